"""Tiny, randomly initialised Qwen-architecture models, built offline in seconds.

Real checkpoints cannot be downloaded here (CI, robots without internet), so tests and smoke runs use
models with the real architectures (Qwen2.5-VL for perception, Qwen2 for reasoning) but tiny sizes and
random weights, plus a byte-level BPE tokenizer trained on a small built-in corpus in Qwen2's layout. They
are written with ``save_pretrained`` and read back through exactly the code that loads real checkpoints.

``build_tiny_models(DIR)`` writes ``DIR/vlm`` and ``DIR/lm``; the same seed gives byte-identical files.
"""

from __future__ import annotations

import json
import logging
import os
import random
from pathlib import Path
from typing import Any

from ..poses.ego_motion import ACTION_LABELS
from ..reasoning.options import OPTION_LETTERS

logger = logging.getLogger(__name__)

# Bump when the layout or architecture of the tiny models changes, so stale caches are rebuilt.
FORMAT_VERSION = 1
MARKER = "tiny_models.json"
VLM_SUBDIR = "vlm"
LM_SUBDIR = "lm"

# Qwen2/2.5 special tokens, in Qwen's order (ids follow the BPE vocabulary here).
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# Reasoning tags are ordinary added tokens: one id each (easy for a tiny model to learn) yet kept by
# ``decode(skip_special_tokens=True)``, so the reward parser sees them as it does with real models.
REASONING_TOKENS = ("<think>", "</think>", "<answer>", "</answer>")

# Same shape as Qwen2.5-VL's template: default system prompt, images as vision-start/pad/end.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if loop.first and message['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for item in message['content'] %}"
    "{%- if item['type'] == 'image' or 'image' in item %}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif item['type'] == 'video' or 'video' in item %}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{%- elif 'text' in item %}{{- item['text'] }}"
    "{%- endif %}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

VOCAB_SIZE = 4096  # an upper bound: the small corpus runs out of merges before it
PATCH_SIZE = 14
MERGE_SIZE = 2
# An image becomes 64..256 patches (16..64 tokens after the 2x2 merge).
MIN_PIXELS = 64 * PATCH_SIZE * PATCH_SIZE
MAX_PIXELS = 256 * PATCH_SIZE * PATCH_SIZE
# Wider than the usual 0.02 and with untied embeddings: a random model then answers differently to
# different inputs instead of repeating one token, so tests comparing outputs can actually fail.
INIT_RANGE = 0.1

ACTIONS = ACTION_LABELS  # the paper's ten actions, in the tokenizer's training corpus
_OBJECTS = tuple(
    (
        "chair, table, sofa, bed, lamp, door, window, shelf, cabinet, television, monitor, desk, plant, "
        "sink, toilet, refrigerator, stove, microwave, bookshelf, picture, rug, pillow, stairs, wall, "
        "floor, ceiling, building, tower, tree, road, bridge, car, truck, bus, street lamp, "
        "traffic light, sign, billboard, roof, river, park, fence, parking lot, crosswalk, "
        "intersection, skyscraper, house, landmark, drone, robot"
    ).split(", ")
)
_COLOURS = ("red", "blue", "green", "white", "black", "grey", "yellow", "brown", "orange", "purple")
_SHAPES = ("round", "square", "tall", "short", "large", "small", "long", "narrow", "wide", "flat")
_PLACES = tuple(
    (
        "to the left, to the right, ahead, behind, ahead-left, ahead-right, below, above, "
        "in front of the agent, next to the door, near the window, far away, close by, in the centre, "
        "at the bottom of the view, at the top of the view, on the left side, on the right side"
    ).split(", ")
)
_REASONING = (
    "The question asks which object is closer to the agent.",
    "First, the agent sees the scene; then it moves, so the view changes.",
    "Because the object was on the left and the agent rotated left, it is now ahead.",
    "Therefore the answer is the option that matches the last observation.",
    "Counting the objects seen in every frame gives the total number.",
    "The distance is measured in meters; the room size is in square meters.",
    "Which direction should the agent take to reach the destination?",
    "Options: A. left B. right C. forward D. backward E. up F. down G. none H. all",
    "Frame 0: Observe: the agent stands in a room.",
    "Question: what is the relative direction of the sofa from the bed?",
    "The agent is a drone flying over the city; the landmark is below it.",
    "The robot navigates indoors; the kitchen is behind the living room.",
)
# Extra words for a richer vocabulary (about 1.5k tokens; BPE stops once every corpus word is one token).
_WORDS = (
    "kitchen bedroom bathroom corridor hallway office garage balcony garden lobby staircase elevator "
    "entrance exit basement attic closet pantry laundry classroom library warehouse factory station "
    "airport harbour stadium museum hospital school church temple market square plaza avenue "
    "boulevard highway lane alley "
    "sidewalk pavement rooftop chimney antenna balcony facade column pillar arch gate tunnel overpass "
    "mountain hill valley lake pond ocean beach forest field meadow grass bush flower hedge rock stone "
    "wooden metal glass plastic concrete brick marble fabric leather ceramic paper cardboard rubber steel "
    "bright dark shiny dull striped dotted patterned transparent opaque reflective rectangular circular "
    "triangular cylindrical spherical curved straight diagonal vertical horizontal parallel perpendicular "
    "approach leave enter cross climb descend ascend hover land takeoff turn pivot yaw pitch roll glide "
    "accelerate decelerate stop wait continue pass follow avoid reach arrive depart return circle orbit "
    "nearest farthest closest largest smallest highest lowest leftmost rightmost first second third fourth "
    "fifth sixth seventh eighth ninth tenth last previous next before after during while until since "
    "one two three four five six seven eight nine ten eleven twelve twenty thirty hundred thousand "
    "north south east west northeast northwest southeast southwest clockwise counterclockwise degrees "
    "meter meters centimeter centimeters square cubic height width length depth size distance area volume "
    "camera view frame image video sequence observation perception reasoning answer question option choice "
    "correct wrong likely unlikely visible hidden occluded partially fully mostly slightly clearly "
    "appears seems shows contains includes reveals indicates suggests implies means because therefore "
    "however although moreover finally initially currently previously eventually meanwhile instead "
    "agent robot drone vehicle pedestrian person people cyclist bicycle motorcycle scooter dog cat bird "
    "backpack bottle cup mug plate bowl spoon fork knife towel basket bucket box bag suitcase umbrella "
    "keyboard mouse laptop phone printer speaker clock mirror curtain blanket mattress wardrobe dresser "
    "bathtub shower faucet oven dishwasher kettle toaster blender counter island stool bench armchair "
    "ottoman fireplace radiator heater fan vent outlet switch carpet tile ceiling lamp chandelier "
    "destination route path trajectory waypoint goal start progress remaining completed navigation "
    "landmark position orientation heading direction relative absolute appearance order count estimate"
).split()


def _corpus(rng: random.Random) -> list[str]:
    """A small English corpus of spatial and robotics text, fixed by ``rng``."""
    lines: list[str] = list(_REASONING)
    for i in range(1500):
        obj, other = rng.choice(_OBJECTS), rng.choice(_OBJECTS)
        colour, shape, place = rng.choice(_COLOURS), rng.choice(_SHAPES), rng.choice(_PLACES)
        action = rng.choice(ACTIONS)
        digits = f"{rng.randint(0, 99)}.{rng.randint(0, 9)}"
        lines.append(
            f"Frame {i % 32}: After {action}, Observe: a {shape} {colour} {obj} is {place}; "
            f"the {other} is now {rng.choice(_PLACES)}, about {digits} meters away."
        )
        letter = OPTION_LETTERS[i % 8]
        lines.append(
            f"<think>The {obj} was {place}. After the agent chose to {action}, the {other} appears "
            f"{rng.choice(_PLACES)}, so option {letter} fits.</think><answer>{letter}</answer>"
        )
        words = " ".join(rng.choice(_WORDS) for _ in range(12))
        count = rng.randint(0, 9)
        lines.append(f"Describe the scene: {colour} {obj}, {shape} {other}, {count} objects. {words}.")
    return lines


def build_tokenizer(out_dir: Path) -> Any:
    """Train the byte-level BPE tokenizer and save it as a ``Qwen2Tokenizer`` into ``out_dir``.

    Returns the tokenizer. The corpus is fixed, so every build gives the same tokenizer.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    # Qwen2's pipeline: NFC, the Qwen2 split regex, then byte-level mapping without its own regex.
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(random.Random(0)), trainer)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]

    tokenizer = Qwen2Tokenizer(
        vocab=model["vocab"],
        merges=merges,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=32768,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS[1:])})
    tokenizer.add_tokens(list(REASONING_TOKENS))
    tokenizer.chat_template = CHAT_TEMPLATE
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def _padded_vocab(n: int) -> int:
    return (n + 63) // 64 * 64


def _write_generation_config(out_dir: Path, tokenizer: Any) -> None:
    from transformers import GenerationConfig

    im_end, eot = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    GenerationConfig(eos_token_id=[im_end, eot], pad_token_id=eot).save_pretrained(out_dir)


def _save_model(model: Any, out_dir: Path) -> None:
    model.save_pretrained(out_dir, safe_serialization=True)


def build_tiny_vlm(out_dir: Path, seed: int = 0) -> Path:
    """Write a tiny Qwen2.5-VL (2 text layers, hidden 64; vision depth 2, hidden 32) to ``out_dir``."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tokenizer = build_tokenizer(out_dir)
    ids = dict(zip(SPECIAL_TOKENS, tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS)), strict=True))
    head_dim = 16
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": _padded_vocab(len(tokenizer)),
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 64 // head_dim,
            "num_key_value_heads": 2,
            "max_position_embeddings": 8192,
            "initializer_range": INIT_RANGE,
            # 3D rotary sections (time, height, width) must sum to head_dim / 2.
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
            "patch_size": PATCH_SIZE,
            "spatial_merge_size": MERGE_SIZE,
            "temporal_patch_size": 2,
            "window_size": 112,
            "fullatt_block_indexes": [1],
            "tokens_per_second": 2,
            "initializer_range": INIT_RANGE,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):  # leave the caller's random state alone
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config).eval()
    _save_model(model, out_dir)
    _write_generation_config(out_dir, tokenizer)
    preprocessor = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor",
        "min_pixels": MIN_PIXELS,
        "max_pixels": MAX_PIXELS,
        "patch_size": PATCH_SIZE,
        "merge_size": MERGE_SIZE,
        "temporal_patch_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "rescale_factor": 1 / 255,
        "resample": 3,
    }
    text = json.dumps(preprocessor, indent=2, sort_keys=True) + "\n"
    (out_dir / "preprocessor_config.json").write_text(text)
    return out_dir


def build_tiny_lm(out_dir: Path, seed: int = 0) -> Path:
    """Write a tiny Qwen2 causal LM (2 layers, hidden 64) to ``out_dir``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tokenizer(out_dir)
    eot, im_end = tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>"])
    config = Qwen2Config(
        vocab_size=_padded_vocab(len(tokenizer)),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        initializer_range=INIT_RANGE,
        tie_word_embeddings=False,
        bos_token_id=eot,
        eos_token_id=im_end,
        pad_token_id=eot,
    )
    # A different stream from the VLM's, so the two models do not share embeddings by accident.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        model = Qwen2ForCausalLM(config).eval()
    _save_model(model, out_dir)
    _write_generation_config(out_dir, tokenizer)
    return out_dir


def default_tiny_models_dir() -> Path:
    """Where the tiny smoke models live: $EMBODIED_R_TINY_MODELS, else ~/.cache/embodied_r_ros/tiny-models."""
    env = os.environ.get("EMBODIED_R_TINY_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "embodied_r_ros" / "tiny-models"


def ensure_tiny_models(root: Path | None = None) -> Path:
    """``root`` (default :func:`default_tiny_models_dir`) holding the seed-0 tiny models, built if missing."""
    root = Path(root) if root else default_tiny_models_dir()
    if not tiny_models_complete(root, seed=0):
        logger.info("building the tiny smoke models in %s", root)
        build_tiny_models(root, seed=0)
    return root


def tiny_models_complete(root: Path, seed: int | None = None) -> bool:
    """True when ``root`` holds both tiny models built by this version of the builder (with ``seed``)."""
    root = Path(root)
    try:
        marker = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if marker.get("format_version") != FORMAT_VERSION:
        return False
    if seed is not None and marker.get("seed") != seed:
        return False
    needed = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
    vlm_ok = all((root / VLM_SUBDIR / f).is_file() for f in (*needed, "preprocessor_config.json"))
    return vlm_ok and all((root / LM_SUBDIR / f).is_file() for f in needed)


def build_tiny_models(out_dir: Path, seed: int = 0) -> dict[str, Path]:
    """Build ``out_dir/vlm`` (Qwen2.5-VL) and ``out_dir/lm`` (Qwen2); returns {"vlm": path, "lm": path}.

    Deterministic: the same ``seed`` gives the same tokenizer and byte-identical weights.
    """
    out_dir = Path(out_dir)
    paths = {
        "vlm": build_tiny_vlm(out_dir / VLM_SUBDIR, seed),
        "lm": build_tiny_lm(out_dir / LM_SUBDIR, seed),
    }
    # Written last: its presence means the build finished.
    (out_dir / MARKER).write_text(json.dumps({"format_version": FORMAT_VERSION, "seed": seed}) + "\n")
    logger.info("built tiny models in %s", out_dir)
    return paths
