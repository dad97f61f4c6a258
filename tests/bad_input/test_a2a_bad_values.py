"""JSON values of the wrong kind (issue 23, items 8 and 10): the protocol's error on every
transport and path, no traceback in the answer or the log, the server keeps serving.

- a ``method`` that is an array or an object, on the hot lane's head (``A2A-Version: 1.0``)
  and without it;
- NaN, Infinity and a number that overflows a float in request metadata, message metadata
  and a data part: invalid params on JSON-RPC (1.0 and 0.3, blocking and streaming),
  HTTP+JSON and gRPC;
- a JSON-RPC notification (no ``id``): refused with -32600 and ``"id": null``, never run.
"""

from __future__ import annotations

import json
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import CancelTaskRequest, SendMessageRequest, a2a_pb2_grpc
from bad_input_support import JSON, PROTOCOL_MARKS, STEP, Agent, send_message, user_message

from library_ioa.plugins.a2a.server.metrics import A2A_REQUESTS

pytestmark = PROTOCOL_MARKS

V03 = {"Content-Type": "application/json"}  # no A2A-Version: read as 0.3
GRPC_V1 = (("a2a-version", "1.0"),)


async def still_answers(http: httpx.AsyncClient) -> None:
    response = await http.post("/", content=json.dumps(send_message("still there?")), headers=JSON)
    assert response.status_code == 200 and "still there?" in response.text, response.text


def rpc_error(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, (response.status_code, response.text)
    assert "Traceback" not in response.text
    error = response.json()["error"]
    assert isinstance(error, dict)
    return error


@pytest.mark.parametrize("method", [["SendMessage"], {"SendMessage": 1}, [], {}])
@pytest.mark.parametrize("headers", [JSON, V03], ids=["hot-lane-head", "no-version"])
async def test_a_method_that_is_not_a_string_is_invalid_request(
    http: httpx.AsyncClient, method: Any, headers: dict[str, str]
) -> None:
    body = {**send_message(), "method": method}
    error = rpc_error(await http.post("/", content=json.dumps(body), headers=headers))
    assert error["code"] == -32600, error
    assert "'method' must be a string" in error["message"]
    await still_answers(http)


# The JSON text of each number, the name the error gives it; json.dumps writes NaN/Infinity.
BAD_NUMBERS = [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity")]
BAD_NUMBERS += [("1e999", "Infinity")]


def with_number(request: dict[str, Any], place: str, literal: str) -> str:
    """``request`` as JSON with ``literal`` at ``place`` of its 1.0 ``params``."""
    params = request["params"]
    marker = "__bad_number__"
    if place == "metadata":
        params["metadata"] = {"score": marker}
    elif place == "message.metadata":
        params["message"]["metadata"] = {"score": marker}
    else:
        params["message"]["parts"].append({"data": {"nested": [1, {"score": marker}]}})
    return json.dumps(request).replace(f'"{marker}"', literal)


PLACES = {
    "metadata": "metadata.score",
    "message.metadata": "message.metadata.score",
    "data": "message.parts[1].data.nested[1].score",
}


@pytest.mark.parametrize(("literal", "name"), BAD_NUMBERS, ids=[n for n, _ in BAD_NUMBERS])
@pytest.mark.parametrize("place", list(PLACES))
async def test_a_non_finite_number_is_invalid_params_on_json_rpc(
    http: httpx.AsyncClient, literal: str, name: str, place: str
) -> None:
    for method in ("SendMessage", "SendStreamingMessage"):
        body = with_number({**send_message(rid="n-1"), "method": method}, place, literal)
        error = rpc_error(await http.post("/", content=body, headers=JSON))
        assert error["code"] == -32602, error
        assert error["message"].startswith(f"{PLACES[place]}: {name} is not a JSON number")
    await still_answers(http)


async def test_a_non_finite_number_is_invalid_params_on_a_0_3_send(
    http: httpx.AsyncClient,
) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "messageId": "m-nan",
                "kind": "message",
                "parts": [{"kind": "text", "text": "x"}],
                "metadata": {"score": "__bad_number__"},
            }
        },
    }
    body = json.dumps(request).replace('"__bad_number__"', "NaN")
    error = rpc_error(await http.post("/", content=body, headers=V03))
    assert error["code"] == -32602, error
    assert "NaN is not a JSON number" in error["message"]
    await still_answers(http)


@pytest.mark.parametrize("place", list(PLACES))
async def test_a_non_finite_number_is_400_on_http_json(http: httpx.AsyncClient, place: str) -> None:
    body = with_number(send_message(), place, "Infinity")
    rest = json.dumps(json.loads(body)["params"])  # json writes Infinity back as it read it
    for path in ("/a2a/rest/message:send", "/a2a/rest/message:stream"):
        response = await http.post(path, content=rest, headers=JSON)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT"
        assert error["message"].startswith(f"{PLACES[place]}: Infinity is not a JSON number")
    await still_answers(http)


def grpc_send(place: str, value: float) -> SendMessageRequest:
    request = SendMessageRequest()
    request.message.message_id = "grpc-nan"
    request.message.role = 1
    request.message.parts.add().text = "x"
    if place == "metadata":
        request.metadata["score"] = value
    elif place == "message.metadata":
        request.message.metadata["score"] = value
    else:
        data = request.message.parts.add().data
        data.struct_value.update({"nested": [1, {"score": value}]})
    return request


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("place", list(PLACES))
async def test_a_non_finite_number_is_invalid_argument_on_grpc(
    agent: Agent, place: str, value: float
) -> None:
    async with grpc.aio.insecure_channel(agent.grpc) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as unary:
            await stub.SendMessage(grpc_send(place, value), metadata=GRPC_V1, timeout=STEP)
        with pytest.raises(grpc.aio.AioRpcError) as streamed:
            stream = stub.SendStreamingMessage(
                grpc_send(place, value), metadata=GRPC_V1, timeout=STEP
            )
            async for _ in stream:
                pass
        cancel = CancelTaskRequest(id="no-such-task")
        cancel.metadata["score"] = value
        with pytest.raises(grpc.aio.AioRpcError) as canceled:
            await stub.CancelTask(cancel, metadata=GRPC_V1, timeout=STEP)
        good = grpc_send(place, 0.5)
        reply = await stub.SendMessage(good, metadata=GRPC_V1, timeout=STEP)
    for refused in (unary.value, streamed.value):
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused
        assert (refused.details() or "").startswith(f"{PLACES[place]}: ")
    assert canceled.value.code() == grpc.StatusCode.INVALID_ARGUMENT, canceled.value
    assert (canceled.value.details() or "").startswith("metadata.score: ")
    assert reply.HasField("message") or reply.HasField("task")


@pytest.mark.parametrize("headers", [JSON, V03], ids=["1.0", "no-version"])
@pytest.mark.parametrize("method", ["SendMessage", "GetTask", "message/send"])
async def test_a_notification_is_refused_and_not_run(
    http: httpx.AsyncClient, headers: dict[str, str], method: str
) -> None:
    text = f"notified {method}"
    params: dict[str, Any] = {"message": user_message(text)}
    if method == "GetTask":
        params = {"id": "some-task"}
    elif method == "message/send":
        v03_parts = [{"kind": "text", "text": text}]
        params["message"].update(role="user", kind="message", parts=v03_parts)
    body = {"jsonrpc": "2.0", "method": method, "params": params}
    before = requests_handled()
    response = await http.post("/", content=json.dumps(body), headers=headers)
    error = rpc_error(response)
    assert response.json()["id"] is None
    assert error["code"] == -32600, error
    assert "notification" in error["message"]
    assert requests_handled() == before  # it never reached the request handler
    await still_answers(http)


async def test_an_explicit_null_id_is_still_answered(http: httpx.AsyncClient) -> None:
    before = requests_handled()
    response = await http.post("/", content=json.dumps(send_message("null id", None)), headers=JSON)
    assert response.status_code == 200
    assert response.json()["id"] is None
    assert "null id" in response.text
    assert requests_handled() == before + 1


def requests_handled() -> float:
    """Every request the echo agent's request handler counted (any method and outcome)."""
    return sum(
        sample.value
        for metric in A2A_REQUESTS.collect()
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels.get("agent") == "echo"
    )
