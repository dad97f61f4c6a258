"""``mas-ctl tui`` for real, in tmux: keys are typed, the pane is captured, and the test
asserts on what a person sees (conversation, agents/routes pane, activity, status line).

Needs the ``tmux`` binary (Debian package ``tmux``); skipped without it, unless
``MAS_REQUIRE_TMUX=1`` makes its absence a failure (CI sets it)."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from session_modes_support import START, STEP, chat_app, mas_ctl
from tests.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

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


async def test_tui_in_tmux(tmux: Tmux, tmp_path: Path, control_dir: Path) -> None:
    port = free_port()
    app = chat_app(tmp_path, port)
    tui = shlex.join(
        [
            "env",
            f"MAS_CONTROL_DIR={control_dir}",
            "TERM=xterm-256color",
            sys.executable,
            "-m",
            "mas.ctl.cli",
            "tui",
            "-f",
            str(app),
            "--session",
            "t1",
        ]
    )
    await tmux.run(
        "new-session",
        "-d",
        "-s",
        "tui",
        "-x",
        "150",
        "-y",
        "32",
        f"{tui}; echo EXITED $?; sleep 60",
    )
    shown = await tmux.wait_for(r"ready · session t1 · control tcp://127\.0\.0\.1:\d+", START)
    assert "-- conversation" in shown and "-- agents" in shown and "-- routes" in shown
    assert re.search(r"  desk\s+idle\s+here\s+q=0", shown)
    assert "desk -> helper: in-process (local)" in shown
    assert f"listening desk: http://127.0.0.1:{port}" in shown

    await tmux.type("ask helper tea")
    shown = await tmux.wait_for(r"desk: helper said: helper did: tea")
    assert "you: ask helper tea" in shown
    assert "desk -> helper: working on 'tea'" in shown and "helper -> desk: done" in shown

    await tmux.type("story")
    shown = await tmux.wait_for(r"desk: one ")
    assert re.search(r"\* desk\s+working\s+here", shown)
    assert re.search(r" desk working · session t1", shown)
    code, out, err = await mas_ctl(
        control_dir, "steer", "--agent", "desk", "--session", "t1", "--mode", "preempt", "left"
    )
    assert code == 0 and out.startswith("preempted: "), err
    shown = await tmux.wait_for(r"desk: one .*heard: left")
    assert "steer preempt on desk/t1: 'left'" in shown and "six" not in shown
    await tmux.wait_for(r"  desk\s+idle")

    await tmux.type("book a table")
    shown = await tmux.wait_for(r"\nanswer>")  # capture-pane trims trailing spaces
    assert "desk: Sure." in shown and "desk asks: Which day?" in shown
    await tmux.type("friday")
    await tmux.wait_for(r"desk: Booked for friday \(Which day\?\)")

    await tmux.type("story")
    await tmux.wait_for(r"(?m)^desk: one( two| three| four)* +\|")  # still streaming
    await tmux.run("send-keys", "-t", "tui", "C-c")  # interrupts the running turn
    shown = await tmux.wait_for(r"turn: canceled: turn 'turn-\w+' was canceled while it ran")
    assert "cancel on desk/t1" not in shown  # Ctrl-C is local, not the control protocol
    await tmux.wait_for(r" ready · session t1")

    await tmux.type("/quit")
    shown = await tmux.wait_for(r"EXITED 0")
    assert "Traceback" not in shown
