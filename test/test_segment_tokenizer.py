"""Cached tokenization of prompt pieces gives exactly the tokenizer's own ids."""

from __future__ import annotations

import random

from transformers import AutoTokenizer

from embodied_r_ros.backends.segment_tokenizer import SegmentTokenizer
from embodied_r_ros.reasoning.prompts import reasoning_prompt, scene_prompt, step_prompt

PIECES = [
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|image_pad|>",
    "<|vision_end|>",
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    " ",
    "\n",
    "move forward",
    "Frame 3:",
    "  two  spaces ",
    "ümlaut é 北京",
    "B.",
    "1.8 m",
    "<|im_start",
    "|>",
    "<",
    "the red chair",
    "\t",
]


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30))) for _ in range(count)]


def test_equal_to_the_tokenizer_on_prompts_and_random_texts(tiny_models_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models_dir / "vlm")
    segmented = SegmentTokenizer(tokenizer, max_entries=64)
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        for text in (
            scene_prompt("Which object did I pass first?", ["chair", "door"]),
            step_prompt("How far is the door?", [], "moved forward 1.8 m"),
            reasoning_prompt([(None, "a door ahead"), ("rotate left", "a sofa")], "Where is the sofa?", []),
        )
    ]
    for texts in (prompts, _texts(0, 200), _texts(1, 200), prompts):  # the second prompts pass hits the cache
        assert segmented(texts) == tokenizer(texts, add_special_tokens=False)["input_ids"]
    assert len(segmented._cache) <= 64
