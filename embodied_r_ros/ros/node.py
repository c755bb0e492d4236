"""The ROS 2 node ``embodied_r``: camera in, spatial answers out (executable ``embodied_r_node``).

A thin ROS layer over the core, as a managed (lifecycle) node. Interfaces (names relative to the node,
``~`` = /<namespace>/embodied_r):

- in: the camera (``camera.topic``, sensor_msgs/Image or CompressedImage), or several (``cameras``: one VLM
  and LM for all, a history and memory file each, a question names one or asks over all; see
  :mod:`embodied_r_ros.cameras`), optionally poses (``pose.source``: a pose message on ``pose.topic`` or TF,
  see :mod:`embodied_r_ros.poses.pose_sources`);
- service ``~/ask`` (AskSpatial), action ``~/answer`` (AnswerSpatial: feedback per stage, cancel), topic
  ``~/question`` (SpatialQuestion, fire and forget: its answer, or why there is none, comes on ``~/answers``
  with the asker's ``query_id``);
- out: ``~/answers`` (SpatialAnswer, every answer), ``~/keyframes`` (sensor_msgs/Image rgb8, one message
  per key frame of each answer, stamped with the frame's own stamp), ``/diagnostics`` (in every state);
- ``~/reset`` (std_srvs/Trigger) clears the history, and the durable memory unless ``memory.keep_on_reset``;
- the lifecycle services (``ros2 lifecycle``): configure loads the models, activate subscribes (camera,
  poses) and answers, deactivate stops taking frames and questions (the history stays), cleanup frees the
  models' memory, shutdown ends the process. ``~/ask``, ``~/answer``, ``~/question`` and ``~/answers``
  exist in every state: a node that is not active answers every question with its state and the
  transition to make (a topic question on ``~/answers``), and questions still queued at cleanup or
  shutdown are answered "shutting down". With ``autostart`` (the default) the node configures and
  activates itself at start.

The node keeps the lifecycle transitions and wires parts that each do one job: :mod:`.node_inputs` (camera,
poses, /clock, TF -> the history), :mod:`.question_path` (the three transports -> validate -> queue ->
reply) around the :class:`~.query_worker.QueryWorker` thread, whose handler is :mod:`.answering` (key
frames, then the models; one question at a time), :mod:`.node_memory` (the durable memory, its describer and
search) and :mod:`.diagnostics` (counters, /diagnostics). Parameters are declared once (:mod:`.params`).
The process around it (executor, signals, shutdown) is :mod:`.node_main`.
"""

from __future__ import annotations

import functools
import gc
import sys
from dataclasses import dataclass
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_srvs.srv import Trigger

from ..backends import BackendError
from ..config import ConfigError
from ..history import RobotHistory
from ..node_config import NodeConfig
from ..perceivers import PerceiverRegistry
from ..pipeline import EmbodiedR
from .allocator import release_free_memory
from .answering import Answerer, CameraServed, pre_encoder
from .diagnostics import (
    CameraView,
    DiagnosticsPublisher,
    NodeStats,
    NodeView,
    combined_stats,
    diagnostic_status,
)
from .models import ModelLoadError, load_models
from .node_inputs import NodeInputs
from .node_memory import NodeMemory
from .params import NODE_NAME, NodeParameters
from .pose_source import pose_source_problem
from .query_worker import QueryWorker
from .question_path import QuestionPath
from .questions import QueuedQuestion


@dataclass
class Served:
    """What configure makes and cleanup destroys: the models' pipeline and what serves questions; per
    camera (by name, in the order of ``cameras``) its history and memory."""

    pipeline: EmbodiedR
    owns_pipeline: bool  # loaded by this node (cleanup closes it), not given by the caller
    cameras: dict[str, CameraServed]
    worker: QueryWorker[QueuedQuestion]
    reset_service: Any  # ~/reset

    @property
    def history(self) -> RobotHistory:
        """The first camera's history (the only one of a node with one camera)."""
        return next(iter(self.cameras.values())).history

    @property
    def memory(self) -> NodeMemory:
        """The first camera's memory (the only one of a node with one camera)."""
        return next(iter(self.cameras.values())).memory


class EmbodiedRNode(LifecycleNode):
    """The ``embodied_r`` node (see the module docstring).

    ``perceivers`` are the perceivers ``perception.perceiver`` may name (the application's registry);
    ``pipeline`` skips loading the models (tests and benchmarks share one; cleanup leaves it open);
    ``camera_thread`` False serves the camera from the node's own executor like every other callback (the
    benchmark's baseline: see :mod:`.input_thread` for why it is True); ``node_kwargs`` go to
    :class:`rclpy.node.Node` (``context``, ``namespace``, ``parameter_overrides``, ...). With ``autostart``
    (a parameter, default true) the constructor configures and activates the node. Raises
    :class:`ConfigError` for unusable parameters and :class:`ModelLoadError` when a model cannot be loaded.
    """

    def __init__(
        self,
        *,
        perceivers: PerceiverRegistry | None = None,
        pipeline: EmbodiedR | None = None,
        node_name: str = NODE_NAME,
        camera_thread: bool = True,
        **node_kwargs: Any,
    ):
        if pipeline is None and perceivers is None:
            raise TypeError("EmbodiedRNode needs perceivers= to load its pipeline with, or pipeline=")
        super().__init__(node_name, **node_kwargs)
        try:
            self.params = NodeParameters(self, on_change=self._on_config_change)
        except Exception:
            super().destroy_node()
            raise
        config = self.params.config
        self._perceivers, self._given_pipeline = perceivers, pipeline
        self.stats = NodeStats()
        gc.callbacks.append(self.stats.gc_callback)
        self.served: Served | None = None  # configured
        self._failure = ""  # why the last configure failed
        # One NodeInputs per camera; with several, each counts its own frames (/diagnostics adds them up).
        specs = config.camera_specs()
        self.cameras: dict[str, NodeInputs] = {}
        for spec in specs:
            stats = self.stats if len(specs) == 1 else NodeStats()
            first = next(iter(self.cameras.values()), None)  # takes /clock and the poses for all
            self.cameras[spec.name] = NodeInputs(
                self, self.params, stats, camera_thread, camera=spec, shared_poses=first
            )
        self.inputs = next(iter(self.cameras.values()))  # the first camera's (with /clock and the poses)
        worker, state = (lambda: self.worker), (lambda: self.lifecycle_state)
        self.questions = QuestionPath(
            self, self.params, self.stats, worker, state, failure=lambda: self._failure
        )
        self.questions.open()  # in every state: a question to a node that is not active hears why
        # More executor threads than questions that can wait at once, so the camera never starves.
        self.executor_threads = max(8, config.query.queue_length + 6)
        self.diagnostics_publisher = DiagnosticsPublisher(
            self, config.diagnostics_period_s, self.diagnostics, on_tick=self._on_diagnostics_tick
        )
        if config.autostart:
            try:
                self.start()
            except Exception:
                self.destroy_node()
                raise

    # ---------------------------------------------------------------------------------- lifecycle

    @property
    def lifecycle_state(self) -> str:
        """unconfigured, inactive, active or finalized (the state machine's label)."""
        return self._state_machine.current_state[1]

    @property
    def pipeline(self) -> EmbodiedR | None:
        return self.served.pipeline if self.served else None

    @property
    def history(self) -> RobotHistory | None:
        return self.served.history if self.served else None

    @property
    def worker(self) -> QueryWorker[QueuedQuestion] | None:
        return self.served.worker if self.served else None

    @property
    def newest_ns(self) -> int | None:
        """Stamp of the newest camera frame taken (None before the first, after a reset or unconfigured)."""
        return self.history.newest_ns if self.history else None

    def start(self) -> None:
        """Configure and activate (what ``autostart`` does); raises :class:`ModelLoadError` or
        :class:`ConfigError` with the reason when configure fails."""
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            raise ModelLoadError(self._failure or "configure failed (see the log)")
        if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
            raise ModelLoadError("activate failed (see the log)")

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Load the models (or take the given pipeline) and make what serves questions."""
        try:
            self.served = self._serve(self.params.config)
        except (ConfigError, ModelLoadError, BackendError, OSError) as exc:
            self._failure = " ".join(str(exc).split())
            self.get_logger().error(f"configure failed: {self._failure}")
            return TransitionCallbackReturn.FAILURE
        self._failure = ""
        # What the models brought in (torch, transformers, their modules and parameters: 390 000 objects
        # with the tiny models) is never garbage, but every full collection walked it: 250-360 ms with the
        # GIL held on 2 cores, long enough to overflow the camera's queue in a long run. Frozen, a full
        # collection walks only what came later (the history's frames). cleanup unfreezes.
        gc.collect()
        gc.freeze()
        with self.stats.lock:
            # that collection was ours, before any frame; count from here
            self.stats.gc_pause_s_max = self.stats.gc_cpu_s_max = 0.0
        self.get_logger().info(
            f"configured: {self.served.pipeline.perception}, LM {self.params.config.lm.model!r}; "
            f"{'activate to take frames and questions' if not self.params.config.autostart else 'activating'}"
        )
        return super().on_configure(state)

    def _serve(self, config: NodeConfig) -> Served:
        """The parts configure makes, wired: the worker answers with the Answerer and completes each
        question in the question path."""
        problem = pose_source_problem(config.pose)
        if problem:
            raise ConfigError(problem)
        pipeline, owns = self._given_pipeline, False
        if pipeline is None:
            assert self._perceivers is not None
            pipeline, owns = load_models(config, self._perceivers, self.get_logger()), True
        cameras: dict[str, CameraServed] = {}
        embedder = None  # one text embedder for every camera's memory
        for name, inputs in self.cameras.items():
            history = RobotHistory(
                config.buffer, config.keyframes, config.camera.jump_back_reset_s, config.pose.max_gap_s
            )
            # Last, once nothing else can fail: the memory holds a lock on its file until cleanup closes it.
            memory = NodeMemory.open(
                config, self.get_fully_qualified_name(), pipeline, self.get_logger(), camera=name,
                embedder=embedder,
            )  # fmt: skip
            embedder = embedder or memory.embedder
            history.memory = memory.store
            cameras[name] = CameraServed(name, history, memory, inputs, pre_encoder(pipeline, history))
        answerer = Answerer(pipeline, cameras, self.params, self.get_clock)
        worker: QueryWorker[QueuedQuestion] = QueryWorker(
            answerer, queue_length=config.query.queue_length, on_finished=self.questions.finished
        )
        self.questions.configure()
        reset = self.create_service(Trigger, "~/reset", self._on_reset, callback_group=self.questions.group)
        return Served(pipeline, owns, cameras, worker, reset)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Subscribe to the camera and the poses; answer questions."""
        served = self.served
        assert served is not None  # the state machine activates only a configured node
        for camera in served.cameras.values():
            on_keyframe = functools.partial(self._on_keyframe, served, camera)
            camera.inputs.start(camera.history, on_keyframe, on_restart=served.worker.clear_idle)
        self.questions.accept()
        listening = "; ".join(inputs.description for inputs in self.cameras.values())
        self.get_logger().info(f"active: {listening}; ask on {self.resolve_service_name('~/ask')}")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop taking frames, poses and questions (the history and the models stay)."""
        self._stop_inputs()
        self.get_logger().info("inactive: not taking frames or questions (activate to resume)")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Free the models' memory and what serves questions."""
        self._release()
        self.get_logger().info("cleaned up: models released (configure to load them again)")
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop and free everything (questions still queued are answered "shutting down"); the node's
        process (:mod:`.node_main`) ends once the node is finalized."""
        self._stop_inputs()
        self._release()
        self.get_logger().info("shut down (lifecycle shutdown): finalized")
        return super().on_shutdown(state)

    @property
    def finalized(self) -> bool:
        """True once the shutdown transition finished: nothing is served any more."""
        return self.lifecycle_state == "finalized"

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.get_logger().error(f"error in state {state.label}: releasing everything (configure to retry)")
        self._stop_inputs()
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _stop_inputs(self) -> None:
        self.questions.refuse()
        for inputs in self.cameras.values():
            inputs.stop()

    def _release(self) -> None:
        """Close the worker (questions in it are answered "shutting down", on ``~/answers`` too), destroy
        what configure made and close the models this node loaded, returning their memory (GPU memory too,
        and the C allocator's free pages)."""
        served, self.served = self.served, None
        if served is None:
            return
        served.worker.close(timeout=1.0)
        for camera in served.cameras.values():
            camera.memory.close()  # commits what is queued
        self.questions.cleanup()
        self.destroy_service(served.reset_service)
        if served.owns_pipeline:
            served.pipeline.close()
        del served
        gc.unfreeze()  # the models' objects may go now
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
        release_free_memory()

    def destroy_node(self) -> None:
        """Stop taking frames, close the query worker and free the models (a generation in flight is left
        to finish on its daemon thread)."""
        # getattr: a node whose construction failed is still destroyed by its context.
        if getattr(self, "questions", None) is not None:
            self._stop_inputs()
            self._release()
            self.questions.close()
        for inputs in getattr(self, "cameras", {}).values():
            inputs.close()
        if getattr(self, "stats", None) is not None and self.stats.gc_callback in gc.callbacks:
            gc.callbacks.remove(self.stats.gc_callback)
        super().destroy_node()

    # ------------------------------------------------------------------------------------- wiring

    def _on_keyframe(self, served: Served, camera: CameraServed, stamp_ns: int) -> None:
        """A new key frame (on the camera's thread): encode it while idle, describe it in the background."""
        if camera.encode is not None and self.params.config.query.pre_encode_keyframes:
            served.worker.submit_idle(functools.partial(camera.encode, stamp_ns))
        camera.memory.schedule_describer(served.worker)

    def _on_config_change(self, config: NodeConfig) -> None:
        if self.served is not None:
            self.served.worker.queue_length = config.query.queue_length

    def clear_history(self) -> tuple[int, int]:
        """Forget frames, key-frame decisions and poses; returns (frames, decisions) dropped."""
        served = self.served
        if served is None:
            return 0, 0
        frames = decisions = 0
        for camera in served.cameras.values():
            dropped = camera.history.clear()
            frames, decisions = frames + dropped[0], decisions + dropped[1]
            camera.inputs.clear()
        served.worker.clear_idle()
        return frames, decisions

    def _on_reset(self, request: Any, response: Any) -> Any:
        frames, decisions = self.clear_history()
        response.success = True
        response.message = f"history cleared: {frames} stored frames, {decisions} key-frame decisions"
        served = self.served
        if served is not None:
            keep = self.params.config.memory.keep_on_reset
            for name, camera in served.cameras.items():
                said = camera.memory.reset(keep=keep)
                response.message += f"{said} ({name})" if said and name else said
        self.get_logger().info(response.message)
        return response

    # -------------------------------------------------------------------------------- diagnostics

    def diagnostics(self) -> DiagnosticStatus:
        """The node's health as one DiagnosticStatus (what /diagnostics carries)."""
        served = self.served
        inputs: dict[str, str] = {}
        problems: dict[str, str] = {}
        for camera in self.cameras.values():
            inputs.update(camera.input_states())
            problems.update(camera.watch.problems)
        view = NodeView(
            name=self.get_fully_qualified_name(),
            lifecycle_state=self.lifecycle_state,
            failure=self._failure,
            use_sim_time=bool(self.get_parameter("use_sim_time").value),
            clock_problem=self.inputs.clock_problem(),
            camera_topic=", ".join(camera.camera_topic for camera in self.cameras.values()),
            config=self.params.config,
            history=served.history if served else None,
            worker=served.worker if served else None,
            perception=served.pipeline.perception if served else None,
            memory=served.memory if served else None,
            inputs=inputs,
            input_problems=problems,
            cameras=camera_views(self.cameras, served.cameras if served else None),
        )
        if len(self.cameras) == 1:
            return diagnostic_status(view, self.stats)
        return diagnostic_status(view, combined_stats(self.stats, [c.stats for c in self.cameras.values()]))

    def _on_diagnostics_tick(self) -> None:
        served = self.served
        if served is not None and self.inputs.active:
            for camera in served.cameras.values():
                # a backlog from before a restart, or after a busy spell
                camera.memory.schedule_describer(served.worker)
        self.inputs.warn_if_no_clock()
        for inputs in self.cameras.values():
            inputs.check()  # inputs missing or of another type: logged once, in /diagnostics


def camera_views(
    inputs: dict[str, NodeInputs], served: dict[str, CameraServed] | None
) -> tuple[CameraView, ...]:
    """Each camera of a node with several, for /diagnostics (a node with one camera: none)."""
    if len(inputs) == 1:
        return ()
    return tuple(
        CameraView(
            name,
            camera.camera_topic,
            camera.stats,
            served[name].history if served else None,
            served[name].memory if served else None,
        )
        for name, camera in inputs.items()
    )
