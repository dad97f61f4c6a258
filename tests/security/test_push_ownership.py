"""Push configs (and tasks) belong to the principal that created the task (a2a.auth); without
auth, only a config given inline with the task's own SendMessage is attached (by default)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import (
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    a2a_pb2_grpc,
)
from security_support import API_KEY_HEADER, AUTH, V1, Secrets, echo_endpoint, serve

from library_ioa.plugins.a2a.exposure import A2AExposure

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

ECHO = {"echo": {"model": {"type": "echo"}}}
STEP = 10.0
HOOK = "http://127.0.0.1:9/hook"


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


@pytest.fixture
async def guarded(creds: Secrets) -> AsyncIterator[A2AExposure]:
    endpoint = echo_endpoint(
        auth=AUTH, capabilities={"pushNotifications": True}, push={"allow_private": True}
    )
    async with serve(ECHO, {"echo": endpoint}, "echo") as exposure:
        yield exposure


async def test_another_principal_cannot_attach_list_or_delete_push_configs(
    guarded: A2AExposure, creds: Secrets
) -> None:
    owner = {**V1, "Authorization": f"Bearer {creds.token}"}
    other = {**V1, API_KEY_HEADER: creds.api_key}
    async with httpx.AsyncClient(base_url=guarded.url, timeout=STEP) as http:
        message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "t"}]}
        send = rpc(
            "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
        )
        task_id = (await http.post("/", json=send, headers=owner)).json()["result"]["task"]["id"]
        attach = rpc("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": HOOK})
        listing = rpc("ListTaskPushNotificationConfigs", {"taskId": task_id})

        refused = (await http.post("/", json=attach, headers=other)).json()
        assert refused["error"]["code"] == -32001, refused  # TaskNotFoundError: says nothing
        created = (await http.post("/", json=attach, headers=owner)).json()["result"]
        config_id = created["id"]
        assert (await http.post("/", json=listing, headers=other)).json()["error"]["code"] == -32001
        delete = rpc("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": config_id})
        assert (await http.post("/", json=delete, headers=other)).json()["error"]["code"] == -32001
        rest = await http.get(f"/a2a/rest/tasks/{task_id}/pushNotificationConfigs", headers=other)
        assert rest.status_code == 404
        get = rpc("GetTask", {"id": task_id})
        assert (await http.post("/", json=get, headers=other)).json()["error"]["code"] == -32001
        mine = (await http.post("/", json=listing, headers=owner)).json()["result"]
        assert [c["id"] for c in mine["configs"]] == [config_id]  # nothing was deleted

    version = ("a2a-version", "1.0")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{guarded.grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        request = TaskPushNotificationConfig(task_id=task_id, url=HOOK)
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await stub.CreateTaskPushNotificationConfig(
                request, metadata=(version, ("x-api-key", creds.api_key)), timeout=STEP
            )
        assert denied.value.code() == grpc.StatusCode.NOT_FOUND
        listed = await stub.ListTaskPushNotificationConfigs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id),
            metadata=(version, ("authorization", f"Bearer {creds.token}")),
            timeout=STEP,
        )
        assert [c.id for c in listed.configs] == [config_id]


# Without a2a.auth: a standalone create cannot show the task's context, so it is refused
# (security.md); a config given inline with the task's own SendMessage is accepted.

REFUSED = "CreateTaskPushNotificationConfig without authentication is refused"


@pytest.fixture
async def anonymous() -> AsyncIterator[A2AExposure]:
    endpoint = echo_endpoint(capabilities={"pushNotifications": True}, push={"allow_private": True})
    async with serve(ECHO, {"echo": endpoint}, "echo") as exposure:
        yield exposure


def inline_send(url: str, **message: Any) -> dict[str, Any]:
    body = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "t"}]}
    configuration = {"returnImmediately": True, "taskPushNotificationConfig": {"url": url}}
    return {"message": {**body, **message}, "configuration": configuration}


async def test_without_auth_a_standalone_create_is_refused_on_jsonrpc_and_rest(
    anonymous: A2AExposure,
) -> None:
    async with httpx.AsyncClient(base_url=anonymous.url, headers=V1, timeout=STEP) as http:
        made = (await http.post("/", json=rpc("SendMessage", inline_send(HOOK)))).json()
        task = made["result"]["task"]
        listing = rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        inline = (await http.post("/", json=listing)).json()["result"]["configs"]
        assert [c["url"] for c in inline] == [HOOK]  # inline, with the task's own send

        attach = rpc("CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": HOOK})
        refused = (await http.post("/", json=attach)).json()
        assert refused["error"]["code"] == -32004, refused  # UnsupportedOperationError
        assert refused["error"]["message"].startswith(REFUSED)
        assert "inline" in refused["error"]["message"]
        unknown = rpc("CreateTaskPushNotificationConfig", {"taskId": "nobody", "url": HOOK})
        assert (await http.post("/", json=unknown)).json()["error"]["code"] == -32004
        legacy = rpc(  # the 0.3 name of the same request
            "tasks/pushNotificationConfig/set",
            {"taskId": task["id"], "pushNotificationConfig": {"url": HOOK}},
        )
        v03 = await http.post("/", json=legacy, headers={"A2A-Version": "0.3"})
        assert v03.json()["error"]["code"] == -32004, v03.text

        path = f"/a2a/rest/tasks/{task['id']}/pushNotificationConfigs"
        rest = await http.post(path, json={"url": HOOK})
        assert rest.status_code == 400, rest.text
        assert "UNSUPPORTED_OPERATION" in rest.text and REFUSED in rest.text

        rest_made = await http.post("/a2a/rest/message:send", json=inline_send(HOOK + "3"))
        rest_task = rest_made.json()["task"]["id"]
        got = await http.get(f"/a2a/rest/tasks/{rest_task}/pushNotificationConfigs")
        assert [c["url"] for c in got.json()["configs"]] == [HOOK + "3"]
        after = (await http.post("/", json=listing)).json()["result"]["configs"]
        assert [c["url"] for c in after] == [HOOK]  # nothing attached by the refused calls


async def test_without_auth_a_standalone_create_is_refused_on_grpc(
    anonymous: A2AExposure,
) -> None:
    version = (("a2a-version", "1.0"),)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{anonymous.grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        send = SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="t")]
            ),
            configuration=SendMessageConfiguration(
                return_immediately=True,
                task_push_notification_config=TaskPushNotificationConfig(url=HOOK),
            ),
        )
        task = (await stub.SendMessage(send, metadata=version, timeout=STEP)).task
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.CreateTaskPushNotificationConfig(
                TaskPushNotificationConfig(task_id=task.id, url=HOOK),
                metadata=version,
                timeout=STEP,
            )
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert REFUSED in (refused.value.details() or "")
        listed = await stub.ListTaskPushNotificationConfigs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=version, timeout=STEP
        )
        assert [c.url for c in listed.configs] == [HOOK]


async def test_an_endpoint_may_allow_anonymous_standalone_creates() -> None:
    endpoint = echo_endpoint(
        capabilities={"pushNotifications": True},
        push={"allow_private": True, "allow_anonymous_create": True},
    )
    async with (
        serve(ECHO, {"echo": endpoint}, "echo") as exposure,
        httpx.AsyncClient(base_url=exposure.url, headers=V1, timeout=STEP) as http,
    ):
        message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "t"}]}
        send = rpc(
            "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
        )
        task_id = (await http.post("/", json=send)).json()["result"]["task"]["id"]
        attach = rpc("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": HOOK})
        created = (await http.post("/", json=attach)).json()
        assert created["result"]["url"] == HOOK, created
