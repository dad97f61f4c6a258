"""Shared helpers of the runtime tests (documents, a gated runner, event collection, waits)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

from mas.infra.wiring import Wired, wire
from mas.runtime.boundary.agentcomm import AgentCommContract, CommReply, OutboundMessage
from mas.runtime.errors import PeerUnavailable
from mas.runtime.models.base import ModelOutput, ModelPlugin, ModelRequest, TextChunk
from mas.runtime.registry import Registry, builtin_registry
from mas.runtime.turns import TextDelta, TurnEnded, TurnEvent, TurnInput, TurnRunner

DEADLINE = 10.0  # seconds any single wait in these tests may take before it is a failure


def application(
    agents: Mapping[str, Mapping[str, Any]],
    *,
    entry: str | None = None,
    endpoints: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """An Application document with these agents (each value is the agent's ``spec``)."""
    agency: dict[str, Any] = {"agents": {k: {"spec": dict(v)} for k, v in agents.items()}}
    if entry is not None:
        agency["entry"] = entry
    elif len(agents) > 1:
        agency["entry"] = next(iter(agents))
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "test-app"},
        "spec": {"agency": agency, "endpoints": dict(endpoints or {}), **spec},
    }


def wired(
    agents: Mapping[str, Mapping[str, Any]], *, registry: Registry | None = None, **kwargs: Any
) -> Wired:
    """The wired Application of :func:`application` (plugin names checked by ``registry``)."""
    known = registry.known_plugins() if registry is not None else None
    return wire(application(agents, **kwargs), known)


def scripted(*rules: Mapping[str, Any], default: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A ``spec.model`` selecting the scripted plugin."""
    params: dict[str, Any] = {"rules": [dict(r) for r in rules]}
    if default is not None:
        params["default"] = dict(default)
    return {"type": "scripted", "params": params}


async def collect(events: AsyncIterator[TurnEvent]) -> list[TurnEvent]:
    """Every event of one stream, within the deadline."""
    out: list[TurnEvent] = []
    async with asyncio.timeout(DEADLINE):
        async for event in events:
            out.append(event)
    return out


def text_of(events: list[TurnEvent]) -> str:
    """The streamed text."""
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def ended(events: list[TurnEvent]) -> TurnEnded:
    """The last event, which must be the one TurnEnded."""
    assert isinstance(events[-1], TurnEnded), events
    assert sum(isinstance(e, TurnEnded) for e in events) == 1, events
    return events[-1]


class GatedRunner(TurnRunner):
    """A runner whose turns wait for their gate (when one is set) and log what they do."""

    def __init__(self, agent_id: str = "gated") -> None:
        self.agent_id = agent_id
        self.gates: dict[str, asyncio.Event] = {}
        self.started: dict[str, asyncio.Event] = {}
        self.log: list[tuple[str, str, str]] = []  # (what, session, turn)
        self.active: dict[str, int] = {}
        self.max_active_per_session = 0
        self.barrier: asyncio.Barrier | None = None

    def gate(self, turn_id: str) -> asyncio.Event:
        """The gate a turn waits for."""
        return self.gates.setdefault(turn_id, asyncio.Event())

    def started_event(self, turn_id: str) -> asyncio.Event:
        """Set when the turn starts."""
        return self.started.setdefault(turn_id, asyncio.Event())

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:
        session = turn.session_id
        self.active[session] = self.active.get(session, 0) + 1
        self.max_active_per_session = max(self.max_active_per_session, self.active[session])
        self.log.append(("start", session, turn.turn_id))
        self.started_event(turn.turn_id).set()
        try:
            yield TextDelta(f"{turn.turn_id}:")
            if self.barrier is not None and turn.turn_id.endswith("#0"):
                async with asyncio.timeout(DEADLINE):
                    await self.barrier.wait()
            if turn.turn_id in self.gates:
                await self.gates[turn.turn_id].wait()
            else:
                await asyncio.sleep(0)
            yield TextDelta(turn.text)
            self.log.append(("end", session, turn.turn_id))
            yield TurnEnded("completed", text=f"{turn.turn_id}:{turn.text}")
        finally:
            self.active[session] -= 1


class Waits:
    """Stands in for asyncio.sleep: records each wait the plugin asks for, returns at once."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)


class RecordingModel(ModelPlugin):
    """A model plugin for tests: records every request, answers ``recorded: <input>``."""

    instances: ClassVar[list[RecordingModel]] = []

    def __init__(self, *, agent_id: str = "", env: Mapping[str, str] | None = None) -> None:
        self.agent_id = agent_id
        self.requests: list[ModelRequest] = []
        RecordingModel.instances.append(self)

    async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        self.requests.append(request)
        yield TextChunk(f"recorded: {request.last_user_text}")


class RecordingComm(AgentCommContract):
    """An agent_comm plugin for tests: records how it was built and what it sent."""

    instances: ClassVar[list[RecordingComm]] = []

    def __init__(self, **params: Any) -> None:
        self.params = params
        self.sent: list[OutboundMessage] = []
        self.closed = False
        RecordingComm.instances.append(self)

    async def send(self, message: OutboundMessage) -> CommReply:
        self.sent.append(message)
        return CommReply("completed", f"remote answer to {message.text}")

    async def aclose(self) -> None:
        self.closed = True


class DownComm(RecordingComm):
    """A peer that is down."""

    async def send(self, message: OutboundMessage) -> CommReply:
        self.sent.append(message)
        raise PeerUnavailable(f"cannot reach {message.target!r} at {self.params.get('url')}")


def registry_with(**comms: type[AgentCommContract]) -> Registry:
    """The built-in registry plus the recording model, with agent_comm plugins replaced."""
    registry = builtin_registry()
    registry.register("model", "recorder", RecordingModel)
    for name, factory in comms.items():
        registry.register("agent_comm", name, factory)
    return registry
