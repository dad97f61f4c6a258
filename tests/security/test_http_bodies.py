"""HTTP listener limits on bodies and responses, on real loopback sockets: body time, an
early answer, connections per client and a client that never reads
(library_ioa.serving.http_guard)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from security_support import AUTH, V1, Secrets, echo_endpoint, serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from tests.ports import free_port

from library_ioa.serving.http_guard import LINGER, HttpLimits, client_key
from library_ioa.serving.listeners import HttpListener

pytestmark = [pytest.mark.timeout(90)]

STEP = 10.0
ECHO = {"echo": {"model": {"type": "echo"}}}
BIG = b"x" * (8 * 1024 * 1024)
ATTACKER = "127.0.0.2"  # another loopback address: another client for the per-client cap


async def echo_body(request: Request) -> Response:
    return PlainTextResponse(f"got {len(await request.body())}")


async def deny(_: Request) -> Response:
    return PlainTextResponse("no", status_code=401)  # answers without reading the body


async def big(_: Request) -> Response:
    return Response(BIG, media_type="application/octet-stream")


@contextlib.asynccontextmanager
async def listening(limits: HttpLimits) -> AsyncIterator[HttpListener]:
    routes = [
        Route("/healthz", echo_body),
        Route("/", echo_body, methods=["POST"]),
        Route("/deny", deny, methods=["POST"]),
        Route("/big", big),
    ]
    listener = HttpListener(Starlette(routes=routes), "127.0.0.1", 0, limits=limits)
    await listener.start()
    try:
        yield listener
    finally:
        await listener.aclose()


def post_head(path: str, length: int) -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (path.encode(), length)


async def until_closed(reader: asyncio.StreamReader, within: float = STEP) -> bytes:
    """Everything the server sends until it closes (a reset counts as closed)."""
    chunks: list[bytes] = []
    with contextlib.suppress(ConnectionResetError):
        async with asyncio.timeout(within):
            while chunk := await reader.read(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


async def wait_for(check: object, what: str, within: float = STEP) -> None:
    """Poll ``check()`` until it is true, failing after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_a_body_trickled_in_gets_408_and_a_closed_connection() -> None:
    async with listening(HttpLimits(body_timeout=0.5)) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(post_head("/", 100) + b"{")
        started = time.monotonic()

        async def trickle() -> None:  # one byte every 0.1 s: the body would take 10 s
            with contextlib.suppress(ConnectionError):
                for _ in range(99):
                    await asyncio.sleep(0.1)
                    writer.write(b" ")
                    await writer.drain()

        trickling = asyncio.create_task(trickle())
        answer = await until_closed(reader)
        elapsed = time.monotonic() - started
        trickling.cancel()
        await asyncio.gather(trickling, return_exceptions=True)
        writer.close()
        assert status_of(answer) == 408, answer
        assert answer.endswith(b"the request body took longer than 0.5 s")
        assert elapsed > 0.4, elapsed
        async with httpx.AsyncClient(timeout=STEP) as http:
            ok = await http.post(f"http://127.0.0.1:{listener.port}/", content=b"x" * 300_000)
        assert ok.text == "got 300000"  # a body sent at once is not slow


async def test_520_slow_bodies_from_one_address_leave_healthz_answering() -> None:
    """The issue's attack at its scale: the per-client cap refuses the connections past it
    at once, healthz keeps answering the kubelet, and every held one ends with a 408."""
    limits = HttpLimits(body_timeout=3.0)  # default caps: 512 in all, 256 per client
    async with listening(limits) as listener:
        port = listener.port
        opened = [
            await asyncio.open_connection("127.0.0.1", port, local_addr=(ATTACKER, 0))
            for _ in range(520)
        ]
        for _, writer in opened:
            writer.write(post_head("/", 1000) + b"{")
        answers = [asyncio.create_task(until_closed(reader)) for reader, _ in opened]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=STEP) as http:
            await wait_for(lambda: sum(a.done() for a in answers) >= 264, "264 refusals")
            assert listener.open_connections == 256 + 0  # the attacker's held ones
            for _ in range(5):
                assert (await http.get("/healthz")).status_code == 200
        statuses = [status_of(answer) for answer in await asyncio.gather(*answers)]
        for _, writer in opened:
            writer.close()
    assert statuses.count(503) == 264, statuses
    assert statuses.count(408) == 256, statuses


async def trickle_until_refused(writer: asyncio.StreamWriter, every: float) -> float:
    """Send a body byte every ``every`` s until the server has closed the connection (the
    write fails); the seconds it took."""
    started = time.monotonic()
    with contextlib.suppress(ConnectionError):
        async with asyncio.timeout(STEP):
            while True:
                await asyncio.sleep(every)
                writer.write(b" ")
                await writer.drain()
    return time.monotonic() - started


async def test_an_early_answer_is_sent_then_the_trickled_body_is_not_kept() -> None:
    async with listening(HttpLimits(body_timeout=1.5)) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(post_head("/deny", 1000) + b"{")
        answer = await until_closed(reader)  # the answer, then the server's end (EOF)
        # Faster than LINGER: only the body deadline ends it.
        elapsed = await trickle_until_refused(writer, 0.2)
        writer.close()
        assert listener.open_connections == 0
    assert status_of(answer) == 401 and answer.endswith(b"no"), answer
    assert b"\r\nconnection: close\r\n" in answer.lower(), answer  # the client is told
    assert elapsed > 0.5, elapsed  # a lower bound only: timers are never early


async def test_the_401_of_a2a_auth_is_read_and_the_connection_closed(creds: Secrets) -> None:
    async with serve(ECHO, {"echo": echo_endpoint(auth=AUTH)}, "echo", grpc=False) as exposure:
        reader, writer = await asyncio.open_connection("127.0.0.1", exposure.port)
        head = post_head("/", 5000).replace(b"\r\n\r\n", b"\r\nA2A-Version: 1.0\r\n\r\n")
        head = head.replace(b"Host: x", b"Host: x\r\nContent-Type: application/json")
        writer.write(head + b'{"jsonrpc": "2.0"')
        answer = await until_closed(reader)
        # A byte every 10 s, as in the issue: LINGER seconds of silence end it.
        elapsed = await trickle_until_refused(writer, LINGER + 0.5)
        writer.close()
        async with httpx.AsyncClient(base_url=exposure.url, timeout=STEP) as http:
            assert (await http.get("/healthz")).status_code == 200
            sent = await http.post(
                "/", content=b"{}", headers={**V1, "Authorization": f"Bearer {creds.token}"}
            )
            assert sent.status_code == 200  # a complete body with the credential is served
    assert status_of(answer) == 401, answer
    assert b"\r\nconnection: close\r\n" in answer.lower(), answer
    assert elapsed >= LINGER, elapsed


async def test_a_client_that_never_reads_is_aborted_after_the_send_timeout() -> None:
    async with listening(HttpLimits(send_timeout=0.5)) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port, limit=1024)
        writer.transport.pause_reading()  # never reads: the kernel buffers fill, then ours
        writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        await wait_for(lambda: listener.open_connections == 0, "the abort")
        elapsed = time.monotonic() - started
        writer.transport.resume_reading()
        answer = await until_closed(reader)
        writer.close()
    assert status_of(answer) == 200
    assert len(answer) < len(BIG)  # the rest was never sent: the server dropped it
    assert elapsed >= 0.5, elapsed


async def test_a_client_that_keeps_reading_gets_everything() -> None:
    async with listening(HttpLimits(send_timeout=0.5)) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = 0
        async with asyncio.timeout(STEP * 3):
            while chunk := await reader.read(64 * 1024):
                got += len(chunk)
                await asyncio.sleep(0.005)
        writer.close()
    assert got > len(BIG)


def test_one_client_is_an_ipv4_address_or_an_ipv6_64() -> None:
    assert client_key("10.1.2.3") == "10.1.2.3"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9")
    assert client_key("2001:db8:1:2::1") != client_key("2001:db8:1:3::1")
    assert client_key("::ffff:10.1.2.3") == "10.1.2.3"
    assert client_key("unix-peer") == "unix-peer"
    with pytest.raises(ValueError, match="max_connections_per_client"):
        HttpLimits(max_connections_per_client=0)
    assert HttpLimits().per_client_cap == 256
    assert HttpLimits(max_connections=100).per_client_cap == 50
    assert HttpLimits(max_connections=1).per_client_cap == 1
    with pytest.raises(ValueError, match="body_timeout"):
        HttpLimits(body_timeout=0)


async def test_the_mcp_door_enforces_the_endpoints_connection_limits() -> None:
    port = free_port()
    door = {
        "protocol": "mcp",
        "agent": "echo",
        "url": f"http://127.0.0.1:{port}",
        "usage": "deploy",
        "a2a": {"connections": {"max_open_per_client": 3, "body_timeout_seconds": 0.5}},
    }
    endpoints = {"echo": echo_endpoint(), "echo-mcp": door}
    async with serve(ECHO, endpoints, "echo", grpc=False):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post_head("/mcp", 500) + b"{")
        answer = await until_closed(reader)
        writer.close()
        assert status_of(answer) == 408, answer
        held = [
            await asyncio.open_connection("127.0.0.1", port, local_addr=(ATTACKER, 0))
            for _ in range(4)
        ]
        for _, writer in held:
            writer.write(b"GET /healthz HTTP/1.1\r\n")  # a head that never ends
        refused = await until_closed(held[3][0])
        assert status_of(refused) == 503 and refused.endswith(b"from this address"), refused
        async with httpx.AsyncClient(timeout=STEP) as http:
            healthz = await http.get(f"http://127.0.0.1:{port}/healthz")
        assert healthz.status_code == 200
        for _, writer in held:
            writer.close()
