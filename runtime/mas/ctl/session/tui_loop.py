"""The loop under ``mas-ctl tui``'s screen: the input line, resizes and the redraw tick.

:class:`TuiLoop` reads every pending key (Enter sends the typed line to :attr:`lines`,
``/quit`` or Ctrl-D on an empty line ends), redraws on SIGWINCH and every :data:`TICK`, and
runs :meth:`converse` until :attr:`stop` is set. Whatever serves the agent (a hosted agency
in :mod:`mas.ctl.commands.tui`, an agent served anywhere in :mod:`mas.ctl.client.remote_tui`)
is a subclass: it draws the status line, runs each line as a turn and decides what a
signal does. :func:`curses_window` sets the terminal up for the screen and back after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import curses
import os
import signal
import sys
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Iterator
from typing import Any

from mas.ctl.session.modes import Signals
from mas.ctl.session.stdin_lines import QUIT_WORDS
from mas.ctl.session.tui_screen import Screen, TuiState
from mas.runtime.turns import ArtifactEmitted, TextDelta, TurnEnded, TurnEvent

TICK = 0.25  # how often the agents pane re-reads the mailboxes


class TuiLoop(ABC):
    """One curses session showing ``state`` in ``window``."""

    def __init__(self, window: curses.window, state: TuiState) -> None:
        self.screen = Screen(window)
        self.window = window
        self.state = state
        self.lines: asyncio.Queue[str] = asyncio.Queue()
        self.stop = asyncio.Event()
        self.working = False
        self._tasks: set[asyncio.Task[Any]] = set()

    @abstractmethod
    def draw(self) -> None:
        """Refresh the state and redraw."""

    @abstractmethod
    def on_signal(self, signum: int) -> None:
        """SIGINT or SIGTERM arrived."""

    @abstractmethod
    async def turn(self, line: str) -> None:
        """Run ``line`` as one turn, showing its events (:meth:`show`)."""

    async def converse(self) -> None:
        """Run the typed lines as turns, one after the other."""
        while True:
            line = await self.lines.get()
            self.state.say("you", line)
            self.working = True
            self.state.say(self.state.entry, "")
            self.draw()
            await self.turn(line)
            self.working = False
            self.draw()

    def show(self, event: TurnEvent) -> None:
        """One event of the running turn: its text, an artifact, its end; then redraw."""
        if isinstance(event, TextDelta):
            self.state.stream(event.text)
        elif isinstance(event, ArtifactEmitted):
            self.state.say("artifact", f"{event.name} ({event.kind})")
        elif isinstance(event, TurnEnded):
            self._ended(event)
        self.draw()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` in a task the TUI keeps until it ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_key(self) -> None:
        """Read every pending key."""
        while True:
            try:
                key = self.window.get_wch()
            except curses.error:
                return
            self._key(key)

    def _key(self, key: str | int) -> None:
        if key in ("\n", "\r", curses.KEY_ENTER):
            line, self.state.typed = self.state.typed, ""
            if line.strip() in QUIT_WORDS:
                self.stop.set()
            elif line.strip():
                self.lines.put_nowait(line)
        elif key in (curses.KEY_BACKSPACE, "\x7f", "\b"):
            self.state.typed = self.state.typed[:-1]
        elif key == "\x04":
            if not self.state.typed:
                self.stop.set()
        elif key == curses.KEY_RESIZE:
            pass
        elif isinstance(key, str) and key.isprintable():
            self.state.typed += key
        self.draw()

    def on_resize(self) -> None:
        """The terminal changed size: tell curses, then redraw."""
        size = os.get_terminal_size(sys.stdout.fileno())
        with contextlib.suppress(curses.error):
            curses.resizeterm(size.lines, size.columns)
        self.draw()

    def _ended(self, ended: TurnEnded) -> None:
        if ended.status == "input_required":
            self.state.say(f"{self.state.entry} asks", ended.text)
            self.state.prompt = "answer> "
            return
        self.state.prompt = "you> "
        if ended.status != "completed":
            self.state.say("turn", f"{ended.status}: {ended.message}")

    async def run(self) -> None:
        """Until ``/quit``, Ctrl-D or a signal."""
        loop = asyncio.get_running_loop()
        loop.add_reader(sys.stdin.fileno(), self.on_key)
        loop.add_signal_handler(signal.SIGWINCH, self.on_resize)
        worker = loop.create_task(self.converse())
        try:
            with Signals(self.on_signal):
                self.on_resize()  # a resize before the handler was in place
                while not self.stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.stop.wait(), TICK)
                    self.draw()
        finally:
            loop.remove_signal_handler(signal.SIGWINCH)
            loop.remove_reader(sys.stdin.fileno())
            worker.cancel()
            await asyncio.gather(worker, *self._tasks, return_exceptions=True)


@contextlib.contextmanager
def curses_window() -> Iterator[curses.window]:
    """The terminal as a curses window (no echo, keys unbuffered, reads never block); the
    terminal is restored on leaving, whatever ends the screen."""
    window = curses.initscr()
    try:
        curses.noecho()
        curses.cbreak()
        window.keypad(True)
        window.nodelay(True)
        with contextlib.suppress(curses.error):
            curses.curs_set(1)
        yield window
    finally:
        window.keypad(False)
        curses.nocbreak()
        curses.echo()
        curses.endwin()
