"""library_ioa's corrections of the SDK's wire behaviour, on real servers and the SDK's client."""

from __future__ import annotations

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest
from a2a.utils.grpc_status import status_from_call
from compliance_servers import HOST
from google.rpc import error_details_pb2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from library_ioa.plugins.a2a.server.transport.corrections import HttpCorrections
from library_ioa.plugins.a2a.server.transport.grpc_corrections import GrpcVersionCheck

pytestmark = pytest.mark.timeout(30)

SEND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "SendMessage",
    "params": {"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "hi"}]}},
}
VERSION = {"A2A-Version": "1.0"}


async def test_rest_responses_are_labelled_application_json(conforming) -> None:
    async with httpx.AsyncClient(base_url=conforming.url) as http:
        sent = await http.post("/a2a/rest/message:send", json=SEND["params"], headers=VERSION)
        missing = await http.get("/a2a/rest/tasks/nope", headers=VERSION)
    assert sent.status_code == 200
    assert sent.headers["content-type"] == "application/json"
    assert sent.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/")
    assert missing.headers["content-type"] != "application/a2a+json"


async def test_a_jsonrpc_post_that_is_not_json_gets_content_type_not_supported(conforming) -> None:
    async with httpx.AsyncClient(base_url=conforming.url) as http:
        wrong = await http.post(
            "/", content=str(SEND).encode(), headers={"Content-Type": "text/plain", **VERSION}
        )
        right = await http.post("/", json=SEND, headers=VERSION)
    assert wrong.status_code == 200
    body = wrong.json()
    assert body["error"]["code"] == -32005
    assert "'text/plain' is not supported; send application/json" in body["error"]["message"]
    assert "result" in right.json()


async def test_the_agent_card_carries_cache_control_and_last_modified(conforming) -> None:
    async with httpx.AsyncClient(base_url=conforming.url) as http:
        card = await http.get("/.well-known/agent-card.json")
    assert card.status_code == 200
    assert card.headers["cache-control"] == "public, max-age=300"
    assert card.headers["last-modified"].endswith(" GMT")
    assert card.headers["etag"]


async def test_headers_the_app_already_sent_are_kept_once() -> None:
    async def card(_: Request) -> Response:
        return Response("{}", media_type="application/json", headers={"Cache-Control": "no-store"})

    async def rest(_: Request) -> Response:
        return Response("{}", media_type="application/problem+json")

    inner = Starlette(
        routes=[Route("/.well-known/agent-card.json", card), Route("/a2a/rest/x", rest)]
    )
    app = HttpCorrections(inner, card_max_age=60, published=0)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as http:
        got = await http.get("/.well-known/agent-card.json")
        problem = await http.get("/a2a/rest/x")
    assert got.headers.get_list("cache-control") == ["no-store"]
    assert got.headers["last-modified"] == "Thu, 01 Jan 1970 00:00:00 GMT"
    assert problem.headers["content-type"] == "application/problem+json"


def test_a_negative_card_max_age_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="card_max_age: -1 is negative"):
        HttpCorrections(Starlette(), card_max_age=-1)


def _request() -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id="g-1", parts=[Part(text="hi")])
    return SendMessageRequest(message=message)


async def test_grpc_refuses_an_unsupported_version_with_the_a2a_error_shape(conforming) -> None:
    async with grpc.aio.insecure_channel(f"{HOST}:{conforming.grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(_request(), metadata=[("a2a-version", "99.0")], timeout=5)
        served = await stub.SendMessage(_request(), metadata=[("a2a-version", "1.0")], timeout=5)
        unlabelled = await stub.GetTask(GetTaskRequest(id=served.task.id), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "A2A-Version '99.0' is not supported; supported: 1.0" in (refused.value.details() or "")
    status = status_from_call(refused.value)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.domain, info.reason) == ("a2a-protocol.org", "VERSION_NOT_SUPPORTED")
    assert served.task.status.state != 0
    assert unlabelled.id == served.task.id


async def test_grpc_streaming_calls_are_refused_too(conforming) -> None:
    async with grpc.aio.insecure_channel(f"{HOST}:{conforming.grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        stream = stub.SendStreamingMessage(_request(), metadata=[("a2a-version", "2.1")], timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in stream:
                pass
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED


@pytest.mark.parametrize(
    ("version", "accepted"), [("1.0", True), ("1.0.3", True), ("0.3", False), ("1", False)]
)
def test_version_acceptance(version: str, accepted: bool) -> None:
    assert GrpcVersionCheck().accepts(version) is accepted
