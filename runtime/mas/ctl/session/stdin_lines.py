"""The typed lines of ``mas-ctl chat`` (local or with a TARGET): prompts, quit words, stdin.

:class:`StdinLines` reads stdin on a daemon thread so the event loop never blocks on it;
:func:`next_line` waits for the next line or for the chat to stop, whichever comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading

PROMPT, ANSWER_PROMPT = "you> ", "answer> "
QUIT_WORDS = ("/quit", "/exit")


class StdinLines:
    """Lines of stdin, read by a daemon thread so the event loop never blocks on them.

    ``get()`` returns the next line without its newline, or ``None`` at end of input.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        thread = threading.Thread(target=self._read, name="chat-stdin", daemon=True)
        thread.start()

    def _read(self) -> None:
        try:
            for line in sys.stdin:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, line.rstrip("\r\n"))
        except (OSError, ValueError):
            pass
        finally:
            # a closed loop raises RuntimeError: the chat is over anyway
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._queue.put_nowait, None)

    async def get(self) -> str | None:
        """The next line, or ``None`` at end of input."""
        return await self._queue.get()


async def next_line(lines: StdinLines, stop: asyncio.Event) -> str | None:
    """The next line typed, or ``None`` at end of input or once ``stop`` is set."""
    reader = asyncio.ensure_future(lines.get())
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (reader, stopper):
            if not task.done():
                task.cancel()
        await asyncio.gather(reader, stopper, return_exceptions=True)
    return reader.result() if reader in done and not reader.cancelled() else None
