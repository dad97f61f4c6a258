"""PostgreSQL goes away under a serving agent: requests that touch tasks get an A2A error
(not a hang, not a crash), the server stays up, and it serves again once the database is
back; turns in flight during the outage end FAILED, in the database too once it is back."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from a2a.client import Client
from a2a.helpers import get_message_text
from a2a.types import (
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import InternalError, UnsupportedOperationError
from durable_support import STEP, get_task, serve_on_store
from pg_server import Postgres
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine
from tests.a2a.a2a_support import sdk_client, send, user_message, wait_for

from library_ioa.plugins.a2a.server.stores.runs import STORE_FAILED

pytestmark = pytest.mark.integration


async def _allow_connections(pg_url: str, allowed: bool) -> None:
    url = make_url(pg_url)
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    name = url.database
    try:
        async with admin.connect() as conn:
            await conn.execute(
                text(f'alter database "{name}" with allow_connections {str(allowed).lower()}')
            )
            if not allowed:
                await conn.execute(
                    text(
                        "select pg_terminate_backend(pid) from pg_stat_activity "
                        "where datname = :name and pid <> pg_backend_pid()"
                    ),
                    {"name": name},
                )
    finally:
        await admin.dispose()


def _get_task(task_id: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": str(uuid.uuid4()),
        "method": "GetTask",
        "params": {"id": task_id},
    }


async def test_the_database_going_away_is_an_error_then_service_resumes(pg_url: str) -> None:
    headers = {"A2A-Version": "1.0"}
    async with serve_on_store(pg_url) as served, httpx.AsyncClient(timeout=STEP) as http:
        async with sdk_client(served) as client:
            [made] = await send(client, user_message("quick hello", context_id="c"))
        task_id = made.task.id
        await _allow_connections(pg_url, allowed=False)
        try:
            async with asyncio.timeout(STEP):
                down = await http.post(served.url, json=_get_task(task_id), headers=headers)
                health = await http.get(f"{served.url}/healthz")
        finally:
            await _allow_connections(pg_url, allowed=True)
        async with asyncio.timeout(STEP):
            back = await http.post(served.url, json=_get_task(task_id), headers=headers)
    assert down.status_code == 200
    error = down.json()["error"]
    assert error["code"] == -32603  # InternalError
    assert error["message"] == "the task store is unavailable; try again later"
    assert health.status_code == 200
    assert back.json()["result"]["id"] == task_id
    assert back.json()["result"]["status"]["state"] == TaskState.Name(
        TaskState.TASK_STATE_COMPLETED
    )


LOAD = 6  # turns in flight when the database goes away (sent with returnImmediately)
STREAMED = 2  # and turns of streaming sends


async def _until_state(client: Client, task_id: str, state: TaskState) -> Task:
    async with asyncio.timeout(STEP * 2):
        while (task := await get_task(client, task_id)).status.state != state:
            await asyncio.sleep(0.05)
    return task


async def _held_runs(pg_url: str) -> list[str]:
    engine = create_async_engine(make_url(pg_url))
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(text("select task_id from mas_task_runs"))
            return [row[0] for row in rows]
    finally:
        await engine.dispose()


async def test_an_outage_ends_in_flight_turns_failed_once_the_database_is_back(
    own_postgres: Postgres,
) -> None:
    """PostgreSQL stopped under load while turns run on replica one, a subscriber on replica
    two; started again: every turn is FAILED in the database, its run row gone, and
    subscribers (the one open across the outage and new ones) get the end."""
    url = own_postgres.url("outage")
    async with (
        serve_on_store(url, heartbeat=0.2) as one,
        serve_on_store(url, heartbeat=0.2) as two,
        sdk_client(one) as to_one,
        sdk_client(two, streaming=True) as to_two,
        sdk_client(one, streaming=True) as streaming_one,
    ):
        streams: list[tuple[list[StreamResponse], asyncio.Task[None]]] = []
        for j in range(STREAMED):  # streaming sends, open across the outage

            async def stream(seen: list[StreamResponse], j: int = j) -> None:
                message = user_message(f"hold s{j} x", context_id=f"s{j}")
                request = SendMessageRequest(message=message)
                async for response in streaming_one.send_message(request):
                    seen.append(response)

            seen_here: list[StreamResponse] = []
            streams.append((seen_here, asyncio.create_task(stream(seen_here))))
        ids = []
        for j, (seen_here, _) in enumerate(streams):
            await wait_for(one.runner.started[f"s{j}"])
            async with asyncio.timeout(STEP):
                while not seen_here:  # the task comes first
                    await asyncio.sleep(0.02)
            ids.append(seen_here[0].task.id)
        for i in range(LOAD):
            [started] = await send(
                to_one,
                user_message(f"late g{i} answer {i}", context_id=f"c{i}"),
                return_immediately=True,
            )
            ids.append(started.task.id)
        for i, task_id in enumerate(ids[STREAMED:]):
            await wait_for(one.runner.started[f"g{i}"])
            await _until_state(to_two, task_id, TaskState.TASK_STATE_WORKING)
        assert sorted(await _held_runs(url)) == sorted(ids)
        seen: list[StreamResponse] = []

        async def follow() -> None:
            async for response in to_two.subscribe(SubscribeToTaskRequest(id=ids[-2])):
                seen.append(response)

        follower = asyncio.create_task(follow())
        async with asyncio.timeout(STEP):
            while not seen:  # the snapshot comes first
                await asyncio.sleep(0.02)

        own_postgres.stop()
        for gate in [f"g{i}" for i in range(LOAD)] + [f"s{j}" for j in range(STREAMED)]:
            one.runner.gates[gate].set()  # every turn ends while the database is away
        runs = one.exposure.stores.runs
        assert runs is not None
        async with asyncio.timeout(STEP):
            while runs.broken != set(ids):
                await asyncio.sleep(0.02)
        own_postgres.start()

        for task_id in ids:  # the stored tasks, once the database is back
            failed = await _until_state(to_one, task_id, TaskState.TASK_STATE_FAILED)
            assert get_message_text(failed.status.message) == STORE_FAILED
        async with asyncio.timeout(STEP):  # open across the outage: they end, no hang
            [ended, *streamed] = await asyncio.gather(
                follower, *(task for _, task in streams), return_exceptions=True
            )
        for error in streamed:  # the sends that ran the turns: the A2A error, at once
            assert isinstance(error, InternalError), repr(error)
            assert error.message == "the task store is unavailable; try again later"
        # Its tail lost the database: the stream ends with the A2A error, no address in it.
        assert isinstance(ended, InternalError), repr(ended)
        assert ended.message == "the task store is unavailable; try again later"
        # A new subscriber, on the other replica: the end at once (the SDK's answer for a
        # task in a terminal state), not a tail of a task nobody runs.
        with pytest.raises(UnsupportedOperationError, match="terminal state: TASK_STATE_FAILED"):
            async with asyncio.timeout(STEP):
                async for _ in to_two.subscribe(SubscribeToTaskRequest(id=ids[-1])):
                    pass
        assert await _held_runs(url) == []
        assert runs.broken == frozenset()
        [again] = await send(to_one, user_message("quick back again", context_id="c0"))
    assert again.task.status.state == TaskState.TASK_STATE_COMPLETED
