"""``GrpcSend`` against the SDK's own gRPC client: the same answers and errors, pinned.

``GrpcSend`` relies on a2a-sdk 1.3's private ``_map_grpc_error`` and does by hand what the
SDK client's ``send_message`` does for ``A2AAgentComm``'s configuration; these tests send the
same requests both ways to a served agent and compare what a caller sees.
"""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from a2a.client import A2AClientError, Client
from a2a.client.base_client import BaseClient
from a2a.types import (
    AgentCard,
    AgentInterface,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
)
from a2a.utils.errors import TaskNotFoundError
from a2a_support import STEP, Served, free_port, sdk_client
from google.protobuf.json_format import MessageToDict
from test_a2a_delegation import outbound

from library_ioa.plugins.a2a.agent_comm import A2AAgentComm
from library_ioa.plugins.a2a.grpc_send import GrpcSend, current_interface

pytestmark = pytest.mark.integration


def request(text: str, *, task_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            context_id="ctx-grpc-send",
            task_id=task_id,
            parts=[Part(text=text)],
        )
    )


def shape(answer: Any) -> dict[str, Any]:
    """What a caller reads of an answer, without the ids and times each send makes anew."""
    body = MessageToDict(answer)
    kind, content = next(iter(body.items()))
    for key in ("id", "messageId", "taskId"):
        content.pop(key, None)
    content.get("status", {}).pop("timestamp", None)
    content.get("status", {}).get("message", {}).pop("messageId", None)
    content.get("status", {}).get("message", {}).pop("taskId", None)
    for item in content.get("history", []):
        item.pop("messageId", None)
        item.pop("taskId", None)
    for artifact in content.get("artifacts", []):
        artifact.pop("artifactId", None)
    return {kind: content}


async def sdk_answer(client: Client, sent: SendMessageRequest) -> StreamResponse:
    answers = [a async for a in client.send_message(sent)]
    assert len(answers) == 1
    return answers[0]


@pytest.mark.parametrize("text", ["a quick answer", "artifacts"])
async def test_the_stub_send_answers_what_the_sdk_client_answers(served: Served, text: str) -> None:
    channel = grpc.aio.insecure_channel(served.grpc_address)
    try:
        ours = await GrpcSend(channel, headers={}).send(request(text))
        async with sdk_client(served, "grpc") as client:
            theirs = await sdk_answer(client, request(text))
    finally:
        await channel.close()
    assert shape(ours) == shape(theirs)
    assert ours.HasField("task") == (text == "artifacts")


async def test_an_a2a_error_is_the_sdk_clients_error(served: Served) -> None:
    channel = grpc.aio.insecure_channel(served.grpc_address)
    try:
        with pytest.raises(TaskNotFoundError) as ours:
            await GrpcSend(channel, headers={}).send(request("hi", task_id="no-such-task"))
        async with sdk_client(served, "grpc") as client:
            with pytest.raises(TaskNotFoundError) as theirs:
                await sdk_answer(client, request("hi", task_id="no-such-task"))
    finally:
        await channel.close()
    assert str(ours.value) == str(theirs.value)
    assert isinstance(ours.value.__cause__, grpc.aio.AioRpcError)


async def test_an_unreachable_peer_is_the_sdk_clients_error_with_the_status_chained() -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{free_port()}")  # nobody listens
    try:
        with pytest.raises(A2AClientError) as raised:
            await GrpcSend(channel, headers={}).send(request("hi"))
    finally:
        await channel.close()
    assert str(raised.value).startswith("gRPC Error UNAVAILABLE")
    cause = raised.value.__cause__
    assert isinstance(cause, grpc.aio.AioRpcError)
    assert cause.code() == grpc.StatusCode.UNAVAILABLE


def test_only_a_current_interface_is_called_on_the_stub() -> None:
    card = AgentCard(
        supported_interfaces=[
            AgentInterface(url="old:1", protocol_binding="GRPC", protocol_version="0.3"),
            AgentInterface(url="new:2", protocol_binding="GRPC", protocol_version="1.0"),
            AgentInterface(url="new:2", protocol_binding="JSONRPC", protocol_version="1.0"),
        ]
    )
    assert current_interface(card, "new:2") == card.supported_interfaces[1]
    assert current_interface(card, "old:1") is None  # the SDK's compat transport's


async def test_a_delegation_over_grpc_skips_the_sdk_clients_send(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails before GrpcSend: every send went through ``BaseClient.send_message``."""

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("BaseClient.send_message was called")

    monkeypatch.setattr(BaseClient, "send_message", refuse)
    comm = A2AAgentComm(served.url, timeout=STEP)
    try:
        reply = await comm.send(outbound("over the stub"))
    finally:
        await comm.aclose()
    assert (reply.status, reply.text) == ("completed", "over the stub")
    assert served.runner.seen[0].metadata["mas.correlation_id"] == "corr-42"
