"""A local server speaking Anthropic's Messages API (streamed) for the anthropic plugin's tests.

It serves ``POST /v1/messages`` on 127.0.0.1 with a free port and answers each request with
the next planned reply: the SSE event stream the API sends (``event:`` and ``data:`` lines:
``message_start`` with the input usage, ``content_block_start`` / ``_delta`` / ``_stop`` for
text and ``tool_use`` blocks, ``ping``, ``message_delta`` with the output usage,
``message_stop``), raw lines (a malformed stream), or an HTTP error with the API's error
body and headers (``retry-after``). Every request is recorded.
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


class FakeMessagesServer(FakeProviderServer):
    """Serve planned replies; ``base_url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self) -> None:
        self.plans: deque[Plan] = deque()
        self.requests: list[Recorded] = []
        super().__init__([Route("/v1/messages", self._messages, methods=["POST"])])

    @property
    def base_url(self) -> str:
        return self.root_url

    async def _messages(self, request: Request) -> Response:
        self.requests.append(await record(request))
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
            return sse_response([plan.raw])
        return sse_response(
            f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in plan.events
        )
