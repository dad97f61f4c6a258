"""``LocalAgentComm`` (registry name ``local``): the in-process bus between hosted agents.

A :class:`LocalBus` maps agent ids to their session turn mailboxes in this process; the
runtime host attaches every hosted agent. :meth:`LocalAgentComm.send` queues the delegation
as a turn on the target's mailbox (session ``message.session_id``, turn id = the call id,
the caller's ids and the depth in the metadata) and waits for that turn to end.

The bus speaks only the small :class:`TurnSink` protocol, so this module does not depend on
the mailbox's package. A target that is not on the bus is :class:`PeerUnavailable`; a full
mailbox too (the peer cannot take the turn now); no answer within ``timeout`` seconds is
:class:`PeerTimeout`, and the peer's turn is then left to finish on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Protocol

from mas.runtime.boundary.agentcomm import AgentCommContract, CommReply, OutboundMessage
from mas.runtime.errors import CommError, MailboxError, PeerTimeout, PeerUnavailable
from mas.runtime.turns import (
    CALLER_CALL_ID,
    CORRELATION_ID,
    DELEGATION_DEPTH,
    ArtifactEmitted,
    TextDelta,
    TurnEnded,
    TurnEvent,
    TurnInput,
)

logger = logging.getLogger(__name__)

# TurnInput metadata key naming the delegating agent.
CALLER_AGENT = "mas.caller_agent"


class TicketLike(Protocol):
    """What the bus needs from a submitted turn."""

    def events(self) -> AsyncIterator[TurnEvent]: ...

    def cancel_wait(self) -> None: ...


class TurnSink(Protocol):
    """What the bus needs from an agent's mailbox."""

    def submit(self, turn: TurnInput, *, front: bool = False) -> TicketLike: ...


class LocalBus:
    """Agent id -> the mailbox hosting it, in this process."""

    def __init__(self) -> None:
        self._sinks: dict[str, TurnSink] = {}

    def attach(self, agent_id: str, sink: TurnSink) -> None:
        """Make ``agent_id`` reachable; attaching an id twice is an error."""
        if agent_id in self._sinks:
            raise ValueError(f"agent {agent_id!r} is already attached to this bus")
        self._sinks[agent_id] = sink

    def detach(self, agent_id: str) -> None:
        """Make ``agent_id`` unreachable (no error if it was not attached)."""
        self._sinks.pop(agent_id, None)

    def agents(self) -> tuple[str, ...]:
        """The attached agent ids."""
        return tuple(self._sinks)

    def sink(self, agent_id: str) -> TurnSink:
        """The mailbox of ``agent_id``; :class:`PeerUnavailable` when it is not here."""
        sink = self._sinks.get(agent_id)
        if sink is None:
            hosted = ", ".join(sorted(self._sinks)) or "(none)"
            raise PeerUnavailable(
                f"agent {agent_id!r} is not hosted in this process (hosted: {hosted})"
            )
        return sink


class LocalAgentComm(AgentCommContract):
    """Delivers delegations to mailboxes on a :class:`LocalBus`."""

    def __init__(self, *, bus: LocalBus, timeout: float | None = None) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._bus = bus
        self._timeout = timeout
        self._closed = False

    async def send(self, message: OutboundMessage) -> CommReply:
        """Run ``message`` as a turn of the target and return how it ended."""
        if self._closed:
            raise PeerUnavailable(f"the local bus to {message.target!r} is closed")
        metadata = {
            **message.metadata,
            CALLER_CALL_ID: message.call_id,
            CORRELATION_ID: message.correlation_id,
            DELEGATION_DEPTH: message.depth,
            CALLER_AGENT: message.source,
        }
        turn = TurnInput(message.session_id, message.call_id, message.text, message.data, metadata)
        try:
            ticket = self._bus.sink(message.target).submit(turn)
        except MailboxError as exc:
            raise PeerUnavailable(f"agent {message.target!r} cannot take the turn: {exc}") from exc
        artifacts: list[ArtifactEmitted] = []
        text: list[str] = []
        finished = False
        try:
            async with asyncio.timeout(self._timeout):
                async for event in ticket.events():
                    if isinstance(event, ArtifactEmitted):
                        artifacts.append(event)
                    elif isinstance(event, TextDelta):
                        text.append(event.text)
                    elif isinstance(event, TurnEnded):
                        finished = True
                        reply = event.text or "".join(text)
                        if event.status in ("failed", "canceled") and event.message:
                            reply = event.message
                        return CommReply(
                            event.status, reply, tuple(artifacts), metadata=event.metadata
                        )
        except TimeoutError:
            raise PeerTimeout(
                f"agent {message.target!r} did not answer within {self._timeout} s"
            ) from None
        finally:
            if not finished:
                ticket.cancel_wait()
        raise CommError(f"agent {message.target!r} ended its turn without a final event")

    async def aclose(self) -> None:
        """Refuse further sends."""
        self._closed = True
