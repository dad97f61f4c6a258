"""``MasLabAgentExecutor``: each A2A send becomes one turn on the agent's session mailbox.

Mapping (the spec's "Task lifecycle"):

- ``contextId`` is the session id (the SDK generates one when the client sends none);
  ``messageId`` (falling back to the task id) is the turn id; ``mas.caller_call_id``,
  ``mas.correlation_id`` and ``mas.delegation_depth`` are copied from the message metadata
  into ``TurnInput.metadata``.
- The turn is queued at the tail of its session and the call waits for its own turn.
- A turn that ends ``completed`` at once, with only text, is answered with a plain
  ``Message`` on a new task and with a status update on an existing one. "At once" means
  within ``message_grace`` seconds: for a blocking send, streamed text is held back that
  long; a streaming send starts its task at the first progress event; a send with
  ``returnImmediately`` or a push-notification config always gets a task. Anything else
  starts a task: ``working``, artifact updates (streamed text chunks append to one
  ``response`` artifact; text, data, file and URL artifacts each get their own), then
  ``completed``, ``input-required`` (a HITL question; the next message on the task resumes
  the session), ``failed`` (with the message) or ``canceled``.
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
# Set by the request handler in the call state: whether the send is a streaming one.
STREAMING_STATE = "mas.streaming"
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
    """Notes each request that names an existing task as it arrives, before the SDK queues it.

    Only such requests can wait behind a working turn of their task (a new task's first
    request runs at once).
    """

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
        if task_id and built.message is not None:
            self._executor.waiting.setdefault(task_id, []).append(built.message.message_id)
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
        self.waiting: dict[str, list[str]] = {}
        self._tickets: dict[str, TurnTicketLike] = {}
        self._canceled: set[str] = set()

    def request_context_builder(self) -> SimpleRequestContextBuilder:
        """The builder to give the request handler, so queued extra messages are seen."""
        return _ArrivalCounter(self)

    def pending(self, task_id: str) -> int:
        """Requests naming ``task_id`` that arrived and have not started yet."""
        return len(self.waiting.get(task_id, ()))

    def _starting(self, task_id: str, message_id: str) -> None:
        waiting = self.waiting.get(task_id)
        if waiting and message_id in waiting:
            waiting.remove(message_id)
        if not waiting:
            self.waiting.pop(task_id, None)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the request's message as one turn of its session and publish the events."""
        message = context.message
        task_id = context.task_id or str(uuid.uuid4())
        context_id = context.context_id or str(uuid.uuid4())
        if message is None:
            raise ValueError("a send without a message")
        self._starting(task_id, message.message_id)
        run = _Run(self, event_queue, message, task_id, context_id, context.current_task)
        config = context.configuration
        # A caller that wants its task at once, or push notifications about it, gets a task.
        run.return_immediately = config is not None and (
            config.return_immediately or config.HasField("task_push_notification_config")
        )
        run.streaming = bool(context.call_context.state.get(STREAMING_STATE, True))
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
            self._canceled.discard(task_id)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Withdraw the waiting call and report CANCELED; the runtime turn is not interrupted."""
        task_id = context.task_id or ""
        ticket = self._tickets.pop(task_id, None)
        if ticket is not None:
            self._canceled.add(task_id)  # the waiting execute() publishes nothing more
            ticket.cancel_wait()
        self.waiting.pop(task_id, None)
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

    async def refuse(self, reason: str) -> None:
        """The mailbox refused the turn (full): the task fails with the reason."""
        await self._start_task()
        await self._updater.failed(self._reply(reason))

    async def follow(self, ticket: TurnTicketLike) -> None:
        """Wait for the turn and publish its events until it ends."""
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
        Message; a streaming send starts its task at the first progress event.
        """
        loop = asyncio.get_running_loop()
        grace = 0.0 if self.return_immediately else self._executor.message_grace
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
