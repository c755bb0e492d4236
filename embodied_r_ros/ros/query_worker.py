"""One model query at a time, on its own thread, behind a bounded queue with deadlines and cancel.

A caller hands a payload (for the node: a queued question) to :meth:`QueryWorker.submit` and, unless it
fires and forgets, waits for the :class:`QueryJob` with :meth:`QueryJob.wait`. The worker never looks inside
a payload: what it means, and whether it may queue at all, is the caller's and the handler's business.
Rules:

- One job runs at a time; up to ``queue_length`` more wait in arrival order. Beyond that ``submit`` raises
  :class:`QueueFullError` at once (the caller answers "busy").
- Every job has a deadline (``timeout_s`` after it was submitted; queue wait counts). A caller that stops
  waiting (timeout, cancel) calls :meth:`QueryWorker.abandon`: a waiting job is removed from the queue; a
  running job cannot be interrupted inside torch, so it runs on in the background and its result is
  dropped. The handler reports its stages through :meth:`QueryJob.report`, which raises
  :class:`QueryAbandoned` once the job is abandoned or past its deadline, so the next stage (e.g. the LM
  after the VLM) is skipped. Later jobs run as soon as the worker is free, each within its own deadline.
- ``on_finished(job)`` runs once for every job that leaves the queue (ran, or expired waiting): on the
  worker thread, before a waiting caller is woken; ``job.delivered`` tells whether the job ran to the end
  with nobody giving up on it, i.e. whether to publish its result. Jobs a caller abandoned while they
  waited in the queue never reach it. :meth:`QueryWorker.close` runs it at once, on the closing thread,
  for the jobs it abandons (queued or running): their askers hear "shutting down" before the caller of
  ``close`` tears down what replies (a publisher at cleanup).
- Idle tasks (:meth:`QueryWorker.submit_idle`, e.g. encoding new key frames ahead of questions) run only
  when no job waits, on the same thread, so they never run concurrently with a query's model calls.

Plain Python (no ROS), so it is tested without DDS.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from typing import Any, Callable, Generic, TypeVar

logger = logging.getLogger(__name__)

# Job states.
QUEUED, RUNNING, DONE, ABANDONED = "queued", "running", "done", "abandoned"
# Why a job was abandoned.
TIMEOUT, CANCELLED, SHUTDOWN = "timeout", "cancelled", "shutdown"


class QueueFullError(RuntimeError):
    """The queue holds ``queue_length`` jobs already; the message says so."""


class QueryAbandoned(Exception):
    """Raised by :meth:`QueryJob.report` inside the handler once nobody waits for the job any more."""


Payload = TypeVar("Payload")


class QueryJob(Generic[Payload]):
    """A submitted payload: its state, deadline, progress events and result."""

    def __init__(self, job_id: str, payload: Payload, timeout_s: float) -> None:
        self.id = job_id
        self.payload = payload
        self.submitted = time.monotonic()
        self.deadline = self.submitted + timeout_s
        self.timeout_s = timeout_s
        self.state = QUEUED
        self.abandon_reason: str | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.started: float | None = None
        self.finished: float | None = None
        self._reported = False  # on_finished ran for it (once: the worker thread or close)
        self._done = threading.Event()
        # Progress events; None wakes a waiter in next_event when the job ends.
        self._events: queue.SimpleQueue[tuple[str, float] | None] = queue.SimpleQueue()

    @property
    def delivered(self) -> bool:
        """True when the job ran to the end without an error and nobody gave up on it."""
        return self.state == DONE and self.error is None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the job is done or abandoned; False when ``timeout`` passed first."""
        return self._done.wait(timeout)

    def remaining_s(self) -> float:
        """Seconds until the deadline (negative once past)."""
        return self.deadline - time.monotonic()

    def report(self, stage: str, progress: float) -> None:
        """Record a stage for the waiting caller; raises :class:`QueryAbandoned` when it should stop."""
        if self.state == ABANDONED:
            raise QueryAbandoned(f"query {self.id} was abandoned ({self.abandon_reason})")
        if time.monotonic() > self.deadline:
            raise QueryAbandoned(f"query {self.id} passed its {self.timeout_s:g} s timeout")
        self._events.put((stage, float(progress)))

    def next_event(self, timeout: float) -> tuple[str, float] | None:
        """The next reported (stage, progress), waiting up to ``timeout`` seconds; None when none came or
        the job ended."""
        try:
            return self._events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def _end(self) -> None:
        self._done.set()
        self._events.put(None)


class QueryWorker(Generic[Payload]):
    """Runs ``handler(job)`` for one job at a time on a daemon thread (see the module docstring)."""

    def __init__(
        self,
        handler: Callable[[QueryJob[Payload]], Any],
        *,
        queue_length: int = 2,
        on_finished: Callable[[QueryJob[Payload]], None] | None = None,
        max_idle_tasks: int = 64,
        name: str = "embodied_r_queries",
    ) -> None:
        self._handler = handler
        self._on_finished = on_finished
        self.queue_length = queue_length
        self._queue: deque[QueryJob] = deque()
        # (task, on_dropped): the oldest go beyond max_idle_tasks, and each dropped task hears of it
        self._idle: deque[tuple[Callable[[], None], Callable[[], None] | None]] = deque()
        self._max_idle = max_idle_tasks
        self._cond = threading.Condition()
        self._running: QueryJob | None = None
        self._stopped = False
        self._ids = itertools.count(1)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    @property
    def queue_length(self) -> int:
        return self._queue_length

    @queue_length.setter
    def queue_length(self, value: int) -> None:
        if value < 0:
            raise ValueError(f"queue_length must be >= 0, got {value}")
        self._queue_length = int(value)

    @property
    def waiting(self) -> int:
        """Jobs in the queue (not counting the running one)."""
        with self._cond:
            return len(self._queue)

    @property
    def alive(self) -> bool:
        """Whether the worker thread still runs (e.g. a generation finishing after :meth:`close`)."""
        return self._thread.is_alive()

    @property
    def running(self) -> QueryJob | None:
        """The job on the worker now, or None."""
        return self._running

    def submit(self, payload: Payload, timeout_s: float, job_id: str = "") -> QueryJob[Payload]:
        """Queue ``payload`` for the handler as job ``job_id`` ("": the worker numbers it, "q1", "q2", ...);
        raises :class:`QueueFullError` when the queue is full."""
        with self._cond:
            if self._stopped:
                raise QueueFullError("the query worker is shut down")
            busy = self._running is not None or bool(self._queue)
            if busy and len(self._queue) >= self._queue_length:
                raise QueueFullError(
                    f"busy: one question is being answered and {len(self._queue)} wait (query.queue_length = "
                    f"{self._queue_length}); ask again later"
                )
            job = QueryJob(job_id or f"q{next(self._ids)}", payload, timeout_s)
            self._queue.append(job)
            self._cond.notify_all()
            return job

    def abandon(self, job: QueryJob, reason: str) -> bool:
        """Give up on ``job`` (reason TIMEOUT, CANCELLED or SHUTDOWN); False when it had finished already."""
        with self._cond:
            if job.state in (DONE, ABANDONED):
                return job.state == ABANDONED
            if job.state == QUEUED:
                try:
                    self._queue.remove(job)
                except ValueError:
                    pass
            job.state = ABANDONED
            job.abandon_reason = reason
        job._end()
        return True

    def submit_idle(self, task: Callable[[], None], on_dropped: Callable[[], None] | None = None) -> None:
        """Run ``task`` when no question waits. Beyond the bound the oldest idle tasks are dropped, and
        :meth:`clear_idle` drops them all: ``on_dropped`` is then called instead of ``task`` (a task that
        holds a claim, the memory describer's batch, releases it there), as it is for a worker stopped."""
        dropped = []
        with self._cond:
            if self._stopped:
                dropped.append(on_dropped)
            else:
                self._idle.append((task, on_dropped))
                while len(self._idle) > self._max_idle:
                    dropped.append(self._idle.popleft()[1])
                self._cond.notify_all()
        _call_all(dropped)

    def clear_idle(self) -> None:
        """Drop the idle tasks not started yet (each one's ``on_dropped`` is called)."""
        with self._cond:
            dropped = [on_dropped for _, on_dropped in self._idle]
            self._idle.clear()
        _call_all(dropped)

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking questions: the queued and the running one are abandoned as SHUTDOWN and reported to
        ``on_finished`` now, on this thread (their callers are answered at once; a generation in flight
        finishes on the daemon thread, its answer dropped); waits up to ``timeout`` for the thread."""
        with self._cond:
            self._stopped = True
            pending = [*([self._running] if self._running is not None else []), *self._queue]  # arrival order
            self._queue.clear()
            self._cond.notify_all()
        for job in pending:
            self.abandon(job, SHUTDOWN)
            self._report(job)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # ---------------------------------------------------------------------------------------------

    def _next(self) -> tuple[QueryJob | None, Callable[[], None] | None]:
        """The next job to run or to report as expired, else the next idle task; (None, None) to stop."""
        with self._cond:
            while not self._stopped and not self._queue and not self._idle:
                self._cond.wait()
            if self._stopped:
                return None, None
            if self._queue:
                job = self._queue.popleft()
                if time.monotonic() > job.deadline:
                    job.state, job.abandon_reason = ABANDONED, TIMEOUT
                else:
                    job.state, job.started = RUNNING, time.monotonic()
                    self._running = job
                return job, None
            return None, self._idle.popleft()[0]

    def _loop(self) -> None:
        while not self._stopped:
            job, task = self._next()
            if task is not None:
                try:
                    task()
                except Exception:  # an idle task is an optimisation: its failure must not stop queries
                    logger.warning("background task failed", exc_info=True)
            if job is None:
                continue
            if job.state == RUNNING:
                self._run(job)
            self._report(job)
            # Set last, so that what on_finished publishes goes out before the caller gets the answer.
            job._end()

    def _report(self, job: QueryJob) -> None:
        """``on_finished(job)``, once per job (the worker thread and :meth:`close` may both get here)."""
        with self._cond:
            if job._reported or self._on_finished is None:
                return
            job._reported = True
        try:
            self._on_finished(job)
        except Exception:
            logger.warning("on_finished of query %s failed", job.id, exc_info=True)

    def _run(self, job: QueryJob) -> None:
        try:
            job.result = self._handler(job)
        except Exception as exc:  # the handler's errors (QueryAbandoned too) are the caller's answer
            job.error = exc
        with self._cond:
            job.finished = time.monotonic()
            self._running = None
            if job.state == RUNNING:
                if isinstance(job.error, QueryAbandoned):
                    job.state, job.abandon_reason = ABANDONED, TIMEOUT
                else:
                    job.state = DONE


def _call_all(callbacks: list[Callable[[], None] | None]) -> None:
    """Call each callback given (outside the worker's lock: they may take their own)."""
    for callback in callbacks:
        if callback is not None:
            callback()
