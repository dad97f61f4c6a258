"""A hostile A2A peer of our own: a valid AgentCard, then one class of malformed answer.

One listener serves every class, each at its own base URL ``http://127.0.0.1:<port>/<mode>``
(a card at ``<base>/.well-known/agent-card.json``, JSON-RPC at ``<base>``), so a comm is
pointed at ``peer.url(mode)``; an Application endpoint, which takes no path, uses
``peer.root`` and the class set in ``peer.mode``. The answers are written by hand as the
wire carries them, not built with the SDK: the point is what the SDK would never build.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from tests.ports import free_port

from library_ioa.serving.listeners import HttpListener

PEER_WORDS = "the peer's own words"
NAIVE_TIME = "2026-03-01T12:00:00.123456"  # ISO 8601 without a UTC offset


def task(state: str = "TASK_STATE_COMPLETED", **extra: Any) -> dict[str, Any]:
    """A task as ProtoJSON: the reply in an artifact of the peer's own name."""
    body: dict[str, Any] = {
        "id": "task-1",
        "contextId": "ctx-1",
        "status": {"state": state},
        "artifacts": [
            {"artifactId": "a-1", "name": "result", "parts": [{"text": PEER_WORDS}]},
        ],
    }
    body.update(extra)
    return body


def _result(value: Any) -> Callable[[Any], Response]:
    return lambda rpc_id: JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "result": value})


def _raw(body: str, media: str = "application/json", status: int = 200) -> Any:
    return lambda _rpc_id: Response(body, status_code=status, media_type=media)


# Each class of answer: what SendMessage gets back.
SEND_ANSWERS: dict[str, Callable[[Any], Response]] = {
    # conformant, but stamped without a UTC offset: read as UTC
    "naive-timestamp": _result(
        {"task": task(status={"state": "TASK_STATE_COMPLETED", "timestamp": NAIVE_TIME})}
    ),
    "bad-timestamp": _result(
        {"task": task(status={"state": "TASK_STATE_COMPLETED", "timestamp": "yesterday"})}
    ),
    "result-not-an-object": _result("garbage"),
    "artifacts-not-a-list": _result({"task": task(artifacts={"name": "result"})}),
    "state-not-a-state": _result({"task": task(status={"state": "DONE"})}),
    "task-without-id": _result({"task": {k: v for k, v in task().items() if k != "id"}}),
    "task-without-status": _result({"task": {k: v for k, v in task().items() if k != "status"}}),
    "message-without-parts": _result(
        {"message": {"messageId": "m-1", "role": "ROLE_AGENT", "parts": []}}
    ),
    "not-json": _raw("}}} not json {{{"),
    "html-content-type": _raw("<html><body>Welcome to nginx!</body></html>", "text/html"),
    "server-error": _raw("upstream exploded", "text/plain", 500),
    "neither-result-nor-error": lambda rpc_id: JSONResponse({"jsonrpc": "2.0", "id": rpc_id}),
    # left working, then a subscription stream cut in the middle of an event
    "stream-cut-mid-event": _result({"task": task("TASK_STATE_WORKING", artifacts=[])}),
}

# The JSON-RPC answer GetTask gets (after a subscription), by class.
GET_ANSWERS: dict[str, Callable[[Any], Response]] = {
    "stream-cut-mid-event": _result(task()),
}


@dataclass
class HostilePeer:
    """The listener and what it was asked (method names, by class)."""

    port: int
    mode: str = "not-json"  # the class served at the root
    asked: dict[str, list[str]] = field(default_factory=dict)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, mode: str) -> str:
        return f"{self.root}/{mode}"


def _app(peer: HostilePeer) -> Starlette:
    async def card(request: Request) -> Response:
        mode = request.path_params.get("mode", peer.mode)
        url = peer.url(mode) if "mode" in request.path_params else peer.root
        return JSONResponse(
            {
                "name": f"hostile {mode}",
                "description": "A peer that answers one class of malformed A2A.",
                "version": "1.0.0",
                "supportedInterfaces": [
                    {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
                ],
                "capabilities": {"streaming": mode == "stream-cut-mid-event"},
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": [
                    {"id": "s", "name": "s", "description": "s", "tags": ["s"]},
                ],
            }
        )

    async def rpc(request: Request) -> Response:
        mode = request.path_params.get("mode", peer.mode)
        body = json.loads(await request.body())
        method, rpc_id = body.get("method"), body.get("id")
        peer.asked.setdefault(mode, []).append(method)
        if method == "SendMessage" and mode in SEND_ANSWERS:
            return SEND_ANSWERS[mode](rpc_id)
        if method == "SubscribeToTask":
            return _cut_stream(rpc_id)
        if method == "GetTask" and mode in GET_ANSWERS:
            return GET_ANSWERS[mode](rpc_id)
        return PlainTextResponse(f"no answer for {method} in {mode}", status_code=404)

    return Starlette(
        routes=[
            Route("/.well-known/agent-card.json", card),
            Route("/", rpc, methods=["POST"]),
            Route("/{mode}/.well-known/agent-card.json", card),
            Route("/{mode}", rpc, methods=["POST"]),
        ]
    )


def _cut_stream(rpc_id: Any) -> Response:
    """An event stream whose only event stops in the middle of its JSON."""
    event = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": {"statusUpdate": {}}})

    async def body() -> AsyncIterator[bytes]:
        yield f"data: {event[: len(event) // 2]}".encode()

    return StreamingResponse(body(), media_type="text/event-stream")


@contextlib.asynccontextmanager
async def hostile_peer() -> AsyncIterator[HostilePeer]:
    """The hostile peer, listening on loopback."""
    peer = HostilePeer(free_port())
    listener = HttpListener(_app(peer), "127.0.0.1", peer.port, graceful_timeout=1)
    await listener.start()
    try:
        yield peer
    finally:
        await listener.aclose()
