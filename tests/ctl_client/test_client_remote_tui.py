"""``mas-ctl tui TARGET`` for real, in tmux, against our agent served by ``mas-ctl serve``:
a turn with a reported delegation, a question and its answer, Ctrl-C cancelling a running
turn's task on the agent, ``/quit``."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
from a2a.types import TaskState
from ctl_client_support import OurAgent, environment, wait_state
from tests.deadlines import COLD_START
from tests.tmux_pane import Tmux

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def test_remote_tui_in_tmux(tmux: Tmux, tmp_path: Path, desk: OurAgent) -> None:
    env = environment(tmp_path)
    tui = shlex.join(
        [
            "env",
            f"MAS_CONTROL_DIR={env['MAS_CONTROL_DIR']}",
            "TERM=xterm-256color",
            sys.executable,
            "-m",
            "mas.ctl.cli",
            "tui",
            desk.url,
            "--context",
            "tui-ctx-1",
            "--transport",
            "grpc",
        ]
    )
    await tmux.run(
        "new-session", "-d", "-s", "tui", "-x", "150", "-y", "32",
        f"{tui}; echo EXITED $?; sleep 60",
    )  # fmt: skip
    shown = await tmux.wait_for(r"ready · context tui-ctx-1 · GRPC", COLD_START)
    assert re.search(r"  desk\s+idle\s+remote", shown)
    assert f"you -> desk: GRPC 127.0.0.1:{desk.grpc_port}" in shown

    await tmux.type("ask helper tea")
    shown = await tmux.wait_for(r"desk: helper said: helper did: tea")
    assert "you: ask helper tea" in shown
    assert "delegated to helper: ok: helper did: tea" in shown

    await tmux.type("book a table")
    shown = await tmux.wait_for(r"\nanswer>")
    assert "desk asks: Which day?" in shown
    await tmux.type("friday")
    await tmux.wait_for(r"desk: Booked for friday \(Which day\?\)")

    desk.release.unlink(missing_ok=True)
    await tmux.type("story")
    await tmux.wait_for(r"(?m)^desk: one +\|")  # held after its first chunk
    await tmux.run("send-keys", "-t", "tui", "C-c")
    shown = await tmux.wait_for(r"turn: interrupted \(task [\w-]+: canceled\)")
    task_id = re.search(r"turn: interrupted \(task ([\w-]+): canceled\)", shown)
    assert task_id is not None
    await wait_state(desk.url, task_id.group(1), TaskState.TASK_STATE_CANCELED)
    await tmux.wait_for(r" ready · context tui-ctx-1")

    await tmux.type("/quit")
    shown = await tmux.wait_for(r"EXITED 0")
    assert "Traceback" not in shown
