"""``mas-ctl tui`` for real, in tmux: keys are typed, the pane is captured, and the test
asserts on what a person sees (conversation, agents/routes pane, activity, status line).

Needs the ``tmux`` binary (Debian package ``tmux``); skipped without it, unless
``MAS_REQUIRE_TMUX=1`` makes its absence a failure (CI sets it)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
from session_modes_support import START, chat_app, mas_ctl
from tests.ports import free_port
from tests.tmux_pane import Tmux

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


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
