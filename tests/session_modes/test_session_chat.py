"""``mas-ctl chat`` driven through a pseudo-terminal, as a person types: delegation shown
live, a HITL question and its answer, a control-protocol steer mid-stream, Ctrl-C
interrupting a turn, the deployed endpoint answering A2A in the background, Ctrl-D ending
the chat."""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect
import pytest
from session_modes_support import START, STEP, ask_a2a, chat_app, environment, mas_ctl
from tests.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def test_chat_through_a_pty_with_delegation_hitl_cancel_and_a2a(
    tmp_path: Path, control_dir: Path
) -> None:
    port = free_port()
    app = chat_app(tmp_path, port)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "mas.ctl.cli", "chat", "-f", str(app), "--session", "talk"],
        env=environment(control_dir),
        encoding="utf-8",
        timeout=STEP,
        dimensions=(40, 200),
    )
    try:
        child.expect_exact("· chat with desk, session talk;", timeout=START)
        assert "· hosting desk (entry), helper" in child.before
        assert f"· listening desk: A2A http://127.0.0.1:{port} (JSON-RPC)" in child.before
        child.expect_exact("you> ")

        # Another client interrogates the deployed agent while the chat waits for input.
        assert await ask_a2a(f"http://127.0.0.1:{port}", "who is there") == "heard: who is there"

        child.sendline("ask helper tea")
        child.expect_exact("· desk -> helper: working on 'tea'\r\n")
        child.expect_exact("· helper -> desk: done\r\n")
        child.expect_exact("desk> helper said: helper did: tea\r\n")
        child.expect_exact("you> ")

        child.sendline("book a table")
        child.expect_exact("desk> Sure.\r\n")
        child.expect_exact("· desk asks: Which day?\r\n")
        child.expect_exact("answer> ")
        child.sendline("friday")
        child.expect_exact("desk> Booked for friday (Which day?)\r\n")
        child.expect_exact("you> ")

        # A steer over the control protocol shows up mid-stream, on its own line.
        child.sendline("story")
        child.expect_exact("desk> one ")
        steer = ("steer", "--agent", "desk", "--session", "talk", "--mode", "preempt", "left")
        code, out, err = await mas_ctl(control_dir, *steer)
        assert code == 0 and out.startswith("preempted: turn steer-"), err
        child.expect_exact(
            "· steer preempt on desk/talk: 'left' (preempted: the prefix is kept, the rest "
            "replaced)\r\n"
        )
        child.expect_exact("desk> heard: left\r\n")
        child.expect_exact("you> ")

        child.sendline("story")
        child.expect_exact("desk> one ")
        child.sendintr()  # Ctrl-C: cancel_inflight on the running turn
        child.expect_exact("· turn canceled: turn '")
        assert "six" not in child.before
        child.expect_exact("you> ")

        child.sendeof()  # Ctrl-D at the prompt ends the chat
        child.expect_exact("· chat ended\r\n")
        child.expect(pexpect.EOF)
        assert child.before == ""  # nothing after it, not even a prompt
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert not list(control_dir.glob("*.json"))  # the control endpoint went with it
