"""How the events of one turn become A2A events on the SDK's event queue.

See :mod:`library_ioa.plugins.a2a.server.executor` for the rules; this module holds the
mechanics: the grace period before a task is started, the ``Message`` answer, the task's
status updates and artifact chunks.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus

from library_ioa.plugins.a2a.parts import artifact_parts
from library_ioa.plugins.a2a.server.ids import random_uuid
from mas.runtime.turns import (
    ArtifactEmitted,
    Delegated,
    TextDelta,
    TurnEnded,
    TurnEvent,
    TurnInput,
)

RESPONSE_ARTIFACT = "response"


def quick_answer(context_id: str, text: str) -> Message:
    """The ``Message`` that answers a new task's quick text-only turn.

    It carries no ``taskId``: no task is stored for it (as with the SDK, a ``Message``
    answer is not a task), so an id would name a task that ``GetTask`` cannot find and a
    follow-up could not continue. The conversation goes on by ``contextId``.
    """
    return QuickAnswer(random_uuid(), context_id, text).message()


@dataclass(frozen=True)
class QuickAnswer:
    """The :func:`quick_answer` ``Message`` before it is built: for a route that writes its
    JSON (:meth:`message_dict`) without building the protobuf first."""

    message_id: str
    context_id: str
    text: str

    def message(self) -> Message:
        """The ``Message``."""
        return Message(
            role=Role.ROLE_AGENT,
            message_id=self.message_id,
            context_id=self.context_id,
            parts=[Part(text=self.text)],
        )

    def message_dict(self) -> dict[str, Any]:
        """``MessageToDict(self.message())``, written directly (its fields, in its order:
        an empty id is left out, as proto3 leaves out every unset string)."""
        result: dict[str, Any] = {}
        if self.message_id:
            result["messageId"] = self.message_id
        if self.context_id:
            result["contextId"] = self.context_id
        result["role"] = _AGENT_ROLE
        result["parts"] = [{"text": self.text}]
        return result


_AGENT_ROLE = Role.Name(Role.ROLE_AGENT)


class TurnTicketLike(Protocol):
    """What the executor needs of a :class:`mas.ctl.session.mailbox.TurnTicket`.

    A ticket may also have ``discarded``: how many of its first text deltas a ``replace``
    steer withdrew (read when the turn ends; none when it is absent).
    """

    @property
    def turn(self) -> TurnInput: ...

    def events(self) -> AsyncIterator[TurnEvent]: ...

    def cancel_wait(self) -> None: ...


class TaskBook(Protocol):
    """What a publisher asks the executor about its task."""

    message_grace: float

    def canceled(self, task_id: str) -> bool: ...

    def pending(self, task_id: str) -> int: ...

    def closing(self, task_id: str) -> None: ...


class TurnPublisher:
    """Publishes the events of one turn onto the SDK's event queue."""

    def __init__(  # noqa: PLR0917
        self,
        executor: TaskBook,
        queue: EventQueue,
        message: Message,
        task_id: str,
        context_id: str,
        current: Task | None,
    ) -> None:
        self._executor = executor
        self._queue = queue
        self._message = message
        self._task_id = task_id
        self._context_id = context_id
        self._existing = current is not None
        self._working = False
        self._updater = TaskUpdater(queue, task_id, context_id)
        self._stream_id = f"{RESPONSE_ARTIFACT}-{uuid.uuid4().hex[:12]}"
        self._streamed = False
        self._chunks: list[str] = []  # the text of the response artifact's chunks, in order
        self._ticket: TurnTicketLike | None = None
        self.return_immediately = False
        self.streaming = True

    def _reply(self, text: str) -> Message:
        return self._updater.new_agent_message([Part(text=text)])

    async def _start_task(self) -> None:
        if self._working:
            return
        self._working = True
        if not self._existing:
            self._existing = True
            history = Message()
            history.CopyFrom(self._message)
            history.role = Role.ROLE_USER
            history.task_id = self._task_id
            history.context_id = self._context_id
            await self._queue.enqueue_event(
                Task(
                    id=self._task_id,
                    context_id=self._context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[history],
                )
            )
        await self._updater.start_work()

    async def start_task(self) -> None:
        """Start the task now: a turn handed over by the fast handler has spent its grace."""
        await self._start_task()

    async def refuse(self, reason: str) -> None:
        """The mailbox refused the turn (full): the task fails with the reason."""
        await self._start_task()
        await self._updater.failed(self._reply(reason))

    async def follow(self, ticket: TurnTicketLike) -> None:
        """Wait for the turn and publish its events until it ends."""
        self._ticket = ticket
        events = ticket.events().__aiter__()
        first = await self._opening(events)
        if first is None or self._executor.canceled(self._task_id):
            return
        await self._publish(first)
        async for event in events:
            if self._executor.canceled(self._task_id):
                return
            await self._publish(event)

    async def _opening(self, events: AsyncIterator[TurnEvent]) -> TurnEvent | None:
        """Within the grace period: answer at once (None), or start the task (the next event).

        A blocking send buffers streamed text meanwhile, so a quick text-only turn is one
        Message; a streaming send starts its task at the first progress event. On an
        existing task (a follow-up) only a turn that streamed nothing is answered at once:
        streamed text is published as the streaming send publishes it (its own ``response``
        artifact), so the task ends the same whichever way the follow-up came. A task that
        has started (an adopted turn, whose grace the fast handler spent) takes the next
        event as it comes, with no timer and no task around the wait.
        """
        if self._working:
            try:
                first = await anext(events)
            except StopAsyncIteration:
                first = TurnEnded("failed", message="the turn ended without a result")
            return None if self._executor.canceled(self._task_id) else first
        loop = asyncio.get_running_loop()
        grace = 0.0 if self.return_immediately else self._executor.message_grace
        if grace <= 0:
            # No grace: the task starts now, not after one pass of the loop (in which a
            # turn that never waits could end and be answered with a Message).
            await self._start_task()
        deadline = loop.time() + grace
        buffered: list[TextDelta] = []
        while True:
            step = asyncio.ensure_future(anext(events))
            try:
                if not self._working:
                    done, _ = await asyncio.wait({step}, timeout=max(0.0, deadline - loop.time()))
                    if not done:
                        await self._start_task()
                        await self._flush(buffered)
                event = await step
            except StopAsyncIteration:
                event = TurnEnded("failed", message="the turn ended without a result")
            finally:
                if not step.done():
                    step.cancel()
            if self._executor.canceled(self._task_id):
                return None
            if isinstance(event, TextDelta) and not self._working and not self.streaming:
                buffered.append(event)
                continue
            if (
                isinstance(event, TurnEnded)
                and event.status == "completed"
                and not self._working
                and self._executor.pending(self._task_id) == 0
                and not (self._existing and buffered)
                and not event.metadata  # a Message answer has no task to carry it
            ):
                await self._answer_at_once(event)
                return None
            await self._start_task()
            await self._flush(buffered)
            return event

    async def _flush(self, buffered: list[TextDelta]) -> None:
        for delta in buffered:
            await self._publish(delta)
        buffered.clear()

    async def _answer_at_once(self, end: TurnEnded) -> None:
        if self._existing:
            self._executor.closing(self._task_id)
            await self._updater.complete(self._reply(end.text))
            return
        await self._queue.enqueue_event(quick_answer(self._context_id, end.text))

    async def _publish(self, event: TurnEvent) -> None:
        if isinstance(event, TextDelta):
            await self._updater.add_artifact(
                [Part(text=event.text)],
                artifact_id=self._stream_id,
                name=RESPONSE_ARTIFACT,
                append=self._streamed,
                last_chunk=False,
            )
            self._streamed = True
            self._chunks.append(event.text)
        elif isinstance(event, ArtifactEmitted):
            await self._updater.add_artifact(
                artifact_parts(event),
                artifact_id=event.artifact_id or f"artifact-{uuid.uuid4().hex[:12]}",
                name=event.name,
                last_chunk=True,
            )
        elif isinstance(event, Delegated):
            await self._updater.update_status(
                TaskState.TASK_STATE_WORKING,
                metadata={
                    "mas.delegated": {
                        "target": event.target,
                        "call_id": event.call_id,
                        "ok": event.ok,
                        "detail": event.detail,
                        "kind": event.kind,
                    }
                },
            )
        else:
            await self._end(event)

    async def _status(self, state: Any, text: str, end: TurnEnded) -> None:
        """The turn's final status; its metadata (maslab.tokens) merges into the task's."""
        await self._updater.update_status(
            state, self._reply(text), metadata=dict(end.metadata) or None
        )

    async def _end(self, end: TurnEnded) -> None:
        if self._streamed:
            # A replace steer withdrew the first chunks: the last chunk replaces the artifact
            # (append false) with what is left, so it holds the answer, never the prefix.
            discarded = getattr(self._ticket, "discarded", 0)
            await self._updater.add_artifact(
                [Part(text="".join(self._chunks[discarded:]) if discarded else "")],
                artifact_id=self._stream_id,
                name=RESPONSE_ARTIFACT,
                append=not discarded,
                last_chunk=True,
            )
        if end.status == "completed":
            if self._executor.pending(self._task_id) > 0:
                # More messages of this task wait behind this turn: the task goes on.
                await self._updater.update_status(
                    TaskState.TASK_STATE_WORKING,
                    self._reply(end.text),
                    metadata={"mas.turn_completed": True, **end.metadata},
                )
            else:
                self._executor.closing(self._task_id)
                await self._status(TaskState.TASK_STATE_COMPLETED, end.text, end)
        elif end.status == "input_required":
            await self._status(TaskState.TASK_STATE_INPUT_REQUIRED, end.text or end.message, end)
        elif end.status == "failed":
            self._executor.closing(self._task_id)
            text = end.message or end.text or "the turn failed"
            await self._status(TaskState.TASK_STATE_FAILED, text, end)
        else:
            await self._updater.cancel(self._reply(end.message or "the turn was canceled"))
