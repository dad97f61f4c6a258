"""gRPC listener limits on real loopback sockets: open connections, handshake and idle time
(library_ioa.serving.grpc_guard), and the open-files limit of a serving process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest, a2a_pb2_grpc
from security_support import echo_endpoint, serve

from library_ioa.serving.grpc_guard import GrpcLimits, grpc_connection_options

pytestmark = [pytest.mark.timeout(90), pytest.mark.integration]

STEP = 10.0
ECHO = {"echo": {"model": {"type": "echo"}}}
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")  # + SETTINGS
VERSION = (("a2a-version", "1.0"),)

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def request(text: str) -> SendMessageRequest:
    message = SendMessageRequest()
    message.message.message_id = f"{text}-{time.monotonic_ns()}"
    message.message.role = 1
    message.message.parts.add().text = text
    return message


async def send(port: int, text: str) -> str:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
            request(text), metadata=VERSION, timeout=STEP
        )
    return str(reply)


async def connect(port: int, count: int, data: bytes) -> list[Connection]:
    opened = [await asyncio.open_connection("127.0.0.1", port) for _ in range(count)]
    for _, writer in opened:
        writer.write(data)
    return opened


async def closed_by_server(connection: Connection) -> None:
    """Returns once the server closed ``connection`` (EOF or reset); reads what comes."""
    reader, _ = connection
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass


def close_all(connections: list[Connection]) -> None:
    for _, writer in connections:
        writer.close()


async def test_connections_past_the_cap_are_closed_at_once_and_cost_no_descriptor() -> None:
    cap, extra = 200, 200
    limits: dict[str, Any] = {"grpc_max_open": cap, "grpc_idle_timeout_seconds": 600}
    endpoint = echo_endpoint(connections={**limits, "head_timeout_seconds": 600})
    async with serve(ECHO, {"echo": endpoint}, "echo") as exposure:
        port = exposure.grpc_port
        assert port is not None
        assert "grpc welcome" in await send(port, "grpc welcome")
        before = open_fds()
        opened = await connect(port, cap + extra, PREFACE)
        waits = {asyncio.create_task(closed_by_server(c)): c for c in opened}
        async with asyncio.timeout(STEP):  # the extra ones are closed at once
            while sum(wait.done() for wait in waits) < extra:
                pending = [wait for wait in waits if not wait.done()]
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        refused = [c for wait, c in waits.items() if wait.done()]
        held = [c for wait, c in waits.items() if not wait.done()]
        for _, writer in refused:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        assert (len(refused), len(held)) == (extra, cap)
        # Both ends of a held connection are in this process (2 descriptors each), none
        # of a refused one; a few more for grpc's own pollers.
        grown = open_fds() - before
        assert grown <= 2 * cap + 8, grown
        with pytest.raises(grpc.aio.AioRpcError) as full:
            await send(port, "no room")
        assert full.value.code() == grpc.StatusCode.UNAVAILABLE
        async with httpx.AsyncClient(base_url=exposure.url, timeout=STEP) as http:
            assert (await http.get("/healthz")).status_code == 200  # the HTTP port's own slots
        close_all(held[:10])
        deadline = time.monotonic() + STEP
        while True:  # the server notices the closes: a slot is free again
            try:
                assert "served again" in await send(port, "served again")
                break
            except grpc.aio.AioRpcError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        close_all(held[10:])
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def test_idle_connections_are_closed_after_the_idle_timeout() -> None:
    endpoint = echo_endpoint(
        connections={"grpc_idle_timeout_seconds": 1.0, "head_timeout_seconds": 600}
    )
    async with serve(ECHO, {"echo": endpoint}, "echo") as exposure:
        port = exposure.grpc_port
        assert port is not None
        started = time.monotonic()
        idle = await connect(port, 100, PREFACE)  # HTTP/2 opened, then no call
        async with asyncio.timeout(STEP):
            await asyncio.gather(*(closed_by_server(c) for c in idle))
        elapsed = time.monotonic() - started
        close_all(idle)
        assert elapsed >= 0.9, elapsed
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            assert "first" in str(await stub.SendMessage(request("first"), metadata=VERSION))
            assert channel.get_state() == grpc.ChannelConnectivity.READY
            async with asyncio.timeout(STEP):  # GOAWAY after the idle time: the channel idles
                while channel.get_state() == grpc.ChannelConnectivity.READY:
                    await channel.wait_for_state_change(grpc.ChannelConnectivity.READY)
            again = await stub.SendMessage(request("again"), metadata=VERSION, timeout=STEP)
            assert "again" in str(again)  # and reconnects on its next call


async def test_connections_that_never_open_http2_are_closed_after_the_head_timeout() -> None:
    endpoint = echo_endpoint(
        connections={"head_timeout_seconds": 1.0, "grpc_idle_timeout_seconds": 600}
    )
    async with serve(ECHO, {"echo": endpoint}, "echo") as exposure:
        port = exposure.grpc_port
        assert port is not None
        started = time.monotonic()
        silent = await connect(port, 100, b"")
        async with asyncio.timeout(STEP):
            await asyncio.gather(*(closed_by_server(c) for c in silent))
        close_all(silent)
        assert time.monotonic() - started >= 0.9
        assert "still here" in await send(port, "still here")


def test_the_options_state_the_limits() -> None:
    options = dict(grpc_connection_options(GrpcLimits(max_connections=7, idle_timeout=1.5)))
    assert options["grpc.max_allowed_incoming_connections"] == 7
    assert options["grpc.max_connection_idle_ms"] == 1500
    assert options["grpc.server_handshake_timeout_ms"] == 20_000
    with pytest.raises(ValueError, match="max_connections"):
        GrpcLimits(max_connections=0)


def test_a_serving_process_raises_its_open_files_limit_to_the_hard_one() -> None:
    script = (
        "import resource\n"
        "from library_ioa.serving.listeners import raise_open_file_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))\n"
        "print(raise_open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE) == "
        "(hard if hard != resource.RLIM_INFINITY else 1024 * 1024, hard))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip().endswith("True"), out.stdout + out.stderr
    assert out.stdout.startswith("(256, "), out.stdout
