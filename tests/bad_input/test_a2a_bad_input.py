"""Bad input on every A2A transport: the protocol's error, the server stays up, no traceback."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest, a2a_pb2_grpc
from bad_input_support import (
    DEPTH,
    JSON,
    LIMIT,
    PROTOCOL_MARKS,
    STEP,
    V1,
    Agent,
    exchange,
    send_message,
    serve_echo,
)

from library_ioa.plugins.a2a.server.transport.limits import RequestLimits

pytestmark = PROTOCOL_MARKS


async def rpc(http: httpx.AsyncClient, body: bytes | str, **headers: str) -> httpx.Response:
    return await http.post("/", content=body, headers={**JSON, **headers})


async def still_answers(http: httpx.AsyncClient) -> None:
    """A good request after the bad ones gets its answer."""
    response = await rpc(http, json.dumps(send_message("still there?")))
    assert response.status_code == 200
    assert "still there?" in response.text, response.text
    assert "result" in response.json()


def error_of(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert "Traceback" not in response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    error = body["error"]
    assert isinstance(error, dict)
    return error


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        (b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700, "not valid JSON"),
        (b"", -32700, ""),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"t":"\xff\xfe"}}',
            -32700,
            "UTF-8",
        ),
        (b'"just a string"', -32600, "object"),
        (b"42", -32600, "object"),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}', -32600, "2.0"),
        (b'{"id": 1, "method": "SendMessage"}', -32600, "2.0"),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "SendMessage"}', -32600, "id"),
        (b'{"jsonrpc": "2.0", "id": true, "method": "SendMessage"}', -32600, "id"),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "SendMessage"}', -32600, "id"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 7}', -32600, "method"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": [1]}', -32602, "params"),
        (b"[" * 30_000 + b"]" * 30_000, -32600, "nested"),
        (b'{"a":' * (DEPTH + 1) + b"1" + b"}" * (DEPTH + 1), -32600, "nested"),
    ],
    ids=[
        "truncated-json",
        "empty",
        "invalid-utf8",
        "string",
        "number",
        "jsonrpc-1.0",
        "no-jsonrpc",
        "object-id",
        "bool-id",
        "float-id",
        "number-method",
        "array-params",
        "deep-array",
        "deep-object",
    ],
)
async def test_malformed_json_rpc_gets_the_protocol_error(
    http: httpx.AsyncClient, body: bytes, code: int, words: str
) -> None:
    error = error_of(await rpc(http, body))
    assert error["code"] == code
    assert words in error["message"]
    await still_answers(http)


async def test_the_request_id_is_echoed_when_the_envelope_has_a_good_one(
    http: httpx.AsyncClient,
) -> None:
    response = await rpc(
        http, b'{"jsonrpc": "2.0", "id": "abc", "method": "SendMessage", "params": 3}'
    )
    assert response.json()["id"] == "abc"
    assert response.json()["error"]["code"] == -32602


async def test_unknown_method_and_invalid_params_are_the_sdks_errors_without_a_traceback(
    http: httpx.AsyncClient,
) -> None:
    unknown = error_of(await rpc(http, json.dumps({**send_message(), "method": "Nope", "id": 9})))
    assert unknown["code"] == -32601
    bad = send_message()
    bad["params"]["message"]["role"] = {"not": "an enum"}
    invalid = error_of(await rpc(http, json.dumps(bad)))
    assert invalid["code"] == -32602
    empty = error_of(await rpc(http, json.dumps({**send_message(), "params": {}})))
    assert empty["code"] == -32602
    await still_answers(http)


async def chunked_upload(agent: Agent, size: int) -> httpx.Response:
    """POST ``size`` bytes without a Content-Length (chunked), unterminated; the response."""
    chunks = b"".join(b"400\r\n" + b" " * 1024 + b"\r\n" for _ in range(size // 1024))
    raw = await exchange(
        agent,
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"A2A-Version: 1.0\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks,
    )
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return httpx.Response(status, content=body)


async def test_a_body_over_the_limit_is_413_with_a_json_rpc_error(
    agent: Agent, http: httpx.AsyncClient
) -> None:
    big = json.dumps(send_message("x" * LIMIT))
    error = error_of(await rpc(http, big), 413)
    assert error["code"] == -32600
    assert f"the limit is {LIMIT} bytes" in error["message"]

    assert error_of(await chunked_upload(agent, LIMIT + 1024), 413)["code"] == -32600
    await still_answers(http)


async def test_an_announced_oversize_body_is_refused_before_it_is_sent(agent: Agent) -> None:
    host, port = agent.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 104857600\r\n\r\n"  # 100 MiB announced, none of it sent
        )
        await writer.drain()
        async with asyncio.timeout(STEP):
            head = await reader.readuntil(b"\r\n\r\n")
    finally:
        writer.close()
        await writer.wait_closed()
    assert head.startswith(b"HTTP/1.1 413 "), head


async def test_the_default_limit_is_one_mebibyte() -> None:
    async with serve_echo() as served, httpx.AsyncClient(base_url=served.url, timeout=10) as http:
        fits = await rpc(http, json.dumps(send_message("y" * (1024 * 1024 - 1024))))
        assert fits.status_code == 200 and "result" in fits.json()
        over = await rpc(http, json.dumps(send_message("y" * (1024 * 1024))))
        assert over.status_code == 413


async def test_content_type_and_version_errors_on_json_rpc(http: httpx.AsyncClient) -> None:
    plain = await http.post(
        "/", content=json.dumps(send_message()), headers={"Content-Type": "text/plain", **V1}
    )
    assert error_of(plain)["code"] == -32005
    unsupported = error_of(await rpc(http, json.dumps(send_message()), **{"A2A-Version": "99.0"}))
    assert unsupported["code"] == -32009
    missing = await http.post(
        "/", content=json.dumps(send_message()), headers={"Content-Type": "application/json"}
    )
    assert error_of(missing)["code"] == -32009  # no header reads as 0.3; SendMessage is 1.0
    await still_answers(http)


def rest_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert "Traceback" not in response.text
    error = response.json()["error"]
    assert error["code"] == status
    return dict(error)


async def test_http_json_bad_bodies_are_4xx_in_the_rest_error_shape(
    http: httpx.AsyncClient,
) -> None:
    url = "/a2a/rest/message:send"
    good = json.dumps({"message": send_message()["params"]["message"]})
    cases = [
        (b'{"message": ', "application/json", 400, "INVALID_ARGUMENT"),
        (b'{"message": "\xff"}', "application/json", 400, "INVALID_ARGUMENT"),
        (b"[" * 30_000 + b"]" * 30_000, "application/json", 400, "INVALID_ARGUMENT"),
        (good.encode(), "text/plain", 415, None),
        (b"x" * (LIMIT + 1), "application/json", 413, None),
        (b'{"message": {"role": 17.5}}', "application/json", 400, "INVALID_ARGUMENT"),
    ]
    for body, content_type, status, grpc_status in cases:
        response = await http.post(url, content=body, headers={"Content-Type": content_type, **V1})
        error = rest_error(response, status)
        if grpc_status:
            assert error["status"] == grpc_status
    version = await http.post(
        url, content=good, headers={"Content-Type": "application/json", "A2A-Version": "99.0"}
    )
    assert version.status_code == 400 and "99.0" in version.text
    unknown = await http.post("/a2a/rest/nowhere:at-all", content=good, headers=JSON)
    assert unknown.status_code == 404
    ok = await http.post(url, content=good, headers=JSON)
    assert ok.status_code == 200, ok.text
    assert "hello" in ok.text


async def test_grpc_caps_the_message_size_and_refuses_bad_fields(agent: Agent) -> None:
    metadata = (("a2a-version", "1.0"),)
    async with grpc.aio.insecure_channel(agent.grpc) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        big = SendMessageRequest()
        big.message.message_id = "big"
        big.message.role = 1
        big.message.parts.add().text = "z" * (LIMIT + 1)
        with pytest.raises(grpc.aio.AioRpcError) as too_big:
            await stub.SendMessage(big, metadata=metadata, timeout=STEP)
        assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        with pytest.raises(grpc.aio.AioRpcError) as empty:
            await stub.SendMessage(SendMessageRequest(), metadata=metadata, timeout=STEP)
        assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        good = SendMessageRequest()
        good.message.message_id = "fine"
        good.message.role = 1
        good.message.parts.add().text = "grpc still answers"
        reply = await stub.SendMessage(good, metadata=metadata, timeout=STEP)
    assert "grpc still answers" in str(reply)


async def test_an_endless_upload_is_read_only_up_to_the_limit() -> None:
    """Memory stays bounded: the middleware stops reading just past the limit."""
    reached: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(1)

    limits = RequestLimits(app, max_body_bytes=10_000)
    pulled = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"{" * 1000, "more_body": True}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(b"content-type", b"application/json")],
    }
    await limits(scope, receive, send)
    assert pulled == 11  # 11 000 bytes: one chunk past the limit, then it stops
    assert sent[0]["status"] == 413
    assert not reached
