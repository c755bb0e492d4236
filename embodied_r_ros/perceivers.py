"""Perceivers by name: what ``perception.perceiver`` may say, and how each one is made.

A perceiver (:class:`~embodied_r_ros.perception.KeyFramePerceiver`) writes the descriptions of key frames.
The core brings one, ``vlm``: the VLM of the ``vlm`` section (:class:`~embodied_r_ros.perception.Perceiver`).
Other packages add theirs through the entry-point group ``embodied_r_ros.perceivers``
(:mod:`embodied_r_ros.plugins`; the training package adds ``ground_truth``, a measuring instrument for
simulator bags): :func:`installed_perceivers` holds the core's and theirs, found without importing any
package by name. The application (``embodied-r``, the node's executable) builds the registry and hands it
to :meth:`EmbodiedR.from_config <embodied_r_ros.pipeline.EmbodiedR.from_config>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import plugins
from .backends import load_role
from .config import VLM_PERCEIVER, ConfigError, PipelineConfig
from .perception import KeyFramePerceiver, Perceiver

# What a user does when a perceiver of another package is installed but cannot be imported.
INSTALL_HINT = (
    "install the whole project (`pip install .` in the repository, or build it with colcon), or use "
    "perception.perceiver: vlm"
)

# Makes a perceiver from the pipeline's configuration (its perception and vlm sections); a perceiver that
# cannot be made raises BackendError (or ConfigError) naming the setting and the fix.
PerceiverFactory = Callable[[PipelineConfig], KeyFramePerceiver]
# The perception source in words, for logs and diagnostics: "VLM 'Qwen/...' (transformers)".
Describer = Callable[[PipelineConfig], str]


@dataclass(frozen=True)
class RegisteredPerceiver:
    """One name of the registry: how to make the perceiver and how to say what it is."""

    name: str
    factory: PerceiverFactory
    describes: Describer


class PerceiverRegistry(plugins.Registry[RegisteredPerceiver]):
    """The perceivers a pipeline may be configured with, by name (``perception.perceiver``)."""

    kind = "perceiver"

    def register(self, name: str, factory: PerceiverFactory, *, describes: Describer) -> None:
        """Add perceiver ``name``; ``describes(config)`` says what it perceives with, in words that never
        call an instrument a VLM. A name registered twice is a programming error (ValueError)."""
        self._add(name, RegisteredPerceiver(name, factory, describes))

    def describe(self, config: PipelineConfig) -> str:
        """What ``config``'s perceiver perceives with, in words (before it is made)."""
        return self._find(config.perception.perceiver).describes(config)

    def create(self, config: PipelineConfig) -> KeyFramePerceiver:
        """The perceiver ``config.perception.perceiver`` names, made from ``config``.

        Raises ConfigError for a name that is not registered (listing the registered ones) or not available
        here (saying how to install it), and whatever the perceiver's factory raises (BackendError naming
        the setting) when it cannot be made.
        """
        return self._find(config.perception.perceiver).factory(config)

    def _missing(self, name: str, reason: str | None) -> ConfigError:
        if reason is not None:
            return ConfigError(f"perception.perceiver {name} is not available here: {reason}")
        return ConfigError(
            f"perception.perceiver {name!r} is not a registered perceiver; registered: {self._listing()}"
        )


def vlm_perceiver(config: PipelineConfig) -> Perceiver:
    """The core's perceiver: the VLM of ``config.vlm``, loaded (BackendError naming the setting if not)."""
    return Perceiver(load_role("VLM", "vlm", config.vlm, vision=True))


def describe_vlm(config: PipelineConfig) -> str:
    """The VLM perceiver in words: "VLM 'Qwen/Qwen2.5-VL-7B-Instruct' (transformers)"."""
    return f"VLM {config.vlm.model!r} ({config.vlm.backend})"


def core_perceivers() -> PerceiverRegistry:
    """A registry holding the core's perceiver only: ``vlm``."""
    registry = PerceiverRegistry()
    registry.register(VLM_PERCEIVER, vlm_perceiver, describes=describe_vlm)
    return registry


def installed_perceivers() -> PerceiverRegistry:
    """The core's perceivers and those of the installed packages (entry-point group
    ``embodied_r_ros.perceivers``: name = the perceiver's, value = ``register(registry)``). One that is
    installed but cannot be imported is recorded as unavailable, with the reason and how to install it."""
    registry = core_perceivers()
    plugins.register_installed(plugins.PERCEIVER_GROUP, registry, INSTALL_HINT)
    return registry
