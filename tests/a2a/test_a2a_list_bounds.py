"""``ListTasks`` pages are bounded by bytes and trim history by default (``a2a.responses``)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import ListTasksRequest, a2a_pb2_grpc
from a2a_support import STEP, Served, serve_agent

pytestmark = [pytest.mark.timeout(60)]

V1 = {"A2A-Version": "1.0"}
BIG = "x" * 20_000  # in the request and the failure: a task of about 40 KB, one per 64 KiB page


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


@contextlib.asynccontextmanager
async def agent(**responses: int) -> AsyncIterator[tuple[Served, httpx.AsyncClient]]:
    async with (
        serve_agent(a2a_options={"responses": responses}) as served,
        httpx.AsyncClient(base_url=served.url, headers=V1, timeout=STEP) as http,
    ):
        yield served, http


async def ended_task(http: httpx.AsyncClient, text: str) -> str:
    """A task that fails at once (its history holds the request), once the store says so."""
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    send = rpc("SendMessage", {"message": message, "configuration": {"returnImmediately": True}})
    task_id: str = (await http.post("/", json=send)).json()["result"]["task"]["id"]
    for _ in range(500):
        task = (await http.post("/", json=rpc("GetTask", {"id": task_id}))).json()["result"]
        if task["status"]["state"] == "TASK_STATE_FAILED":
            return task_id
    raise AssertionError(f"task {task_id} never ended")


async def test_list_tasks_without_history_length_trims_each_tasks_history() -> None:
    async with agent(list_history_length=0) as (_, http):
        task_id = await ended_task(http, "fail with a question")
        full = (await http.post("/", json=rpc("GetTask", {"id": task_id}))).json()["result"]
        listed = (await http.post("/", json=rpc("ListTasks", {}))).json()["result"]
        asked = rpc("ListTasks", {"historyLength": 5})
        given = (await http.post("/", json=asked)).json()["result"]
        rest = (await http.get("/a2a/rest/tasks")).json()
    assert full["history"]  # GetTask keeps the whole history
    assert [t["id"] for t in listed["tasks"]] == [task_id]
    assert not listed["tasks"][0].get("history")
    assert not rest["tasks"][0].get("history")
    ids = [m["messageId"] for m in given["tasks"][0]["history"]]
    assert ids == [m["messageId"] for m in full["history"]]  # asked for: honoured as given


async def test_list_tasks_pages_by_bytes_and_every_task_is_reached() -> None:
    max_bytes = 64 * 1024
    async with agent(max_bytes=max_bytes) as (served, http):
        made = {await ended_task(http, f"fail {n} {BIG}") for n in range(4)}
        seen: list[str] = []
        token = ""
        for _ in range(10):
            params: dict[str, Any] = {"pageToken": token} if token else {}
            reply = await http.post("/", json=rpc("ListTasks", params))
            page = reply.json()["result"]
            assert len(reply.content) < max_bytes * 1.4  # JSON escapes add a little
            assert len(page["tasks"]) == 1 and page["totalSize"] == 4
            seen += [t["id"] for t in page["tasks"]]
            token = page.get("nextPageToken", "")
            if not token:
                break
        assert sorted(seen) == sorted(made)  # every task once, none skipped
        async with grpc.aio.insecure_channel(served.grpc_address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            first = await stub.ListTasks(
                ListTasksRequest(page_size=100), metadata=(("a2a-version", "1.0"),), timeout=STEP
            )
        assert len(first.tasks) == 1 and first.next_page_token
        assert first.ByteSize() < max_bytes


@pytest.mark.parametrize(
    ("transport", "status"), [("jsonrpc", "BOGUS"), ("jsonrpc", 99), ("rest", "BOGUS")]
)
async def test_an_unknown_status_filter_is_invalid_params(transport: str, status: Any) -> None:
    async with agent() as (_, http):
        await ended_task(http, "fail once")
        if transport == "rest":
            reply = await http.get("/a2a/rest/tasks", params={"status": status})
            assert reply.status_code == 400, reply.text
            error = reply.json()["error"]
            assert error["status"] == "INVALID_ARGUMENT"
        else:
            error = (await http.post("/", json=rpc("ListTasks", {"status": status}))).json()
            error = error["error"]
            assert error["code"] == -32602
        assert "is not a task state; accepted: TASK_STATE_SUBMITTED" in error["message"]
        working = await http.get("/a2a/rest/tasks", params={"status": "TASK_STATE_WORKING"})
        assert working.status_code == 200 and not working.json()["tasks"]


async def test_an_unknown_status_number_is_invalid_argument_on_grpc() -> None:
    async with (
        agent() as (served, _),
        grpc.aio.insecure_channel(served.grpc_address) as channel,
    ):
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.ListTasks(
                ListTasksRequest(status=99),  # type: ignore[arg-type]
                metadata=(("a2a-version", "1.0"),),
                timeout=STEP,
            )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "99 is not a task state" in (caught.value.details() or "")
