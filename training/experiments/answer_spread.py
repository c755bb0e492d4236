"""Would GRPO groups disagree? The answer-letter distribution of a model right after ``<answer>``.

GRPO learns only from groups whose completions get different rewards. For each multiple-choice question of
a data split this reads the model's probabilities of the option letters at the point where it writes its
answer: the chat prompt, then the warm start's completion up to ``<answer>`` (its fixed think template),
one forward pass. With ``p`` the probability of the right letter at temperature ``T`` (the letters'
share of the whole vocabulary), a group of ``G`` samples carries an accuracy signal with probability
``1 - p**G - (1 - p)**G`` (format failures and think variations aside: after the warm start both are rare).

    python training/experiments/answer_spread.py --data out/smollm2/data/train_all \\
        --model .cache/models/smollm2 --model out/smollm2/runs/grpo_all/warm_start [--limit 64]

Prints, per model: greedy accuracy, how many questions share the most common greedy letter, mean ``p``,
mean letter entropy (bits), and the expected share of groups with a signal per temperature.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from embodied_r_training.warm_start import THINK_TEMPLATE

from embodied_r_ros.prompts import OPTION_LETTERS


def answer_logits(model: Any, tokenizer: Any, prompt: list[dict[str, str]]) -> Any:
    """Next-token logits (whole vocabulary) after the prompt and ``<think>{template}</think><answer>``."""
    import torch

    text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    text += f"<think>{THINK_TEMPLATE}</think><answer>"
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model(input_ids=ids).logits[0, -1].float()


def spread(model_dir: Path, rows: list[dict[str, Any]], temperatures: list[float], group: int) -> dict:
    """Greedy accuracy, letter spread and expected GRPO signal of one model over ``rows``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    greedy, right_p = [], {t: [] for t in temperatures}
    entropy = {t: [] for t in temperatures}
    for row in rows:
        letters = OPTION_LETTERS[: len(row["options"])]
        letter_ids = [tokenizer.encode(letter, add_special_tokens=False)[0] for letter in letters]
        logits = answer_logits(model, tokenizer, row["prompt"])
        greedy.append(letters[int(logits[letter_ids].argmax())])
        right = letters.index(str(row["solution"]))
        for t in temperatures:
            letter_p = torch.softmax(logits / t, 0)[letter_ids].tolist()
            right_p[t].append(letter_p[right])
            total = sum(letter_p)
            entropy[t].append(-sum(p / total * math.log2(p / total) for p in letter_p if p > 0))
    solutions = [str(row["solution"]) for row in rows]
    common = max(set(greedy), key=greedy.count)
    result = {
        "model": str(model_dir),
        "questions": len(rows),
        "greedy_accuracy": sum(g == s for g, s in zip(greedy, solutions, strict=True)) / len(rows),
        "most_common_greedy_letter": f"{common} ({greedy.count(common)}/{len(rows)})",
    }
    for t in temperatures:
        ps = right_p[t]
        signal = [1 - p**group - (1 - p) ** group for p in ps]
        result[f"T={t:g}"] = {
            "mean_p_right": round(sum(ps) / len(ps), 3),
            "letter_entropy_bits": round(sum(entropy[t]) / len(ps), 3),
            f"groups_of_{group}_with_signal": round(sum(signal) / len(ps), 3),
        }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a prepared data set (embodied-r prepare)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--model", type=Path, action="append", required=True, help="repeatable")
    parser.add_argument("--limit", type=int, default=64, help="multiple-choice questions read (0: all)")
    parser.add_argument("--temperatures", default="1.0,1.3,1.6")
    parser.add_argument("--group", type=int, default=8, help="GRPO completions per question")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from embodied_r_training.prepare import read_split

    dataset = read_split(args.data, args.split, ("prompt", "solution", "options"), "answer_spread")
    rows = [row for row in dataset if row["options"]]
    rows = rows[: args.limit] if args.limit else rows
    temperatures = [float(t) for t in args.temperatures.split(",")]
    results = [spread(path, rows, temperatures, args.group) for path in args.model]
    print(json.dumps(results, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
