"""A version the endpoint does not serve is the protocol's VersionNotSupportedError, on every
transport and for both protocol versions served (1.0 and the 0.3 compatibility layer).

Raw requests (httpx, the generated gRPC stubs) against the echo agent served as
``mas-ctl serve`` serves it; the ``server_log`` fixture fails a test whose server logged a
traceback. JSON-RPC: -32009 with the SDK's ``google.rpc.ErrorInfo``; HTTP+JSON: the SDK's 400
``FAILED_PRECONDITION``; gRPC: ``UNIMPLEMENTED`` with the same ``ErrorInfo``
(``GrpcVersionCheck``). Never -32603.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc
from a2a.types import SendMessageRequest, a2a_pb2_grpc
from bad_input_support import PROTOCOL_MARKS, STEP, Agent, user_message
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

pytestmark = PROTOCOL_MARKS

REASON = "VERSION_NOT_SUPPORTED"
V1_METHODS = ("SendMessage", "SendStreamingMessage", "GetTask")
V03_METHODS = ("message/send", "message/stream", "tasks/get")
NOT_1_0 = (None, "0.3", "9.9", "abc")  # no header reads as 0.3
NOT_0_3 = ("1.0", "9.9", "1.1", "abc")


def v03_message(text: str = "hello") -> dict[str, Any]:
    """A 0.3 user message as JSON."""
    return {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": text}],
    }


def request_of(method: str) -> dict[str, Any]:
    """A JSON-RPC request of ``method`` (a 1.0 or a 0.3 name) with valid params."""
    if method in ("GetTask", "tasks/get"):
        params: dict[str, Any] = {"id": "no-such-task"}
    elif method in V1_METHODS:
        params = {"message": user_message()}
    else:
        params = {"message": v03_message()}
    return {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}


async def post_rpc(http: httpx.AsyncClient, method: str, version: str | None) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if version is not None:
        headers["A2A-Version"] = version
    return await http.post("/", content=json.dumps(request_of(method)), headers=headers)


def assert_version_error(response: httpx.Response, version: str | None) -> None:
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"  # not an event stream
    answer = response.json()
    error = answer["error"]
    assert error["code"] == -32009, answer
    assert answer["id"] == 5
    assert f"'{version or '0.3'}'" in error["message"]
    assert [detail["reason"] for detail in error["data"]] == [REASON]


@pytest.mark.parametrize("method", V03_METHODS)
async def test_a_0_3_method_with_a_version_it_does_not_serve_is_the_version_error(
    http: httpx.AsyncClient, method: str
) -> None:
    """Fails before the fix: -32603 (the 0.3 adapter knows no -32009)."""
    for version in NOT_0_3:
        assert_version_error(await post_rpc(http, method, version), version)
    refused = (await post_rpc(http, method, "1.0")).json()["error"]["message"]
    assert refused == (
        f"A2A-Version '1.0' is not supported by the 0.3 method '{method}'; send A2A-Version "
        "0.3 (or none) with the 0.3 method names, or A2A-Version 1.0 with the 1.0 names "
        "(SendMessage, ...)"
    )
    for version in (None, "0.3", "0.3.1"):  # served: an answer, or the task's own error
        served = await post_rpc(http, method, version)
        if method == "message/stream":
            assert served.headers["content-type"].startswith("text/event-stream")
            assert "hello" in served.text
            continue
        answer = served.json()
        if method == "tasks/get":
            assert answer["error"]["code"] == -32001, answer  # TaskNotFoundError
        else:
            assert answer["result"]["parts"][0]["text"] == "hello", answer


@pytest.mark.parametrize("method", V1_METHODS)
async def test_a_1_0_method_with_a_version_it_does_not_serve_is_the_version_error(
    http: httpx.AsyncClient, method: str
) -> None:
    for version in NOT_1_0:
        assert_version_error(await post_rpc(http, method, version), version)
    assert "error" not in (await post_rpc(http, "SendMessage", "1.0")).json()


async def test_http_json_refuses_a_version_each_path_does_not_serve(
    http: httpx.AsyncClient,
) -> None:
    v1 = json.dumps({"message": user_message()})
    v03 = json.dumps(
        {"message": {"messageId": "r-1", "role": "ROLE_USER", "content": [{"text": "hello"}]}}
    )
    cases = [
        ("/a2a/rest/message:send", v1, ("0.3", "9.9"), "1.0"),
        ("/a2a/rest/message:stream", v1, ("0.3", "9.9"), "1.0"),
        ("/a2a/rest/v1/message:send", v03, ("1.0", "9.9"), "0.3"),
        ("/a2a/rest/v1/message:stream", v03, ("1.0", "9.9"), "0.3"),
    ]
    for path, body, refused, served in cases:
        for version in refused:
            headers = {"Content-Type": "application/json", "A2A-Version": version}
            response = await http.post(path, content=body, headers=headers)
            assert response.status_code == 400, (path, version, response.text)
            error = response.json()["error"]
            assert (error["code"], error["status"]) == (400, "FAILED_PRECONDITION")
            assert [detail["reason"] for detail in error["details"]] == [REASON]
            assert f"'{version}'" in error["message"]
        headers = {"Content-Type": "application/json", "A2A-Version": served}
        ok = await http.post(path, content=body, headers=headers)
        assert ok.status_code == 200 and "hello" in ok.text, (path, ok.text)


def reasons(error: grpc.aio.AioRpcError) -> list[str]:
    """The ``ErrorInfo`` reasons of a gRPC error's rich status."""
    trailing = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailing["grpc-status-details-bin"])
    found = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        assert detail.Unpack(info)
        found.append(info.reason)
    return found


def v1_send() -> SendMessageRequest:
    request = SendMessageRequest()
    request.message.message_id = uuid.uuid4().hex
    request.message.role = 1
    request.message.parts.add().text = "hello"
    return request


def v03_send() -> a2a_v0_3_pb2.SendMessageRequest:
    request = a2a_v0_3_pb2.SendMessageRequest()
    request.request.message_id = uuid.uuid4().hex
    request.request.role = a2a_v0_3_pb2.ROLE_USER
    request.request.content.add().text = "hello"
    return request


async def test_grpc_refuses_a_version_each_service_does_not_serve(agent: Agent) -> None:
    """Fails before the fix for the 0.3 service: a 1.0 or 9.9 call was served as 0.3."""
    async with grpc.aio.insecure_channel(agent.grpc) as channel:
        v1 = a2a_pb2_grpc.A2AServiceStub(channel)
        v03 = a2a_v0_3_pb2_grpc.A2AServiceStub(channel)
        calls = [
            (v1.SendMessage, v1_send, ("0.3", "9.9")),
            (v1.SendStreamingMessage, v1_send, ("0.3", "9.9")),
            (v03.SendMessage, v03_send, ("1.0", "9.9")),
            (v03.SendStreamingMessage, v03_send, ("1.0", "9.9")),
        ]
        for call, request, refused in calls:
            for version in refused:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    answer = call(request(), metadata=(("a2a-version", version),), timeout=STEP)
                    if hasattr(answer, "__aiter__"):
                        [_ async for _ in answer]
                    else:
                        await answer
                assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
                assert reasons(caught.value) == [REASON]
                assert f"'{version}'" in (caught.value.details() or "")
        # Served: each service's own version, and (as documented) a call without a version.
        for metadata in ((("a2a-version", "1.0"),), None):
            answer = await v1.SendMessage(v1_send(), metadata=metadata, timeout=STEP)
            assert answer.message.parts[0].text == "hello"
        for metadata in ((("a2a-version", "0.3"),), None):
            old = await v03.SendMessage(v03_send(), metadata=metadata, timeout=STEP)
            assert old.msg.content[0].text == "hello"
