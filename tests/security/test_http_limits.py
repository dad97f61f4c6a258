"""HTTP listener limits on real loopback sockets: head size, header count, head time, idle
time and open connections (library_ioa.serving.http_guard)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest
from security_support import echo_endpoint, serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from library_ioa.serving.http_guard import DEFAULT_HTTP_LIMITS, HttpLimits
from library_ioa.serving.listeners import HttpListener

pytestmark = [pytest.mark.timeout(60)]

STEP = 10.0
ECHO = {"echo": {"model": {"type": "echo"}}}
FAST = HttpLimits(head_timeout=0.3, keep_alive=0.3)


async def hello(request: Request) -> Response:
    body = await request.body()
    return PlainTextResponse(f"hello {len(body)}" if body else "hello")


@contextlib.asynccontextmanager
async def listening(limits: HttpLimits = DEFAULT_HTTP_LIMITS) -> AsyncIterator[int]:
    app = Starlette(routes=[Route("/healthz", hello), Route("/", hello, methods=["GET", "POST"])])
    listener = HttpListener(app, "127.0.0.1", 0, limits=limits)
    await listener.start()
    try:
        yield listener.port
    finally:
        await listener.aclose()


async def exchange(port: int, data: bytes) -> tuple[int, bytes]:
    """Send ``data`` and read until the server closes: the status and everything read."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(STEP):
            answer = await reader.read(-1)  # until EOF: the server closed the connection
    finally:
        writer.close()
    return status_of(answer), answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def head(*headers: bytes) -> bytes:
    return b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(h + b"\r\n" for h in headers)


async def test_a_head_over_the_byte_limit_gets_431_and_a_closed_connection() -> None:
    async with listening() as port:
        status, answer = await exchange(port, head(b"X-Big: " + b"a" * 40_000) + b"\r\n")
        assert status == 431, answer
        assert b"larger than 32768 bytes" in answer
        ok, _ = await exchange(port, head(b"Connection: close") + b"\r\n")
        assert ok == 200


async def test_a_big_body_sent_with_its_head_in_one_write_is_not_a_big_head() -> None:
    body = b"b" * 300_000
    request = b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    request += b"Content-Length: %d\r\n\r\n" % len(body) + body
    async with listening() as port:
        status, answer = await exchange(port, request)
    assert status == 200, answer[:200]
    assert answer.endswith(b"hello 300000")


async def test_more_headers_than_the_limit_get_431() -> None:
    many = [b"X-H%d: v" % n for n in range(101)]
    async with listening() as port:
        status, answer = await exchange(port, head(*many) + b"\r\n")
        assert status == 431, answer
        assert b"more than 100 headers" in answer
        ok, _ = await exchange(port, head(*many[:90], b"Connection: close") + b"\r\n")
        assert ok == 200


async def test_a_256_mb_header_is_refused_early_and_healthz_keeps_answering() -> None:
    chunk = b"a" * (1024 * 1024)
    sent = 0
    async with listening() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def flood() -> None:
            nonlocal sent
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Huge: ")
            with contextlib.suppress(ConnectionError):
                while sent < 256 * len(chunk):
                    writer.write(chunk)
                    await writer.drain()
                    sent += len(chunk)

        flooding = asyncio.create_task(flood())
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=STEP) as http:
            assert (await http.get("/healthz")).status_code == 200
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            async with asyncio.timeout(STEP):
                answer = await reader.read(-1)
        async with asyncio.timeout(STEP):
            await asyncio.gather(flooding, return_exceptions=True)
        writer.close()
    # The server closes with the flood unread, so TCP may reset before the 431 arrives.
    assert answer == b"" or status_of(answer) == 431, answer[:200]
    assert sent < 64 * len(chunk)  # refused long before 256 MB were sent


async def test_thirty_half_sent_heads_are_answered_408_and_closed() -> None:
    async with listening(FAST) as port:
        answers = await asyncio.gather(
            *(exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ") for _ in range(30))
        )
    assert [status for status, _ in answers] == [408] * 30


async def test_a_connection_that_sends_nothing_is_closed() -> None:
    async with listening(FAST) as port:
        status, answer = await exchange(port, b"")
    assert (status, answer) == (0, b"")


async def test_an_idle_kept_alive_connection_is_closed() -> None:
    async with listening(FAST) as port:
        status, answer = await exchange(port, head() + b"\r\n")
    assert status == 200
    assert answer.endswith(b"hello")  # one response, then the server closed the idle connection


async def test_connections_past_the_limit_get_503() -> None:
    async with listening(HttpLimits(max_connections=3, max_connections_per_client=3)) as port:
        held = []
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head() + b"\r\n")
            async with asyncio.timeout(STEP):
                assert (await reader.readuntil(b"hello")).startswith(b"HTTP/1.1 200")
            held.append(writer)
        status, answer = await exchange(port, head() + b"\r\n")
        assert status == 503, answer
        for writer in held:
            writer.close()


async def test_the_a2a_listener_and_its_probes_enforce_the_limits() -> None:
    async with serve(ECHO, {"echo": echo_endpoint()}, "echo", grpc=False) as exposure:
        port = exposure.port
        status, answer = await exchange(port, head(b"X-Big: " + b"a" * 40_000) + b"\r\n")
        assert status == 431, answer
        ok, answer = await exchange(port, head(b"Connection: close") + b"\r\n")
        assert ok == 200, answer


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="head_timeout"):
        HttpLimits(head_timeout=0)
    with pytest.raises(ValueError, match="max_connections"):
        HttpLimits(max_connections=0)
