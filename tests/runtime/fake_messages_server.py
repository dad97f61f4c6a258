"""A local server speaking Anthropic's Messages API (streamed) for the anthropic plugin's tests.

It serves ``POST /v1/messages`` on 127.0.0.1 with a free port and answers each request with
the next planned reply: the SSE event stream the API sends (``event:`` and ``data:`` lines:
``message_start`` with the input usage, ``content_block_start`` / ``_delta`` / ``_stop`` for
text and ``tool_use`` blocks, ``ping``, ``message_delta`` with the output usage,
``message_stop``), raw lines (a malformed stream), or an HTTP error with the API's error
body and headers (``retry-after``). Every request is recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Recorded:
    """One request as the server saw it."""

    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Plan:
    """One planned reply: events, raw SSE text, or an HTTP error."""

    events: list[dict[str, Any]] = field(default_factory=list)
    raw: str | None = None
    status: int = 200
    error_type: str = "api_error"
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)


def message_events(
    *blocks: dict[str, Any], input_tokens: int = 10, output_tokens: int = 5, model: str = "claude"
) -> list[dict[str, Any]]:
    """A whole streamed message; each block is ``{"text": [...chunks]}`` or
    ``{"tool_use": (id, name), "json": [...fragments]}``."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        },
        {"type": "ping"},
    ]
    stop = "end_turn"
    for index, block in enumerate(blocks):
        if "tool_use" in block:
            call_id, name = block["tool_use"]
            start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": f} for f in block["json"]]
            stop = "tool_use"
        else:
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in block["text"]]
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return events


class FakeMessagesServer:
    """Serve planned replies; ``base_url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self) -> None:
        self.plans: deque[Plan] = deque()
        self.requests: list[Recorded] = []
        app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none"
        )
        self._server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FakeMessagesServer:
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
    def base_url(self) -> str:
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Recorded(dict(request.headers), body))
        if not self.plans:
            plan = Plan(status=500, error="no reply planned")
        else:
            plan = self.plans.popleft()
        if plan.status != 200:
            return JSONResponse(
                {"type": "error", "error": {"type": plan.error_type, "message": plan.error}},
                status_code=plan.status,
                headers=plan.headers,
            )
        if plan.raw is not None:
            text = plan.raw

            async def raw() -> AsyncIterator[bytes]:
                yield text.encode()

            return StreamingResponse(raw(), media_type="text/event-stream")
        events = plan.events

        async def stream() -> AsyncIterator[bytes]:
            for event in events:
                yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()

        return StreamingResponse(stream(), media_type="text/event-stream")
