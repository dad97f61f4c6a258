"""gRPC ``SendMessage`` on the fast servicer answers exactly what the SDK's servicer answers.

Two exposures of the same scripted agent serve gRPC side by side: one with the fast path
(``FastGrpcHandler`` on ``FastSendHandler``, the default), one with ``fast_send=False``
(the SDK's ``GrpcHandler`` and ``DefaultRequestHandler`` only). Each case sends the same
request through the generated stub to both and compares what a caller reads: the
response as JSON (generated ids and times replaced), or the status code, its message and
the ``google.rpc`` details in the trailing metadata.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    a2a_pb2_grpc,
)
from a2a_support import STEP
from fast_path_support import EXPOSURES, exposure, normalised
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from google.rpc import status_pb2

from library_ioa.plugins.a2a.server.fast import grpc_handler as fast_grpc

pytestmark = pytest.mark.integration

V1 = (("a2a-version", "1.0"),)
Stubs = tuple[a2a_pb2_grpc.A2AServiceStub, a2a_pb2_grpc.A2AServiceStub]


@contextlib.asynccontextmanager
async def _stubs(message_grace: float = 5.0) -> AsyncIterator[Stubs]:
    async with (
        exposure(fast=True, grpc=True, message_grace=message_grace) as fast,
        exposure(fast=False, grpc=True, message_grace=message_grace) as sdk,
    ):
        channels = [grpc.aio.insecure_channel(EXPOSURES[url].grpc_address) for url in (fast, sdk)]
        try:
            yield a2a_pb2_grpc.A2AServiceStub(channels[0]), a2a_pb2_grpc.A2AServiceStub(channels[1])
        finally:
            for channel in channels:
                await channel.close()


@pytest.fixture
async def stubs() -> AsyncIterator[Stubs]:
    async with _stubs() as pair:
        yield pair


@pytest.fixture
def plain_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What ``send_response`` answered: proof that a request took the fast servicer's path."""
    answered: list[Any] = []
    original = fast_grpc.send_response

    def counted(answer: Any) -> Any:
        answered.append(answer)
        return original(answer)

    monkeypatch.setattr(fast_grpc, "send_response", counted)
    return answered


async def _call(stub: a2a_pb2_grpc.A2AServiceStub, request: SendMessageRequest) -> Any:
    """What a caller reads: the response as normalised JSON, or the error's parts."""
    try:
        response = await stub.SendMessage(request, metadata=V1, timeout=STEP)
    except grpc.aio.AioRpcError as exc:
        details = [
            MessageToDict(detail)
            for key, value in exc.trailing_metadata() or ()
            if key == "grpc-status-details-bin"
            for detail in status_pb2.Status.FromString(value).details
        ]
        return {"code": exc.code().name, "details": exc.details(), "status": normalised(details)}
    return normalised(MessageToDict(response))


async def _both(stubs: Stubs, request: SendMessageRequest) -> Any:
    answers = [await _call(stub, request) for stub in stubs]
    assert answers[0] == answers[1]
    return answers[0]


def _send(*texts: str, **fields: Any) -> SendMessageRequest:
    message = {"role": Role.ROLE_USER, "message_id": "m-1", **fields}
    return SendMessageRequest(message=Message(parts=[Part(text=t) for t in texts], **message))


async def test_a_quick_turn_is_the_same_message(stubs: Stubs, plain_calls: list[Any]) -> None:
    answer = await _both(stubs, _send("quick hello"))
    assert answer == {
        "message": {
            "messageId": "<uuid>",
            "contextId": "<uuid>",
            "role": "ROLE_AGENT",
            "parts": [{"text": "hello"}],
        }
    }
    assert len(plain_calls) == 1  # the fast exposure's answer came from the short path


async def test_the_context_id_and_every_text_part_are_kept(
    stubs: Stubs, plain_calls: list[Any]
) -> None:
    answer = await _both(stubs, _send("quick one", "two", "", context_id="ctx-7"))
    assert answer["message"]["contextId"] == "ctx-7"
    assert answer["message"]["parts"] == [{"text": "one\ntwo\n"}]
    assert len(plain_calls) == 1


@pytest.mark.parametrize(
    "text", ["echo one two three", "artifacts", "fail it broke", "ask which day?", "héllo ✓"]
)
async def test_every_kind_of_turn_is_answered_alike(
    stubs: Stubs, plain_calls: list[Any], text: str
) -> None:
    answer = await _both(stubs, _send(text, context_id=f"ctx {text}"))
    assert "message" in answer or "task" in answer, answer
    assert len(plain_calls) == 1


@pytest.mark.parametrize(
    "request_",
    [
        _send("quick no id", message_id=""),
        _send(),
        _send("quick nobody", role=Role.ROLE_UNSPECIFIED),
        _send("quick on a task", task_id="no-such-task"),
        _send("quick with metadata", metadata=Struct(fields={})),
        _send("quick refs", reference_task_ids=["t-1"]),
        _send("quick ext", extensions=["https://example.invalid/ext"]),
        SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER,
                message_id="m-1",
                parts=[Part(text="quick typed", media_type="text/plain")],
            )
        ),
        SendMessageRequest(
            message=Message(role=Role.ROLE_USER, message_id="m-1", parts=[Part(url="x:/y")])
        ),
        SendMessageRequest(message=_send("quick tenant").message, tenant="t1"),
        SendMessageRequest(
            message=_send("quick history").message,
            configuration=SendMessageConfiguration(history_length=-1),
        ),
        SendMessageRequest(
            message=_send("quick now").message,
            configuration=SendMessageConfiguration(return_immediately=True),
        ),
        SendMessageRequest(),
    ],
)
async def test_other_requests_take_the_sdk_path_and_get_the_same_answer(
    stubs: Stubs, plain_calls: list[Any], request_: SendMessageRequest
) -> None:
    await _both(stubs, request_)
    assert plain_calls == []


async def test_a_follow_up_continues_the_context_of_a_message_answer(stubs: Stubs) -> None:
    for stub in stubs:
        first = await stub.SendMessage(_send("quick first"), metadata=V1, timeout=STEP)
        context_id = first.message.context_id
        assert not first.message.task_id
        again = await stub.SendMessage(
            _send("history", context_id=context_id, message_id="m-2"), metadata=V1, timeout=STEP
        )
        assert again.message.context_id == context_id
        assert again.message.parts[0].text == "quick first"


async def test_past_the_grace_both_complete_a_task_with_the_chunks(plain_calls: list[Any]) -> None:
    async with _stubs(message_grace=0.0) as pair:
        answer = await _both(pair, _send("echo a b c"))
    task = answer["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "".join(p["text"] for p in task["artifacts"][0]["parts"]) == "echo a b c"
    assert len(plain_calls) == 1
