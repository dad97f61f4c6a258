"""A local chat-completions server (the OpenAI wire protocol) for the openai plugin's tests.

It serves ``POST /v1/chat/completions`` on 127.0.0.1 with a free port, answers each request
with the next planned reply (SSE chunks with ``delta.content`` / ``delta.tool_calls`` and a
``finish_reason``, then the ``usage`` chunk when the request sets
``stream_options.include_usage``, or an HTTP error with an OpenAI error body), and records
every request.
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
    path: str = ""
    query: str = ""


@dataclass
class Plan:
    """One planned reply: SSE chunks, or an HTTP error."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    error: str = ""
    usage: dict[str, Any] | None = None  # sent as the last chunk when the request asks
    headers: dict[str, str] = field(default_factory=dict)  # of an error (e.g. Retry-After)


def text_chunks(*texts: str, model: str = "m") -> list[dict[str, Any]]:
    """Streamed content chunks, then ``finish_reason: stop``."""
    out = [
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": t}, "finish_reason": None}
            ],
        }
        for t in texts
    ]
    out.append(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    return out


def tool_call_chunks(call_id: str, name: str, arguments: str) -> list[dict[str, Any]]:
    """One tool call streamed in fragments (name first, then the arguments in two halves)."""
    half = len(arguments) // 2

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "c2",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    return [
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[:half]}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[half:]}}]}),
        chunk({}, "tool_calls"),
    ]


class FakeChatServer:
    """Serve planned replies; ``base_url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self) -> None:
        self.plans: deque[Plan] = deque()
        self.requests: list[Recorded] = []
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._complete, methods=["POST"]),
                # Azure OpenAI's form: the deployment in the path, api-version in the query
                Route(
                    "/openai/deployments/{deployment}/chat/completions",
                    self._complete,
                    methods=["POST"],
                ),
            ]
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none"
        )
        self._server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FakeChatServer:
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
        return f"{self.root_url}/v1"

    @property
    def root_url(self) -> str:
        """The server's root (an Azure resource's endpoint has no ``/v1``)."""
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(
            Recorded(dict(request.headers), body, request.url.path, request.url.query)
        )
        if not self.plans:
            return JSONResponse({"error": {"message": "no reply planned"}}, status_code=500)
        plan = self.plans.popleft()
        if plan.status != 200:
            return JSONResponse(
                {"error": {"message": plan.error, "type": "invalid_request_error"}},
                status_code=plan.status,
                headers=plan.headers,
            )

        chunks = list(plan.chunks)
        if plan.usage is not None and (body.get("stream_options") or {}).get("include_usage"):
            # As OpenAI streams it: one more chunk, no choices, the usage of the whole call.
            chunks.append(
                {
                    "id": "cu",
                    "object": "chat.completion.chunk",
                    "model": "m",
                    "choices": [],
                    "usage": plan.usage,
                }
            )

        async def stream() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")
