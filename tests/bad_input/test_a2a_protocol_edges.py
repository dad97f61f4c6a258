"""Protocol edges found from outside (issue 14): each answer is the protocol's, never a traceback.

Every case runs against the echo agent served on loopback with JSON-RPC, HTTP+JSON and gRPC
(``serve_echo``); the ``server_log`` fixture fails a test whose server logged a traceback.
"""

from __future__ import annotations

import json

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest
from bad_input_support import (
    JSON,
    PROTOCOL_MARKS,
    STEP,
    Agent,
    exchange,
    send_message,
    user_message,
)

pytestmark = PROTOCOL_MARKS

HUGE_VERSION = "1." + "9" * 5000  # a component past Python's 4,300-digit int() limit
GRPC_SEND = "/lf.a2a.v1.A2AService/SendMessage"


async def raw_post(agent: Agent, path: str, head: bytes, body: bytes) -> tuple[int, bytes]:
    """POST ``body`` in one chunk without a Content-Length; the status and the whole answer."""
    raw = await exchange(
        agent,
        f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n".encode()
        + head
        + b"Connection: close\r\n\r\n"
        + f"{len(body):x}\r\n".encode()
        + body
        + b"\r\n0\r\n\r\n",
    )
    return int(raw.split(b" ", 2)[1]), raw


async def test_a_chunked_text_plain_body_on_http_json_is_415_and_not_executed(
    agent: Agent,
) -> None:
    body = json.dumps({"message": user_message("chunked and plain")}).encode()
    head = b"Content-Type: text/plain\r\nA2A-Version: 1.0\r\n"
    status, raw = await raw_post(agent, "/a2a/rest/message:send", head, body)
    assert status == 415, raw
    assert b"text/plain" in raw and b"application/json" in raw
    assert b"chunked and plain" not in raw  # the echo agent never saw it
    ok_status, ok = await raw_post(
        agent,
        "/a2a/rest/message:send",
        b"Content-Type: application/json\r\nA2A-Version: 1.0\r\n",
        body,
    )
    assert ok_status == 200 and b"chunked and plain" in ok, ok


async def test_a_huge_version_component_is_the_version_error_on_json_rpc(
    http: httpx.AsyncClient,
) -> None:
    response = await http.post(
        "/", content=json.dumps(send_message()), headers={**JSON, "A2A-Version": HUGE_VERSION}
    )
    assert response.status_code == 200
    error = response.json()["error"]
    assert error["code"] == -32009, error  # VersionNotSupportedError
    assert "1.0" in error["message"] and "int" not in error["message"].lower()


async def test_a_huge_version_component_is_the_version_error_on_http_json(
    http: httpx.AsyncClient,
) -> None:
    response = await http.post(
        "/a2a/rest/message:send",
        content=json.dumps({"message": user_message()}),
        headers={**JSON, "A2A-Version": HUGE_VERSION},
    )
    assert response.status_code == 400, response.text
    assert "1.0" in response.text and "Traceback" not in response.text


async def test_a_0_3_message_send_with_invalid_params_is_invalid_params(
    http: httpx.AsyncClient,
) -> None:
    bad = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "message/send",
        "params": {"message": {"role": {"not": "a role"}, "parts": 5}},
    }
    for headers in ({"Content-Type": "application/json"}, {**JSON, "A2A-Version": "0.3"}):
        response = await http.post("/", content=json.dumps(bad), headers=headers)
        assert response.status_code == 200
        error = response.json()["error"]
        assert error["code"] == -32602, error
        assert response.json()["id"] == 3
        assert "params.message" in error["message"], error
    good = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "messageId": "m-03",
                "kind": "message",
                "parts": [{"kind": "text", "text": "old client"}],
            }
        },
    }
    response = await http.post(
        "/", content=json.dumps(good), headers={"Content-Type": "application/json"}
    )
    assert "old client" in response.text, response.text


async def test_undecodable_grpc_bytes_are_invalid_argument(agent: Agent) -> None:
    async with grpc.aio.insecure_channel(agent.grpc) as channel:
        call = channel.unary_unary(GRPC_SEND)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(b"\xff\xff\xff\xff", metadata=(("a2a-version", "1.0"),), timeout=STEP)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
    assert "SendMessageRequest" in (refused.value.details() or "")


async def test_a_long_grpc_version_is_refused_within_the_clients_metadata_limit(
    agent: Agent,
) -> None:
    request = SendMessageRequest()
    request.message.message_id = "long-version"
    request.message.role = 1
    request.message.parts.add().text = "x"
    version = "9." + "9" * 6000
    async with grpc.aio.insecure_channel(agent.grpc) as channel:
        call = channel.unary_unary(
            GRPC_SEND, request_serializer=SendMessageRequest.SerializeToString
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(request, metadata=(("a2a-version", version),), timeout=STEP)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED, refused.value
    details = refused.value.details() or ""
    assert "is not supported" in details and "1.0" in details
    assert len(details) < 1024
