"""The fast path answers exactly what the SDK's own path answers, request for request.

Two exposures of the same scripted agent run side by side: one with the fast handler and
the fast JSON-RPC route (the default), one with ``fast_send=False`` (the SDK's
``DefaultRequestHandler`` and ``create_jsonrpc_routes`` only). Each case posts the same
bytes to both and compares the HTTP status and the JSON body field by field, after
replacing what is generated per request (UUIDs, artifact suffixes, timestamps).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from a2a_support import STEP, ScriptRunner, wait_for
from fast_path_support import MAILBOXES, V1, body, both, exposure, normalised

pytestmark = pytest.mark.integration


async def test_a_quick_turn_is_the_same_message(pair: tuple[httpx.AsyncClient, str, str]) -> None:
    status, answer = await both(*pair, body("quick hello"))
    assert status == 200
    assert answer == {
        "result": {
            "message": {
                "messageId": "<uuid>",
                "contextId": "<uuid>",
                "role": "ROLE_AGENT",
                "parts": [{"text": "hello"}],
            }
        },
        "id": 7,
        "jsonrpc": "2.0",
    }


@pytest.mark.parametrize(
    "text", ["echo one two three", "artifacts", "fail it broke", "ask which day?", "héllo ✓"]
)
async def test_every_kind_of_turn_is_answered_alike(
    pair: tuple[httpx.AsyncClient, str, str], text: str
) -> None:
    message = {"role": "ROLE_USER", "messageId": "m-2", "contextId": f"ctx {text}"}
    message["parts"] = [{"text": text}]
    status, answer = await both(*pair, body(message=message))
    assert status == 200 and "result" in answer, answer


@pytest.mark.parametrize(
    ("content", "headers"),
    [
        (body(message={"role": "ROLE_USER", "parts": [{"text": "no id"}]}), V1),
        (body(message={"role": "ROLE_USER", "messageId": "m", "parts": []}), V1),
        (body(message={"role": "ROLE_NOBODY", "messageId": "m", "parts": [{"text": "x"}]}), V1),
        (body(message={"role": "ROLE_USER", "messageId": 5, "parts": [{"text": "x"}]}), V1),
        (body(message={"messageId": "m", "parts": [{"text": "x"}], "extra": 1}), V1),
        (body(message={"role": "ROLE_USER", "messageId": "m", "parts": [{"data": {"a": 1}}]}), V1),
        (body(message={"role": "ROLE_USER", "messageId": "m", "parts": [{"text": 3}]}), V1),
        (body(), {"A2A-Version": "0.3", "Content-Type": "application/json"}),
        (body(), {"A2A-Version": "2.0", "Content-Type": "application/json"}),
        (body(), {"A2A-Version": "1", "Content-Type": "application/json"}),
        (body(jsonrpc="1.0"), V1),
        (body(id=True), V1),
        (body(id=None), V1),
        (body(id=1.5), V1),
        (body(extra="member"), V1),
        (body(params=[1, 2]), V1),
        (
            body(params={"message": {"role": "ROLE_USER"}, "configuration": {"historyLength": -1}}),
            V1,
        ),
        (body(method="NoSuchMethod"), V1),
        (body(method="message/send"), V1),
        (b"{not json", V1),
        (b"[]", V1),
        (b'"text"', V1),
    ],
)
async def test_bad_and_unusual_requests_get_the_same_answer(
    pair: tuple[httpx.AsyncClient, str, str], content: bytes, headers: dict[str, str]
) -> None:
    status, answer = await both(*pair, content, headers=headers)
    assert status == 200 and answer["jsonrpc"] == "2.0", answer


async def test_a_message_answer_names_no_task_and_the_context_goes_on(
    pair: tuple[httpx.AsyncClient, str, str],
) -> None:
    # No task is stored for a Message answer, so it hands out no taskId that GetTask could
    # not find; a follow-up continues the conversation by its contextId.
    http, fast, sdk = pair
    rest = {"message": {"role": "ROLE_USER", "messageId": "r1", "parts": [{"text": "quick x"}]}}
    for base in (fast, sdk):
        reply = (await http.post(base + "/", content=body("quick gone"), headers=V1)).json()
        message = reply["result"]["message"]
        assert "taskId" not in message, message
        listed = {"jsonrpc": "2.0", "id": 8, "method": "ListTasks", "params": {}}
        tasks = (await http.post(base + "/", json=listed, headers=V1)).json()["result"]
        assert tasks.get("tasks", []) == [], tasks
        follow = {"role": "ROLE_USER", "messageId": "f1", "contextId": message["contextId"]}
        follow["parts"] = [{"text": "quick again"}]
        again = (await http.post(base + "/", content=body(message=follow), headers=V1)).json()
        assert again["result"]["message"]["contextId"] == message["contextId"], again
        answer = await http.post(base + "/a2a/rest/message:send", json=rest, headers=V1)
        assert answer.status_code == 200, answer.text
        assert "taskId" not in answer.json()["message"], answer.text


async def test_a_full_session_mailbox_fails_the_task_alike() -> None:
    runner = ScriptRunner()
    answers = []
    async with (
        exposure(fast=True, runner=runner) as fast,
        exposure(fast=False, runner=runner) as sdk,
        httpx.AsyncClient(timeout=STEP) as http,
    ):
        for base, gate in ((fast, "g1"), (sdk, "g2")):

            def post(text: str, message_id: str, base: str = base) -> Any:
                sent = {"role": "ROLE_USER", "contextId": "busy", "messageId": message_id}
                sent["parts"] = [{"text": text}]
                return http.post(base + "/", content=body(message=sent), headers=V1)

            running = asyncio.ensure_future(post(f"wait {gate} done", "m1"))
            await wait_for(runner.started[gate])
            mailbox = MAILBOXES[-2] if base == fast else MAILBOXES[-1]
            queued = asyncio.ensure_future(post("quick queued", "m2"))
            async with asyncio.timeout(STEP):
                while mailbox.depth("busy") < 1:
                    await asyncio.sleep(0.01)
            refused = await post("quick refused", "m3")  # max_pending_per_session=1
            runner.gates[gate].set()
            replies = [await running, await queued, refused]
            answers.append([normalised(r.json()) for r in replies])
    assert answers[0] == answers[1]
    assert answers[0][2]["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"


async def test_a_message_naming_a_task_goes_the_sdk_way(
    pair: tuple[httpx.AsyncClient, str, str],
) -> None:
    http, fast, sdk = pair
    resumed = []
    for base in (fast, sdk):
        message = {"role": "ROLE_USER", "messageId": "q", "contextId": "c", "parts": []}
        message["parts"] = [{"text": "ask when?"}]
        first = (await http.post(base + "/", content=body(message=message), headers=V1)).json()
        task_id = first["result"]["task"]["id"]
        message = {**message, "messageId": "a", "taskId": task_id, "parts": [{"text": "monday"}]}
        reply = await http.post(base + "/", content=body(message=message), headers=V1)
        resumed.append(normalised(reply.json()))
    assert resumed[0] == resumed[1]
    assert resumed[0]["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", resumed
    message = {"role": "ROLE_USER", "messageId": "q", "taskId": "nope", "parts": [{"text": "x"}]}
    _, answer = await both(http, fast, sdk, body(message=message))
    assert answer["error"]["code"] == -32001, answer


@pytest.mark.parametrize("text", ["quick rest", "artifacts"])
async def test_rest_sends_are_answered_alike(
    pair: tuple[httpx.AsyncClient, str, str], text: str
) -> None:
    request = {"message": {"role": "ROLE_USER", "messageId": "r", "parts": [{"text": text}]}}
    status, answer = await both(*pair, json.dumps(request).encode(), path="/a2a/rest/message:send")
    assert status == 200 and ("message" in answer or "task" in answer), answer


async def test_past_the_grace_both_complete_a_task_with_the_chunks() -> None:
    async with (
        exposure(fast=True, message_grace=0.0) as fast,
        exposure(fast=False, message_grace=0.0) as sdk,
        httpx.AsyncClient(timeout=STEP) as http,
    ):
        _, answer = await both(http, fast, sdk, body("echo a b c"))
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "".join(p["text"] for p in task["artifacts"][0]["parts"]) == "echo a b c"
