"""PostgreSQL goes away under a serving agent: requests that touch tasks get an A2A error
(not a hang, not a crash), the server stays up, and it serves again once the database is
back."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from a2a.types import TaskState
from durable_support import STEP, serve_on_store
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine
from tests.a2a.a2a_support import sdk_client, send, user_message

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
