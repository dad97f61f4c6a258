"""The screen of ``mas-ctl tui``: what it shows (:class:`TuiState`) and how (:class:`Screen`).

Layout (``W`` x ``H`` cells)::

    +-- conversation ------------------------+-- agents ------------------+
    | you: research A2A                      | concierge   working  q=0   |
    | concierge: Here is what I found: ...   | researcher  idle     q=0   |
    |                                        |-- routes ------------------|
    |                                        | concierge -> researcher .. |
    |                                        |-- activity ----------------|
    |                                        | concierge -> researcher .. |
    +----------------------------------------+----------------------------+
    | status: concierge working · session chat-1a2b · control tcp://...     |
    | you> _                                                                 |

:class:`TuiState` is plain data (tested without a terminal); :class:`Screen` draws it with
:mod:`curses` and never raises for a screen too small (it draws what fits).
"""

from __future__ import annotations

import contextlib
import curses
import textwrap
from collections import deque
from dataclasses import dataclass, field

from mas.ctl.session.activity import Activity, DelegationFinished, DelegationStarted
from mas.ctl.session.transcript import activity_line

MAX_LINES = 2000


@dataclass
class AgentRow:
    """One row of the agents pane."""

    agent: str
    where: str  # "here" or "remote"
    working: int = 0
    queued: int = 0


@dataclass
class TuiState:
    """Everything the screen shows."""

    entry: str
    session: str
    agents: dict[str, AgentRow] = field(default_factory=dict)
    routes: list[str] = field(default_factory=list)
    conversation: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LINES))
    activity: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    status: str = ""
    prompt: str = "you> "
    typed: str = ""
    remote_busy: dict[str, int] = field(default_factory=dict)

    def say(self, who: str, text: str) -> None:
        """Start a conversation line."""
        self.conversation.append(f"{who}: {text}")

    def stream(self, text: str) -> None:
        """Append streamed text to the last conversation line (newlines start new ones)."""
        first, *rest = text.split("\n")
        if self.conversation:
            self.conversation[-1] += first
        else:
            self.conversation.append(first)
        self.conversation.extend(rest)

    def record(self, record: Activity) -> None:
        """An activity record: into the activity list, and remote peers' busy counts."""
        self.activity.append(activity_line(record))
        if isinstance(record, DelegationStarted) and record.target in self.remote_busy:
            self.remote_busy[record.target] += 1
        if isinstance(record, DelegationFinished) and record.target in self.remote_busy:
            self.remote_busy[record.target] = max(0, self.remote_busy[record.target] - 1)

    def agent_lines(self) -> list[str]:
        """The agents pane rows."""
        out = []
        for row in self.agents.values():
            busy = row.working or self.remote_busy.get(row.agent, 0)
            state = "working" if busy else "idle"
            mark = "*" if busy else " "
            out.append(f"{mark} {row.agent:<14} {state:<8} {row.where:<6} q={row.queued}")
        return out


def _wrap(lines: list[str], width: int) -> list[str]:
    out: list[str] = []
    for line in lines:
        wrapped = textwrap.wrap(line, width, replace_whitespace=False, drop_whitespace=False)
        out.extend(wrapped or [""])
    return out


class Screen:
    """Draws a :class:`TuiState` on a curses window."""

    def __init__(self, window: curses.window) -> None:
        self.window = window

    def _put(self, y: int, x: int, text: str, width: int, attr: int = 0) -> None:
        if width <= 0:
            return
        # the bottom-right cell, or a screen that shrank meanwhile, raises curses.error
        with contextlib.suppress(curses.error):
            self.window.addnstr(y, x, text.ljust(width)[:width], width, attr)

    def draw(self, state: TuiState) -> None:
        """Redraw everything."""
        height, width = self.window.getmaxyx()
        self.window.erase()
        if height < 5 or width < 20:
            self._put(0, 0, "mas-ctl tui: the terminal is too small", width)
            self.window.refresh()
            return
        side = min(48, max(24, width // 3))
        main = width - side - 1
        body = height - 3
        self._put(0, 0, "-- conversation ", main, curses.A_BOLD)
        conversation = _wrap(list(state.conversation), main)[-(body - 1) :]
        for row, line in enumerate(conversation, start=1):
            self._put(row, 0, line, main)
        pane: list[tuple[str, int]] = [("-- agents ", curses.A_BOLD)]
        pane += [(line, 0) for line in state.agent_lines()]
        pane.append(("-- routes ", curses.A_BOLD))
        pane += [(line, 0) for line in _wrap(state.routes, side)]
        pane.append(("-- activity ", curses.A_BOLD))
        room = body - len(pane)
        recent = _wrap(list(state.activity), side)
        pane += [(line, 0) for line in (recent[-room:] if room > 0 else [])]
        for row, (line, attr) in enumerate(pane[:body]):
            self._put(row, main + 1, line, side, attr)
        for row in range(body):
            self._put(row, main, "|", 1)
        self._put(height - 2, 0, state.status, width, curses.A_REVERSE)
        typed = state.prompt + state.typed
        self._put(height - 1, 0, typed[-(width - 1) :], width - 1)
        with contextlib.suppress(curses.error):
            self.window.move(height - 1, min(len(typed), width - 2))
        self.window.refresh()
