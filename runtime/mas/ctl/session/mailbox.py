"""The session turn mailbox: one per agent, holding many sessions.

Every incoming turn is queued at the tail of its session's queue and the caller waits for
its own turn (:meth:`TurnTicket.events`). Turns of one session never run concurrently and
never reorder; different sessions run in parallel, one worker task per active session,
dropped when the session goes idle. Turns run in tasks the mailbox owns, never in the
caller's task, so a caller that goes away never interrupts a turn.

A turn's generation runs in its session's worker task itself: a steer or cancel cancels
the worker while it is inside the generation (the only place it waits), the worker takes
back that cancellation (``Task.uncancel``) and goes on with the continuation or the end.
So a turn costs one task, not a worker and a generation task joined by ``asyncio.wait``.
A worker cancelled by :meth:`SessionTurnMailbox.aclose` (``_closed`` set) ends its turn
``canceled`` and stops.

Bounds: at most ``max_pending_per_session`` queued (not running) turns per session and
``max_sessions`` sessions with queued or running turns; past either, :meth:`submit` raises
:class:`~mas.runtime.errors.MailboxFull`. Memory per turn is the events of that turn.

Steer and cancel follow :mod:`mas.runtime.boundary.control`. ``front=True`` queues a turn
ahead of ordinary turns, after earlier front-queued ones (steer ``wait``).

Single event loop: every method must be called from the loop the mailbox runs on.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from mas.runtime import metrics
from mas.runtime.boundary.control import (
    STEER_METADATA_KEY,
    STEER_MODES,
    ControlContract,
    SteerMode,
    SteerReceipt,
)
from mas.runtime.errors import ControlError, MailboxClosed, MailboxFull
from mas.runtime.turns import TextDelta, TurnEnded, TurnEvent, TurnInput, TurnRunner
from mas.telemetry import tracing
from mas.telemetry.logs import FIELDS

__all__ = ["MailboxClosed", "MailboxFull", "SessionTurnMailbox", "TurnTicket"]

logger = logging.getLogger(__name__)

TicketState = Literal["queued", "running", "done"]


class TurnTicket:
    """A caller's handle on one submitted turn."""

    def __init__(self, turn: TurnInput, mailbox: SessionTurnMailbox) -> None:
        loop = asyncio.get_running_loop()
        self.turn = turn
        self._mailbox = mailbox
        # The events not read yet, and the reader's waiter while it waits for more: one
        # reader, so a deque and a future do what an asyncio.Queue does, for less.
        self._events: deque[TurnEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._result: asyncio.Future[TurnEnded] = loop.create_future()
        self._state: TicketState = "queued"
        self._detached = False
        self._consumed = False
        self._deltas = 0
        self._only_text = True
        self.discarded = 0  # how many of the first TextDeltas a replace steer withdrew
        self.submitted_at = loop.time()
        self.trace_parent = tracing.capture()  # the submitter's span parents the turn's

    @property
    def result(self) -> asyncio.Future[TurnEnded]:
        """Resolves with the turn's real ``TurnEnded`` (also after :meth:`cancel_wait`)."""
        return self._result

    @property
    def state(self) -> TicketState:
        """``queued``, ``running`` or ``done``."""
        return self._state

    @property
    def only_text(self) -> bool:
        """Whether every event of the turn so far was a ``TextDelta`` (the end aside): once
        :attr:`result` is done, whether its events were text and the end, nothing else."""
        return self._only_text

    def events(self) -> AsyncIterator[TurnEvent]:
        """Wait for this turn, then yield its events, ending with ``TurnEnded``; call once."""
        if self._consumed:
            raise RuntimeError(f"events() of turn {self.turn.turn_id!r} may be called only once")
        self._consumed = True
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TurnEvent]:
        events = self._events
        while True:
            while not events:
                self._waiter = self._result.get_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
            event = events.popleft()
            yield event
            if isinstance(event, TurnEnded):
                return

    def _put(self, event: TurnEvent) -> None:
        self._events.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def cancel_wait(self) -> None:
        """Stop waiting: a queued turn is withdrawn; a running one finishes and is kept.

        The consumer's :meth:`events` ends with ``TurnEnded('canceled')`` either way.
        """
        if self._state == "queued":
            self._mailbox._withdraw(self)
        elif self._state == "running" and not self._detached:
            self._put(
                TurnEnded(
                    "canceled",
                    message=f"stopped waiting for turn {self.turn.turn_id!r}; "
                    "it goes on in the background and its effects are kept",
                )
            )
            self._detached = True

    def _push(self, event: TurnEvent) -> None:
        if isinstance(event, TextDelta):
            self._deltas += 1
        elif not isinstance(event, TurnEnded):
            self._only_text = False
        if not self._detached:
            self._put(event)

    def _discard_streamed(self) -> None:
        """A replace steer: every text delta pushed so far is withdrawn from the answer."""
        self.discarded = self._deltas

    def _finish(self, ended: TurnEnded) -> None:
        self._state = "done"
        self._push(ended)
        self._detached = True
        if not self._result.done():
            self._result.set_result(ended)


@dataclass
class _Interrupt:
    kind: Literal["cancel", "preempt", "replace"]
    text: str = ""
    turn_id: str = ""


@dataclass
class _Generation:
    """The generation in flight on a session, and the task running it (the worker)."""

    ticket: TurnTicket
    task: asyncio.Task[None] | None = None
    text: list[str] = field(default_factory=list)
    interrupt: _Interrupt | None = None


@dataclass
class _Session:
    session_id: str
    queue: deque[TurnTicket] = field(default_factory=deque)
    front: int = 0  # how many tickets at the head of ``queue`` were queued with front=True
    worker: asyncio.Task[None] | None = None
    current: _Generation | None = None


class SessionTurnMailbox(ControlContract):
    """Queues and runs the turns of one agent (see the module docstring)."""

    def __init__(
        self, runner: TurnRunner, *, max_pending_per_session: int = 64, max_sessions: int = 10_000
    ) -> None:
        if max_pending_per_session < 1 or max_sessions < 1:
            raise ValueError(
                f"max_pending_per_session ({max_pending_per_session}) and max_sessions "
                f"({max_sessions}) must be at least 1"
            )
        self._runner = runner
        self._agent = str(getattr(runner, "agent_id", "") or "agent")
        self._max_pending = max_pending_per_session
        self._max_sessions = max_sessions
        self._sessions: dict[str, _Session] = {}
        self._queued = 0
        self._closed = False
        self._idle = asyncio.Event()
        self._idle.set()
        # The metric children of this agent, made at first use: ``labels()`` takes a lock
        # and builds a key on every call.
        self._depth_gauge: Any = None
        self._latency: Any = None
        self._outcomes: dict[str, Any] = {}

    @property
    def agent_id(self) -> str:
        """The agent whose turns this mailbox runs."""
        return self._agent

    @property
    def runner(self) -> TurnRunner:
        """The runner (the agent) whose turns this mailbox runs."""
        return self._runner

    # -- the caller's side ------------------------------------------------------------

    def submit(self, turn: TurnInput, *, front: bool = False) -> TurnTicket:
        """Queue ``turn`` (at the tail, or at the front after earlier front turns)."""
        if self._closed:
            raise MailboxClosed(f"agent {self._agent!r} is shutting down; turn not accepted")
        session = self._sessions.get(turn.session_id)
        if session is None:
            if len(self._sessions) >= self._max_sessions:
                raise MailboxFull(
                    f"agent {self._agent!r} already has {len(self._sessions)} active sessions "
                    f"(max_sessions={self._max_sessions}); retry when some finish"
                )
            session = self._sessions[turn.session_id] = _Session(turn.session_id)
        if len(session.queue) >= self._max_pending:
            raise MailboxFull(
                f"session {turn.session_id!r} of agent {self._agent!r} already has "
                f"{len(session.queue)} queued turns (max_pending_per_session="
                f"{self._max_pending}); retry when the current turns finish"
            )
        ticket = TurnTicket(turn, self)
        if front:
            session.queue.insert(session.front, ticket)
            session.front += 1
        else:
            session.queue.append(ticket)
        self._queued += 1
        self._idle.clear()
        self._show_depth()
        if session.worker is None:
            session.worker = asyncio.get_running_loop().create_task(
                self._work(session), name=f"mailbox:{self._agent}:{turn.session_id}"
            )
        return ticket

    def depth(self, session_id: str | None = None) -> int:
        """Queued (not running) turns, of one session or of all."""
        if session_id is None:
            return self._queued
        session = self._sessions.get(session_id)
        return len(session.queue) if session else 0

    def running(self, session_id: str) -> bool:
        """Whether a turn of ``session_id`` is running now."""
        session = self._sessions.get(session_id)
        return session is not None and session.current is not None

    def sessions(self) -> tuple[str, ...]:
        """Sessions with queued or running turns."""
        return tuple(self._sessions)

    async def drain(self, timeout: float) -> bool:
        """Wait until no turn is queued or running; ``True`` if that happened in time."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        """Stop the workers; every queued or running ticket ends ``canceled``."""
        self._closed = True
        workers = [s.worker for s in self._sessions.values() if s.worker is not None]
        for worker in workers:
            worker.cancel()
        if workers:
            await asyncio.gather(*workers, return_exceptions=True)
        for session in list(self._sessions.values()):
            while session.queue:
                self._end_unrun(session.queue.popleft(), "the mailbox closed before it ran")
        self._sessions.clear()
        self._queued = 0
        self._show_depth()
        self._idle.set()

    # -- ControlContract -------------------------------------------------------------

    async def steer(self, session_id: str, text: str, mode: SteerMode) -> SteerReceipt:
        """Preempt, replace or queue ahead (see :mod:`mas.runtime.boundary.control`)."""
        if mode not in STEER_MODES:
            raise ControlError(
                f"steer mode {mode!r} is not accepted; accepted: {', '.join(STEER_MODES)}"
            )
        turn_id = f"steer-{uuid.uuid4().hex[:12]}"
        session = self._sessions.get(session_id)
        generation = session.current if session else None
        if (
            mode != "wait"
            and generation is not None
            and generation.interrupt is None
            and generation.task is not None
            and generation.task.cancel()
        ):
            generation.interrupt = _Interrupt(mode, text, turn_id)
            logger.info("agent %s session %s: steer %s", self._agent, session_id, mode)
            applied: Literal["preempted", "replaced"] = (
                "preempted" if mode == "preempt" else "replaced"
            )
            return SteerReceipt(session_id, mode, applied, turn_id, generation.ticket.result)
        turn = TurnInput(session_id, turn_id, text, metadata={STEER_METADATA_KEY: "wait"})
        ticket = self.submit(turn, front=True)
        return SteerReceipt(session_id, mode, "queued", turn_id, ticket.result)

    async def cancel_inflight(self, session_id: str) -> bool:
        """Interrupt the running turn of ``session_id``; it ends ``canceled``."""
        session = self._sessions.get(session_id)
        generation = session.current if session else None
        if generation is None or generation.task is None:
            return False
        if generation.interrupt is not None:
            # a steer already stopped the generation; cancel wins over its continuation
            generation.interrupt = _Interrupt("cancel")
            return True
        if not generation.task.cancel():
            return False
        generation.interrupt = _Interrupt("cancel")
        logger.info("agent %s session %s: in-flight turn canceled", self._agent, session_id)
        return True

    # -- the mailbox's side ----------------------------------------------------------

    def _withdraw(self, ticket: TurnTicket) -> None:
        session = self._sessions.get(ticket.turn.session_id)
        if session is None or ticket not in session.queue:
            return
        index = session.queue.index(ticket)
        del session.queue[index]
        if index < session.front:
            session.front -= 1
        self._queued -= 1
        self._show_depth()
        self._end_unrun(ticket, "withdrawn: the caller stopped waiting before it ran")
        self._forget_if_idle(session)

    def _show_depth(self) -> None:
        if self._depth_gauge is None:
            self._depth_gauge = metrics.QUEUE_DEPTH.labels(self._agent)
        self._depth_gauge.set(self._queued)

    def _count(self, outcome: str, elapsed: float | None = None) -> None:
        """A turn ended with ``outcome``; ``elapsed``: how long it ran (``None``: never ran)."""
        counter = self._outcomes.get(outcome)
        if counter is None:
            counter = self._outcomes[outcome] = metrics.TURNS.labels(self._agent, outcome)
        counter.inc()
        if elapsed is not None:
            if self._latency is None:
                self._latency = metrics.TURN_LATENCY.labels(self._agent)
            self._latency.observe(elapsed)

    def _end_unrun(self, ticket: TurnTicket, why: str) -> None:
        self._count("withdrawn")
        ticket._finish(TurnEnded("canceled", message=f"turn {ticket.turn.turn_id!r} {why}"))

    def _forget_if_idle(self, session: _Session) -> None:
        if not session.queue and session.current is None and session.worker is None:
            self._sessions.pop(session.session_id, None)
        if self._queued == 0 and all(s.current is None for s in self._sessions.values()):
            self._idle.set()

    async def _work(self, session: _Session) -> None:
        try:
            while session.queue and not self._closed:
                ticket = session.queue.popleft()
                if session.front:
                    session.front -= 1
                self._queued -= 1
                self._show_depth()
                await self._run(session, ticket)
        finally:
            session.worker = None
            self._forget_if_idle(session)

    async def _run(self, session: _Session, ticket: TurnTicket) -> None:
        worker = cast("asyncio.Task[None]", asyncio.current_task())
        loop = worker.get_loop()
        started = loop.time()
        ticket._state = "running"
        turn, kept = ticket.turn, ""
        ended: TurnEnded | None = None
        wait = started - ticket.submitted_at
        span_of_turn = tracing.turn_span(self._agent, turn, ticket.trace_parent, wait)
        with span_of_turn as span:
            try:
                while ended is None:
                    generation = _Generation(ticket, worker)
                    session.current = generation
                    try:
                        done: TurnEnded | None = await self._generate(turn, generation)
                    except asyncio.CancelledError:
                        if self._closed or generation.interrupt is None:
                            # aclose() (or a cancel not the mailbox's own): the turn ends here
                            ended = TurnEnded(
                                "canceled",
                                text=kept + "".join(generation.text),
                                message=f"agent {self._agent!r} shut down while the turn ran",
                            )
                            raise
                        done = None
                    if generation.interrupt is not None:
                        worker.uncancel()  # the steer's or cancel's own cancellation, taken back
                    elif done is not None:
                        # a question stays the question; any other end carries the kept prefix
                        keep = kept and done.status != "input_required"
                        ended = replace(done, text=kept + done.text) if keep else done
                        continue
                    interrupt = generation.interrupt or _Interrupt("cancel")
                    if interrupt.kind == "cancel":
                        ended = TurnEnded(
                            "canceled",
                            text=kept + "".join(generation.text),
                            message=f"turn {ticket.turn.turn_id!r} was canceled while it ran",
                        )
                        continue
                    if interrupt.kind == "preempt":
                        kept += "".join(generation.text)
                    else:
                        kept = ""
                        ticket._discard_streamed()
                    metadata = {**ticket.turn.metadata, STEER_METADATA_KEY: interrupt.kind}
                    turn = TurnInput(
                        session.session_id, interrupt.turn_id, interrupt.text, metadata=metadata
                    )
            finally:
                session.current = None
                final = ended or TurnEnded("canceled", message="the turn was abandoned")
                elapsed = loop.time() - started
                self._count(final.status, elapsed)
                ticket._finish(final)
                self._report(ticket, final, elapsed, wait, span)

    def _report(
        self, ticket: TurnTicket, ended: TurnEnded, elapsed: float, wait: float, span: Any
    ) -> None:
        """The turn's INFO line (and its span's outcome when traced)."""
        if span is not None:
            tracing.end_turn(span, ended.status, ended.message)
        if logger.isEnabledFor(logging.INFO):
            turn = ticket.turn
            logger.info(
                "turn %s of agent %s session %s: %s in %.1f ms (queued %.1f ms)",
                turn.turn_id,
                self._agent,
                turn.session_id,
                ended.status,
                elapsed * 1000,
                wait * 1000,
                extra={
                    FIELDS: {
                        "event": "turn",
                        "agent": self._agent,
                        "session_id": turn.session_id,
                        "turn_id": turn.turn_id,
                        "outcome": ended.status,
                        "duration_ms": round(elapsed * 1000, 3),
                        "queue_wait_ms": round(wait * 1000, 3),
                    }
                },
            )

    async def _generate(self, turn: TurnInput, generation: _Generation) -> TurnEnded:
        stream: AsyncIterator[TurnEvent] | None = None
        try:
            stream = self._runner.run(turn)
            async for event in stream:
                if isinstance(event, TurnEnded):
                    return event
                if isinstance(event, TextDelta):
                    generation.text.append(event.text)
                generation.ticket._push(event)
        except Exception as exc:  # a runner must not raise; keep the mailbox alive if it does
            logger.exception("agent %s: runner raised during turn %s", self._agent, turn.turn_id)
            return TurnEnded(
                "failed",
                text="".join(generation.text),
                message=f"agent {self._agent!r} failed: {type(exc).__name__}: {exc}",
            )
        finally:
            aclose = getattr(stream, "aclose", None) if stream is not None else None
            if aclose is not None:
                await aclose()
        return TurnEnded(
            "failed",
            text="".join(generation.text),
            message=f"agent {self._agent!r} ended the turn without a final event",
        )
