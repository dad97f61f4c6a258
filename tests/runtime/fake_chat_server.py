"""A local chat-completions server (the OpenAI wire protocol) for the openai plugin's tests.

It serves ``POST /v1/chat/completions`` on 127.0.0.1 with a free port, answers each request
with the next planned reply (SSE chunks with ``delta.content`` / ``delta.tool_calls`` and a
``finish_reason``, then the ``usage`` chunk when the request sets
``stream_options.include_usage``, or an HTTP error with an OpenAI error body), and records
every request.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tests.runtime.fake_provider_server import FakeProviderServer, Recorded, record, sse_response


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


class FakeChatServer(FakeProviderServer):
    """Serve planned replies; ``base_url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self) -> None:
        self.plans: deque[Plan] = deque()
        self.requests: list[Recorded] = []
        super().__init__(
            [
                Route("/v1/chat/completions", self._complete, methods=["POST"]),
                # Azure OpenAI's form: the deployment in the path, api-version in the query
                Route(
                    "/openai/deployments/{deployment}/chat/completions",
                    self._complete,
                    methods=["POST"],
                ),
            ]
        )

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    async def _complete(self, request: Request) -> Response:
        recorded = await record(request)
        self.requests.append(recorded)
        body = recorded.body
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
        frames = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
        return sse_response([*frames, "data: [DONE]\n\n"])
