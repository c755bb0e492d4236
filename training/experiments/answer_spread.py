"""Would GRPO groups disagree? A model's distribution over the option letters it can answer.

GRPO learns only from groups whose completions get different rewards. For each multiple-choice question of
a data split this scores, for every option letter X, the whole completion the warm start teaches,
``<think>{template}</think><answer>X</answer>``, after the chat prompt (one batched forward pass per
question; scoring whole completions, not one next token, because the tokenizer may merge a letter with the
tag's ``>``). Normalized over the letters this is the answer distribution of the completions that follow
the format; ``p`` is the right letter's share. A group of ``G`` such completions sampled at temperature
1 carries an accuracy signal with probability ``1 - p**G - (1 - p)**G``.

    python training/experiments/answer_spread.py --data out/smollm2/data/train_all \\
        --model .cache/models/smollm2 --model out/smollm2/runs/grpo_all/warm_start [--limit 64]

Prints, per model: how often the most likely letter is right, how many questions share the most common
one, the letters' entropy (bits; 2 = four letters equally likely), mean ``p``, the expected share of
groups with a signal, and the probability of these formatted completions at all.

Does the model read the question at all? ``debiased_letter_right`` takes the most likely letter after
subtracting each letter's mean log-probability over all the questions read (the model's letter prior,
estimated on the same questions), with a 95 % bootstrap interval: near 1/k (0.25 for four options), the
model's choice does not depend on the question; GRPO can only sharpen what the model samples, so there is
nothing question-specific for it to reinforce.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from embodied_r_training.rl.warm_start import target_completion

from embodied_r_ros.reasoning.options import OPTION_LETTERS


def completion_log_probs(
    model: Any, tokenizer: Any, prompt: list[dict[str, str]], letters: str
) -> list[float]:
    """log P(``<think>..</think><answer>X</answer>`` | prompt) for each letter X (teacher forcing)."""
    import torch

    prefix = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    start = len(tokenizer(prefix, add_special_tokens=False)["input_ids"])
    texts = [prefix + target_completion(letter) for letter in letters]
    encoded = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(len(ids) for ids in encoded)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.tensor([e + [pad] * (width - len(e)) for e in encoded])
    mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in encoded])
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits.float()
    log_probs = torch.log_softmax(logits[:, :-1], dim=-1).gather(2, ids[:, 1:, None])[..., 0]
    return [float(log_probs[i, start - 1 : len(e) - 1].sum()) for i, e in enumerate(encoded)]


def spread(model_dir: Path, rows: list[dict[str, Any]], group: int) -> dict[str, Any]:
    """Answer-letter spread and expected GRPO signal of one model over ``rows``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    best, right_p, entropy, mass, all_scores = [], [], [], [], []
    for row in rows:
        letters = OPTION_LETTERS[: len(row["options"])]
        scores = completion_log_probs(model, tokenizer, row["prompt"], letters)
        all_scores.append(scores)
        top = max(scores)
        weights = [math.exp(v - top) for v in scores]
        probs = [w / sum(weights) for w in weights]
        best.append(letters[probs.index(max(probs))])
        right_p.append(probs[letters.index(str(row["solution"]))])
        entropy.append(-sum(p * math.log2(p) for p in probs if p > 0))
        mass.append(math.exp(top) * sum(weights))
    solutions = [str(row["solution"]) for row in rows]
    common = max(set(best), key=best.count)
    n = len(rows)
    debiased = debiased_right(all_scores, solutions)
    return {
        "model": str(model_dir),
        "questions": n,
        "most_likely_letter_right": round(sum(b == s for b, s in zip(best, solutions, strict=True)) / n, 3),
        "most_common_most_likely_letter": f"{common} ({best.count(common)}/{n})",
        "letter_entropy_bits": round(sum(entropy) / n, 3),
        "mean_p_right": round(sum(right_p) / n, 3),
        f"groups_of_{group}_with_signal": round(sum(1 - p**group - (1 - p) ** group for p in right_p) / n, 3),
        "mean_probability_of_a_formatted_answer": round(sum(mass) / n, 3),
        "debiased_letter_right": debiased,
    }


def debiased_right(scores: list[list[float]], solutions: list[str]) -> dict[str, float] | None:
    """Share of questions whose most likely letter, after removing the letter prior, is the solution."""
    from embodied_r_training.eval.stats import bootstrap_ci

    prior: dict[int, list[float]] = {}
    for row in scores:
        for i, value in enumerate(row):
            prior.setdefault(i, []).append(value)
    mean = {i: sum(values) / len(values) for i, values in prior.items()}
    right = []
    for row, solution in zip(scores, solutions, strict=True):
        adjusted = [value - mean[i] for i, value in enumerate(row)]
        right.append(float(OPTION_LETTERS[adjusted.index(max(adjusted))] == solution))
    interval = bootstrap_ci(right)
    return None if interval is None else {k: round(v, 3) for k, v in interval.as_dict().items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a prepared data set (embodied-r prepare)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--model", type=Path, action="append", required=True, help="repeatable")
    parser.add_argument("--limit", type=int, default=64, help="multiple-choice questions read (0: all)")
    parser.add_argument("--group", type=int, default=8, help="GRPO completions per question")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from embodied_r_training.data.schema import read_split

    dataset = read_split(args.data, args.split, ("prompt", "solution", "options"), "answer_spread")
    rows = [row for row in dataset if row["options"]]
    rows = rows[: args.limit] if args.limit else rows
    results = []
    for path in args.model:
        results.append(spread(path, rows, args.group))
        print(json.dumps(results[-1], indent=1), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
