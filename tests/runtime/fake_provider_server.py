"""The HTTP and SSE plumbing the fake LLM provider servers share.

:class:`FakeProviderServer` serves a Starlette app on 127.0.0.1 with a port the OS picks,
started and stopped as an async context manager; each fake (``fake_chat_server`` for the
OpenAI chat-completions protocol, ``fake_messages_server`` for Anthropic's Messages API)
adds its routes and its own wire format. :func:`sse_response` streams already encoded
SSE frames, and :class:`Recorded` is one request as a fake saw it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route


@dataclass
class Recorded:
    """One request as the server saw it."""

    headers: dict[str, str]
    body: dict[str, Any]
    path: str = ""
    query: str = ""


async def record(request: Request) -> Recorded:
    """``request`` read: its headers, its JSON body, its path and query."""
    body = await request.json()
    return Recorded(dict(request.headers), body, request.url.path, request.url.query)


def sse_response(frames: Iterable[str]) -> StreamingResponse:
    """A ``text/event-stream`` response sending ``frames`` (whole SSE text) one by one."""
    texts = list(frames)

    async def stream() -> AsyncIterator[bytes]:
        for text in texts:
            yield text.encode()

    return StreamingResponse(stream(), media_type="text/event-stream")


class FakeProviderServer:
    """Serve ``routes`` on 127.0.0.1 from entering the context until leaving it."""

    def __init__(self, routes: list[Route]) -> None:
        config = uvicorn.Config(
            Starlette(routes=routes),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            ws="none",
        )
        self._server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._server.serve())
        async with asyncio.timeout(10):
            while not self._server.started:
                await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>``, the port the server listens on."""
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"
