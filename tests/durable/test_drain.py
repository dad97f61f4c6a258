"""A replica that stops keeps the turns it accepted (issue #29: a drain lost a turn).

A non-blocking send's HTTP request ends at once while its turn runs on in the background,
so the listener's graceful shutdown does not wait for it. These tests start such a turn on
a real exposure with a SQLite task store, stop the exposure the way ``mas-ctl serve`` does
on SIGTERM (:meth:`A2AExposure.aclose`), and read the outcome from the database afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import httpx
import pytest
from a2a.client import Client
from a2a.helpers import get_message_text
from a2a.server.cluster.database_task_store import VersionedDatabaseTaskStore
from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState
from durable_support import serve_on_store
from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine
from tests.a2a.a2a_support import STEP, Served, sdk_client, send, user_message, wait_for

from library_ioa.plugins.a2a.server.stores.runs import RUNS

pytestmark = pytest.mark.integration

WAITING = "stopping: waiting"


def replica(url: str, drain_timeout: float) -> contextlib.AbstractAsyncContextManager[Served]:
    """One replica on ``url``; the test stops its exposure, this closes the mailbox after."""
    return serve_on_store(url, drain_timeout=drain_timeout)


async def start_turn(client: Client, served: Served, gate: str) -> str:
    """A non-blocking send whose turn waits on ``gate``; its task id once the turn runs."""
    (reply,) = await send(client, user_message(f"late {gate} done"), return_immediately=True)
    assert reply.HasField("task"), reply
    await wait_for(served.runner.started[gate])
    return reply.task.id


async def stopping(closing: asyncio.Task[None], caplog: pytest.LogCaptureFixture) -> None:
    """Until the exposure waits for its turns (or, without that wait, has stopped)."""
    async with asyncio.timeout(STEP):
        while not closing.done() and WAITING not in caplog.text:
            await asyncio.sleep(0.01)


async def close_while_gated(served: Served, gate: str, caplog: pytest.LogCaptureFixture) -> None:
    """Stop the exposure as ``mas-ctl serve`` does, and open ``gate`` only once it waits for
    the turn behind it: it must not close before that turn ends."""
    closing = asyncio.create_task(served.exposure.aclose())
    await stopping(closing, caplog)
    assert not closing.done(), "the exposure closed under an accepted turn"
    served.runner.gates[gate].set()  # the model answers while the replica stops
    async with asyncio.timeout(STEP):
        await closing


async def stored(url: str, task_id: str) -> tuple[Task, int]:
    """The task as the database holds it, and how many run rows name it."""
    engine = create_async_engine(url)
    try:
        store = VersionedDatabaseTaskStore(engine)
        found = await store.get(task_id, ServerCallContext())
        async with engine.connect() as conn:
            rows = (await conn.execute(select(RUNS).where(RUNS.c.task_id == task_id))).all()
    finally:
        await engine.dispose()
    assert found is not None, f"task {task_id} is not in the database"
    return found.task, len(rows)


async def assert_completed(url: str, task_id: str) -> None:
    """The task is stored completed, and no run row is left naming it."""
    task, runs = await stored(url, task_id)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
    assert runs == 0


async def test_a_turn_running_at_shutdown_completes_before_the_stores_close(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="library_ioa.plugins.a2a.exposure")
    url = f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}"
    async with replica(url, drain_timeout=STEP) as served:
        async with sdk_client(served) as client:
            task_id = await start_turn(client, served, "g")
        await close_while_gated(served, "g", caplog)
    await assert_completed(url, task_id)


async def test_a_turn_outliving_the_drain_timeout_ends_failed_by_its_replica(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}"
    async with replica(url, drain_timeout=0.2) as served:
        async with sdk_client(served) as client:
            task_id = await start_turn(client, served, "g")
        async with asyncio.timeout(STEP):
            await served.exposure.aclose()  # the gate stays shut: the drain runs out
    task, runs = await stored(url, task_id)
    assert task.status.state == TaskState.TASK_STATE_FAILED, task.status
    assert "replica running this task's turn was stopping" in get_message_text(task.status.message)
    assert runs == 0


async def test_a_send_on_a_kept_alive_connection_after_the_stop_began_runs_to_its_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # mas-ctl serve on SIGTERM: stop accepting, wait for the idle mailbox, then close. A
    # client's kept-alive connection outlives the listening socket, so a send can still
    # arrive after the mailbox drain returned: its turn must run to its end, not be lost.
    caplog.set_level(logging.INFO, logger="library_ioa.plugins.a2a.exposure")
    url = f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}"
    async with replica(url, drain_timeout=STEP) as served:
        async with sdk_client(served) as client:
            await send(client, user_message("quick hello"))  # the connection, kept alive
            served.exposure.stop_accepting()
            with pytest.raises(httpx.ConnectError):  # a new connection is refused
                async with httpx.AsyncClient(timeout=STEP) as fresh:
                    await fresh.get(f"{served.url}/healthz")
            assert await served.mailbox.drain(STEP)  # idle: serve goes on to close
            task_id = await start_turn(client, served, "g")  # on the kept-alive connection
        await close_while_gated(served, "g", caplog)
    await assert_completed(url, task_id)
