"""Task lifecycle across turns: cancel, queued extra messages, concurrency, push, 0.3 names."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_message_text
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from a2a.utils.push_url_validator import validate_push_notification_url
from a2a_support import (
    STEP,
    TRANSPORTS,
    Served,
    eventually,
    sdk_client,
    send,
    serve_agent,
    user_message,
    wait_for,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from library_ioa.serving.listeners import HttpListener

pytestmark = pytest.mark.integration


def reply_text(response: StreamResponse) -> str:
    if response.HasField("message"):
        return get_message_text(response.message)
    return get_message_text(response.task.status.message)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancel_during_a_slow_turn_reports_canceled_and_keeps_the_turn(
    served: Served, transport: str
) -> None:
    context = f"ctx-{uuid.uuid4().hex[:8]}"
    async with sdk_client(served, transport) as client:
        [started] = await send(
            client, user_message("wait g1 slow answer", context_id=context), return_immediately=True
        )
        task_id = started.task.id
        await wait_for(served.runner.started["g1"])
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        # the runtime turn was not interrupted: it is still running inside the mailbox
        assert served.mailbox.running(context)
        assert served.runner.history[context] == []
        served.runner.gates["g1"].set()

        async def finished() -> bool:
            return not served.mailbox.running(context)

        await eventually(finished, "the canceled call's turn finishes in the background")
        [after] = await send(client, user_message("history", context_id=context))
        stored = await client.get_task(GetTaskRequest(id=task_id))
    assert reply_text(after) == "wait g1 slow answer"  # its effect is kept
    assert stored.status.state == TaskState.TASK_STATE_CANCELED


async def test_cancel_of_a_queued_turn_withdraws_it(served: Served) -> None:
    context = f"ctx-{uuid.uuid4().hex[:8]}"
    async with sdk_client(served) as client:
        await send(
            client, user_message("wait g2 first", context_id=context), return_immediately=True
        )
        await wait_for(served.runner.started["g2"])
        [queued] = await send(
            client, user_message("quick never runs", context_id=context), return_immediately=True
        )
        canceled = await client.cancel_task(CancelTaskRequest(id=queued.task.id))
        served.runner.gates["g2"].set()
        [after] = await send(client, user_message("history", context_id=context))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert reply_text(after) == "wait g2 first"
    assert all(t.text != "quick never runs" for t in served.runner.seen)


@pytest.mark.parametrize("transport", ["jsonrpc", "grpc"])
async def test_extra_messages_on_a_working_task_are_queued_not_preempting(
    served: Served, transport: str
) -> None:
    async with sdk_client(served, transport) as client:
        [started] = await send(client, user_message("wait g3 first reply"), return_immediately=True)
        task = started.task
        await wait_for(served.runner.started["g3"])
        second = asyncio.create_task(
            send(
                client,
                user_message("quick second reply", task_id=task.id, context_id=task.context_id),
            )
        )

        async def queued() -> bool:
            return served.exposure.executor.pending(task.id) == 1

        await eventually(queued, "the extra message waits behind the working turn")
        assert [t.text for t in served.runner.seen][-1] == "wait g3 first reply"
        served.runner.gates["g3"].set()
        [done] = await second
        stored = await client.get_task(GetTaskRequest(id=task.id))
    assert done.task.id == task.id
    assert done.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(done.task.status.message) == "second reply"
    texts = [t.text for t in served.runner.seen]
    assert texts.index("wait g3 first reply") < texts.index("quick second reply")
    agent_replies = [get_message_text(m) for m in stored.history if m.role == 2]
    assert "first reply" in agent_replies  # the first turn ran to its end
    users = [get_message_text(m) for m in stored.history if m.role == 1]
    assert users == ["wait g3 first reply", "quick second reply"]


# 600 SDK round trips on one event loop: 38 s at load 16, past the former 90 s budget at
# load 30. The deadline bounds the observable end of every session, not a pace.
@pytest.mark.timeout(300)
async def test_per_session_order_under_200_concurrent_sessions(served: Served) -> None:
    sessions, turns = 200, 3

    async def one_session(client: object, index: int) -> list[str]:
        context = f"s{index}"
        replies = []
        for turn in range(turns):
            text = f"barrier {sessions}" if turn == 0 else f"quick {context}-{turn}"
            message = user_message(text, context_id=context)
            [response] = await send(client, message, timeout=240)  # type: ignore[arg-type]
            replies.append(reply_text(response))
        return replies

    async with sdk_client(served, connections=sessions + 10) as client:
        async with asyncio.timeout(240):
            results = await asyncio.gather(*(one_session(client, i) for i in range(sessions)))
    # every session's first turn waited for all 200 to start: they ran in parallel
    assert served.runner.arrived == sessions
    for index, replies in enumerate(results):
        assert replies == [f"barrier {sessions}", f"s{index}-1", f"s{index}-2"]
        seen = [t.text for t in served.runner.seen if t.session_id == f"s{index}"]
        assert seen == [f"barrier {sessions}", f"quick s{index}-1", f"quick s{index}-2"]


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[tuple[dict[str, str], dict[str, object]]]]]:
    received: list[tuple[dict[str, str], dict[str, object]]] = []

    async def collect(request: Request) -> Response:
        received.append((dict(request.headers), await request.json()))
        return Response(status_code=204)

    listener = HttpListener(
        Starlette(routes=[Route("/hook", collect, methods=["POST"])]),
        "127.0.0.1",
        0,
        graceful_timeout=1,
    )
    await listener.start()
    try:
        yield f"http://127.0.0.1:{listener.port}/hook", received
    finally:
        await listener.aclose()


async def test_push_notifications_reach_a_local_receiver(
    served: Served, receiver: tuple[str, list[tuple[dict[str, str], dict[str, object]]]]
) -> None:
    url, received = receiver
    request = SendMessageRequest(message=user_message("pushed words here"))
    request.configuration.task_push_notification_config.CopyFrom(
        TaskPushNotificationConfig(url=url, token="secret-token")
    )
    async with sdk_client(served) as client, asyncio.timeout(STEP):
        [response] = [r async for r in client.send_message(request)]

    def completed() -> bool:
        return any(
            body.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
            for _, body in received
        )

    async def check() -> bool:
        return completed()

    await eventually(check, "the completed status is pushed")
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert all(h.get("x-a2a-notification-token") == "secret-token" for h, _ in received)
    assert any("artifactUpdate" in body for _, body in received)
    task_ids = {
        next(iter(body.values()))["taskId"] if "task" not in body else body["task"]["id"]
        for _, body in received
    }
    assert task_ids == {response.task.id}


async def jsonrpc(url: str, method: str, params: dict[str, object], **headers: str) -> dict:  # type: ignore[type-arg]
    async with httpx.AsyncClient(timeout=STEP) as http:
        reply = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
            headers=headers,
        )
    assert reply.status_code == 200, reply.text
    return reply.json()  # type: ignore[no-any-return]


async def test_0_3_method_names_on_json_rpc(served: Served) -> None:
    message = {
        "role": "user",
        "parts": [{"kind": "text", "text": "quick old client"}],
        "messageId": "m-03",
        "kind": "message",
        "contextId": "ctx-03",
    }
    sent = await jsonrpc(served.url, "message/send", {"message": message})
    assert sent["result"]["kind"] == "message"
    assert sent["result"]["parts"][0]["text"] == "old client"
    long = {**message, "messageId": "m-03b", "parts": [{"kind": "text", "text": "artifacts"}]}
    task = (await jsonrpc(served.url, "message/send", {"message": long}))["result"]
    assert (task["kind"], task["status"]["state"]) == ("task", "completed")
    got = await jsonrpc(served.url, "tasks/get", {"id": task["id"]})
    assert got["result"]["status"]["state"] == "completed"
    refused = await jsonrpc(served.url, "tasks/cancel", {"id": task["id"]})
    assert refused["error"]["code"] == -32002  # a completed task is not cancelable


async def test_0_3_rest_and_1_0_json_rpc_side_by_side(served: Served) -> None:
    async with httpx.AsyncClient(timeout=STEP) as http:
        old = await http.post(
            f"{served.url}/a2a/rest/v1/message:send",
            json={
                "message": {
                    "role": "ROLE_USER",
                    "content": [{"text": "quick rest03"}],
                    "messageId": "m-r03",
                }
            },
        )
    assert old.status_code == 200, old.text
    assert old.json()["message"]["content"][0]["text"] == "rest03"
    current = await jsonrpc(
        served.url,
        "SendMessage",
        {"message": {"role": "ROLE_USER", "parts": [{"text": "quick v1"}], "messageId": "m-v1"}},
        **{"A2A-Version": "1.0"},
    )
    assert current["result"]["message"]["parts"][0]["text"] == "v1"


async def test_bad_requests_get_protocol_errors_and_the_server_stays_up(served: Served) -> None:
    async with httpx.AsyncClient(timeout=STEP) as http:
        garbage = await http.post(
            served.url,
            content=b"{not json",
            headers={"A2A-Version": "1.0", "Content-Type": "application/json"},
        )
        untyped = await http.post(served.url, content=b"{}", headers={"A2A-Version": "1.0"})
        unknown = await jsonrpc(served.url, "NoSuchMethod", {}, **{"A2A-Version": "1.0"})
        no_task = await jsonrpc(served.url, "GetTask", {"id": "missing"}, **{"A2A-Version": "1.0"})
        health = await http.get(f"{served.url}/healthz")
    assert garbage.json()["error"]["code"] == -32700
    assert untyped.json()["error"]["code"] == -32005  # the protocol's content-type error
    assert unknown["error"]["code"] == -32601
    assert no_task["error"]["code"] == -32001
    assert health.status_code == 200


async def test_a_full_session_mailbox_fails_the_task_with_a_clear_message() -> None:
    async with (
        serve_agent(grpc_on=False, max_pending_per_session=1) as agent,
        sdk_client(agent) as client,
    ):
        await send(client, user_message("wait g4 busy", context_id="full"), return_immediately=True)
        await wait_for(agent.runner.started["g4"])
        await send(client, user_message("quick queued", context_id="full"), return_immediately=True)
        [refused] = await send(client, user_message("quick one too many", context_id="full"))
        agent.runner.gates["g4"].set()
    assert refused.task.status.state == TaskState.TASK_STATE_FAILED
    text = get_message_text(refused.task.status.message)
    assert "session 'full'" in text and "max_pending_per_session=1" in text


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_the_sdk_0_3_client_transports_work(served: Served, binding: str) -> None:
    channels: list[grpc.aio.Channel] = []

    def channel(target: str) -> grpc.aio.Channel:
        channels.append(grpc.aio.insecure_channel(target))
        return channels[-1]

    async with httpx.AsyncClient(timeout=STEP) as http:
        card = await A2ACardResolver(http, served.url).get_agent_card()
        legacy = AgentCard()
        legacy.CopyFrom(card)
        del legacy.supported_interfaces[:]
        legacy.supported_interfaces.extend(
            i for i in card.supported_interfaces if i.protocol_version == "0.3"
        )
        config = ClientConfig(
            streaming=False,
            httpx_client=http,
            grpc_channel_factory=channel,
            supported_protocol_bindings=[binding],
        )
        client = ClientFactory(config).create(legacy)
        # the SDK's 0.3 transports, not its 1.0 ones
        assert type(client._transport).__name__.startswith("Compat")  # type: ignore[attr-defined]
        try:
            [quick] = await send(client, user_message("quick from 0.3"))
            [task] = await send(client, user_message("artifacts"))
        finally:
            await client.close()
            for made in channels:
                await made.close()
    assert reply_text(quick) == "from 0.3"
    assert task.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert {a.name for a in task.task.artifacts} == {"notes.txt", "result.json", "blob.bin", "link"}


async def test_a_message_on_a_finished_task_is_refused_not_swallowed(served: Served) -> None:
    async with sdk_client(served) as client:
        [done] = await send(client, user_message("echo all done"), return_immediately=True)

        async def completed() -> bool:
            task = await client.get_task(GetTaskRequest(id=done.task.id))
            return task.status.state == TaskState.TASK_STATE_COMPLETED

        await eventually(completed, "the first turn completes")
        late = user_message("quick too late", task_id=done.task.id, context_id=done.task.context_id)
        with pytest.raises(UnsupportedOperationError) as refused:
            await send(client, late)
    assert str(refused.value) == (
        f"task {done.task.id} has ended; send the message without a taskId to start a new task"
    )
    assert "quick too late" not in [t.text for t in served.runner.seen]


async def test_push_urls_can_be_screened_to_public_addresses(
    receiver: tuple[str, list[tuple[dict[str, str], dict[str, object]]]],
) -> None:
    url, received = receiver
    request = SendMessageRequest(message=user_message("echo screened"))
    request.configuration.task_push_notification_config.CopyFrom(
        TaskPushNotificationConfig(url=url, token="t")
    )
    async with (
        serve_agent(
            grpc_on=False,
            pushNotifications=True,
            push_url_validator=validate_push_notification_url,
        ) as agent,
        sdk_client(agent) as client,
    ):
        with pytest.raises(InvalidParamsError, match="Invalid push notification URL"):
            async with asyncio.timeout(STEP):
                [_ async for _ in client.send_message(request)]
    assert received == []
    assert agent.runner.seen == []
