"""What other installed packages add to embodied_r_ros, found through their package entry points.

As colcon finds its verbs and pytest its plugins, ``embodied-r`` and the pipeline find what other packages
add by the entry points those packages declare (:func:`importlib.metadata.entry_points`), and import one
only when it is used. The groups (docs/plugins.md):

- :data:`COMMAND_GROUP`: name = the ``embodied-r`` subcommand, value = ``register(subparsers)``, which adds
  its parser with ``set_defaults(func=...)`` (:mod:`embodied_r_ros.cli.main`);
- :data:`PERCEIVER_GROUP`: name = the ``perception.perceiver`` value, value = ``register(registry)`` that
  adds it to a :class:`~embodied_r_ros.perceivers.PerceiverRegistry`;
- :data:`BACKEND_GROUP`: name = the ``vlm.backend`` / ``lm.backend`` value, value = ``register(registry)``
  that adds it to a :class:`~embodied_r_ros.backends.registry.BackendRegistry`;
- :data:`YARDSTICK_GROUP`: value = ``answers(descriptions, question, options)`` giving the
  :class:`~embodied_r_ros.reasoning.yardstick.YardstickAnswers` shown beside a graded answer.

The core's own commands, perceiver and backends are registered directly, not through these groups, so a
source checkout without installed metadata still has them. Reading the groups imports nothing.
"""

from __future__ import annotations

import logging
from importlib import metadata
from typing import Any, Callable, Generic, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

COMMAND_GROUP = "embodied_r_ros.commands"
PERCEIVER_GROUP = "embodied_r_ros.perceivers"
BACKEND_GROUP = "embodied_r_ros.backends"
YARDSTICK_GROUP = "embodied_r_ros.yardstick"


class PluginUnavailable(ImportError):
    """A plugin that is installed (its entry point is) but cannot be imported here: ``missing`` is the
    top-level module that is not importable (its package, or a dependency of it)."""

    def __init__(self, entry: metadata.EntryPoint, missing: str, error: ImportError) -> None:
        super().__init__(f"{entry.name} ({entry.value}) needs {missing}, which is not importable: {error}")
        self.entry = entry
        self.missing = missing


def entry_points(group: str) -> tuple[metadata.EntryPoint, ...]:
    """The entry points of ``group`` installed here, one per name (the first found on sys.path wins: one
    package installed twice, by pip and by colcon, lists its entry points twice), in the order found."""
    found: dict[str, metadata.EntryPoint] = {}
    for entry in metadata.entry_points(group=group):
        found.setdefault(entry.name, entry)
    return tuple(found.values())


def names(group: str) -> tuple[str, ...]:
    """The names :func:`entry_points` gives for ``group``, without importing anything."""
    return tuple(entry.name for entry in entry_points(group))


def load(entry: metadata.EntryPoint) -> Any:
    """The object ``entry`` names, imported.

    Raises :class:`PluginUnavailable` when its package or a dependency of it cannot be imported; an import
    error that names embodied_r_ros itself is a bug of this package and propagates as it is.
    """
    try:
        return entry.load()
    except ImportError as exc:
        missing = (exc.name or entry.module).split(".")[0]
        if missing == "embodied_r_ros":
            raise
        raise PluginUnavailable(entry, missing, exc) from exc


class Registry(Generic[T]):
    """Entries by name, and the names installed but not importable here with the reason: the common part
    of the perceiver and backend registries, which say what they hold (``kind``) and how a missing name
    fails (:meth:`_missing`)."""

    kind = "plugin"

    def __init__(self) -> None:
        self._registered: dict[str, T] = {}
        self._unavailable: dict[str, str] = {}
        self._deferred: dict[str, Callable[[], None]] = {}  # installed plugins, imported on first use

    def _add(self, name: str, entry: T) -> None:
        if name in self._registered:  # a programming error
            raise ValueError(f"{self.kind} {name!r} is registered already")
        self._registered[name] = entry
        self._unavailable.pop(name, None)
        self._deferred.pop(name, None)

    def defer(self, name: str, register: Callable[[], None]) -> None:
        """Register ``name`` when it is first asked for, by calling ``register()`` (which imports its plugin
        and adds it, or records it as unavailable): an installed plugin costs nothing until it is used."""
        if name not in self._registered:
            self._deferred.setdefault(name, register)

    def unavailable(self, name: str, reason: str) -> None:
        """Record that ``name`` exists but cannot be made here (its package, or a dependency of it, is not
        installed): asking for it raises an error with ``reason``, which says how to install it. The first
        reason recorded for a name stays (the most specific: why its installed package cannot be imported)."""
        if name not in self._registered:
            self._unavailable.setdefault(name, reason)

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order, then the installed plugins not imported yet."""
        return (*self._registered, *self._deferred)  # disjoint: registering a name ends its deferral

    def _find(self, name: str) -> T:
        register = self._deferred.pop(name, None)
        if register is not None:
            register()
        entry = self._registered.get(name)
        if entry is None:
            raise self._missing(name, self._unavailable.get(name))
        return entry

    def _missing(self, name: str, reason: str | None) -> Exception:
        """The error for ``name``: unavailable here (``reason``) or not registered (None)."""
        raise NotImplementedError

    def _listing(self) -> str:
        return ", ".join(self.names()) or "none"


def register_installed(group: str, registry: Registry, hint: str = "") -> None:
    """Make every entry point of ``group`` (name = what it registers) known to ``registry``, to be imported
    and registered (``register(registry)``) when it is first asked for. One whose package cannot be imported
    then is recorded as unavailable, the reason followed by ``hint`` (how to install it); one whose name is
    taken (by the core) is left out with a warning."""
    for entry in entry_points(group):
        if entry.name in registry.names():
            log.warning("%s %s of %s left out: the name is taken", group, entry.name, entry.value)
            continue

        def register(entry: metadata.EntryPoint = entry) -> None:
            try:
                plugin = load(entry)
            except PluginUnavailable as exc:
                registry.unavailable(entry.name, f"{exc}; {hint}" if hint else str(exc))
                return
            plugin(registry)

        registry.defer(entry.name, register)
