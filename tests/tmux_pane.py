"""A real terminal for the TUI tests: tmux, whose pane a test types into and reads.

Needs the ``tmux`` binary (Debian package ``tmux``); a test using the :func:`tmux` fixture is
skipped without it, unless ``MAS_REQUIRE_TMUX=1`` makes its absence a failure (CI sets it).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from tests.session_modes.session_modes_support import STEP

TMUX = shutil.which("tmux")


@dataclass
class Tmux:
    """One private tmux server (its own socket name) with one session running a command."""

    name: str

    async def run(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            "tmux",
            "-L",
            self.name,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(STEP):
            out, err = await process.communicate()
        assert process.returncode == 0, f"tmux {args}: {err.decode()}"
        return out.decode()

    async def screen(self) -> str:
        """What the pane shows now."""
        return await self.run("capture-pane", "-p", "-t", "tui")

    async def type(self, text: str) -> None:
        """Type ``text`` and press Enter."""
        await self.run("send-keys", "-t", "tui", "-l", text)
        await self.run("send-keys", "-t", "tui", "Enter")

    async def wait_for(self, pattern: str, timeout: float = STEP) -> str:
        """Wait (at most ``timeout`` s) until the pane matches the regex ``pattern``."""
        shown = ""
        try:
            async with asyncio.timeout(timeout):
                while not re.search(pattern, shown := await self.screen()):
                    await asyncio.sleep(0.1)
        except TimeoutError:
            raise AssertionError(f"the pane never showed {pattern!r}; it shows:\n{shown}") from None
        return shown


@pytest.fixture
async def tmux() -> AsyncIterator[Tmux]:
    if TMUX is None:
        if os.environ.get("MAS_REQUIRE_TMUX") == "1":
            pytest.fail("tmux is not installed and MAS_REQUIRE_TMUX=1 (apt-get install -y tmux)")
        pytest.skip("tmux is not installed (apt-get install -y tmux); MAS_REQUIRE_TMUX=1 fails")
    server = Tmux(f"mas-tui-{uuid.uuid4().hex[:8]}")
    yield server
    process = await asyncio.create_subprocess_exec(
        "tmux", "-L", server.name, "kill-server", stderr=asyncio.subprocess.DEVNULL
    )
    async with asyncio.timeout(STEP):
        await process.wait()
