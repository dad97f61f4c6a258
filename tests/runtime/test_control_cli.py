"""mas-ctl steer, cancel and ps as real processes against a control endpoint in this one."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from runtime_support import DEADLINE, collect, ended, scripted, wired

from mas.ctl.session.control import ControlServer
from mas.ctl.session.host import RuntimeHost
from mas.runtime.turns import TurnInput

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]  # cold mas-ctl processes


@pytest.fixture
async def served(control_dir: Path, tmp_path: Path) -> AsyncIterator[RuntimeHost]:
    # After "one " the story holds until a file that never appears: a steer or cancel from a
    # cold mas-ctl process always lands mid-generation, however slow the machine is.
    held = {"match": "^story", "chunks": ["one ", "two "], "release_file": str(tmp_path / "go")}
    host = RuntimeHost.build(
        wired({"talker": {"model": scripted(held, default={"reply": "heard: {input}"})}}),
        ["talker"],
    )
    async with ControlServer({"talker": host.mailbox("talker")}):
        yield host
    await host.aclose()


async def mas_ctl(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mas.ctl.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_ps_lists_the_endpoint_without_its_token(served: RuntimeHost) -> None:
    code, out, err = await mas_ctl("ps")
    assert code == 0, err
    header, row = out.strip().splitlines()
    assert header.split() == ["AGENT", "PID", "ADDRESS"]
    agent, pid, address = row.split()
    assert (agent, int(pid)) == ("talker", os.getpid()) and address.startswith("tcp://127.0.0.1:")
    assert "token" not in out


async def test_steer_preempt_and_cancel_from_the_command_line(served: RuntimeHost) -> None:
    mailbox = served.mailbox("talker")
    ticket = mailbox.submit(TurnInput("s1", "t1", "story"))
    stream = ticket.events()
    async with asyncio.timeout(DEADLINE):
        await anext(stream)  # "one " is out; the model is between chunks
    code, out, err = await mas_ctl(
        "steer", "--agent", "talker", "--session", "s1", "--mode", "preempt", "--follow", "left"
    )
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("preempted: turn steer-") and lines[0].endswith("of session 's1'")
    assert lines[1] == "one heard: left"
    assert ended(await collect(stream)).text == "one heard: left"

    second = mailbox.submit(TurnInput("s1", "t2", "story"))
    stream = second.events()
    async with asyncio.timeout(DEADLINE):
        await anext(stream)
    code, out, _ = await mas_ctl("cancel", "--agent", "talker", "--session", "s1")
    assert (code, out.strip()) == (0, "canceled the running turn of session 's1' of agent 'talker'")
    assert ended(await collect(stream)).status == "canceled"
    code, out, _ = await mas_ctl("cancel", "--agent", "talker", "--session", "s1")
    assert out.strip() == "no turn was running in session 's1' of agent 'talker'"


async def test_an_agent_without_an_endpoint_is_one_clear_line(served: RuntimeHost) -> None:
    code, out, err = await mas_ctl("cancel", "--agent", "ghost", "--session", "s")
    assert code == 1 and out == ""
    assert err.startswith(
        "error: no running process advertises a control endpoint for agent 'ghost'"
    )
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, _, err = await mas_ctl(
        "steer", "--agent", "talker", "--session", "s", "--mode", "up", "x"
    )
    assert code == 2 and "invalid choice: 'up'" in err
