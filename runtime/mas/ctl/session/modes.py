"""What ``run-mas``, ``chat`` and ``tui`` share: one process hosting a whole agency.

:class:`SessionProcess` (the spec's "Exposure topology"):

- the entry agent is always in-process; so is every agent whose endpoint is deployed
  (``usage: deploy`` or ``use-and-deploy``), and every agent those reach through local
  routes (private workers);
- every hosted deployed agent binds its listener in this process through the shared
  exposure helper (:func:`mas.ctl.session.exposure.bind_listeners`), without gRPC:
  ``mas-ctl serve`` is the only path that starts the gRPC listener;
- ``usage: use`` peers (``--bind`` rows among them) are client routes only: another
  process owns those ports and nothing here listens on them;
- a control endpoint for every hosted agent is advertised in the control directory unless
  ``control=False`` (``--no-control``); steers and cancels that reach it are reported to
  :attr:`SessionProcess.hub`, and so is every delegation of a hosted agent.

Use it on one event loop::

    async with SessionProcess(wired) as process:
        for line in process.describe():
            print(line, file=sys.stderr)
        ticket = process.submit("session-1", "hello")
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

from mas.ctl.session.activity import ActivityHub, ObservedControl, observe_delegations
from mas.ctl.session.control import ControlServer
from mas.ctl.session.exposure import Listeners, bind_listeners
from mas.ctl.session.host import RuntimeHost
from mas.ctl.session.mailbox import TurnTicket
from mas.infra.wiring import Wired
from mas.runtime.errors import HostError
from mas.runtime.metrics import REGISTRY
from mas.runtime.turns import TurnInput

logger = logging.getLogger(__name__)


def new_session_id(prefix: str) -> str:
    """A fresh session id such as ``chat-1a2b3c4d``."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def entry_of(wired: Wired) -> str:
    """The entry agent; :class:`HostError` naming the field when there is none."""
    agency = wired.app.spec.agency
    entry = agency.entry_agent()
    if entry is None:
        raise HostError(
            "spec.agency.entry: is not set and the agency has "
            f"{len(agency.agents)} agents; set it to one of: {', '.join(agency.agents)}"
        )
    return entry


def hosted_roots(wired: Wired) -> list[str]:
    """The entry agent, then every agent of the agency whose endpoint is deployed."""
    roots = [entry_of(wired)]
    for listener in wired.routes.listeners:
        if listener.agent not in roots:
            roots.append(listener.agent)
    return roots


class SessionProcess:
    """The hosted agents, their listeners and the control endpoint of one process."""

    def __init__(
        self,
        wired: Wired,
        *,
        control: bool = True,
        bind_host: str | None = None,
        drain_timeout: float = 10.0,
        control_directory: Path | None = None,
    ) -> None:
        self.wired = wired
        self.entry = entry_of(wired)
        self.hub = ActivityHub()
        self._control_wanted = control
        self._bind_host = bind_host
        self.drain_timeout = drain_timeout
        self._control_directory = control_directory
        self._host: RuntimeHost | None = None
        self.listeners: Listeners | None = None
        self.control: ControlServer | None = None

    @property
    def host(self) -> RuntimeHost:
        """The runtime host (after :meth:`start`)."""
        if self._host is None:
            raise RuntimeError("the session process is not started")
        return self._host

    async def start(self) -> None:
        """Build the agents, bind the deployed listeners, advertise the control endpoint."""
        host = self._host = RuntimeHost.build(self.wired, hosted_roots(self.wired))
        try:
            observe_delegations({a: host.runner(a) for a in host.agents}, self.hub)
            self.listeners = await bind_listeners(
                self.wired,
                host,
                bind_host=self._bind_host,
                grpc=False,
                metrics_registries=[REGISTRY],
                drain_timeout=self.drain_timeout,
            )
            if self._control_wanted:
                contracts = {a: ObservedControl(a, host.mailbox(a), self.hub) for a in host.agents}
                self.control = ControlServer(contracts, directory=self._control_directory)
                await self.control.start()
        except BaseException:
            await self.aclose(drain=False)
            raise

    async def __aenter__(self) -> SessionProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose(drain=False)

    def submit(self, session: str, text: str, *, turn_id: str | None = None) -> TurnTicket:
        """Queue one input on the entry agent's session."""
        turn = TurnInput(session, turn_id or f"turn-{uuid.uuid4().hex[:12]}", text)
        return self.host.mailbox(self.entry).submit(turn)

    async def cancel(self, session: str) -> bool:
        """Interrupt the entry agent's running turn of ``session``."""
        return await self.host.mailbox(self.entry).cancel_inflight(session)

    def describe(self) -> list[str]:
        """Which agents are hosted, which listeners are up, the routes and the control."""
        host = self.host
        endpoints = self.wired.app.spec.endpoints
        others = [a for a in host.agents if a != self.entry]
        lines = [f"hosting {self.entry} (entry)" + "".join(f", {a}" for a in others)]
        for bound in self.listeners.bound if self.listeners else ():
            url = bound.exposure.url
            if bound.protocol != "a2a":
                lines.append(f"listening {bound.agent}: {bound.protocol.upper()} {url}/mcp")
                continue
            lines.append(
                f"listening {bound.agent}: A2A {url} (JSON-RPC), {url}/a2a/rest (HTTP+JSON), "
                f"card {url}/.well-known/agent-card.json"
            )
            endpoint = endpoints[bound.agent]
            if endpoint.a2a.grpc_port is not None or endpoint.a2a.grpc_url is not None:
                lines.append(
                    f"note {bound.agent}: gRPC is not served here (nor in its card); mas-ctl "
                    "serve is the only path that starts the gRPC listener"
                )
        for agent in host.agents:
            for route in self.wired.routes.from_agent(agent):
                lines.append(f"route {route_text(self, route.source, route.target)}")
            for tool in self.wired.routes.tools_of(agent):
                only = f" (tools: {', '.join(tool.names)})" if tool.names is not None else ""
                lines.append(f"tools {agent} -> {tool.server}: {tool.protocol} {tool.url}{only}")
        if self.control is not None:
            lines.append(f"control {self.control.address} ({', '.join(host.agents)})")
        else:
            lines.append("control: off (--no-control)")
        return lines

    async def drain(self, timeout: float) -> bool:
        """Wait until every hosted mailbox is idle (at most ``timeout`` s)."""
        return await self.host.drain(timeout)

    async def aclose(self, *, drain: bool = True) -> None:
        """Stop accepting, optionally drain, then close control, listeners and agents."""
        if self.listeners is not None:
            self.listeners.stop_accepting()
        if drain and self._host is not None and not await self._host.drain(self.drain_timeout):
            await self._host.cancel_turns()  # their callers get the canceled end, then close
        if self.control is not None:
            await self.control.aclose()
            self.control = None
        if self.listeners is not None:
            await self.listeners.aclose()
            self.listeners = None
        if self._host is not None:
            await self._host.aclose()
            self._host = None


def route_text(process: SessionProcess, source: str, target: str) -> str:
    """One route as people read it, e.g. ``concierge -> researcher: a2a http://... (here)``."""
    route = next(r for r in process.wired.routes.from_agent(source) if r.target == target)
    if route.kind == "local":
        return f"{source} -> {target}: in-process ({route.protocol})"
    endpoint = process.wired.app.spec.endpoints.get(target)
    served_here = process.listeners is not None and any(
        b.agent == target for b in process.listeners.bound
    )
    where = "served by this process" if served_here else "owned by another process"
    usage = endpoint.effective_usage if endpoint is not None else "use"
    return f"{source} -> {target}: {route.protocol} {route.url} (usage: {usage}; {where})"


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """The options ``run-mas``, ``chat`` and ``tui`` share (besides the document options)."""
    parser.add_argument(
        "--no-control", action="store_true", help="do not advertise a control endpoint"
    )
    parser.add_argument(
        "--listen",
        metavar="HOST",
        default=None,
        help="bind host of the deployed listeners (default: the host of each endpoint url)",
    )
    parser.add_argument(
        "--session",
        metavar="S",
        default=None,
        type=_session_id,
        help="the session id of the conversation (default: a fresh one, printed at start)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="on exit, wait at most S seconds for turns still running (default 10)",
    )


def session_process(wired: Wired, args: argparse.Namespace) -> SessionProcess:
    """The (not yet started) process of ``wired`` as :func:`add_session_options` set it up."""
    return SessionProcess(
        wired,
        control=not args.no_control,
        bind_host=args.listen,
        drain_timeout=args.drain_timeout,
    )


def _session_id(text: str) -> str:
    if not text.strip() or len(text) > 200 or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a session id; accepted: 1 to 200 characters without spaces"
        )
    return text


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; accepted: 0 to 3600 seconds")
    return value


class Signals:
    """SIGINT and SIGTERM handled on the running loop: ``on_signal(signum)`` is called."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self._on_signal = on_signal
        self._installed: list[int] = []

    def __enter__(self) -> Signals:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._on_signal, signum)
            self._installed.append(signum)
        return self

    def __exit__(self, *exc: object) -> None:
        loop = asyncio.get_running_loop()
        for signum in self._installed:
            loop.remove_signal_handler(signum)
        self._installed.clear()
