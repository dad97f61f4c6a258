"""``MasLabAgentExecutor``: each A2A send becomes one turn on the agent's session mailbox.

Mapping (the spec's "Task lifecycle"):

- ``contextId`` is the session id (the SDK generates one when the client sends none),
  the caller's own under ``a2a.auth`` (``principals.owned_session``);
  ``messageId`` (falling back to the task id) is the turn id; ``mas.caller_call_id``,
  ``mas.correlation_id`` and ``mas.delegation_depth`` are copied from the message metadata
  into ``TurnInput.metadata``.
- The turn is queued at the tail of its session and the call waits for its own turn.
- A turn that ends ``completed`` at once, with only text, is answered with a plain
  ``Message`` on a new task, and with a status update on an existing one when it streamed
  no text (a follow-up's streamed text is its own ``response`` artifact, whether it was sent
  blocking or streaming, so the task ends the same either way). "At once" means
  within ``message_grace`` seconds: for a blocking send, streamed text is held back that
  long; a streaming send starts its task at the first progress event; a send with
  ``returnImmediately`` or a push-notification config always gets a task. Anything else
  starts a task: ``working``, artifact updates (a turn's streamed text chunks append to one
  ``response`` artifact, a new one, with its own id, per turn; text, data, file and URL
  artifacts each get their own), then
  ``completed``, ``input-required`` (a HITL question; the next message on the task resumes
  the session), ``failed`` (with the message) or ``canceled``.
- Extra messages on a task that is still working are queued behind it, never preempting
  it: the SDK runs the requests of one task one after the other, and a turn whose task has
  more requests waiting reports its reply as a ``working`` status update instead of ending
  the task. A request naming a task that has ended is refused with a clear error, never
  silently dropped.
- A turn the fast handler (``fast.handler.FastSendHandler``) already submitted and hands
  over in the call state (``ADOPTED_STATE``) is adopted, never submitted twice; its task
  starts at once, since its grace is spent.
- ``CancelTask`` withdraws the waiting call (``ticket.cancel_wait()``) and reports
  ``canceled``. It never interrupts the runtime turn: a running turn finishes inside the
  mailbox and its effects (the session history) are kept.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Protocol

from a2a.server.agent_execution import AgentExecutor, RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    Message,
    Part,
    SendMessageRequest,
    Task,
)
from a2a.utils.errors import UnsupportedOperationError

from library_ioa.plugins.a2a.parts import data_of, mas_metadata
from library_ioa.plugins.a2a.server.publisher import TurnPublisher, TurnTicketLike
from library_ioa.plugins.a2a.server.tracing import annotate_request
from library_ioa.serving.principals import owned_session, owner_of
from mas.runtime.errors import RuntimeFailure
from mas.runtime.turns import (
    ORIGIN_PRINCIPAL,
    TurnInput,
)
from mas.telemetry import tracing

logger = logging.getLogger(__name__)

# Set by the request handler in the call state: whether the send is a streaming one.
STREAMING_STATE = "mas.streaming"
# Set by the fast handler in the call state: a turn it already submitted (``AdoptedTurn``).
ADOPTED_STATE = "mas.adopted_turn"
DEFAULT_MESSAGE_GRACE = 0.5
CLOSED_MEMORY = 60.0


class TurnMailbox(Protocol):
    """What the executor needs of a :class:`mas.ctl.session.mailbox.SessionTurnMailbox`."""

    def submit(self, turn: TurnInput, *, front: bool = False) -> TurnTicketLike: ...


def turn_from_message(
    message: Message, session_id: str, task_id: str, principal: str = ""
) -> TurnInput:
    """The turn of one A2A message (text parts joined, the first data part as ``data``),
    sent by ``principal`` (the request's authenticated caller, ``""`` when anonymous): the
    turn's origin is marked on the request's span."""
    text = "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text")
    metadata = mas_metadata(message, principal)
    tracing.annotate(tracing.MAS_ORIGIN, metadata.get(ORIGIN_PRINCIPAL, ""))
    return TurnInput(
        session_id=session_id,
        turn_id=message.message_id or task_id,
        text=text,
        data=data_of(message.parts),
        metadata=metadata,
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
        adopted = context.state.get(ADOPTED_STATE)
        if adopted is not None and not task_id:
            # The fast handler already chose the ids and started the turn under them.
            task_id, context_id = adopted.task_id, adopted.context_id
        built = await super().build(context, params, task_id, context_id, task)
        # No await between this check and the note below: a turn's end cannot slip between.
        if task_id and task_id in self._executor.closed:
            raise UnsupportedOperationError(
                message=f"task {task_id} has ended; send the message without a taskId to "
                "start a new task"
            )
        if task_id and built.message is not None:
            self._executor.arrived(task_id, built.message.message_id)
        if built.message is not None and tracing.on():  # the request's span names the origin
            metadata = mas_metadata(built.message, owner_of(context))
            annotate_request(tracing.MAS_ORIGIN, metadata.get(ORIGIN_PRINCIPAL, ""))
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
        self.closed: set[str] = set()
        self._tickets: dict[str, TurnTicketLike] = {}
        self._canceled: set[str] = set()

    def request_context_builder(self) -> SimpleRequestContextBuilder:
        """The builder to give the request handler, so queued extra messages are seen."""
        return _ArrivalCounter(self)

    def pending(self, task_id: str) -> int:
        """Requests naming ``task_id`` that arrived and have not started yet."""
        return len(self.waiting.get(task_id, ()))

    def arrived(self, task_id: str, message_id: str) -> None:
        """A request naming ``task_id`` arrived; it waits until its turn starts."""
        self.waiting.setdefault(task_id, []).append(message_id)

    def withdraw(self, task_id: str, message_id: str) -> None:
        """The request ``message_id`` of ``task_id`` no longer waits (it starts, or left)."""
        self._starting(task_id, message_id)

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
        # A follow-up that names only its task belongs to that task's session; the SDK would
        # invent a new context id for it.
        current = context.current_task
        context_id = (current.context_id if current else context.context_id) or str(uuid.uuid4())
        if message is None:
            raise ValueError("a send without a message")
        self._starting(task_id, message.message_id)
        run = TurnPublisher(self, event_queue, message, task_id, context_id, context.current_task)
        config = context.configuration
        # A caller that wants its task at once, or push notifications about it, gets a task.
        run.return_immediately = config is not None and (
            config.return_immediately or config.HasField("task_push_notification_config")
        )
        run.streaming = bool(context.call_context.state.get(STREAMING_STATE, True))
        adopted = context.call_context.state.pop(ADOPTED_STATE, None)
        if adopted is not None and adopted.task_id == task_id:
            # Started by the fast handler, which waited the grace: the task starts now.
            ticket = adopted.ticket
            await run.start_task()
        else:
            try:
                owner = owner_of(context.call_context)
                session_id = owned_session(owner, context_id)
                turn = turn_from_message(message, session_id, task_id, owner)
                ticket = self._mailbox.submit(turn)
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

    def closing(self, task_id: str) -> None:
        """``task_id`` is about to end: later requests naming it are refused, not swallowed.

        The SDK refuses them itself once it has recorded the end; this covers the instant
        before. The mark is dropped after :data:`CLOSED_MEMORY` seconds.
        """
        self.closed.add(task_id)
        asyncio.get_running_loop().call_later(CLOSED_MEMORY, self.closed.discard, task_id)

    def canceled(self, task_id: str) -> bool:
        """Whether ``task_id`` was canceled since its current request started."""
        return task_id in self._canceled


__all__ = [
    "ADOPTED_STATE",
    "MasLabAgentExecutor",
    "TurnMailbox",
    "TurnTicketLike",
    "turn_from_message",
]
