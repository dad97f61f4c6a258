"""Live activity of a session-mode process: delegations, steers and cancels as they happen.

``run-mas``, ``chat`` and ``tui`` show which agent is working and what reached the process
over the control protocol. An :class:`ActivityHub` fans :data:`Activity` records out to
its listeners (the console view, the curses screen, the transcript file). Records come from

- :class:`ObservedDelegation`, which wraps a hosted agent's
  :class:`~mas.runtime.boundary.delegation.DelegationContract` (``Agent.delegation``):
  :class:`DelegationStarted` when a delegate tool call begins, :class:`DelegationFinished`
  when its result is back (the call itself is unchanged);
- :class:`ObservedToolbox`, which wraps a hosted agent's
  :class:`~mas.runtime.toolbox.Toolbox` (``Agent.toolbox``): :class:`ToolUsed` when a
  tool-server call is back, and for each notice that a server's tools are not offered;
- :class:`ObservedControl`, which wraps a mailbox's
  :class:`~mas.runtime.boundary.control.ControlContract` before it is given to the
  control server: :class:`Steered` when a steer was applied, :class:`SteeredTurnEnded`
  when the turn that carries the steer text ends, :class:`Canceled` for ``cancel_inflight``.

A listener must not block: it is called on the event loop, in the order of the records.
A listener that raises is logged; the others still get the record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mas.runtime.agent import Agent
from mas.runtime.boundary.control import ControlContract, SteerMode, SteerReceipt
from mas.runtime.boundary.delegation import (
    DelegationContract,
    ToolResult,
    ToolSpec,
    delegation_message,
)
from mas.runtime.toolbox import Toolbox
from mas.runtime.turns import TurnEnded, TurnRunner

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DelegationStarted:
    """``source`` began delegating to ``target`` (in ``session`` of the source)."""

    source: str
    target: str
    session: str
    message: str


@dataclass(frozen=True)
class DelegationFinished:
    """The delegation from ``source`` to ``target`` is back."""

    source: str
    target: str
    session: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Steered:
    """A control-protocol steer reached ``agent``'s session."""

    agent: str
    session: str
    mode: SteerMode
    text: str
    applied: str
    turn_id: str


@dataclass(frozen=True)
class SteeredTurnEnded:
    """The turn that carried a steer's text ended."""

    agent: str
    session: str
    mode: SteerMode
    turn_id: str
    ended: TurnEnded


@dataclass(frozen=True)
class Canceled:
    """A control-protocol cancel reached ``agent``'s session."""

    agent: str
    session: str
    interrupted: bool


@dataclass(frozen=True)
class ToolUsed:
    """``agent`` called the tool ``target`` (``<server>/<tool>``), or was told about a server
    (``target`` is the server) whose tools are not offered (``ok`` false, ``detail`` why)."""

    agent: str
    target: str
    session: str
    ok: bool
    detail: str


Activity = DelegationStarted | DelegationFinished | Steered | SteeredTurnEnded | Canceled | ToolUsed
Listener = Callable[[Activity], None]


class ActivityHub:
    """Delivers every record to every listener, in order."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; returns the function that removes it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def emit(self, record: Activity) -> None:
        """Call every listener with ``record``."""
        for listener in list(self._listeners):
            try:
                listener(record)
            except Exception:
                logger.exception("activity listener %r failed on %r", listener, record)


class ObservedDelegation(DelegationContract):
    """A :class:`DelegationContract` that reports each call to an :class:`ActivityHub`.

    It forwards everything to the wrapped contract (which keeps its routes, tools and
    metrics); it does not call the base initializer on purpose: it holds no routes itself.
    """

    def __init__(self, inner: DelegationContract, hub: ActivityHub) -> None:
        self.inner = inner
        self.hub = hub
        self.source = inner.source
        self.max_depth = inner.max_depth

    @property
    def targets(self) -> tuple[str, ...]:
        """The wrapped contract's targets."""
        return self.inner.targets

    def tools(self) -> list[ToolSpec]:
        """The wrapped contract's tools."""
        return self.inner.tools()

    def target_of(self, tool_name: str) -> str | None:
        """The wrapped contract's target of ``tool_name``."""
        return self.inner.target_of(tool_name)

    async def call(
        self,
        tool_name: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        session_id: str,
        turn_id: str,
        correlation_id: str,
        depth: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> ToolResult:
        """Report the start, run the wrapped call, report its end."""
        target = self.inner.target_of(tool_name) or tool_name
        message = delegation_message(arguments)
        self.hub.emit(DelegationStarted(self.source, target, session_id, message))
        result = await self.inner.call(
            tool_name,
            arguments,
            session_id=session_id,
            turn_id=turn_id,
            correlation_id=correlation_id,
            depth=depth,
            metadata=metadata,
        )
        self.hub.emit(
            DelegationFinished(self.source, target, session_id, result.ok, result.text[:300])
        )
        return result

    async def aclose(self) -> None:
        """Close the wrapped contract."""
        await self.inner.aclose()


class ObservedToolbox(Toolbox):
    """A :class:`Toolbox` that reports calls and notices to an :class:`ActivityHub`.

    Like :class:`ObservedDelegation`, it forwards everything and holds no sources itself.
    """

    def __init__(self, inner: Toolbox, hub: ActivityHub) -> None:
        self.inner = inner
        self.hub = hub
        self.agent_id = inner.agent_id

    async def tools(self, *, session_id: str = "") -> tuple[list[ToolSpec], list[str]]:
        """The wrapped toolbox's tools; each notice is reported."""
        offered, notices = await self.inner.tools(session_id=session_id)
        for line in notices:
            self.hub.emit(ToolUsed(self.agent_id, "tools", session_id, False, line))
        return offered, notices

    def server_of(self, tool_name: str) -> str | None:
        """The wrapped toolbox's server of ``tool_name``."""
        return self.inner.server_of(tool_name)

    async def call(
        self,
        tool_name: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        turn_id: str,
        session_id: str = "",
    ) -> ToolResult:
        """Run the wrapped call and report its result."""
        result = await self.inner.call(tool_name, arguments, turn_id=turn_id, session_id=session_id)
        target = f"{result.target or '?'}/{tool_name}"
        self.hub.emit(ToolUsed(self.agent_id, target, session_id, result.ok, result.text[:300]))
        return result

    async def aclose(self) -> None:
        """Close the wrapped toolbox."""
        await self.inner.aclose()


def observe_delegations(runners: Mapping[str, TurnRunner], hub: ActivityHub) -> None:
    """Wrap the delegation contract and the toolbox of every hosted :class:`Agent` (once)."""
    for runner in runners.values():
        if isinstance(runner, Agent) and not isinstance(runner.delegation, ObservedDelegation):
            runner.delegation = ObservedDelegation(runner.delegation, hub)
        toolbox = runner.toolbox if isinstance(runner, Agent) else None
        if isinstance(runner, Agent) and toolbox and not isinstance(toolbox, ObservedToolbox):
            runner.toolbox = ObservedToolbox(toolbox, hub)


class ObservedControl(ControlContract):
    """A :class:`ControlContract` that reports steers and cancels to an :class:`ActivityHub`."""

    def __init__(self, agent: str, inner: ControlContract, hub: ActivityHub) -> None:
        self.agent = agent
        self.inner = inner
        self.hub = hub

    async def steer(self, session_id: str, text: str, mode: SteerMode) -> SteerReceipt:
        """Steer through the wrapped contract; report it and, later, the steered turn's end."""
        receipt = await self.inner.steer(session_id, text, mode)
        self.hub.emit(Steered(self.agent, session_id, mode, text, receipt.applied, receipt.turn_id))

        def ended(future: asyncio.Future[TurnEnded]) -> None:
            if not future.cancelled() and future.exception() is None:
                self.hub.emit(
                    SteeredTurnEnded(self.agent, session_id, mode, receipt.turn_id, future.result())
                )

        receipt.result.add_done_callback(ended)
        return receipt

    async def cancel_inflight(self, session_id: str) -> bool:
        """Cancel through the wrapped contract and report it."""
        interrupted = await self.inner.cancel_inflight(session_id)
        self.hub.emit(Canceled(self.agent, session_id, interrupted))
        return interrupted
