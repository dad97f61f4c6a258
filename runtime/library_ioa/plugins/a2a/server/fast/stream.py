"""``StreamRun``: the streamed turn of a new task without the SDK's ``ActiveTask``.

For every streaming send the SDK's ``DefaultRequestHandler`` builds an ``ActiveTask``: a
producer and a consumer task, two event queues on culsans/aiologic with their dispatch
loops, a tapped queue per subscriber and a ``TaskManager``, and every event crosses all of
them (what that costs a streamed event: docs/performance.md, "Where the time goes").

A :class:`StreamRun` does the same work for one new task on one asyncio task. It is the
event queue the executor publishes to (``enqueue_event``), and handles each event where it
is published, in the order and with the rules of the SDK's ``EventConsumer``:

- a ``Message`` (a quick text-only turn) is passed on and ends the stream; nothing is stored;
- the ``Task`` is stored, then every status and artifact update is applied by the SDK's own
  ``TaskManager`` and stored through the same versioned store (so the final-state guard,
  the run book of ``sql`` stores and ``GetTask``/``ListTasks`` see the same writes), sent
  to the push sender when there is one, handed to every listener and published on the
  cross-replica event stream when there is one;
- a write refused because the task reached a terminal state meanwhile (a ``CancelTask``
  from another replica) ends the stream with the stored task, as the SDK does;
- the executor raising writes FAILED and ends every listener with the error.

Listeners are the requester's stream and any ``SubscribeToTask`` of the task while it
runs: they get the events in order; a listener that goes away (a client disconnecting)
never stops the turn, which runs to its end and is stored. Each listener's buffer is
bounded (:class:`StreamLimits`, ``a2a.responses.stream_buffer_events`` and
``stream_buffer_bytes``): a reader that leaves more unread (a client that stopped reading,
whose socket no longer drains) is dropped: its buffer is freed, its stream ends with an
``InternalError`` naming the bound once the writer reaches it, and the turn and the other
listeners go on (counted in ``maslab_a2a_stream_subscribers_dropped_total{agent}``).

:meth:`cancel` is the SDK's local cancel: the executor's ``cancel`` publishes CANCELED,
the turn's waiting call is withdrawn, and the stored task is returned. When the run
ends, ``park`` (the handler) may hand the task to the SDK's registry as the
``ActiveTask`` the SDK would have kept: for a task waiting for input, or with a message
waiting behind the turn, so that message, a cancel or a resubscription is the SDK's.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.cluster import ConcurrentTaskModificationError, TaskEventStream, VersionedTaskStore
from a2a.server.cluster.event_stream import VersionedEvent
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationSender
from a2a.types import (
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InternalError, InvalidAgentResponseError, InvalidParamsError
from prometheus_client import Counter

from library_ioa.plugins.a2a.server.metrics import A2A_REGISTRY
from library_ioa.plugins.a2a.server.stores.final_state import TERMINAL_STATES
from mas.infra.models import DEFAULT_STREAM_BUFFER_BYTES, DEFAULT_STREAM_BUFFER_EVENTS

logger = logging.getLogger(__name__)

__all__ = ["Listener", "StreamLimits", "StreamRun", "bounded_events"]

Event = Message | Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent

STREAM_DROPS = Counter(
    "maslab_a2a_stream_subscribers_dropped",
    "Stream subscribers dropped because they left more events unread than their buffer holds.",
    ("agent",),
    registry=A2A_REGISTRY,
)


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """How much one listener may leave unread (``a2a.responses``) before it is dropped."""

    max_events: int = DEFAULT_STREAM_BUFFER_EVENTS
    max_bytes: int = DEFAULT_STREAM_BUFFER_BYTES
    agent_id: str = ""


class Listener:
    """One reader of a run's events: the requester's stream or a resubscription.

    The event put while nothing waits is always taken; behind it at most ``max_events``
    more and ``max_bytes`` of them (their serialized size, measured only while the reader
    is behind). One more drops the listener (module docstring).
    """

    __slots__ = ("_bytes", "_done", "_error", "_items", "_waiter", "dropped", "limits")

    def __init__(self, limits: StreamLimits | None = None) -> None:
        self._items: deque[Event] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False
        self._error: BaseException | None = None
        self._bytes = 0  # of the events behind the first
        self.limits = limits or StreamLimits()
        self.dropped = False

    def put(self, event: Event) -> None:
        if self._done:
            return
        if self._items:  # the reader is behind
            size = event.ByteSize()
            limits = self.limits
            if len(self._items) >= limits.max_events or self._bytes + size > limits.max_bytes:
                self._drop()
                return
            self._bytes += size
        self._items.append(event)
        self._wake()

    def _drop(self) -> None:
        limits = self.limits
        self.dropped = True
        self._items.clear()
        self._bytes = 0
        STREAM_DROPS.labels(limits.agent_id).inc()
        logger.warning(
            "agent %s: a stream subscriber left more than %d events or %d bytes unread; "
            "dropped (the task goes on)",
            limits.agent_id,
            limits.max_events,
            limits.max_bytes,
        )
        self.close(
            InternalError(
                message=(
                    "stream dropped: this subscriber left more than "
                    f"{limits.max_events} events or {limits.max_bytes} bytes unread "
                    "(a2a.responses.stream_buffer_events, stream_buffer_bytes); the task "
                    "goes on: SubscribeToTask or GetTask it"
                )
            )
        )

    def close(self, error: BaseException | None = None) -> None:
        if self._done:  # dropped already: its error stands
            return
        self._done = True
        self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def batch(self) -> list[Event]:
        """Every event queued now (waiting for one); ``[]`` at the end; the run's error last."""
        while not self._items:
            if self._done:
                if self._error is not None:
                    raise self._error
                return []
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        items = list(self._items)
        self._items.clear()
        self._bytes = 0
        return items


class TaskBook:
    """The task of one run as last stored: what the SDK's ``TaskManager`` does for a new task.

    The same reads, writes (with the event, the previous task and its version, so a
    versioned store compares and swaps) and updates (a status moves the previous status
    message to the history and merges the metadata; an artifact chunk replaces, appends to
    or adds an artifact by id); without the tracing span the SDK wraps around every
    artifact update.

    ``new``: ``task_id`` was just generated for this run, so nothing is stored under it
    until the book's first save and its first read does not ask the store (the SDK's
    ``TaskManager`` asks, and always misses); after :meth:`invalidate` the store is asked.
    """

    def __init__(
        self,
        store: VersionedTaskStore,
        context: ServerCallContext,
        task_id: str,
        initial_message: Message | None,
        *,
        new: bool = False,
    ) -> None:
        self._store = store
        self.context = context
        self.task_id = task_id
        self._initial_message = initial_message
        self.task: Task | None = None
        self.version = TaskVersion.MISSING
        self._unsaved = new  # a new task's id: the store holds nothing under it yet

    async def get_task(self) -> Task | None:
        """The task as last read or written (read from the store when not known)."""
        if self.task is None and not self._unsaved:
            stored = await self._store.get(self.task_id, self.context)
            if stored is not None:
                self.task, self.version = stored.task, stored.version
            else:
                self.version = TaskVersion.MISSING
        return self.task

    def invalidate(self) -> None:
        """Forget the task: the next read is the store's."""
        self._unsaved = False
        self.task = None
        self.version = TaskVersion.MISSING

    async def save(self, task: Task, event: Event | None) -> None:
        """Write ``task`` (produced by ``event``) over the version last seen."""
        self.version = await self._store.save(
            task, event=event, prev=self.task, prev_version=self.version, context=self.context
        )
        self._unsaved = False
        self.task = task

    async def ensure_task(self, context_id: str) -> Task:
        """The task; a new SUBMITTED one (with the request's message) when there is none."""
        task = await self.get_task()
        if task is None:
            history = [self._initial_message] if self._initial_message else []
            task = Task(
                id=self.task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=history,
            )
            await self.save(task, None)
        return task

    async def apply(self, event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        """Apply one update to the task and store it."""
        if event.task_id != self.task_id:
            raise InvalidParamsError(
                message=f"Task in event doesn't match TaskManager {self.task_id} : {event.task_id}"
            )
        task = await self.ensure_task(event.context_id)
        if isinstance(event, TaskStatusUpdateEvent):
            if task.status.HasField("message"):
                task.history.append(task.status.message)
            if event.metadata:
                task.metadata.MergeFrom(event.metadata)
            task.status.CopyFrom(event.status)
        else:
            add_artifact_chunk(task, event)
        await self.save(task, event)


def add_artifact_chunk(task: Task, event: TaskArtifactUpdateEvent) -> None:
    """Apply an artifact chunk: a first chunk replaces or adds, a later one appends parts."""
    chunk = event.artifact
    existing = next((a for a in task.artifacts if a.artifact_id == chunk.artifact_id), None)
    if not event.append:
        if existing is not None:
            existing.CopyFrom(chunk)
        else:
            task.artifacts.append(chunk)
    elif existing is not None:
        existing.parts.extend(chunk.parts)
        existing.metadata.update(dict(chunk.metadata.items()))
    else:  # the protocol's rule: append only to an artifact sent before
        raise InvalidAgentResponseError(
            f"append=True for nonexistent artifact_id={chunk.artifact_id!r} in task "
            f"{task.id!r}. The artifact must be created (append=False) before appending "
            "parts to it."
        )


class StreamRun:
    """The streamed turn of one new task (module docstring)."""

    def __init__(
        self,
        *,
        executor: AgentExecutor,
        store: VersionedTaskStore,
        push_sender: PushNotificationSender | None,
        event_stream: TaskEventStream | None,
        request: RequestContext,
        park: Callable[[StreamRun, Task], Awaitable[bool]],
    ) -> None:
        assert request.task_id is not None and request.context_id is not None
        self.task_id: str = request.task_id
        self._executor = executor
        self._push_sender = push_sender
        self._event_stream = event_stream
        self._request = request
        self._park = park
        # A run is always of a new task, whose id the handler has just generated.
        self._book = TaskBook(
            store, request.call_context, request.task_id, request.message, new=True
        )
        self._message_to_save: Message | None = request.message
        self._task_mode: bool | None = None
        self._task_created = False
        self._lock = asyncio.Lock()
        self._listeners: list[Listener] = []
        self.finished = False  # a terminal state or a Message: nothing more is published
        self.parked = False  # the SDK's registry holds the task now (see park)
        self.ended = asyncio.Event()
        self.runner: asyncio.Task[None] | None = None

    @property
    def call_context(self) -> ServerCallContext:
        """The call context of the request that started the task."""
        return self._request.call_context

    def start(self, requester: Listener) -> None:
        """Run the turn on its own task, ``requester`` listening from the first event."""
        self._listeners.append(requester)
        self.runner = asyncio.create_task(self._run(), name=f"stream-run:{self.task_id}")

    def listen(self, limits: StreamLimits | None = None) -> Listener | None:
        """A new listener of the events from now on; ``None`` once the run has ended."""
        if self.ended.is_set():
            return None
        listener = Listener(limits)
        self._listeners.append(listener)
        return listener

    def leave(self, listener: Listener) -> None:
        """``listener`` stops reading (its client went away); the turn goes on."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    async def current_task(self) -> Task | None:
        """A copy of the task as last stored."""
        task = await self._book.get_task()
        if task is None:
            return None
        copied = Task()
        copied.CopyFrom(task)
        return copied

    # -- the producer ---------------------------------------------------------------------

    async def _run(self) -> None:
        error: BaseException | None = None
        try:
            await self._executor.execute(self._request, self)  # type: ignore[arg-type]
        except asyncio.CancelledError:
            pass  # canceled by cancel() or at shutdown: the listeners end
        except Exception as exc:
            logger.exception("streamed task %s: the executor failed", self.task_id)
            error = exc
            if isinstance(exc, ConcurrentTaskModificationError):
                error = InternalError(message=str(exc))
            try:
                async with self._lock:
                    await self._write_failed()
            except Exception:
                logger.exception("streamed task %s: cannot record FAILED", self.task_id)
        try:
            task = await self._book.get_task() if error is None else None
            if task is not None:
                self.parked = await self._park(self, task)
        finally:
            self._end(error)

    def _end(self, error: BaseException | None) -> None:
        self.finished = True
        self.ended.set()
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener.close(error)

    async def _write_failed(self) -> None:
        """The SDK's ``_write_failed_status`` after a producer failure."""
        book = self._book
        task = await book.get_task()
        if task is None:
            task = await book.ensure_task(self._request.context_id or "")
            if task.status.state not in TERMINAL_STATES:
                task.status.state = TaskState.TASK_STATE_FAILED
                task.status.timestamp.FromDatetime(datetime.now(UTC))
                await book.save(task, task)
            return
        if task.status.state in TERMINAL_STATES:
            return
        status = TaskStatus(state=TaskState.TASK_STATE_FAILED)
        status.timestamp.FromDatetime(datetime.now(UTC))
        event = TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=status)
        try:
            await self._modify(event)
        except ConcurrentTaskModificationError:
            book.invalidate()

    # -- the consumer: the EventQueue the executor publishes to -------------------------

    async def enqueue_event(self, event: Event) -> None:
        """Store, push and pass on one event the executor published."""
        async with self._lock:
            if self.finished:
                return
            try:
                await self._process(event)
            except ConcurrentTaskModificationError:
                logger.info("streamed task %s: concurrent modification, reloading", self.task_id)
                self._book.invalidate()
                task = await self._book.get_task()
                if task is not None and task.status.state in TERMINAL_STATES:
                    # As the SDK: the stored task is passed on and the producer canceled.
                    self.finished = True
                    await self._pass_on(await self.current_task() or task)
                    if self.runner is not None:
                        self.runner.cancel()
                    return
                await self._process(event)

    async def _process(self, event: Event) -> None:
        if isinstance(event, Message):
            if self._task_mode is True:
                raise InvalidAgentResponseError(
                    "Received Message object in task mode. Use TaskStatusUpdateEvent or "
                    "TaskArtifactUpdateEvent instead."
                )
            if self._task_mode is False:
                raise InvalidAgentResponseError("Multiple Message objects received.")
            self._task_mode = False
            self.finished = True
            await self._pass_on(event)
            return
        if self._task_mode is False:
            raise InvalidAgentResponseError(
                f"Received {type(event).__name__} in message mode. Use Task with "
                "TaskStatusUpdateEvent and TaskArtifactUpdateEvent instead."
            )
        book = self._book
        if isinstance(event, Task):
            if await book.get_task():
                logger.error("Task %s already exists. Ignoring task replacement.", self.task_id)
            else:
                await book.save(event, event)
            self._message_to_save = None
        else:
            await self._modify(event)
        self._task_mode = True
        task = await book.get_task()
        if task is None:
            raise RuntimeError(f"Task {self.task_id} not found")
        self._task_created = True
        if task.status.state in TERMINAL_STATES:
            self.finished = True
        if self._push_sender is not None:
            try:
                await self._push_sender.send_notification(
                    self.task_id, task if isinstance(event, Task) else event
                )
            except Exception:  # best effort, as in the SDK: never fails the task
                logger.exception("streamed task %s: push notification sender raised", self.task_id)
        if event is task:  # the stored object: listeners get a copy
            copied = Task()
            copied.CopyFrom(task)
            event = copied
        await self._pass_on(event)

    async def _modify(self, event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        """The SDK's ``_handle_task_modification_event``."""
        book = self._book
        if (
            isinstance(event, TaskStatusUpdateEvent)
            and not self._task_created
            and await book.get_task() is None
        ):
            raise InvalidAgentResponseError(
                f"Agent should enqueue Task before {type(event).__name__} event"
            )
        task = await book.ensure_task(event.context_id)
        message = self._message_to_save
        if message is not None:
            if not any(m.message_id == message.message_id for m in task.history):
                if task.status.HasField("message"):
                    task.history.append(task.status.message)
                    task.status.ClearField("message")
                task.history.append(message)
                await book.save(task, task)
            self._message_to_save = None
        await book.apply(event)

    async def _pass_on(self, event: Event) -> None:
        self._emit(event)
        if self._event_stream is not None:
            await self._event_stream.publish(
                self.task_id, VersionedEvent(event=event, version=self._book.version)
            )

    def _emit(self, event: Event) -> None:
        for listener in self._listeners:
            listener.put(event)

    # -- cancel -------------------------------------------------------------------------

    async def cancel(self, call_context: ServerCallContext) -> Task:
        """The SDK's ``ActiveTask.cancel``: CANCELED through the executor, the stored task."""
        book = self._book
        book.context = call_context  # as ActiveTask.cancel does
        task = await book.get_task()
        request = RequestContext(
            call_context=call_context,
            task_id=self.task_id,
            context_id=task.context_id if task else None,
            task=task,
        )
        runner = self.runner
        if not self.finished and runner is not None and not runner.done():
            try:
                await self._executor.cancel(request, self)  # type: ignore[arg-type]
            finally:
                runner.cancel()
        await self.ended.wait()
        book.invalidate()
        task = await book.get_task()
        if task is None:
            raise RuntimeError("Task should have been created")
        if task.status.state not in TERMINAL_STATES:
            updated = Task()
            updated.CopyFrom(task)
            updated.status.state = TaskState.TASK_STATE_CANCELED
            await book.save(updated, updated)
            task = updated
        return task

    async def aclose(self) -> None:
        """Stop the turn's follower (at shutdown) and wait for it."""
        runner = self.runner
        if runner is not None and not runner.done():
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)


async def events_of(listener: Listener) -> AsyncIterator[Event]:
    """The listener's events one by one."""
    while batch := await listener.batch():
        for event in batch:
            yield event


async def bounded_events(
    events: AsyncGenerator[Event, None], limits: StreamLimits
) -> AsyncGenerator[Event, None]:
    """``events`` (a stream of the SDK's, e.g. its ``SubscribeToTask``) through a bounded
    :class:`Listener`: a task reads the SDK's stream as fast as it comes (so the SDK's own
    queue never holds more than an event), and a reader that leaves more than ``limits``
    unread is dropped as a run's listener is, and the SDK's stream closed."""
    listener = Listener(limits)

    async def pump() -> None:
        try:
            async for event in events:
                listener.put(event)
                if listener.dropped:
                    return
        except Exception as exc:  # the stream's error is the reader's
            listener.close(exc)
        finally:
            await events.aclose()
            listener.close()

    pumping = asyncio.get_running_loop().create_task(pump(), name="bounded-events")
    try:
        async for event in events_of(listener):
            yield event
    finally:
        pumping.cancel()
        await asyncio.gather(pumping, return_exceptions=True)
