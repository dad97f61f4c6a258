"""``MasLabAgentExecutor``: each A2A send becomes one turn on the agent's session mailbox.

Mapping (the spec's "Task lifecycle"):

- ``contextId`` is the session id (the SDK generates one when the client sends none);
  ``messageId`` (falling back to the task id) is the turn id; ``mas.caller_call_id``,
  ``mas.correlation_id`` and ``mas.delegation_depth`` are copied from the message metadata
  into ``TurnInput.metadata``.
- The turn is queued at the tail of its session and the call waits for its own turn.
- A turn that ends ``completed`` at once (its first event is the end, within
  ``message_grace`` seconds, with only text) on a new task is answered with a plain
  ``Message``; on an existing task, with a status update. Anything else starts a task:
  ``working``, artifact updates (streamed text chunks append to one ``response`` artifact;
  text, data, file and URL artifacts each get their own), then ``completed``,
  ``input-required`` (a HITL question; the next message on the task resumes the session),
  ``failed`` (with the message) or ``canceled``.
- Extra messages on a task that is still working are queued behind it, never preempting
  it: the SDK runs the requests of one task one after the other, and a turn whose task has
  more requests waiting reports its reply as a ``working`` status update instead of ending
  the task.
- ``CancelTask`` withdraws the waiting call (``ticket.cancel_wait()``) and reports
  ``canceled``. It never interrupts the runtime turn: a running turn finishes inside the
  mailbox and its effects (the session history) are kept.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Protocol

from a2a.server.agent_execution import AgentExecutor, RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatus,
)

from library_ioa.plugins.a2a.parts import artifact_parts, data_of, mas_metadata
from mas.runtime.errors import RuntimeFailure
from mas.runtime.turns import (
    ArtifactEmitted,
    Delegated,
    TextDelta,
    TurnEnded,
    TurnEvent,
    TurnInput,
)

logger = logging.getLogger(__name__)

RESPONSE_ARTIFACT = "response"
DEFAULT_MESSAGE_GRACE = 0.5


class TurnTicketLike(Protocol):
    """What the executor needs of a :class:`mas.ctl.session.mailbox.TurnTicket`."""

    @property
    def turn(self) -> TurnInput: ...

    def events(self) -> AsyncIterator[TurnEvent]: ...

    def cancel_wait(self) -> None: ...


class TurnMailbox(Protocol):
    """What the executor needs of a :class:`mas.ctl.session.mailbox.SessionTurnMailbox`."""

    def submit(self, turn: TurnInput, *, front: bool = False) -> TurnTicketLike: ...


def turn_from_message(message: Message, session_id: str, task_id: str) -> TurnInput:
    """The turn of one A2A message (text parts joined, the first data part as ``data``)."""
    text = "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text")
    return TurnInput(
        session_id=session_id,
        turn_id=message.message_id or task_id,
        text=text,
        data=data_of(message.parts),
        metadata=mas_metadata(message),
    )


class _ArrivalCounter(SimpleRequestContextBuilder):
    """Counts every request of a task as it arrives, before the SDK queues it."""

    def __init__(self, executor: MasLabAgentExecutor) -> None:
        super().__init__(should_populate_referred_tasks=False, task_store=None)
        self._executor = executor

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        built = await super().build(context, params, task_id, context_id, task)
        if built.task_id:
            self._executor.arrivals[built.task_id] += 1
        return built


class MasLabAgentExecutor(AgentExecutor):
    """The a2a-sdk executor of one agent, on that agent's session mailbox."""

    def __init__(
        self,
        mailbox: TurnMailbox,
        *,
        agent_id: str = "",
        message_grace: float = DEFAULT_MESSAGE_GRACE,
    ) -> None:
        self.agent_id = agent_id
        self._mailbox = mailbox
        self.message_grace = message_grace
        self.arrivals: Counter[str] = Counter()
        self._started: Counter[str] = Counter()
        self._tickets: dict[str, TurnTicketLike] = {}
        self._canceled: set[str] = set()

    def request_context_builder(self) -> SimpleRequestContextBuilder:
        """The builder to give the request handler, so queued extra messages are seen."""
        return _ArrivalCounter(self)

    def pending(self, task_id: str) -> int:
        """Requests of ``task_id`` that arrived and have not started yet."""
        return max(0, self.arrivals[task_id] - self._started[task_id])

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the request's message as one turn of its session and publish the events."""
        message = context.message
        task_id = context.task_id or str(uuid.uuid4())
        context_id = context.context_id or str(uuid.uuid4())
        if message is None:
            raise ValueError("a send without a message")
        self._started[task_id] += 1
        self._canceled.discard(task_id)
        run = _Run(self, event_queue, message, task_id, context_id, context.current_task)
        config = context.configuration
        run.return_immediately = bool(config is not None and config.return_immediately)
        try:
            ticket = self._mailbox.submit(turn_from_message(message, context_id, task_id))
        except RuntimeFailure as exc:
            logger.warning("agent %s refused a turn of %s: %s", self.agent_id, context_id, exc)
            await run.refuse(str(exc))
            return
        self._tickets[task_id] = ticket
        try:
            await run.follow(ticket)
        except asyncio.CancelledError:
            ticket.cancel_wait()
            raise
        finally:
            if self._tickets.get(task_id) is ticket:
                del self._tickets[task_id]
            if self.pending(task_id) == 0:
                self.arrivals.pop(task_id, None)
                self._started.pop(task_id, None)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Withdraw the waiting call and report CANCELED; the runtime turn is not interrupted."""
        task_id = context.task_id or ""
        self._canceled.add(task_id)
        ticket = self._tickets.pop(task_id, None)
        if ticket is not None:
            ticket.cancel_wait()
        logger.info("agent %s: task %s canceled by the client", self.agent_id, task_id)
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        await updater.cancel(updater.new_agent_message([Part(text="canceled by the client")]))

    def canceled(self, task_id: str) -> bool:
        """Whether ``task_id`` was canceled since its current request started."""
        return task_id in self._canceled


class _Run:
    """Publishes the events of one turn onto the SDK's event queue."""

    def __init__(  # noqa: PLR0917
        self,
        executor: MasLabAgentExecutor,
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
        self.return_immediately = False

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

    async def refuse(self, reason: str) -> None:
        """The mailbox refused the turn (full): the task fails with the reason."""
        await self._start_task()
        await self._updater.failed(self._reply(reason))

    async def follow(self, ticket: TurnTicketLike) -> None:
        """Wait for the turn and publish its events until it ends."""
        events = ticket.events().__aiter__()
        first_step = asyncio.ensure_future(anext(events))
        try:
            grace = 0.0 if self.return_immediately else self._executor.message_grace
            done, _ = await asyncio.wait({first_step}, timeout=grace)
            if not done:
                await self._start_task()
            first = await first_step
        except StopAsyncIteration:
            first = TurnEnded("failed", message="the turn ended without a result")
        finally:
            if not first_step.done():
                first_step.cancel()
        if self._executor.canceled(self._task_id):
            return
        if (
            isinstance(first, TurnEnded)
            and first.status == "completed"
            and not self._working
            and self._executor.pending(self._task_id) == 0
        ):
            await self._answer_at_once(first)
            return
        await self._start_task()
        await self._publish(first)
        async for event in events:
            if self._executor.canceled(self._task_id):
                return
            await self._publish(event)

    async def _answer_at_once(self, end: TurnEnded) -> None:
        if self._existing:
            await self._updater.complete(self._reply(end.text))
            return
        await self._queue.enqueue_event(
            Message(
                role=Role.ROLE_AGENT,
                message_id=str(uuid.uuid4()),
                context_id=self._context_id,
                task_id=self._task_id,
                parts=[Part(text=end.text)],
            )
        )

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
                    }
                },
            )
        else:
            await self._end(event)

    async def _end(self, end: TurnEnded) -> None:
        if self._streamed:
            await self._updater.add_artifact(
                [Part(text="")],
                artifact_id=self._stream_id,
                name=RESPONSE_ARTIFACT,
                append=True,
                last_chunk=True,
            )
        if end.status == "completed":
            if self._executor.pending(self._task_id) > 0:
                # More messages of this task wait behind this turn: the task goes on.
                await self._updater.update_status(
                    TaskState.TASK_STATE_WORKING,
                    self._reply(end.text),
                    metadata={"mas.turn_completed": True},
                )
            else:
                await self._updater.complete(self._reply(end.text))
        elif end.status == "input_required":
            await self._updater.requires_input(self._reply(end.text or end.message))
        elif end.status == "failed":
            await self._updater.failed(self._reply(end.message or end.text or "the turn failed"))
        else:
            await self._updater.cancel(self._reply(end.message or "the turn was canceled"))


__all__ = ["MasLabAgentExecutor", "TurnMailbox", "TurnTicketLike", "turn_from_message"]
