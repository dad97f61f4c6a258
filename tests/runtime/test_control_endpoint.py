"""The control endpoint: token, advertised files (0600), stale entries, steer and cancel."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from runtime_support import DEADLINE, collect, ended, scripted, wired

from mas.ctl.session.control import (
    ControlClient,
    ControlEndpoint,
    ControlServer,
    control_directory,
    list_endpoints,
)
from mas.ctl.session.host import RuntimeHost
from mas.runtime.errors import ControlError
from mas.runtime.turns import TextDelta, TurnInput

pytestmark = [pytest.mark.timeout(30), pytest.mark.integration]


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[RuntimeHost]:
    # After "one " the story holds until a file that never appears: a steer or cancel always
    # lands mid-generation, however slow the machine is.
    held = {"match": "^story", "chunks": ["one ", "two "], "release_file": str(tmp_path / "go")}
    built = RuntimeHost.build(
        wired({"talker": {"model": scripted(held, default={"reply": "heard: {input}"})}}),
        ["talker"],
    )
    yield built
    await built.aclose()


async def raw(address: str, line: bytes) -> dict[str, object]:
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(line)
    await writer.drain()
    async with asyncio.timeout(DEADLINE):
        reply = json.loads(await reader.readline())
    writer.close()
    await writer.wait_closed()
    assert isinstance(reply, dict)
    return reply


def test_the_directory_follows_the_environment(tmp_path: Path) -> None:
    assert control_directory({"MAS_CONTROL_DIR": str(tmp_path)}) == tmp_path
    assert control_directory({"XDG_STATE_HOME": "/st"}) == Path("/st/maslab/control")
    assert control_directory({}) == Path.home() / ".local/state/maslab/control"


async def test_files_are_private_and_removed_on_close(host: RuntimeHost, control_dir: Path) -> None:
    server = ControlServer({"talker": host.mailbox("talker")})
    await server.start()
    try:
        [path] = list(control_dir.iterdir())
        assert path.name == f"talker.{os.getpid()}.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(control_dir.stat().st_mode) == 0o700
        record = json.loads(path.read_text())
        assert record == {
            "agent": "talker",
            "pid": os.getpid(),
            "address": server.address,
            "token": server.token,
        }
        assert server.address.startswith("tcp://127.0.0.1:")
        [endpoint] = list_endpoints()
        assert (endpoint.agent, endpoint.pid) == ("talker", os.getpid())
    finally:
        await server.aclose()
    assert list(control_dir.iterdir()) == []


async def test_a_request_without_the_right_token_is_refused(
    host: RuntimeHost, control_dir: Path
) -> None:
    async with ControlServer({"talker": host.mailbox("talker")}) as server:
        no_token = await raw(server.address, b'{"op": "ping"}\n')
        assert no_token == {"ok": False, "error": "invalid or missing token"}
        wrong = await raw(server.address, b'{"op": "ping", "token": "guess"}\n')
        assert wrong == {"ok": False, "error": "invalid or missing token"}
        garbage = await raw(server.address, b"not json\n")
        assert garbage == {"ok": False, "error": "the request is not a JSON object"}
        # still serving, and the right token works
        ok = await raw(
            server.address, json.dumps({"op": "ping", "token": server.token}).encode() + b"\n"
        )
        assert ok == {"ok": True, "pid": os.getpid(), "agents": ["talker"]}


async def test_bad_requests_name_the_field_and_the_accepted_values(
    host: RuntimeHost, control_dir: Path
) -> None:
    async with ControlServer({"talker": host.mailbox("talker")}):
        client = ControlClient.from_directory("talker")
        with pytest.raises(
            ControlError, match="mode 'sideways' is not accepted; accepted: preempt, replace, wait"
        ):
            await client.steer("s", "x", "sideways")
        with pytest.raises(ControlError, match="session '' is not accepted; a non-empty string"):
            await client.cancel("")
        with pytest.raises(ControlError, match="agent 'ghost' is not served here; agents: talker"):
            await client.request({"op": "cancel", "agent": "ghost", "session": "s"})
        with pytest.raises(ControlError, match="op 'reboot' is not accepted"):
            await client.request({"op": "reboot"})


async def test_steer_and_cancel_through_the_client(host: RuntimeHost, control_dir: Path) -> None:
    mailbox = host.mailbox("talker")
    async with ControlServer({"talker": mailbox}):
        client = ControlClient.from_directory("talker")
        assert await client.cancel("s") is False  # nothing running
        ticket = mailbox.submit(TurnInput("s", "t1", "story"))
        stream = ticket.events()
        async with asyncio.timeout(DEADLINE):
            first = await anext(stream)
        assert isinstance(first, TextDelta) and first.text == "one "
        reply = await client.steer("s", "turn around", "preempt", follow=True, timeout=DEADLINE)
        assert reply["applied"] == "preempted"
        assert (reply["status"], reply["text"]) == ("completed", "one heard: turn around")
        assert ended([first, *await collect(stream)]).text == "one heard: turn around"

        second = mailbox.submit(TurnInput("s", "t2", "story again"))
        stream = second.events()
        async with asyncio.timeout(DEADLINE):
            await anext(stream)
        assert await client.cancel("s") is True
        assert ended(await collect(stream)).status == "canceled"


async def test_a_unix_socket_endpoint(host: RuntimeHost, control_dir: Path, tmp_path: Path) -> None:
    socket_path = tmp_path / "ctl.sock"
    async with ControlServer({"talker": host.mailbox("talker")}, unix_socket=socket_path) as server:
        assert server.address == f"unix://{socket_path}"
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
        reply = await ControlClient.from_directory("talker").steer(
            "u", "hello", "wait", follow=True, timeout=DEADLINE
        )
        assert (reply["applied"], reply["text"]) == ("queued", "heard: hello")
    assert not socket_path.exists()


def gone_pid() -> int:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
        timeout=DEADLINE,
    )
    return int(child.stdout)


def test_list_endpoints_drops_files_of_gone_processes(control_dir: Path) -> None:
    control_dir.mkdir(mode=0o700)
    stale = control_dir / "old.1.json"
    stale.write_text(
        json.dumps(
            {"agent": "old", "pid": gone_pid(), "address": "tcp://127.0.0.1:1", "token": "t"}
        )
    )
    live = control_dir / f"live.{os.getpid()}.json"
    live.write_text(
        json.dumps(
            {"agent": "live", "pid": os.getpid(), "address": "tcp://127.0.0.1:1", "token": "t"}
        )
    )
    (control_dir / "broken.json").write_text("{")
    assert [e.agent for e in list_endpoints()] == ["live"]
    assert not stale.exists() and live.exists()


async def test_no_endpoint_and_a_dead_endpoint_are_clear_errors(control_dir: Path) -> None:
    with pytest.raises(
        ControlError, match="no running process advertises a control endpoint for agent 'x'"
    ):
        ControlClient.from_directory("x")
    dead = ControlClient(ControlEndpoint("x", os.getpid(), "tcp://127.0.0.1:1", "t", control_dir))
    with pytest.raises(
        ControlError,
        match=r"the control endpoint of agent 'x' at tcp://127.0.0.1:1 does not answer",
    ):
        await dead.ping()
