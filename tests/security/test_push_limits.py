"""A task takes at most ``a2a.push.max_configs_per_task`` push configs, on every transport."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import TaskPushNotificationConfig, a2a_pb2_grpc
from security_support import V1, echo_endpoint, serve

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

ECHO = {"echo": {"model": {"type": "echo"}}}
STEP = 10.0
HOOK = "http://127.0.0.1:9/hook"
CAPPED = "the most a2a.push.max_configs_per_task (2) allows"


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def test_a_config_past_the_cap_is_refused_naming_it() -> None:
    push = {"allow_private": True, "allow_anonymous_create": True, "max_configs_per_task": 2}
    endpoint = echo_endpoint(capabilities={"pushNotifications": True}, push=push)
    async with (
        serve(ECHO, {"echo": endpoint}, "echo") as exposure,
        httpx.AsyncClient(base_url=exposure.url, headers=V1, timeout=STEP) as http,
    ):
        message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "t"}]}
        inline = {"returnImmediately": True, "taskPushNotificationConfig": {"url": HOOK}}
        send = rpc("SendMessage", {"message": message, "configuration": inline})
        task_id = (await http.post("/", json=send)).json()["result"]["task"]["id"]

        def attach(config_id: str) -> dict[str, Any]:
            params = {"taskId": task_id, "id": config_id, "url": HOOK}
            return rpc("CreateTaskPushNotificationConfig", params)

        assert "result" in (await http.post("/", json=attach("second"))).json()
        again = (await http.post("/", json=attach("second"))).json()
        assert "result" in again, again  # the same id replaces: not one more
        refused = (await http.post("/", json=attach("third"))).json()
        assert refused["error"]["code"] == -32602, refused
        assert CAPPED in refused["error"]["message"]

        rest = await http.post(
            f"/a2a/rest/tasks/{task_id}/pushNotificationConfigs", json={"id": "x", "url": HOOK}
        )
        assert rest.status_code == 400 and CAPPED in rest.text, rest.text

        assert exposure.grpc_address is not None
        async with grpc.aio.insecure_channel(exposure.grpc_address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            config = TaskPushNotificationConfig(task_id=task_id, id="y", url=HOOK)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.CreateTaskPushNotificationConfig(
                    config, metadata=(("a2a-version", "1.0"),), timeout=STEP
                )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert CAPPED in (caught.value.details() or "")

        listing = rpc("ListTaskPushNotificationConfigs", {"taskId": task_id})
        configs = (await http.post("/", json=listing)).json()["result"]["configs"]
        assert len(configs) == 2
