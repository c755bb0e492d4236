"""Flags from a config dataclass, and the config back from the parsed flags: how every command turns its
flags into the config its library function takes.

A field's flag is declared with the field (:func:`embodied_r_ros.config.param` with ``flag=``, or the
overrides of the section holding it, :func:`~embodied_r_ros.config.section`): its name, help and choices;
its type and default are the field's (:func:`embodied_r_ros.config.shortcuts` reads that table, as for
``embodied-r run``). :func:`add_config_flags` adds the flags of the fields a command chooses to its parser;
:func:`config_from_flags` builds the config from the parsed namespace.

* A bool flag flips its field's default: ``--compressed`` sets ``compressed: False`` to True,
  ``--no-progress`` sets ``progress: True`` to False.
* A field without default (:data:`~embodied_r_ros.config.REQUIRED`) gives a required flag.
* A flag that several fields declare sets them all (one value).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..config import REQUIRED, ConfigError, Shortcut, field_default, shortcuts

T = TypeVar("T")

# Namespace attribute (set_defaults) listing the flags add_config_flags added, so config_from_flags reads
# exactly those and no other argument that happens to share a name.
_ADDED = "config_flags_added"
# Values argparse can parse from one string without a parser of the command's own.
_SCALARS = (str, int, float, Path)


def flag_dest(flag: Shortcut) -> str:
    """The namespace attribute of ``flag`` (``--no-progress`` -> ``no_progress``)."""
    return flag.name.removeprefix("--").replace("-", "_")


def argument_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` (raising ValueError with a message) as an argparse type that shows that message."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def config_flags(config: type, fields: Sequence[str] | None = None) -> list[Shortcut]:
    """The flags declared on ``config``'s fields: all, in field order, or those setting one of ``fields``
    (dotted names such as ``keyframes.max_keyframes``), in the order of ``fields``."""
    table = list(shortcuts("flag", config).values())
    if fields is None:
        return table
    order = {name: i for i, name in enumerate(fields)}
    chosen = [flag for flag in table if any(name in order for name in flag.parameters)]
    undeclared = sorted(set(fields) - {name for flag in chosen for name in flag.parameters})
    if undeclared:
        raise TypeError(f"{config.__name__} declares no flag for {', '.join(undeclared)}")
    return sorted(chosen, key=lambda flag: min(order.get(name, len(order)) for name in flag.parameters))


def add_config_flags(
    parser: argparse.ArgumentParser,
    config: type,
    fields: Sequence[str] | None = None,
    *,
    types: Mapping[str, Callable[[str], Any]] | None = None,
) -> list[Shortcut]:
    """Add the flags of ``config``'s ``fields`` (default: every field with a flag) to ``parser``.

    ``types`` gives a parser by flag name for values that are no single str/int/float/Path (``--split
    0.8,0.1,0.1``); see :func:`argument_type`. Returns the flags added.
    """
    flags = config_flags(config, fields)
    for flag in flags:
        _add_flag(parser, flag, (types or {}).get(flag.name))
    added = parser.get_default(_ADDED) or ()
    parser.set_defaults(**{_ADDED: (*added, *(flag.name for flag in flags))})
    return flags


def _add_flag(parser: argparse.ArgumentParser, flag: Shortcut, parse: Callable[[str], Any] | None) -> None:
    if flag.kind is bool:
        if not isinstance(flag.default, bool):
            raise TypeError(f"flag {flag.name} sets {', '.join(flag.parameters)}, which differ in default")
        parser.add_argument(flag.name, dest=flag_dest(flag), action="store_true", help=flag.help)
        return
    if parse is None and not issubclass(flag.kind, _SCALARS):
        raise TypeError(f"flag {flag.name} takes {flag.kind.__name__} values: give add_config_flags a parser")
    options: dict[str, Any] = {"dest": flag_dest(flag), "type": parse or flag.kind, "help": flag.help}
    if flag.choices:
        options["choices"] = list(flag.choices)
    if flag.default is REQUIRED:
        options["required"] = True
    else:
        options["default"] = flag.default
    parser.add_argument(flag.name, **options)


def config_from_flags(config: type[T], args: argparse.Namespace, **values: Any) -> T:
    """``config`` built from the values of the flags :func:`add_config_flags` added (given or default) and
    ``values``, the fields the command fills itself (from positional arguments, say); ``values`` win."""
    return config(**{**flag_fields(config, args, skip=values.keys()), **values})


def flag_fields(config: type, args: argparse.Namespace, skip: Iterable[str] = ()) -> dict[str, Any]:
    """{field: value} of the ``config`` fields that the flags :func:`add_config_flags` added set (given or
    default), ``skip`` left out; a nested section is rebuilt over its default.

    A bad value in a section raises :class:`ConfigError` naming the flags that set it
    (``--max-keyframes 1: keyframes.max_keyframes must be ...``).
    """
    added = set(getattr(args, _ADDED, ()))
    settings: dict[str, Any] = {}
    given: dict[str, list[str]] = defaultdict(list)  # section -> "--flag value" of the flags changing it
    for flag in shortcuts("flag", config).values():
        if flag.name not in added:
            continue
        value = getattr(args, flag_dest(flag))
        if flag.kind is bool:
            value = (not flag.default) if value else flag.default
        settings.update(dict.fromkeys(flag.parameters, value))
        if value != flag.default:
            shown = flag.name if flag.kind is bool else f"{flag.name} {value}"
            for name in flag.parameters:
                given[name.partition(".")[0]].append(shown)
    skipped = set(skip)
    top, nested = _split(settings)
    fields = {name: value for name, value in top.items() if name not in skipped}
    defaults = {f.name: f for f in dataclasses.fields(config)}
    for name, section_settings in nested.items():
        if name in skipped:
            continue
        try:
            fields[name] = _replace(field_default(defaults[name]), section_settings)
        except ValueError as exc:
            flags = " ".join(dict.fromkeys(given[name]))
            raise ConfigError(f"{flags}: {exc}" if flags else str(exc)) from exc
    return fields


def _split(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """{dotted name: value} as (this level's fields, {section: its settings, one level down})."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = defaultdict(dict)
    for name, value in settings.items():
        head, _, rest = name.partition(".")
        if rest:
            nested[head][rest] = value
        else:
            top[head] = value
    return top, nested


def _replace(base: Any, settings: Mapping[str, Any]) -> Any:
    """``base`` (a config dataclass) with the dotted ``settings`` applied, sections rebuilt over theirs."""
    top, nested = _split(settings)
    top.update({name: _replace(getattr(base, name), inner) for name, inner in nested.items()})
    return dataclasses.replace(base, **top)
