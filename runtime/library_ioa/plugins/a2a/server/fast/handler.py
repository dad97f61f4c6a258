"""``FastSendHandler``: sends that start a new task, without the SDK's per-task machinery.

The SDK's ``DefaultRequestHandler`` runs every send through an ``ActiveTask``: two
background tasks (producer and consumer), two event queues with their dispatch loops, a
task manager and a subscriber tap, even when the agent answers with one ``Message`` and
nothing is ever stored (what that costs a send: docs/performance.md, "Where the time goes").

A blocking ``SendMessage`` that starts a new task (no ``taskId``), asks for no push
notifications and does not set ``returnImmediately`` is the hot case. For it this handler
runs the turn on the mailbox itself and waits up to the executor's ``message_grace``:

- the turn ends ``completed`` with text only: the answer is the same one ``Message`` the
  executor would publish (a new ``messageId``, the request's ``contextId`` or a generated
  one, one text part, no ``taskId``); as with the SDK, no task is stored;
- anything else (the grace runs out, an artifact, a delegation, another end): the turn,
  its ticket already taken, runs on a
  :class:`~library_ioa.plugins.a2a.server.fast.stream.StreamRun` (below) instead of the
  SDK's ``ActiveTask``, so the executor publishes its events exactly as it would have (the
  task, its updates, the store, push, cancel, resubscribe) without running the turn twice,
  and the answer is what the SDK's blocking send answers: the task once it is in a
  terminal or interrupted state (with the request's history length);
- a full mailbox: the request goes to the SDK's handler, whose executor fails the task.

A streaming send of a new task with the same conditions (and the streaming capability)
runs on a :class:`~library_ioa.plugins.a2a.server.fast.stream.StreamRun` too: the same
events, stores, pushes and errors as an ``ActiveTask`` (see that module). While a run
(streamed or blocking) goes on, this handler answers ``CancelTask`` and ``SubscribeToTask``
of its task from it, and queues a message naming its task behind its turn as the SDK
would; once it ends, those are the SDK's again.
:meth:`FastSendHandler.message_stream_batches` gives the events that are ready together
in one list, which the JSON-RPC route writes as one chunk.

Every other request (a message on an existing task, ``returnImmediately``, a push
configuration, every other method) is the SDK's handler unchanged. Validation runs in the
SDK's order with the SDK's functions, so a bad request gets the same error.

One difference is only visible to a racing observer: a task whose turn emits an artifact
or a delegation and still ends within the grace is stored when the turn ends rather than
at that first event (``ListTasks`` during those milliseconds does not show it yet). The
caller's answer and the stored task are the same.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import (
    CancelTaskRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    InternalError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.input_mode_validator import validate_input_modes
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import apply_history_length, validate_history_length

from library_ioa.plugins.a2a.server import sdk_internals
from library_ioa.plugins.a2a.server.executor import (
    ADOPTED_STATE,
    STREAMING_STATE,
    MasLabAgentExecutor,
    TurnMailbox,
    turn_from_message,
)
from library_ioa.plugins.a2a.server.fast.codec import (
    PLAIN_SEND_STATE,
    PlainSend,
    has_required_fields,
)
from library_ioa.plugins.a2a.server.fast.stream import (
    Event,
    Listener,
    StreamLimits,
    StreamRun,
    bounded_events,
    events_of,
)
from library_ioa.plugins.a2a.server.handler import CountingRequestHandler
from library_ioa.plugins.a2a.server.ids import random_uuid
from library_ioa.plugins.a2a.server.publisher import QuickAnswer, TurnTicketLike, quick_answer
from library_ioa.plugins.a2a.server.stores.final_state import INTERRUPTED_STATES, TERMINAL_STATES
from library_ioa.serving.principals import owned_session, owner_of
from mas.runtime.errors import RuntimeFailure
from mas.runtime.turns import ORIGIN_PRINCIPAL, TextDelta, TurnEnded, TurnEvent, TurnInput
from mas.telemetry import tracing

logger = logging.getLogger(__name__)

__all__ = ["AdoptedTurn", "FastSendHandler", "fast_eligible"]


@dataclass
class AdoptedTurn:
    """A turn the fast path started and hands to the executor: its ids and ticket."""

    task_id: str
    context_id: str
    ticket: TurnTicketLike


@dataclass
class _Replay:
    """A ticket whose first events were already read: they come again, then the rest."""

    inner: TurnTicketLike
    stream: AsyncIterator[TurnEvent]
    seen: list[TurnEvent] = field(default_factory=list)

    @property
    def turn(self) -> TurnInput:
        return self.inner.turn

    @property
    def discarded(self) -> int:
        """The inner ticket's text deltas withdrawn by a replace steer."""
        return int(getattr(self.inner, "discarded", 0))

    def events(self) -> AsyncIterator[TurnEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TurnEvent]:
        for event in self.seen:
            yield event
            if isinstance(event, TurnEnded):
                return
        async for event in self.stream:
            yield event

    def cancel_wait(self) -> None:
        self.inner.cancel_wait()


async def _wait(future: asyncio.Future[Any], timeout: float) -> None:
    """Until ``future`` is done or ``timeout`` passes (``asyncio.wait`` with less to set up)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    timer = loop.call_later(timeout, wake)
    future.add_done_callback(wake)
    try:
        await waiter
    finally:
        timer.cancel()
        future.remove_done_callback(wake)


def _request(params: SendMessageRequest | PlainSend) -> SendMessageRequest:
    return params if isinstance(params, SendMessageRequest) else params.request()


def fast_eligible(params: SendMessageRequest) -> bool:
    """Whether a blocking send may take the fast path (a new task, nothing asked of a task)."""
    if not params.HasField("message") or params.message.task_id:
        return False
    config = params.configuration
    return not (config.return_immediately or config.HasField("task_push_notification_config"))


class FastSendHandler(CountingRequestHandler):
    """The counting SDK handler with the fast blocking send of a new task (module docstring)."""

    def __init__(
        self,
        executor: MasLabAgentExecutor,
        *args: Any,
        mailbox: TurnMailbox | None,
        stream_limits: StreamLimits | None = None,
        **kwargs: Any,
    ) -> None:
        """The SDK handler's arguments, plus the mailbox (``None``: the SDK path only) and
        each stream listener's bounds (``stream.StreamLimits``)."""
        super().__init__(executor, *args, **kwargs)
        self.stream_limits = stream_limits or StreamLimits(agent_id=self.agent_id)
        self._executor = executor
        self._mailbox = mailbox
        self._runs: dict[str, StreamRun] = {}  # streamed new tasks still running (fast/stream.py)

    async def on_message_send(self, params: Any, context: Any) -> Any:
        context.state[STREAMING_STATE] = False
        if (
            self._mailbox is None
            or not isinstance(params, SendMessageRequest)
            or not fast_eligible(params)
        ):
            return await self._unary(
                "SendMessage",
                DefaultRequestHandler.on_message_send(self, params, context),
                context,
                params,
            )
        return await self._unary("SendMessage", self._send(params, context), context, params)

    async def on_plain_send(self, plain: PlainSend, context: Any) -> Any:
        """``on_message_send`` of plain params (``codec.read_plain_send``), for the JSON-RPC
        route: a quick answer comes back as its :class:`QuickAnswer` (no ``Message`` is
        built for it), anything else as ``on_message_send`` answers it."""
        if self._mailbox is None:
            return await self.on_message_send(plain.request(), context)
        context.state[STREAMING_STATE] = False
        return await self._unary("SendMessage", self._plain_send(plain, context), context, plain)

    async def _send(self, params: SendMessageRequest, context: Any) -> Any:
        # The SDK's checks, in its order (validate_request_params, then _setup_active_task).
        if not context.state.get(PLAIN_SEND_STATE) and not has_required_fields(params):
            validate_proto_required_fields(params)  # raises the SDK's own error
        validate_history_length(params.configuration)
        if sdk_internals.validates_input_modes(self):
            validate_input_modes(params.message, sdk_internals.agent_card(self))
        message = params.message
        # The ids the SDK's RequestContext would generate (UUIDGenerator).
        task_id = random_uuid()
        context_id = message.context_id or random_uuid()
        owner = owner_of(context)
        turn = turn_from_message(message, owned_session(owner, context_id), task_id, owner)
        answer = await self._answer(turn, context_id, params, context, task_id)
        return quick_answer(context_id, answer) if isinstance(answer, str) else answer

    async def _plain_send(self, plain: PlainSend, context: Any) -> Any:
        # Plain params pass every check of _send: each required field is set, there is no
        # configuration, and no part names a media type (codec.read_plain_send).
        context_id = plain.context_id or random_uuid()
        owner = owner_of(context)
        session_id = owned_session(owner, context_id)
        # turn_from_message's: a plain send has no metadata, so its sender is its origin
        origin = {ORIGIN_PRINCIPAL: owner} if owner else {}
        tracing.annotate(tracing.MAS_ORIGIN, owner)
        turn = TurnInput(session_id, plain.message_id, plain.text, metadata=origin)
        answer = await self._answer(turn, context_id, plain, context)
        return QuickAnswer(random_uuid(), context_id, answer) if isinstance(answer, str) else answer

    async def _answer(
        self,
        turn: TurnInput,
        context_id: str,
        params: SendMessageRequest | PlainSend,
        context: Any,
        task_id: str | None = None,
    ) -> Any:
        """The text of the turn's quick answer, else what the blocking send answers: the
        task of the adopted turn (``task_id``, or a new one, in ``context_id``: the turn's
        session is the caller's own, see ``principals.owned_session``), or the SDK's when the
        mailbox refuses the turn."""
        assert self._mailbox is not None
        try:
            ticket = self._mailbox.submit(turn)
        except RuntimeFailure:
            # The executor submits again and reports the refusal as the task's failure.
            return await DefaultRequestHandler.on_message_send(self, _request(params), context)
        try:
            answer = await self._quick_answer(ticket)
        except asyncio.CancelledError:
            ticket.cancel_wait()
            raise
        if isinstance(answer, str):
            return answer
        adopted = AdoptedTurn(task_id or random_uuid(), context_id, answer)
        context.state[ADOPTED_STATE] = adopted
        return await self._blocking_run(_request(params), context)

    async def _blocking_run(self, params: SendMessageRequest, context: Any) -> Task:
        """The SDK's blocking ``on_message_send`` of the adopted turn, on a :class:`StreamRun`.

        As the SDK: the answer is the task once it is in a terminal or interrupted state
        (after FAILED the run is read to its end, so a failure of the executor surfaces),
        else the task as stored when the run ends; with the request's history length.
        """
        run, requester = await self._start_run(params, context)
        result: Task | None = None
        try:
            while batch := await requester.batch():
                if any(_state_of(event) in _BLOCKING_ENDS for event in batch):
                    result = await run.current_task()
                    if result is not None and result.status.state != TaskState.TASK_STATE_FAILED:
                        break
        finally:
            run.leave(requester)
        if result is None:
            result = await run.current_task()
        if result is None:
            raise InternalError
        if result.id != run.task_id:  # the SDK's _validate_task_id_match, without its span
            logger.error(
                "Agent generated task_id=%s does not match the RequestContext task_id=%s.",
                result.id,
                run.task_id,
            )
            raise InternalError(message="Task ID mismatch in agent response")
        return apply_history_length(result, params.configuration)

    async def _quick_answer(self, ticket: Any) -> str | TurnTicketLike:
        """The text of a quick text-only turn's answer, else the ticket to hand over."""
        result: asyncio.Future[TurnEnded] | None = getattr(ticket, "result", None)
        grace = self._executor.message_grace
        if result is not None and not result.done() and grace > 0:
            await _wait(result, grace)
        if result is not None and result.done() and getattr(ticket, "only_text", False):
            # Ended with text and nothing else (the mailbox's ticket says so): its end is
            # the answer, without reading the events back.
            ended = result.result()
            if ended.status == "completed" and not ended.metadata:
                return ended.text
        stream = ticket.events().__aiter__()
        replay = _Replay(ticket, stream)
        if result is None or not result.done():
            return replay  # still running at the end of the grace: the task starts now
        # The turn has ended, so all its events are queued: reading them does not wait,
        # and the stream ends by itself after the TurnEnded (no generator left to finalise).
        async for event in stream:
            replay.seen.append(event)
            if not isinstance(event, TextDelta | TurnEnded):
                return replay
        end = replay.seen[-1] if replay.seen else None
        if not isinstance(end, TurnEnded) or end.status != "completed" or end.metadata:
            return replay
        return end.text

    # -- streaming: a new task's streamed turn on a StreamRun (fast/stream.py) ------------

    def _stream_eligible(self, params: Any) -> bool:
        return (
            self._mailbox is not None
            and isinstance(params, SendMessageRequest)
            and sdk_internals.agent_card(self).capabilities.streaming
            and fast_eligible(params)
        )

    def on_message_send_stream(self, params: Any, context: Any) -> AsyncGenerator[Any, None]:
        context.state[STREAMING_STATE] = True
        if not self._stream_eligible(params):
            return self._stream(
                "SendStreamingMessage",
                bounded_events(
                    DefaultRequestHandler.on_message_send_stream(self, params, context),
                    self.stream_limits,
                ),
                context,
                params,
            )
        fast = _one_by_one(self._fast_stream(params, context))
        return self._stream("SendStreamingMessage", fast, context, params)

    def message_stream_batches(
        self, params: Any, context: Any
    ) -> AsyncGenerator[list[Event], None]:
        """``on_message_send_stream`` with the events that are ready together in one list."""
        context.state[STREAMING_STATE] = True
        if not self._stream_eligible(params):
            return self._stream(
                "SendStreamingMessage",
                _in_lists(
                    bounded_events(
                        DefaultRequestHandler.on_message_send_stream(self, params, context),
                        self.stream_limits,
                    )
                ),
                context,
                params,
            )
        return self._stream(
            "SendStreamingMessage", self._fast_stream(params, context), context, params
        )

    async def _fast_stream(
        self, params: SendMessageRequest, context: Any
    ) -> AsyncGenerator[list[Event], None]:
        # The SDK's checks, in its order (validate_request_params, then _setup_active_task).
        if not context.state.get(PLAIN_SEND_STATE) and not has_required_fields(params):
            validate_proto_required_fields(params)  # raises the SDK's own error
        validate_history_length(params.configuration)
        if sdk_internals.validates_input_modes(self):
            validate_input_modes(params.message, sdk_internals.agent_card(self))
        run, requester = await self._start_run(params, context)
        task_id = run.task_id
        configuration = params.configuration
        try:
            while batch := await requester.batch():
                for index, event in enumerate(batch):
                    if isinstance(event, Task):
                        if event.id != task_id:
                            raise InternalError(message="Task ID mismatch in agent response")
                        batch[index] = apply_history_length(event, configuration)
                yield batch
        finally:
            run.leave(requester)

    async def _start_run(
        self, params: SendMessageRequest, context: Any
    ) -> tuple[StreamRun, Listener]:
        """A running :class:`StreamRun` of the new task, and its requester's listener."""
        request = await sdk_internals.request_context_builder(self).build(
            params=params,
            task_id=None,
            context_id=params.message.context_id or None,
            task=None,
            context=context,
        )
        run = StreamRun(
            executor=self._executor,
            store=sdk_internals.versioned_store(self),
            push_sender=sdk_internals.push_sender(self),
            event_stream=sdk_internals.event_stream(self),
            request=request,
            park=self._park,
        )
        requester = Listener(self.stream_limits)
        self._runs[run.task_id] = run
        run.start(requester)
        assert run.runner is not None
        run.runner.add_done_callback(lambda _: self._forget(run))
        return run, requester

    def _forget(self, run: StreamRun) -> None:
        if self._runs.get(run.task_id) is run:
            del self._runs[run.task_id]

    async def _park(self, run: StreamRun, task: Task) -> bool:
        """Whether the SDK's registry now holds the task of a run that ended, as the SDK's
        own ``ActiveTask`` would still be there: when it waits for input, or a message
        naming it waits behind the turn (whose task manager must keep the task's context).
        """
        if task.status.state not in INTERRUPTED_STATES and not self._executor.pending(task.id):
            return False
        try:
            await sdk_internals.active_task_registry(self).get_or_create(
                task.id,
                call_context=run.call_context,
                context_id=task.context_id,
                create_task_if_missing=False,
            )
        except Exception as exc:  # closed at shutdown, the task is gone or ended: nothing held
            logger.debug("task %s is not parked: %s", task.id, exc)
            return False
        return True

    # The one override of a private SDK method (declared in sdk_internals.OVERRIDES).
    async def _setup_active_task(self, params: Any, call_context: Any) -> Any:
        task_id = params.message.task_id
        run = self._runs.get(task_id) if task_id else None
        if run is not None and not run.ended.is_set():
            # The SDK queues a message naming a running task behind the running turn.
            message_id = params.message.message_id
            self._executor.arrived(task_id, message_id)
            try:
                await run.ended.wait()
            finally:
                self._executor.withdraw(task_id, message_id)
        return await super()._setup_active_task(params, call_context)

    async def on_cancel_task(self, params: Any, context: Any) -> Any:
        run = self._runs.get(params.id) if isinstance(params, CancelTaskRequest) else None
        if run is None:
            return await super().on_cancel_task(params, context)
        return await self._unary(
            "CancelTask", self._cancel_run(run, params, context), context, params
        )

    async def _cancel_run(self, run: StreamRun, params: CancelTaskRequest, context: Any) -> Task:
        if not has_required_fields(params):
            validate_proto_required_fields(params)
        stored = await sdk_internals.versioned_store(self).get(params.id, context)
        if stored is None:
            raise TaskNotFoundError
        if stored.task.status.state in TERMINAL_STATES:
            raise TaskNotCancelableError
        if run.ended.is_set():  # parked, or over: the SDK's own cancel
            result: Task = await DefaultRequestHandler.on_cancel_task(self, params, context)
            return result
        return await run.cancel(context)

    def on_subscribe_to_task(self, params: Any, context: Any) -> AsyncGenerator[Any, None]:
        run = self._runs.get(params.id) if isinstance(params, SubscribeToTaskRequest) else None
        if run is None:  # the SDK's, through a bounded listener
            return self._stream(
                "SubscribeToTask",
                bounded_events(
                    DefaultRequestHandler.on_subscribe_to_task(self, params, context),
                    self.stream_limits,
                ),
                context,
                params,
            )
        return self._stream(
            "SubscribeToTask", self._resubscribe(run, params, context), context, params
        )

    async def _resubscribe(
        self, run: StreamRun, params: SubscribeToTaskRequest, context: Any
    ) -> AsyncGenerator[Event, None]:
        if not has_required_fields(params):
            validate_proto_required_fields(params)
        stored = await sdk_internals.versioned_store(self).get(params.id, context)
        if stored is None:
            raise TaskNotFoundError
        state = stored.task.status.state
        if state in TERMINAL_STATES:
            raise UnsupportedOperationError(
                message=f"Task {params.id} is in terminal state: {TaskState.Name(state)}"
            )
        listener = run.listen(self.stream_limits)
        if listener is None:  # ended meanwhile: the SDK's own resubscription
            async for event in DefaultRequestHandler.on_subscribe_to_task(self, params, context):
                yield event
            return
        try:
            task = await run.current_task()
            if task is not None:
                yield task
            async for event in events_of(listener):
                yield event
        finally:
            run.leave(listener)
        if run.parked:  # the SDK's ActiveTask holds the task now: follow it there
            active = await sdk_internals.active_task_registry(self).get(run.task_id)
            if active is not None:
                async for event in bounded_events(active.subscribe(), self.stream_limits):
                    yield event

    async def aclose(self) -> None:
        """Stop the streamed runs still going, then the SDK's handler."""
        runs = list(self._runs.values())
        await asyncio.gather(*(run.aclose() for run in runs), return_exceptions=True)
        await super().aclose()


_BLOCKING_ENDS = TERMINAL_STATES | INTERRUPTED_STATES


def _state_of(event: Event) -> TaskState | None:
    """The task state an event reports (``None``: an artifact update or a ``Message``)."""
    if isinstance(event, Task):
        return event.status.state
    if isinstance(event, TaskStatusUpdateEvent):
        return event.status.state
    return None


async def _one_by_one(batches: AsyncGenerator[list[Event], None]) -> AsyncGenerator[Event, None]:
    try:
        async for batch in batches:
            for event in batch:
                yield event
    finally:
        await batches.aclose()


async def _in_lists(events: AsyncGenerator[Any, None]) -> AsyncGenerator[list[Any], None]:
    try:
        async for event in events:
            yield [event]
    finally:
        await events.aclose()
