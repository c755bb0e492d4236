"""Model backends by name: what ``vlm.backend`` and ``lm.backend`` may say, how each backend is made, and
which options section of :class:`~embodied_r_ros.config.ModelConfig` it reads.

The core registers two: ``transformers`` (in-process; options ``vlm.transformers.*``) and ``openai`` (an
OpenAI-compatible server; options ``vlm.openai.*``). Other packages add theirs through the entry-point group
``embodied_r_ros.backends`` (:mod:`embodied_r_ros.plugins`): the entry point's name is the backend's, its
value a ``register(registry)`` function. :func:`installed_backends` holds both;
:func:`~embodied_r_ros.backends.load_backend` makes models from it.

A backend's options are a section of ModelConfig (a dataclass field such as ``openai: OpenAIOptions``), so
that the node declares them as parameters and every config reads them by the same names; a new backend
reads one of the sections there or none.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .. import plugins
from ..config import ModelConfig, OpenAIOptions, TransformersOptions, option_sections
from .base import BackendError, GenerationBackend
from .openai_backend import OpenAIBackend

if TYPE_CHECKING:
    from .transformers_backend import TransformersBackend


class BackendFactory(Protocol):
    """Makes a backend for one model (``vision=True``: the VLM, which accepts images); raises
    :class:`BackendError` (or ``ModelNotFoundError``) saying why a model cannot serve."""

    def __call__(self, config: ModelConfig, *, vision: bool) -> GenerationBackend: ...


@dataclass(frozen=True)
class RegisteredBackend:
    """One name of the registry: how to make the backend, the options section it reads and which of its
    options a failure to load names."""

    name: str
    factory: BackendFactory
    section: str | None  # the ModelConfig field holding its options ("openai"); None: it takes none
    shown: tuple[str, ...]  # options of that section a load failure names ("base_url")

    def settings(self, config: ModelConfig, key: str) -> list[str]:
        """``vlm.openai.base_url = http://...`` for each shown option of ``config`` (``key``: its section)."""
        if self.section is None:
            return []
        options = getattr(config, self.section)
        return [f"{key}.{self.section}.{name} = {getattr(options, name)}" for name in self.shown]


class BackendRegistry(plugins.Registry[RegisteredBackend]):
    """The backends a model may be configured with, by name (``vlm.backend``, ``lm.backend``)."""

    kind = "backend"

    def register(
        self, name: str, factory: BackendFactory, *, options: type | None = None, shown: tuple[str, ...] = ()
    ) -> None:
        """Add backend ``name``, made by ``factory(config, vision=...)``; ``options`` is the type of the
        ModelConfig section it reads (:class:`~embodied_r_ros.config.OpenAIOptions`, ...), ``shown`` the
        options of it that an error loading the model names. A name registered twice, or options that are
        no section of ModelConfig, are programming errors (ValueError, TypeError)."""
        section = None if options is None else _section_of(options)
        fields = {f.name for f in dataclasses.fields(options)} if options is not None else set()
        unknown = sorted(set(shown) - fields)
        if unknown:
            raise TypeError(f"backend {name!r}: {', '.join(unknown)} are no options of its section")
        self._add(name, RegisteredBackend(name, factory, section, tuple(shown)))

    def get(self, name: str) -> RegisteredBackend:
        """Backend ``name``; BackendError saying why for one that is unavailable or not registered."""
        return self._find(name)

    def create(self, config: ModelConfig, *, vision: bool) -> GenerationBackend:
        """The backend ``config.backend`` names, made for ``config``."""
        return self.get(config.backend).factory(config, vision=vision)

    def settings(self, config: ModelConfig, key: str) -> list[str]:
        """The shown options of ``config``'s backend (:meth:`RegisteredBackend.settings`); none when that
        backend is not registered."""
        if config.backend not in self.names():
            return []
        return self.get(config.backend).settings(config, key)

    def _missing(self, name: str, reason: str | None) -> BackendError:
        if reason is not None:
            return BackendError(f"backend {name} is not available here: {reason}")
        return BackendError(f"unknown backend {name!r}; registered: {self._listing()}")


def _section_of(options: type) -> str:
    """The name of the ModelConfig section whose options are of type ``options``."""
    section = next((name for name, kind in option_sections().items() if kind is options), None)
    if section is None:
        raise TypeError(
            f"{options.__name__} is no options section of ModelConfig: a backend's options are a section "
            "there (embodied_r_ros/config.py), so that the node declares them as parameters"
        )
    return section


def _transformers(config: ModelConfig, *, vision: bool) -> TransformersBackend:
    # torch and transformers are imported only when a transformers model is made.
    from .transformers_backend import TransformersBackend

    return TransformersBackend(config, vision=vision)


def core_backends() -> BackendRegistry:
    """A registry holding the core's backends: ``transformers`` and ``openai``."""
    registry = BackendRegistry()
    registry.register("transformers", _transformers, options=TransformersOptions, shown=("device",))
    registry.register("openai", OpenAIBackend, options=OpenAIOptions, shown=("base_url",))
    return registry


def installed_backends() -> BackendRegistry:
    """The core's backends and those of the installed packages (entry-point group
    ``embodied_r_ros.backends``: name = the backend's, value = ``register(registry)``). One installed but
    not importable is recorded as unavailable, with the reason."""
    registry = core_backends()
    plugins.register_installed(plugins.BACKEND_GROUP, registry)
    return registry
