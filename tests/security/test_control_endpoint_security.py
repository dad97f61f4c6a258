"""The control endpoint: loopback only, and nothing happens without its token."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import socket
from pathlib import Path

import pytest
from tests.control_lines import exchange

from mas.ctl.session.control import ControlClient, ControlServer, list_endpoints
from mas.runtime.boundary.control import ControlContract, SteerMode, SteerReceipt

pytestmark = [pytest.mark.timeout(30), pytest.mark.integration]

STEP = 10.0


class Recorder(ControlContract):
    """A control contract that records what reached it (the server under test is real)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def steer(self, session_id: str, text: str, mode: SteerMode) -> SteerReceipt:
        self.calls.append(("steer", session_id))
        raise NotImplementedError  # never reached in these tests

    async def cancel_inflight(self, session_id: str) -> bool:
        self.calls.append(("cancel", session_id))
        return True


@pytest.fixture
def control_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "control"
    monkeypatch.setenv("MAS_CONTROL_DIR", str(path))
    return path


@pytest.mark.parametrize("token", [None, "", "guess", 42], ids=["missing", "empty", "wrong", "int"])
async def test_no_operation_runs_without_the_token_and_the_connection_closes(
    control_dir: Path, token: object
) -> None:
    recorder = Recorder()
    async with ControlServer({"agent": recorder}) as server:
        request: dict[str, object] = {"op": "cancel", "agent": "agent", "session": "s1"}
        if token is not None:
            request["token"] = token
        line = json.dumps(request).encode() + b"\n"
        first, second = await exchange(server.address, line, line)
        assert json.loads(first) == {"ok": False, "error": "invalid or missing token"}
        assert second == b""  # hung up after the refusal
        assert recorder.calls == []
        good = {**request, "token": server.token}
        [ok] = await exchange(server.address, json.dumps(good).encode() + b"\n")
        assert json.loads(ok) == {"ok": True, "canceled": True}
        assert recorder.calls == [("cancel", "s1")]


async def test_a_token_of_another_server_is_refused(control_dir: Path) -> None:
    async with (
        ControlServer({"one": Recorder()}) as one,
        ControlServer({"two": Recorder()}, directory=control_dir / "other") as two,
    ):
        assert one.token != two.token
        request = {"op": "ping", "token": two.token}
        [reply] = await exchange(one.address, json.dumps(request).encode() + b"\n")
        assert json.loads(reply)["ok"] is False


def non_loopback_address() -> str | None:
    """This machine's primary non-loopback address (no packet is sent), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: routing only, nothing sent
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


async def test_it_listens_on_loopback_only(
    control_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert "host" not in inspect.signature(ControlServer).parameters  # no way to ask for another
    async with ControlServer({"agent": Recorder()}) as server:
        assert server._server is not None
        bound = [s.getsockname()[0] for s in server._server.sockets]
        assert bound == ["127.0.0.1"]
        [advertised] = list_endpoints(control_dir)
        assert advertised.address.startswith("tcp://127.0.0.1:")
        assert (await ControlClient(advertised).ping())["ok"] is True
        other = non_loopback_address()
        if other is not None:
            port = int(server.address.rsplit(":", 1)[1])
            with pytest.raises(OSError):
                async with asyncio.timeout(STEP):
                    await asyncio.open_connection(other, port)
        token = server.token
    assert token not in caplog.text  # the token lives in the 0600 file only


async def test_a_connection_that_sends_no_line_is_closed(control_dir: Path) -> None:
    async with ControlServer({"agent": Recorder()}, idle_timeout=0.3) as server:
        host, _, port = server.address.removeprefix("tcp://").rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b'{"op": "ping", "tok')  # half a line, then silence
        async with asyncio.timeout(STEP):
            assert await reader.read(-1) == b""  # the server hung up
        writer.close()


async def test_connections_past_the_limit_are_refused(control_dir: Path) -> None:
    async with ControlServer({"agent": Recorder()}, max_connections=2) as server:
        host, _, port = server.address.removeprefix("tcp://").rpartition(":")
        held = []
        for _ in range(2):  # two open connections, each known to the server (it answered)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(json.dumps({"op": "ping", "token": server.token}).encode() + b"\n")
            async with asyncio.timeout(STEP):
                assert json.loads(await reader.readline())["ok"] is True
            held.append(writer)
        [refused] = await exchange(server.address, b'{"op": "ping"}\n')
        assert json.loads(refused) == {"ok": False, "error": "more than 2 connections"}
        for writer in held:
            writer.close()


async def test_a_client_that_reads_no_reply_is_dropped_and_frees_its_slot(
    control_dir: Path,
) -> None:
    # 300 agents with long ids: each ping reply is about 60 KB.
    agents = {f"agent-{n:03d}-" + "a" * 190: Recorder() for n in range(300)}
    async with ControlServer(agents, idle_timeout=0.5, max_connections=1) as server:
        host, _, port = server.address.removeprefix("tcp://").rpartition(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.transport.pause_reading()  # reads nothing: the replies pile up on the server
        ping = json.dumps({"op": "ping", "token": server.token}).encode() + b"\n"
        writer.write(ping * 400)  # 400 requests: 24 MB of replies
        [refused] = await exchange(server.address, b'{"op": "ping"}\n')
        assert json.loads(refused) == {"ok": False, "error": "more than 1 connections"}
        deadline = asyncio.get_running_loop().time() + STEP
        while True:  # dropped after idle_timeout with its replies unread: the slot is free
            [reply] = await exchange(server.address, ping)
            if json.loads(reply)["ok"]:
                break
            assert asyncio.get_running_loop().time() < deadline, reply
            await asyncio.sleep(0.05)
        writer.transport.resume_reading()
        got = b""
        with contextlib.suppress(ConnectionError):
            async with asyncio.timeout(STEP):
                got = await reader.read(-1)
        writer.close()
    assert got.count(b"\n") < 400  # it never got every reply: the server dropped them
