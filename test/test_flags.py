"""cli/flags.py: a config's flags come from its fields' table, and the parsed flags build the config."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from embodied_r_ros.cli.flags import (
    add_config_flags,
    argument_type,
    config_flags,
    config_from_flags,
    flag_fields,
)
from embodied_r_ros.config import (
    REQUIRED,
    Alias,
    ConfigError,
    KeyFrameConfig,
    ModelConfig,
    param,
    section,
    shortcuts,
)


@dataclass(frozen=True)
class Inner:
    size: int = param(3, "inner size", flag="--size")
    name: str = "plain"  # no param(): a section's overrides can still give it a flag

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ConfigError(f"inner size must be >= 1, got {self.size}")


@dataclass(frozen=True)
class Job:
    source: Path  # filled by the command (a positional argument)
    out: Path = param(REQUIRED, "output directory", flag="--out")
    mode: str = param("fast", "how to run", choices=("fast", "slow"), flag="--mode")
    rate: float = param(2.0, "per second", flag="--rate")
    cache: Path | None = param(None, "cache directory", flag="--cache")
    verbose: bool = param(False, "say more", flag="--verbose")
    progress: bool = param(True, "progress bars", flag=Alias("--no-progress", "no progress bars"))
    inner: Inner = section(Inner, name={"description": "inner name", "flag": "--inner-name"})
    model: ModelConfig = section(ModelConfig, model={"flag": Alias("--model", "the model")})
    pair: tuple[int, int] = param((1, 2), "two numbers", flag="--pair")
    hidden: int = 7


def _parser(fields: tuple[str, ...] | None = None, **types) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="job", exit_on_error=False)
    parser.add_argument("source", type=Path)
    chosen = fields or ("out", "mode", "rate", "cache", "verbose", "progress", "inner.size", "inner.name")
    add_config_flags(parser, Job, chosen, types=types)
    return parser


def test_flags_take_name_help_type_default_and_choices_from_the_table():
    parser = _parser()
    actions = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    out = actions["--out"]
    assert out.required and out.type is Path and out.help == "output directory"
    assert actions["--mode"].choices == ["fast", "slow"] and actions["--mode"].default == "fast"
    assert actions["--rate"].type is float and actions["--rate"].default == 2.0
    assert actions["--cache"].type is Path and actions["--cache"].default is None  # from the Path | None hint
    assert actions["--no-progress"].help == "no progress bars" and actions["--no-progress"].nargs == 0
    assert actions["--size"].default == 3 and actions["--inner-name"].help == "inner name"
    assert "--model" not in actions and "--pair" not in actions  # only the chosen fields
    # The order of the chosen fields is the order of the help.
    assert [f.name for f in config_flags(Job, ("rate", "out"))] == ["--rate", "--out"]


def test_the_config_comes_back_from_the_parsed_flags():
    args = _parser().parse_args(
        ["src", "--out", "o", "--rate", "5", "--verbose", "--no-progress", "--size", "9"]
    )
    job = config_from_flags(Job, args, source=args.source)
    assert job == Job(
        source=Path("src"), out=Path("o"), rate=5.0, verbose=True, progress=False, inner=Inner(size=9)
    )
    defaults = config_from_flags(Job, _parser().parse_args(["src", "--out", "o"]), source=Path("src"))
    assert defaults == Job(source=Path("src"), out=Path("o"))
    # The command's own values win over the flags.
    given = config_from_flags(Job, args, source=Path("s"), rate=1.0, inner=Inner(name="x"))
    assert given.rate == 1.0 and given.inner == Inner(name="x")
    assert "inner" not in flag_fields(Job, args, skip=("inner",))


def test_only_the_flags_added_are_read():
    parser = _parser(("out",))
    parser.add_argument("--rate", default="not a config flag")  # the command's own argument of that name
    job = config_from_flags(Job, parser.parse_args(["src", "--out", "o"]), source=Path("src"))
    assert job.rate == 2.0


def test_a_bad_value_in_a_section_names_the_flag_that_set_it():
    args = _parser().parse_args(["src", "--out", "o", "--size", "0"])
    with pytest.raises(ConfigError, match=r"^--size 0: inner size must be >= 1, got 0$"):
        config_from_flags(Job, args, source=Path("src"))


def test_values_that_need_a_parser_get_one_and_keep_its_message():
    with pytest.raises(TypeError, match="--pair takes tuple values"):
        _parser(("out", "pair"))

    def pair(text: str) -> tuple[int, int]:
        first, second = text.split(",")  # ValueError: not enough values to unpack
        return int(first), int(second)

    parser = _parser(("out", "pair"), **{"--pair": argument_type(pair)})
    args = parser.parse_args(["s", "--out", "o", "--pair", "3,4"])
    assert config_from_flags(Job, args, source=Path()).pair == (3, 4)
    with pytest.raises(argparse.ArgumentError, match="not enough values to unpack"):
        parser.parse_args(["s", "--out", "o", "--pair", "3"])


def test_table_mistakes_are_programming_errors():
    with pytest.raises(TypeError, match="declares no flag for hidden"):
        config_flags(Job, ("out", "hidden"))

    @dataclass
    class Wrong:
        keyframes: KeyFrameConfig = section(KeyFrameConfig, no_such_field={"flag": "--x"})

    with pytest.raises(TypeError, match="overrides no_such_field"):
        shortcuts("flag", Wrong)


def test_the_commands_configs_declare_the_flags_users_know():
    from embodied_r_training.data.import_video import ImportConfig
    from embodied_r_training.data.prepare import PrepareConfig
    from embodied_r_training.eval.evaluate import EvalConfig
    from embodied_r_training.synth.generate import SynthConfig

    prepare = {f.name: f.parameters for f in config_flags(PrepareConfig)}
    assert prepare["--vlm-backend"] == ("vlm.backend",)
    assert prepare["--max-keyframes"] == ("keyframes.max_keyframes",)
    assert prepare["--odom-topic"] == ("topics.odometry",)
    assert prepare["--concurrency"] == ("vlm.openai.max_concurrency",)  # the openai backend's option
    evaluate = {f.name: f for f in config_flags(EvalConfig)}
    assert evaluate["--reference-temperature"].parameters == ("consistency_config.temperature",)
    assert evaluate["--reference-temperature"].default == 0.1 and evaluate["--max-new-tokens"].default == 512
    synth = {f.name: f.parameters for f in config_flags(SynthConfig)}
    assert synth["--rate"] == ("rate_hz",) and synth["--start-time"] == ("start_s",)
    imports = {f.name for f in config_flags(ImportConfig)}
    assert imports == {"--out", "--layout", "--fps", "--max-side", "--no-progress"}


def test_a_section_gives_flags_to_the_fields_of_its_nested_sections():
    # A model's backend options are sections of ModelConfig; the section holding the model reaches into them.
    @dataclass
    class Served:
        model: ModelConfig = section(
            ModelConfig,
            openai={"base_url": {"flag": Alias("--url", "server URL")}},
            transformers={"device": {"flag": "--on"}},
        )

    parser = argparse.ArgumentParser(prog="served", exit_on_error=False)
    flags = add_config_flags(parser, Served, ("model.openai.base_url", "model.transformers.device"))
    assert [(f.name, f.parameters, f.help) for f in flags] == [
        ("--url", ("model.openai.base_url",), "server URL"),
        ("--on", ("model.transformers.device",), "auto, cpu, cuda or cuda:N"),  # the field's description
    ]
    served = config_from_flags(Served, parser.parse_args(["--url", "http://gpu:8000/v1", "--on", "cpu"]))
    assert (served.model.openai.base_url, served.model.transformers.device) == ("http://gpu:8000/v1", "cpu")
    assert served.model.openai.max_concurrency == ModelConfig().openai.max_concurrency

    @dataclass
    class Wrong:
        model: ModelConfig = section(ModelConfig, openai={"device": {"flag": "--device"}})

    with pytest.raises(TypeError, match=r"section model\.openai overrides device"):
        shortcuts("flag", Wrong)


def test_prepare_and_eval_flags_reach_the_backend_sections_and_the_perceiver():
    from embodied_r_training.data.prepare import PrepareConfig
    from embodied_r_training.eval.evaluate import EvalConfig

    prepare = {f.name: f for f in config_flags(PrepareConfig)}
    assert prepare["--base-url"].parameters == ("vlm.openai.base_url",)
    assert prepare["--device"].parameters == ("vlm.transformers.device",)
    assert prepare["--perceiver"].parameters == ("perception.perceiver",)
    assert prepare["--perceiver"].choices == ("vlm", "ground_truth")
    assert prepare["--scene"].default == "scene.json"
    assert prepare["--vlm-backend"].choices == ()  # the command names the fix for a retired ground_truth
    evaluate = {f.name: f.parameters for f in config_flags(EvalConfig)}
    assert evaluate["--adapter"] == ("lm.transformers.adapter",)
    assert evaluate["--dtype"] == ("lm.transformers.dtype",)
    assert evaluate["--base-url"] == ("lm.openai.base_url",)
