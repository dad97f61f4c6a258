"""Reading a child process's stdout until it prints the line a test waits for."""

from __future__ import annotations

import selectors
import subprocess
import time


def wait_for_line(process: subprocess.Popen[bytes], prefix: str, within: float, what: str) -> str:
    """The first line ``process`` prints that begins with ``prefix``, stripped.

    Fails (``AssertionError``, with the lines seen before) when the process exits first or
    prints no such line within ``within`` seconds; ``what`` names the process in the message.
    """
    assert process.stdout is not None
    deadline = time.monotonic() + within
    seen: list[str] = []
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=deadline - time.monotonic()):
                line = process.stdout.readline().decode(errors="replace")
                if not line:
                    raise AssertionError(f"{what} exited {process.wait()} before ready: {seen}")
                if line.startswith(prefix):
                    return line.strip()
                seen.append(line.rstrip())
    raise AssertionError(f"{what} printed no {prefix!r} line within {within}s: {seen}")
