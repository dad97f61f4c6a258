"""The HTTP and SSE plumbing the fake LLM provider servers share.

:class:`FakeProviderServer` serves Starlette routes on 127.0.0.1
(:class:`~tests.loopback_server.LoopbackServer`); each fake (``fake_chat_server`` for the
OpenAI chat-completions protocol, ``fake_messages_server`` for Anthropic's Messages API)
adds its routes and its own wire format. :func:`sse_response` streams already encoded
SSE frames, and :class:`Recorded` is one request as a fake saw it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from tests.loopback_server import LoopbackServer


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


class FakeProviderServer(LoopbackServer):
    """Serve ``routes`` on 127.0.0.1 from entering the context until leaving it."""

    def __init__(self, routes: list[Route]) -> None:
        super().__init__(Starlette(routes=routes))
