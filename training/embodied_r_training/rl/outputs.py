"""What a training run leaves behind: the final model's folder and the files beside it (the node parameters
that load it, the resolved config), the same for SFT and GRPO."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .train_config import TrainConfig

FINAL_DIR = "final"
MERGED_DIR = "final-merged"
NODE_PARAMS = "node_params.yaml"
CONFIG_COPY = "train_config.json"


@dataclass(frozen=True)
class TrainResult:
    """What a training run left behind."""

    output_dir: Path
    final_dir: Path  # the LoRA adapter or the full model
    merged_dir: Path | None  # LoRA merged into the base model, when lora.merge
    base_model: Path  # the starting weights (with LoRA, the node loads these plus the adapter)
    global_step: int
    log_history: list[dict[str, Any]]

    @property
    def node_params(self) -> dict[str, Any]:
        """The node's LM parameters that load the result (``lm.model``, ``lm.transformers.adapter``), nested
        as in a parameters file."""
        model, adapter = str(self.final_dir), ""
        if self.merged_dir is not None:
            model = str(self.merged_dir)
        elif (self.final_dir / "adapter_config.json").is_file():
            model, adapter = str(self.base_model), str(self.final_dir)
        return {"model": model, "transformers": {"adapter": adapter}}


def write_node_params(result: TrainResult) -> Path:
    """``final/node_params.yaml``: ROS parameters that make the node load the trained LM."""
    import yaml

    params = {"/**/embodied_r": {"ros__parameters": {"lm": result.node_params}}}
    path = result.final_dir / NODE_PARAMS
    path.write_text(
        "# Load the trained reasoner in the node: embodied-r run --params-file " + str(path) + "\n"
        + yaml.safe_dump(params, sort_keys=False),
        encoding="utf-8",
    )  # fmt: skip
    return path


def write_config_copy(config: TrainConfig, output_dir: Path) -> Path:
    """``output_dir/train_config.json``: the resolved config the run trained with."""
    record = asdict(config)
    record["grpo"] = dict(config.grpo)
    path = output_dir / CONFIG_COPY
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path
