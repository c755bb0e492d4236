"""The node's question path: service ``~/ask``, action ``~/answer``, topic ``~/question`` -> validate ->
queue -> answer -> reply.

All three transports go through :meth:`QuestionPath.ask`, top to bottom; they differ only in 1 and 6:

1. receive:  the transport's callback turns its message into a :class:`.QueryRequest` (:meth:`_on_ask`,
   :meth:`_on_goal`, :meth:`_on_question`);
2. validate: the node is active; the question and its options within ``query.max_*``
   (:func:`.questions.check_size`);
3. window:   the window it names, checked now; it is resolved against the history when the answer starts,
   so a question that waited in the queue still ends at the newest frame;
4. queue:    one hand-off to the :class:`.QueryWorker`: a :class:`.QueuedQuestion` holding the request, its
   window and the :class:`.Reply` its outcome goes to; deadline ``query.timeout_s`` from now, or "busy"
   at once beyond ``query.queue_length``; a waiting caller gives it up on a cancel or at the deadline;
5. answer:   on the worker thread, by the worker's handler (:class:`.answering.Answerer`: the window's key
   frames, then the pipeline);
6. reply:    one completion, :meth:`finished` (the worker's ``on_finished``): a delivered answer goes out on
   ``~/answers`` with its key frames on ``~/keyframes``, and the question's Reply is settled with its
   :class:`.Outcome`, counted for /diagnostics. A waiting caller (the service's response, the action's
   result) reads it when the job ends; the topic's asker hears of a failure on ``~/answers`` under its
   ``query_id``. A caller that gives the question up (cancel, deadline, shutdown) settles it itself.

Service and action callbacks (a reentrant group) only wait for their job. The three transports and
``~/answers`` exist in every lifecycle state (:meth:`open`, when the node is made): a question to a node that
is not active is answered at step 2 with its state and the transition that fixes it, on every transport (a
topic question on ``~/answers``), so an asker tells a node that is unconfigured, inactive or busy
configuring from one that is absent. Configure makes ``~/keyframes`` (:meth:`configure`), activate lets
questions through (:meth:`accept`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
import time
from typing import Any, Callable, Iterator

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.duration import Duration
from rclpy.lifecycle import LifecycleNode
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import Image

from embodied_r_ros.action import AnswerSpatial
from embodied_r_ros.msg import SpatialAnswer, SpatialQuestion
from embodied_r_ros.srv import AskSpatial

from ..pipeline import NoFramesError
from ..windows import WindowError
from .action_server import steady_action_server
from .answering import QueryResult
from .diagnostics import NodeStats, QueryTiming
from .messages import failure_message, rgb_image_message, stamp_to_ns
from .params import NodeParameters
from .query_worker import CANCELLED, SHUTDOWN, TIMEOUT, QueryJob, QueryWorker, QueueFullError
from .questions import (
    Outcome,
    QueryRequest,
    QueuedQuestion,
    Reply,
    RequestTooLargeError,
    UnknownCameraError,
    check_camera,
    check_size,
)

INACTIVE = "inactive"  # the status of a question asked while the node is not active
ANSWERS_FLUSH_S = 1.0  # at most this long for ~/answers' subscribers to take the last replies, before it goes


class QuestionPath:
    """Serves questions on ``node`` (see the module docstring). ``worker()`` is the configured node's query
    worker (None: not configured, every question is answered with the node's state), whose
    ``on_finished`` is :meth:`finished`; ``lifecycle_state()`` names the node's state in that answer and
    ``failure()`` why its last configure failed ("" when it did not)."""

    def __init__(
        self,
        node: LifecycleNode,
        params: NodeParameters,
        stats: NodeStats,
        worker: Callable[[], QueryWorker[QueuedQuestion] | None],
        lifecycle_state: Callable[[], str],
        failure: Callable[[], str] = lambda: "",
    ) -> None:
        self._node, self._params, self._stats = node, params, stats
        self._worker, self._lifecycle_state, self._failure = worker, lifecycle_state, failure
        self.group = ReentrantCallbackGroup()  # the callbacks that wait for a question's job
        self._services: list[Any] = []  # open: ~/ask and the ~/answer action server
        self._answers: Any = None  # open: ~/answers
        self._topic: Any = None  # open: ~/question
        self._keyframes: Any = None  # configured: ~/keyframes
        self._accepting = False  # active
        self._asks = threading.Condition()  # ask() calls in flight, waited for at shutdown
        self._asks_in_flight = 0
        self._query_ids = itertools.count(1)  # node-made query ids, unique over the node's life

    # ---------------------------------------------------------------------------------- lifecycle

    def open(self) -> None:
        """When the node is made: the services, ``~/question`` and ``~/answers``, for every state."""
        node, group = self._node, self.group
        self._services = [
            node.create_service(AskSpatial, "~/ask", self._on_ask, callback_group=group),
            steady_action_server(  # the goal-expiry timer off ROS time: no wake-up per /clock
                node,
                AnswerSpatial,
                "~/answer",
                execute_callback=self._on_goal,
                goal_callback=lambda goal: GoalResponse.ACCEPT,
                cancel_callback=lambda goal_handle: CancelResponse.ACCEPT,
                callback_group=group,
            ),
        ]
        # A plain publisher, not a lifecycle one: an inactive node still says why on ~/answers.
        self._answers = node.create_publisher(SpatialAnswer, "~/answers", 10)
        self._topic = node.create_subscription(
            SpatialQuestion, "~/question", self._on_question, 10, callback_group=group
        )

    def configure(self) -> None:
        """Configure: ``~/keyframes`` (a lifecycle publisher: it publishes while active)."""
        # Transient local: a viewer (`embodied-r ask --report`) subscribing late still gets the evidence.
        depth = self._params.config.keyframes.max_keyframes
        self._keyframes = self._node.create_lifecycle_publisher(
            Image, "~/keyframes", QoSProfile(depth=depth, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        )

    def accept(self) -> None:
        """Activate: questions go to the worker."""
        self._accepting = True

    def refuse(self) -> None:
        """Deactivate: every question is answered with the node's state from now on."""
        self._accepting = False

    def cleanup(self) -> None:
        """Cleanup (after the worker closed and its questions were answered): destroy ``~/keyframes``."""
        keyframes, self._keyframes = self._keyframes, None
        if keyframes is not None:
            self._node.destroy_lifecycle_publisher(keyframes)

    def close(self) -> None:
        """The node is destroyed: after a moment for the last replies on ``~/answers`` to be taken, destroy
        the services, the subscription and the publishers."""
        self.refuse()
        self.cleanup()
        for entity in self._services:
            if isinstance(entity, ActionServer):
                entity.destroy()
            else:
                self._node.destroy_service(entity)
        self._services = []
        topic, answers, self._topic, self._answers = self._topic, self._answers, None, None
        if topic is not None:
            self._node.destroy_subscription(topic)
        if answers is not None:
            with contextlib.suppress(Exception):  # a context already shut down: nothing to flush
                answers.wait_for_all_acked(Duration(seconds=ANSWERS_FLUSH_S))
            self._node.destroy_publisher(answers)

    # ------------------------------------------------------------------------------------ the path

    def ask(
        self,
        request: QueryRequest,
        on_event: Callable[[str, float], None] | None = None,
        cancelled: Callable[[], bool] = lambda: False,
        reply: Callable[[Outcome], None] | None = None,
    ) -> Outcome | None:
        """Steps 2 to 6 for one question (see the module docstring). ``on_event(stage, progress)`` hears a
        waiting caller's stages (the action's feedback); ``cancelled()`` True gives the question up; a
        caller that does not wait passes ``reply``, which gets the outcome on the worker thread when the
        question ends. Returns the outcome, or None once a question with ``reply`` is queued."""
        query = self._params.config.query
        to_caller = Reply(reply)
        with self._in_flight():
            worker = self._worker()
            if worker is None or not self._accepting:
                return self._settle(to_caller, Outcome(False, self._inactive_reason(), status=INACTIVE))
            try:
                check_size(request, query)  # 2. validate
                check_camera(request, [c.name for c in self._params.config.camera_specs()])
                window = request.window  # 3. window
                window.check()
                job = worker.submit(  # 4. queue: the one hand-off
                    QueuedQuestion(request, window, to_caller),
                    query.timeout_s,
                    request.query_id or f"q{next(self._query_ids)}",
                )
            except (RequestTooLargeError, UnknownCameraError, WindowError) as exc:
                return self._settle(to_caller, Outcome(False, str(exc)))
            except QueueFullError as exc:
                return self._settle(to_caller, Outcome(False, str(exc), status="busy"))
            if reply is not None:
                return None  # 5. and 6. follow on the worker thread
            self._wait_for_answer(worker, job, on_event, cancelled)  # 5. answer (on the worker thread)
            return self._settle_job(job)  # 6. reply: settled by finished(), or given up here

    def finished(self, job: QueryJob[QueuedQuestion]) -> None:
        """Step 6, the worker's ``on_finished``, on its thread before a waiting caller is woken: publish a
        delivered answer and its evidence, and settle the question's reply."""
        try:
            if job.delivered:
                self._publish(job)
        finally:  # a publisher torn down under it (cleanup) must not leave the caller's reply unsettled
            self._settle_job(job)

    def _inactive_reason(self) -> str:
        """Why the node does not take a question now, and the transition that fixes it."""
        name, state = self._node.get_fully_qualified_name(), self._lifecycle_state()
        if state == "unconfigured":
            failure = self._failure()
            failed = f" (its last configure failed: {failure})" if failure else ""
            return (
                f"the node {name} is unconfigured{failed}, not taking questions: configure and activate it "
                f"(ros2 lifecycle set {name} configure, then activate)"
            )
        if state == "inactive":
            return (
                f"the node {name} is inactive, not taking questions: activate it "
                f"(ros2 lifecycle set {name} activate)"
            )
        if state == "finalized":
            return f"the node {name} is finalized (shut down), not taking questions: start it again"
        return (  # a transition under way: configuring (the models load), activating, cleaningup, ...
            f"the node {name} is {state} (a lifecycle transition is under way), not taking questions yet: "
            "ask again when it is active"
        )

    # Steps 1 and 6 of each transport.

    def _on_ask(self, request: Any, response: Any) -> Any:
        outcome = self.ask(_request_of(request))
        assert outcome is not None  # a waiting caller
        response.success, response.message = outcome.success, outcome.message
        if outcome.answer is not None:
            response.answer = outcome.answer
        return response

    def _on_goal(self, goal_handle: Any) -> Any:
        def feedback(stage: str, progress: float) -> None:
            goal_handle.publish_feedback(AnswerSpatial.Feedback(stage=stage, progress=progress))

        outcome = self.ask(
            _request_of(goal_handle.request),
            on_event=feedback,
            cancelled=lambda: goal_handle.is_cancel_requested,
        )
        assert outcome is not None  # a waiting caller
        result = AnswerSpatial.Result(success=outcome.success, message=outcome.message)
        if outcome.answer is not None:
            result.answer = outcome.answer
        if outcome.status == CANCELLED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif outcome.success:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _on_question(self, message: Any) -> None:
        request = _request_of(message)
        logger = self._node.get_logger()
        if not request.query_id:
            request = dataclasses.replace(request, query_id=f"q{next(self._query_ids)}")
            logger.info(
                f"question {_preview(request.question)} from ~/question has no query_id: its answer on "
                f"~/answers carries {request.query_id}"
            )

        def reply(outcome: Outcome) -> None:  # nobody waits: the answer or the reason goes out on ~/answers
            if outcome.success:
                return
            logger.warning(
                f"question {request.query_id} {_preview(request.question)} from ~/question not answered: "
                f"{outcome.message}"
            )
            publisher = self._answers
            if publisher is not None:
                stamp = self._node.get_clock().now().nanoseconds
                publisher.publish(
                    failure_message(
                        request.query_id, request.question, request.options, outcome.message, stamp
                    )
                )

        self.ask(request, reply=reply)

    # The steps behind ask().

    def _wait_for_answer(
        self,
        worker: QueryWorker[QueuedQuestion],
        job: QueryJob[QueuedQuestion],
        on_event: Callable[[str, float], None] | None,
        cancelled: Callable[[], bool],
    ) -> None:
        """Wait until the worker ends ``job``, passing its stages to ``on_event``; give it up on a cancel or
        at its deadline (the worker drops an answer that comes later)."""
        if on_event is not None:
            on_event("queued", 0.0)
        while not job.wait(0):
            # Wake on each stage (feedback goes out at once), on the job's end, or every 0.1 s to check
            # for a cancel and the deadline.
            step = min(0.1, max(0.0, job.remaining_s()))
            if on_event is None:
                job.wait(step)
            elif (event := job.next_event(step)) is not None:
                on_event(*event)
                continue
            if cancelled() and worker.abandon(job, CANCELLED):
                break
            if job.remaining_s() <= 0 and worker.abandon(job, TIMEOUT):
                break
        while on_event is not None and (event := job.next_event(0.0)) is not None:
            on_event(*event)

    def _publish(self, job: QueryJob[QueuedQuestion]) -> None:
        """A delivered answer on ~/answers, its key frames on ~/keyframes; its timing for /diagnostics."""
        answers, keyframes = self._answers, self._keyframes
        if answers is None or keyframes is None:
            return  # cleaned up meanwhile
        result: QueryResult = job.result
        start = time.monotonic()
        result.message.message = _answered_message(job)
        if self._params.config.query.publish_keyframes:
            # each key frame in its own camera's frame (a node with several cameras), else the answer's
            frame_ids = result.frame_ids or [result.message.header.frame_id] * len(result.keyframes)
            for keyframe, frame_id in zip(result.keyframes, frame_ids, strict=True):
                keyframes.publish(rgb_image_message(keyframe.frame.image, keyframe.frame.stamp_ns, frame_id))
        answers.publish(result.message)
        end = time.monotonic()
        timing = QueryTiming(
            queued_s=(job.started or job.submitted) - job.submitted,
            keyframes_s=result.keyframes_s,
            perception_s=result.message.perception_seconds,
            reasoning_s=result.message.reasoning_seconds,
            publish_s=end - start,
            total_s=end - job.submitted,
            keyframes=len(result.keyframes),
        )
        with self._stats.lock:
            self._stats.last_timing = timing

    def _settle_job(self, job: QueryJob[QueuedQuestion]) -> Outcome:
        """How a question the worker took ended, once: the outcome already settled, or its job's now."""
        reply = job.payload.reply
        if reply.outcome is None:
            self._settle(reply, self._outcome(job), job)
        assert reply.outcome is not None
        return reply.outcome

    def _outcome(self, job: QueryJob[QueuedQuestion]) -> Outcome:
        """How a question the worker took ended, as its caller sees it."""
        if job.delivered:
            result: QueryResult = job.result
            if not result.message.message:
                result.message.message = _answered_message(job)
            return Outcome(True, result.message.message, result.message, "answered")
        if job.abandon_reason == CANCELLED:
            return Outcome(False, f"query {job.id} cancelled", status=CANCELLED)
        if job.abandon_reason == SHUTDOWN:
            return Outcome(
                False,
                "shutting down: the node is stopping or cleaning up; ask when it is back",
                status=SHUTDOWN,
            )
        if job.abandon_reason == TIMEOUT:
            where = (
                "while waiting behind another question"
                if job.started is None
                else "while the models worked on it; they finish it in the background and drop the answer"
            )
            return Outcome(
                False,
                f"timed out after {job.timeout_s:g} s (query.timeout_s) {where}; the node keeps answering",
                status=TIMEOUT,
            )
        error = job.error
        if isinstance(error, (NoFramesError, ValueError)):
            return Outcome(False, str(error))
        self._node.get_logger().error(
            f"query {job.id} ({job.payload.request.question!r}) failed: {type(error).__name__}: {error}"
        )
        return Outcome(False, f"failed: {type(error).__name__}: {error}")

    def _settle(self, reply: Reply, outcome: Outcome, job: QueryJob[QueuedQuestion] | None = None) -> Outcome:
        """Step 6: the first outcome of a question is counted for /diagnostics (an answered job's latency
        too) and delivered where the caller asked; returns the question's outcome."""
        if reply.settle(outcome):
            latency = None
            if job is not None and job.finished is not None and outcome.success:
                latency = job.finished - job.submitted
            self._stats.finished(outcome.status, latency)
            if reply.deliver is not None:
                reply.deliver(outcome)
        assert reply.outcome is not None
        return reply.outcome

    @contextlib.contextmanager
    def _in_flight(self) -> Iterator[None]:
        """Count an :meth:`ask` in flight (at shutdown :meth:`wait_for_callbacks` lets their replies out)."""
        with self._asks:
            self._asks_in_flight += 1
        try:
            yield
        finally:
            with self._asks:
                self._asks_in_flight -= 1
                self._asks.notify_all()

    def wait_for_callbacks(self, timeout_s: float) -> bool:
        """Wait until no :meth:`ask` is in flight (at shutdown, after the worker closed); False on timeout."""
        with self._asks:
            return self._asks.wait_for(lambda: self._asks_in_flight == 0, timeout_s)


def _request_of(message: Any) -> QueryRequest:
    """The question an AskSpatial request, an AnswerSpatial goal or a SpatialQuestion carries (their fields
    are the same; only a SpatialQuestion names its query id)."""
    return QueryRequest(
        message.question,
        tuple(message.options),
        float(message.window_seconds),
        stamp_to_ns(message.start_stamp),
        stamp_to_ns(message.end_stamp),
        getattr(message, "query_id", ""),
        bool(message.search_memory),
        str(getattr(message, "camera", "")),
    )


def _answered_message(job: QueryJob[QueuedQuestion]) -> str:
    result: QueryResult = job.result
    seconds = (job.finished or time.monotonic()) - job.submitted
    count = len(result.message.keyframe_stamps)
    text = f"answered from {count} key frame{'s' * (count != 1)} in {seconds:.2f} s"
    return text + "".join(f"; {note}" for note in result.message.notes)


def _preview(text: str, limit: int = 80) -> str:
    """``text`` quoted for a log line, cut at ``limit`` characters (a refused question may be 100 kB)."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
