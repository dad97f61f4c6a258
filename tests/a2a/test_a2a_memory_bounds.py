"""A served agent's in-memory task store is bounded: what a client sees of an evicted task."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a_support import STEP, ScriptRunner, serve_with_store

pytestmark = [pytest.mark.timeout(60)]

V1 = {"A2A-Version": "1.0"}


@contextlib.asynccontextmanager
async def bounded_agent(task_store: dict[str, Any]) -> AsyncIterator[str]:
    async with serve_with_store(task_store, ScriptRunner(), "bounded") as exposure:
        yield exposure.url


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def send(text: str) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    return rpc("SendMessage", {"message": message, "configuration": {"returnImmediately": True}})


async def get_task(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    reply: dict[str, Any] = (await http.post("/", json=rpc("GetTask", {"id": task_id}))).json()
    return reply


async def ended_task(http: httpx.AsyncClient, text: str) -> str:
    """Start a task that fails at once (an ended task) and wait until the store says so."""
    reply = (await http.post("/", json=send(text))).json()
    task_id: str = reply["result"]["task"]["id"]
    for _ in range(500):
        state = (await get_task(http, task_id))["result"]["status"]["state"]
        if state == "TASK_STATE_FAILED":
            return task_id
    raise AssertionError(f"task {task_id} never ended")


async def test_past_max_tasks_the_oldest_ended_task_is_not_found() -> None:
    async with (
        bounded_agent({"max_tasks": 3}) as url,
        httpx.AsyncClient(base_url=url, headers=V1, timeout=STEP) as http,
    ):
        running = (await http.post("/", json=send("wait gate never"))).json()["result"]["task"]
        ended = [await ended_task(http, f"fail number {n}") for n in range(4)]
        gone = await get_task(http, ended[0])
        assert gone["error"]["code"] == -32001, gone
        assert "not found" in gone["error"]["message"].lower()
        assert "result" in await get_task(http, ended[-1])
        assert "result" in await get_task(http, running["id"])  # never evicted while running
        rest = await http.get(f"/a2a/rest/tasks/{ended[0]}")
        assert rest.status_code == 404
        metrics = (await http.get("/metrics")).text
        assert 'maslab_a2a_task_store_evictions_total{agent="bounded",reason="count"}' in metrics


async def test_past_max_bytes_big_ended_tasks_are_evicted() -> None:
    big = "x" * 300_000
    async with (
        bounded_agent({"max_bytes": 1024 * 1024}) as url,
        httpx.AsyncClient(base_url=url, headers=V1, timeout=STEP) as http,
    ):
        ended = [await ended_task(http, f"fail {n} {big}") for n in range(5)]
        found = ["result" in await get_task(http, task_id) for task_id in ended]
    assert found[-1] and not found[0]
    assert sum(found) <= 3
