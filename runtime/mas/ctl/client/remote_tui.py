"""``mas-ctl tui TARGET``: the TUI's screen, with an agent served anywhere.

The local TUI's screen and keys (:class:`~mas.ctl.session.tui_loop.TuiLoop`), over a
:class:`~mas.ctl.client.conversation.RemoteConversation` instead of a hosted agency: the
conversation pane shows the turns, the agents pane the remote agent (working or idle), the
routes pane the interface in use, the activity pane the delegations and tool calls the
agent reports. ``Ctrl-C`` cancels the running turn (``CancelTask``); ``Ctrl-D`` on an empty
line, ``/quit`` or SIGTERM ends.
"""

from __future__ import annotations

import argparse
import asyncio
import curses
import signal

from mas.ctl.client.connection import Connection
from mas.ctl.client.conversation import RemoteConversation
from mas.ctl.client.errors import ClientError
from mas.ctl.client.output import one_line
from mas.ctl.client.remote_chat import escaped
from mas.ctl.client.turn_output import reported_line
from mas.ctl.session.tui_loop import TuiLoop, curses_window
from mas.ctl.session.tui_screen import AgentRow, TuiState
from mas.runtime.turns import Delegated, TurnEvent


class RemoteTui(TuiLoop):
    """The TUI of one remote conversation."""

    def __init__(self, talk: RemoteConversation, window: curses.window) -> None:
        name = one_line(talk.conn.name, 40)
        super().__init__(window, TuiState(name, talk.context_id))
        self.talk = talk
        self._turn: asyncio.Task[None] | None = None
        self.state.agents[name] = AgentRow(name, "remote")
        conn = talk.conn
        self.state.routes.append(f"you -> {name}: {conn.binding} {one_line(conn.interface.url)}")
        self.state.activity.append(f"connected to {conn.url}, context {talk.context_id}")
        if talk.waiting:
            self.state.say(f"{name} waits for an answer", f"task {talk.waiting}")
            self.state.prompt = "answer> "

    def draw(self) -> None:
        """Redraw, the agent's row showing whether it works on a turn of ours."""
        self.state.agents[self.state.entry].working = 1 if self.working else 0
        doing = f"{self.state.entry} working" if self.working else "ready"
        self.state.status = (
            f" {doing} · context {self.state.session} · {self.talk.conn.binding} · Ctrl-D quits"
        )
        self.screen.draw(self.state)

    def on_signal(self, signum: int) -> None:
        """Ctrl-C cancels a running turn, else quits; SIGTERM quits."""
        if signum == signal.SIGINT and self._turn is not None:
            self._turn.cancel()
        else:
            self.stop.set()

    async def turn(self, line: str) -> None:
        """Run ``line`` as a turn of the conversation; Ctrl-C cancels it (``CancelTask``)."""
        self._turn = asyncio.get_running_loop().create_task(self._run_turn(line))
        [result] = await asyncio.gather(self._turn, return_exceptions=True)
        self._turn = None
        if isinstance(result, asyncio.CancelledError):
            ids = self.talk.last
            outcomes = await self.talk.interrupt(ids) if ids is not None else []
            done = "; ".join(f"task {t}: {o}" for t, o in outcomes) or "no task was running"
            self.state.say("turn", f"interrupted ({done})")
            self.state.prompt = "you> "
        elif isinstance(result, ClientError):
            self.state.say("error", str(result))
            self.state.prompt = "you> "
        elif isinstance(result, BaseException):
            raise result

    async def _run_turn(self, line: str) -> None:
        async for raw in self.talk.turn(line):
            self.show(escaped(raw))

    def show(self, event: TurnEvent) -> None:
        """As the local TUI, and the delegations and tool calls the agent reports."""
        if isinstance(event, Delegated):
            self.state.activity.append(reported_line(event))
            self.draw()
        else:
            super().show(event)


async def remote_tui(conn: Connection, args: argparse.Namespace) -> int:
    """Open the screen on a conversation with ``conn``'s agent, until the person quits."""
    talk = RemoteConversation(conn, args.context_id)
    await talk.resume()
    with curses_window() as window:
        await RemoteTui(talk, window).run()
    return 0
