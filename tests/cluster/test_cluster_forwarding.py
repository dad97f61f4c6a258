"""The loopback listeners of an APP/AGENT target, against a real TCP server standing in for the pod.

``open_stream`` here connects a plain socket to that server: the contract mas.ctl.cluster
fulfils with a port-forward stream through the API server (that path runs on the node tier,
tests/node/test_node_cluster_target.py).
"""

from __future__ import annotations

import asyncio
import logging
import select
import socket
import struct
import threading
from collections.abc import AsyncIterator, Callable

import pytest

from mas.ctl.forwarding import CHUNK, Forwarder

pytestmark = pytest.mark.integration

DEADLINE = 30.0


class Remote:
    """A TCP server that answers each line with ``<connection number>:<line>``."""

    def __init__(self) -> None:
        self.connections = 0
        self.open = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        number = self.connections
        try:
            while line := await reader.readline():
                writer.write(f"{number}:".encode() + line)
                await writer.drain()
        finally:
            self.open -= 1
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def remote() -> AsyncIterator[tuple[Remote, int]]:
    server = Remote()
    port = await server.start()
    yield server, port
    await server.stop()


def connector(port: int, opened: list[int]) -> Callable[[int], socket.socket]:
    def open_stream(remote_port: int) -> socket.socket:
        opened.append(remote_port)
        return socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)

    return open_stream


async def exchange(local: int, line: str) -> tuple[str, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", local)
    writer.write(line.encode() + b"\n")
    await writer.drain()
    async with asyncio.timeout(DEADLINE):
        answer = (await reader.readline()).decode().strip()
    return answer, writer


async def test_each_connection_gets_a_stream_of_its_own(remote: tuple[Remote, int]) -> None:
    server, port = remote
    opened: list[int] = []
    forwarder = Forwarder(connector(port, opened), "the test server")
    local = await forwarder.start([8401, 8411])
    try:
        assert set(local) == {8401, 8411}
        assert local[8401] != local[8411]
        first, w1 = await exchange(local[8401], "hello")
        second, w2 = await exchange(local[8411], "again")
        assert (first, second) == ("1:hello", "2:again")
        assert opened == [8401, 8411]
        assert (server.connections, server.open) == (2, 2)
        for writer in (w1, w2):
            writer.close()
            await writer.wait_closed()
    finally:
        await forwarder.close()


async def test_close_ends_every_open_connection(
    remote: tuple[Remote, int], caplog: pytest.LogCaptureFixture
) -> None:
    server, port = remote
    forwarder = Forwarder(connector(port, []), "the test server")
    local = await forwarder.start([8401])
    answer, writer = await exchange(local[8401], "hi")
    assert answer == "1:hi"
    assert server.open == 1
    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        await forwarder.close()
        await asyncio.sleep(0)  # the loop runs the handlers' done callbacks
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
    async with asyncio.timeout(DEADLINE):
        while server.open:  # the remote side saw its stream closed
            await asyncio.sleep(0.02)
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", local[8401])  # not listening any more
    writer.close()


async def test_a_stream_that_cannot_open_closes_the_connection_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refuse(port: int) -> socket.socket:
        raise ConnectionRefusedError(f"nothing listens on {port}")

    forwarder = Forwarder(refuse, "pod team-a/desk-1")
    local = await forwarder.start([8401])
    try:
        with caplog.at_level(logging.WARNING, logger="mas.ctl.forwarding"):
            reader, writer = await asyncio.open_connection("127.0.0.1", local[8401])
            async with asyncio.timeout(DEADLINE):
                assert await reader.read() == b""  # closed, no bytes
            writer.close()
        assert caplog.messages == [
            "cannot forward a connection to pod team-a/desk-1 port 8401: nothing listens on 8401"
        ]
        # the listener goes on
        reader, writer = await asyncio.open_connection("127.0.0.1", local[8401])
        writer.close()
    finally:
        await forwarder.close()


class ProxyThread:
    """The remote end of a socket pair, written by a thread as the kubernetes port-forward does.

    Like the client library's proxy, it writes whenever it has data and closes its end once it
    reads this end's end of stream. Unlike it, it writes before it reads, every pass, so a
    Forwarder that closes its end before the remote has closed fails a write here every time,
    not once in a while (there: a broken pipe in that thread, a traceback for the user).
    """

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.saw_end = threading.Event()
        self.done = threading.Event()

    def open_stream(self, port: int) -> socket.socket:
        ours, theirs = socket.socketpair()
        threading.Thread(target=self._run, args=(theirs,), daemon=True).start()
        return ours

    def _run(self, sock: socket.socket) -> None:
        try:
            while True:
                readable, _, _ = select.select([sock], [], [], 0.005)  # the pace of the ticks
                sock.sendall(b"tick\n")
                if readable and not sock.recv(CHUNK):
                    self.saw_end.set()
                    return
        except OSError as exc:
            self.errors.append(repr(exc))
        finally:
            sock.close()
            self.done.set()


async def wait_for(event: threading.Event) -> None:
    async with asyncio.timeout(DEADLINE):
        while not event.is_set():
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("ending", ["client closes", "client resets", "forwarder closes"])
async def test_a_stream_is_closed_only_after_the_remote_closed_its_end(ending: str) -> None:
    remote = ProxyThread()
    forwarder = Forwarder(remote.open_stream, "the proxy thread")
    local = await forwarder.start([8401])
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", local[8401])
        async with asyncio.timeout(DEADLINE):
            assert await reader.readline() == b"tick\n"  # the remote is writing
        if ending == "client resets":
            writer.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
        if ending != "forwarder closes":
            writer.close()
            await wait_for(remote.done)
    finally:
        await forwarder.close()
    await wait_for(remote.done)
    assert (remote.errors, remote.saw_end.is_set()) == ([], True)
    writer.close()
