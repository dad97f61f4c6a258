"""The raw floors of the hot-path benchmark: what answering costs with no protocol at all.

- HTTP: a bare ASGI function on uvicorn that reads the body and answers a fixed JSON-RPC
  ``SendMessage`` result, or, when the body names ``SendStreamingMessage``, the 20 canned
  SSE frames of a streamed echo (the task, ``working``, 17 artifact chunks, ``completed``),
  each frame its own body chunk as a streaming server writes them;
- gRPC: a bare ``grpc.aio`` servicer of ``A2AService`` whose ``SendMessage`` returns a fixed
  ``SendMessageResponse`` (built once).

``baselines.py raw PORT [--grpc-port N]`` serves them.
"""

from __future__ import annotations

import json
from typing import Any

FIXED_RESULT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "message": {
                "messageId": "00000000-0000-0000-0000-000000000000",
                "contextId": "00000000-0000-0000-0000-000000000001",
                "taskId": "00000000-0000-0000-0000-000000000002",
                "role": "ROLE_AGENT",
                "parts": [{"text": "hello from the benchmark"}],
            }
        },
    }
).encode()

_IDS = {
    "taskId": "00000000-0000-0000-0000-000000000002",
    "contextId": "00000000-0000-0000-0000-000000000001",
}


def _frame(result: dict[str, Any]) -> bytes:
    return (
        b"data: " + json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode() + b"\r\n\r\n"
    )


def _stream_frames() -> list[bytes]:
    task = {
        "task": {
            "id": _IDS["taskId"],
            "contextId": _IDS["contextId"],
            "status": {"state": "TASK_STATE_SUBMITTED"},
        }
    }
    working = {"statusUpdate": {**_IDS, "status": {"state": "TASK_STATE_WORKING"}}}
    chunks = [
        {
            "artifactUpdate": {
                **_IDS,
                "artifact": {
                    "artifactId": "response",
                    "name": "response",
                    "parts": [{"text": f"word{i} "}],
                },
                "append": i > 0,
            }
        }
        for i in range(16)
    ]
    last = {
        "artifactUpdate": {
            **_IDS,
            "artifact": {"artifactId": "response", "name": "response"},
            "append": True,
            "lastChunk": True,
        }
    }
    done = {"statusUpdate": {**_IDS, "status": {"state": "TASK_STATE_COMPLETED"}}}
    return [_frame(r) for r in [task, working, *chunks, last, done]]


STREAM_FRAMES = _stream_frames()
JSON_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(FIXED_RESULT)).encode()),
]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]


async def raw_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Read the whole body, answer the fixed result (or the canned stream)."""
    if scope["type"] != "http":
        return
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if b'"SendStreamingMessage"' not in body:
        await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
        await send({"type": "http.response.body", "body": FIXED_RESULT})
        return
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    for frame in STREAM_FRAMES:
        await send({"type": "http.response.body", "body": frame, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def start_grpc_floor(port: int) -> Any:
    """A started ``grpc.aio`` server whose ``SendMessage`` answers a fixed response."""
    import grpc
    from a2a.types import Message, Part, Role, SendMessageResponse, a2a_pb2_grpc

    fixed = SendMessageResponse(
        message=Message(
            role=Role.ROLE_AGENT,
            message_id="00000000-0000-0000-0000-000000000000",
            context_id=_IDS["contextId"],
            task_id=_IDS["taskId"],
            parts=[Part(text="hello from the benchmark")],
        )
    )

    class Floor(a2a_pb2_grpc.A2AServiceServicer):  # type: ignore[misc]
        async def SendMessage(self, request: Any, context: Any) -> Any:
            return fixed

    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(Floor(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server
