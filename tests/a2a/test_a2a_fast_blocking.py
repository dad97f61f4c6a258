"""A blocking send whose turn is not a quick text answer stays on the fast path.

A delegating turn (or one with artifacts, a failure, a question, or one still running at
the end of the grace) is answered with a ``Task``. The fast handler runs it on a
``StreamRun`` instead of handing it to the SDK's ``ActiveTask``; these tests send the same
bytes to a fast exposure and an SDK one (``fast_send=False``) and compare the answers,
what the task store says afterwards, and what a cancel or a message naming the task does
meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a_support import STEP, ScriptRunner, eventually, wait_for
from fast_path_support import EXPOSURES, V1, body, both, exposure, normalised

from library_ioa.plugins.a2a.server.fast.stream import StreamRun
from library_ioa.plugins.a2a.server.publisher import TurnPublisher
from mas.runtime.turns import Delegated, TurnEnded, TurnEvent, TurnInput

pytestmark = pytest.mark.integration


class DelegatingRunner(ScriptRunner):
    """``delegate TEXT``: the turn delegates to ``remote`` (the event an agent's delegation
    yields), then answers with its result; ``raise``: the model raises after delegating."""

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:  # type: ignore[override]
        command, _, rest = turn.text.partition(" ")
        if command == "delegate":
            yield Delegated("remote", "call-1", True, rest)
            yield TurnEnded("completed", text=f"remote said: {rest}")
        elif command == "raise":
            yield Delegated("remote", "call-1", False, "peer gone")
            raise RuntimeError("the model broke")
        else:
            async for event in super().run(turn):
                yield event


@contextlib.asynccontextmanager
async def delegating_pair(
    message_grace: float = 5.0,
) -> AsyncIterator[tuple[httpx.AsyncClient, list[tuple[str, ScriptRunner]]]]:
    """Both exposures, each with its own runner, so a gate of the same name opens each."""
    runners = [DelegatingRunner(), DelegatingRunner()]
    async with (
        exposure(fast=True, message_grace=message_grace, runner=runners[0]) as fast,
        exposure(fast=False, message_grace=message_grace, runner=runners[1]) as sdk,
        httpx.AsyncClient(timeout=STEP) as http,
    ):
        yield http, [(fast, runners[0]), (sdk, runners[1])]


async def rpc(http: httpx.AsyncClient, url: str, method: str, params: Any) -> Any:
    request = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    return (await http.post(url + "/", json=request, headers=V1)).json()


async def working_task(http: httpx.AsyncClient, base: str, context_id: str) -> str:
    """The id of the context's task once it works (the turn outlived the grace)."""
    found: list[str] = []

    async def working() -> bool:
        listed = await rpc(http, base, "ListTasks", {"contextId": context_id})
        tasks = listed["result"].get("tasks", [])
        if tasks and tasks[0]["status"]["state"] == "TASK_STATE_WORKING":
            found.append(tasks[0]["id"])
        return bool(found)

    await eventually(working, f"a working task in context {context_id}")
    return found[0]


async def posted_past_grace(
    http: httpx.AsyncClient, base: str, text: str, context_id: str
) -> tuple[asyncio.Future[httpx.Response], str]:
    """A blocking send still waiting once its task works, and that task's id."""
    reply = asyncio.ensure_future(http.post(base + "/", content=send(text, context_id), headers=V1))
    return reply, await working_task(http, base, context_id)


def send(text: str, context_id: str, **configuration: Any) -> bytes:
    message = {"role": "ROLE_USER", "messageId": "b-1", "contextId": context_id}
    message["parts"] = [{"text": text}]
    if configuration:
        return body(message=message, params={"message": message, "configuration": configuration})
    return body(message=message)


@pytest.mark.parametrize(
    "text", ["delegate look it up", "artifacts", "fail it broke", "ask which day?"]
)
async def test_a_task_answer_and_the_stored_task_are_the_sdk_s(
    text: str, runs: list[StreamRun]
) -> None:
    async with delegating_pair() as (http, bases):
        seen = []
        for base, _runner in bases:
            reply = await http.post(base + "/", content=send(text, "c-task"), headers=V1)
            listed = await rpc(http, base, "ListTasks", {"contextId": "c-task"})
            found = await rpc(http, base, "GetTask", {"id": reply.json()["result"]["task"]["id"]})
            answer = normalised(reply.json())
            seen.append((reply.status_code, answer, normalised(listed), normalised(found)))
    assert len(runs) == 1  # the fast exposure ran the turn on a StreamRun, the SDK's did not
    assert seen[0] == seen[1]
    status, answer, listed, found = seen[0]
    assert status == 200 and answer["result"]["task"] == found["result"], answer
    assert [t["status"]["state"] for t in listed["result"]["tasks"]] == [
        found["result"]["status"]["state"]
    ]


async def test_a_delegating_turn_answers_with_the_completed_task_and_its_delegation(
    runs: list[StreamRun],
) -> None:
    async with delegating_pair() as (http, bases):
        (fast, _), (sdk, _) = bases
        _, answer = await both(http, fast, sdk, send("delegate hello", "c-del"))
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["parts"] == [{"text": "remote said: hello"}]
    assert task["metadata"]["mas.delegated"]["target"] == "remote", task
    assert [m["role"] for m in task["history"]] == ["ROLE_USER"], task
    assert len(runs) == 1


async def test_a_history_length_applies_to_the_answered_task() -> None:
    async with delegating_pair() as (http, bases):
        (fast, _), (sdk, _) = bases
        _, answer = await both(http, fast, sdk, send("delegate short", "c-h", historyLength=1))
    assert len(answer["result"]["task"]["history"]) == 1, answer


async def test_a_turn_past_the_grace_is_canceled_alike(runs: list[StreamRun]) -> None:
    async with delegating_pair(message_grace=0.1) as (http, bases):
        seen = []
        for base, runner in bases:
            reply, task_id = await posted_past_grace(http, base, "wait g1 never", "c-cancel")
            canceled = await rpc(http, base, "CancelTask", {"id": task_id})
            answered = (await reply).json()
            found = await rpc(http, base, "GetTask", {"id": task_id})
            seen.append((normalised(canceled), normalised(answered), normalised(found)))
            runner.gates["g1"].set()  # the turn goes on after the cancel, and ends unseen
    assert len(runs) == 1
    assert seen[0] == seen[1]
    canceled, answered, found = seen[0]
    assert answered["result"]["task"]["status"]["state"] == "TASK_STATE_CANCELED", answered
    assert found["result"]["status"]["state"] == "TASK_STATE_CANCELED", found


async def test_a_message_naming_the_running_task_waits_behind_its_turn_alike() -> None:
    async with delegating_pair(message_grace=0.1) as (http, bases):
        seen = []
        for base, runner in bases:
            first, task_id = await posted_past_grace(http, base, "wait g2 first", "c-next")
            message = {"role": "ROLE_USER", "messageId": "b-2", "taskId": task_id}
            message["parts"] = [{"text": "quick second"}]
            second = asyncio.ensure_future(
                http.post(base + "/", content=body(message=message), headers=V1)
            )

            async def waiting(base: str = base, task_id: str = task_id) -> bool:
                return task_id in EXPOSURES[base].executor.waiting

            await eventually(waiting, "the second message waits behind the running turn")
            runner.gates["g2"].set()
            answers = [normalised((await first).json()), normalised((await second).json())]
            found = await rpc(http, base, "GetTask", {"id": task_id})
            seen.append((answers, normalised(found)))
    assert seen[0] == seen[1]
    (first_answer, second_answer), found = seen[0]
    assert first_answer["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert second_answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert found["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def answered_alike(text: str, context_id: str) -> tuple[Any, Any]:
    """The (equal) answers of both exposures to one send, and their tasks of the context."""
    async with delegating_pair() as (http, bases):
        seen = []
        for base, _runner in bases:
            reply = await http.post(base + "/", content=send(text, context_id), headers=V1)
            listed = await rpc(http, base, "ListTasks", {"contextId": context_id})
            seen.append((reply.status_code, normalised(reply.json()), normalised(listed)))
    assert seen[0] == seen[1]
    assert seen[0][0] == 200
    return seen[0][1], seen[0][2]


async def test_a_model_that_raises_after_delegating_fails_alike(runs: list[StreamRun]) -> None:
    answer, listed = await answered_alike("raise now", "c-raise")
    assert len(runs) == 1
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED", answer
    assert listed["result"]["tasks"][0]["status"]["state"] == "TASK_STATE_FAILED"


async def test_an_executor_that_raises_fails_the_blocking_send_alike(
    monkeypatch: pytest.MonkeyPatch, runs: list[StreamRun]
) -> None:
    async def broken_end(self: TurnPublisher, end: TurnEnded) -> None:
        raise RuntimeError("the publisher broke")

    monkeypatch.setattr(TurnPublisher, "_end", broken_end)
    answer, listed = await answered_alike("delegate x", "c-broken")
    assert len(runs) == 1
    assert "error" in answer, answer
    assert listed["result"]["tasks"][0]["status"]["state"] == "TASK_STATE_FAILED"


async def test_a_client_that_goes_away_leaves_the_turn_to_end_and_be_stored() -> None:
    async with delegating_pair(message_grace=0.1) as (http, bases):
        fast, runner = bases[0]
        reply, _ = await posted_past_grace(http, fast, "wait g3 done", "c-gone")
        await wait_for(runner.started["g3"])
        reply.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reply
        runner.gates["g3"].set()

        async def completed() -> bool:
            listed = await rpc(http, fast, "ListTasks", {"contextId": "c-gone"})
            return bool(listed["result"]["tasks"][0]["status"]["state"] == "TASK_STATE_COMPLETED")

        await eventually(completed, "the turn ends and its task is stored")
