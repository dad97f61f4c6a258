"""``mas-ctl tui``: the chat on a curses screen, with the agents and their activity.

::

    mas-ctl tui -f app.yaml [--session S] [--no-control] [--listen HOST]
                [--drain-timeout S] [--infra-ref FILE] [--override ...] [--bind ...]
    mas-ctl tui TARGET [--context ID] [connection and credential options]

With a TARGET instead of ``-f`` the screen shows a conversation with that agent over A2A
(:mod:`mas.ctl.client.remote_tui`); the rest of this docstring is the local form.

The same hosting as ``chat`` and ``run-mas`` (deployed endpoints bind in the background;
the control endpoint is advertised unless ``--no-control``). The screen has a conversation
pane, an agents/routes pane with live delegation, steer and cancel activity, a status line
and the input line. Enter sends the typed line as one turn (lines sent while a turn runs
are queued); when the agent asks for human input the prompt becomes ``answer> ``.
``Ctrl-C`` interrupts a running turn; ``Ctrl-D`` on an empty line, ``/quit`` or SIGTERM
ends. It needs a terminal (use ``mas-ctl chat`` otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import curses
import os
import signal
import sys
from typing import Any

from mas.ctl.client.options import add_client_options, add_context_option, remote_form
from mas.ctl.documents import add_document_options, load_wired
from mas.ctl.session.activity import Activity
from mas.ctl.session.modes import (
    SessionProcess,
    add_session_options,
    new_session_id,
    route_text,
    session_process,
)
from mas.ctl.session.tui_loop import TuiLoop, curses_window
from mas.ctl.session.tui_screen import AgentRow, TuiState
from mas.infra.wiring import Wired


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "tui",
        help="the chat on a curses screen with agents, routes and live activity (-f FILE), or "
        "with a served agent (TARGET)",
    )
    add_document_options(parser, required=False)
    add_session_options(parser)
    add_client_options(parser, optional_target=True)
    add_context_option(parser)
    parser.set_defaults(handler=handle)


class Tui(TuiLoop):
    """One curses session over a started :class:`SessionProcess`."""

    def __init__(self, process: SessionProcess, window: curses.window, session: str) -> None:
        super().__init__(window, TuiState(process.entry, session))
        self.process = process
        host = process.host
        for agent in host.agents:
            self.state.agents[agent] = AgentRow(agent, "here")
        for agent in host.agents:
            for route in process.wired.routes.from_agent(agent):
                self.state.routes.append(route_text(process, route.source, route.target))
                if route.kind == "remote" and route.target not in self.state.agents:
                    self.state.agents[route.target] = AgentRow(route.target, "remote")
                    self.state.remote_busy[route.target] = 0
        bound = process.listeners.bound if process.listeners else ()
        self.state.activity.extend(f"listening {b.agent}: {b.exposure.url}" for b in bound)
        process.hub.subscribe(self.on_activity)

    def on_activity(self, record: Activity) -> None:
        """A delegation, steer or cancel: show it."""
        self.state.record(record)
        self.draw()

    def _status(self) -> str:
        control = self.process.control.address if self.process.control else "off"
        doing = f"{self.state.entry} working" if self.working else "ready"
        return f" {doing} · session {self.state.session} · control {control} · Ctrl-D quits"

    def draw(self) -> None:
        """Refresh the agents' states and redraw."""
        host = self.process.host
        for agent in host.agents:
            mailbox = host.mailbox(agent)
            row = self.state.agents[agent]
            row.working = sum(1 for s in mailbox.sessions() if mailbox.running(s))
            row.queued = mailbox.depth()
        self.state.status = self._status()
        self.screen.draw(self.state)

    def on_signal(self, signum: int) -> None:
        """Ctrl-C interrupts a running turn, else quits; SIGTERM quits."""
        if signum == signal.SIGINT and self.working:
            self.spawn(self.process.cancel(self.state.session))
        else:
            self.stop.set()

    async def turn(self, line: str) -> None:
        """Submit ``line`` to the session and show its events."""
        ticket = self.process.submit(self.state.session, line)
        async for event in ticket.events():
            self.show(event)


async def tui(wired: Wired, args: argparse.Namespace) -> int:
    """Start the process, then the screen."""
    process = session_process(wired, args)
    await process.start()
    try:
        with curses_window() as window:
            await Tui(process, window, args.session or new_session_id("tui")).run()
    finally:
        await process.aclose(drain=False)
    return 0


def handle(args: argparse.Namespace) -> int:
    """Refuse without a terminal; wire the document; run the screen."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()) or not os.environ.get("TERM"):
        print(
            "error: mas-ctl tui needs a terminal (stdin and stdout a tty, TERM set); "
            "use mas-ctl chat for pipes",
            file=sys.stderr,
        )
        return 2
    problem = remote_form(args, "tui")
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.target is not None:
        from mas.ctl.client.remote_tui import remote_tui
        from mas.ctl.client.running import run_client

        return run_client(args, lambda conn: remote_tui(conn, args))
    wired = load_wired(args)
    return asyncio.run(tui(wired, args))
