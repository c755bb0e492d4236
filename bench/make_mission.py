"""Write one long synthetic mission (embodied_r_training.synth.mission_writer) and print its time and size.

Usage::

    python bench/make_mission.py --minutes 20 --seed 0 --out out/missions/m20 [--fps 2] [--size 320x240]

Prints the wall time (and seconds per mission minute), the bag's size on disk (and MB per mission minute),
the frames, rooms and questions kept per kind; ``--json PATH`` also writes them. Rendering runs on one
core (BLAS/OpenMP limited to one thread), as ``embodied-r synth`` renders a scene.
"""

from __future__ import annotations

import os

# One core: set before numpy (and its BLAS) is imported.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

# Run from a checkout without installing the package.
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "training")]

from embodied_r_training.synth.mission import MissionConfig  # noqa: E402
from embodied_r_training.synth.mission_writer import write_mission  # noqa: E402

from embodied_r_ros.config import ConfigError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, write the mission, print the figures; 2 on bad flags."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, required=True, help="mission length in minutes")
    parser.add_argument("--seed", type=int, default=0, help="seed (0)")
    parser.add_argument("--out", type=Path, required=True, help="output directory (must not hold a mission)")
    parser.add_argument("--fps", type=float, default=MissionConfig.fps, help="camera frames per second")
    parser.add_argument("--size", default="320x240", help="image size WxH (320x240)")
    parser.add_argument(
        "--questions-per-kind", type=int, default=MissionConfig.questions_per_kind,
        help=f"labelled questions per kind, at most ({MissionConfig.questions_per_kind})",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
        config = MissionConfig(minutes=args.minutes, seed=args.seed, fps=args.fps, width=width, height=height,
                               questions_per_kind=args.questions_per_kind)  # fmt: skip
        result = write_mission(config, args.out)
    except (ConfigError, ValueError) as exc:
        print(f"make_mission: {exc}", file=sys.stderr)
        return 2
    mission = json.loads((args.out / "mission.json").read_text(encoding="utf-8"))
    figures = {
        "minutes": config.minutes,
        "seed": config.seed,
        "fps": config.fps,
        "size": f"{config.width}x{config.height}",
        "frames": result.frames,
        "rooms": len(mission["rooms"]),
        "visits": sum(len(r["visits"]) for r in mission["rooms"]),
        "seconds": round(result.seconds, 1),
        "seconds_per_mission_minute": round(result.seconds / config.minutes, 2),
        "bag_mb": round(result.bag_bytes / 1e6, 1),
        "bag_mb_per_mission_minute": round(result.bag_bytes / 1e6 / config.minutes, 2),
        "questions": {kind: count.kept for kind, count in result.counts.items()},
    }
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
