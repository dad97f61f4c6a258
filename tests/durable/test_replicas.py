"""Several replicas of one agent on one PostgreSQL database: get, list, subscribe and cancel
from any replica; a terminal state is final, whichever replica runs the turn."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.client import Client
from a2a.helpers import get_message_text
from a2a.server.cluster import (
    ConcurrentTaskModificationError,
    TaskVersion,
    VersionedDatabaseTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.types import (
    CancelTaskRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatus,
)
from durable_support import STEP, get_task, list_tasks, serve_on_store
from sqlalchemy.ext.asyncio import create_async_engine
from tests.a2a.a2a_support import Served, sdk_client, send, user_message, wait_for

from library_ioa.plugins.a2a.server.stores import sql_guards
from library_ioa.plugins.a2a.server.stores.sql_guards import FinalStateVersionedStore

pytestmark = pytest.mark.integration

Write = tuple[str, TaskState, bool]  # task id, the state written, whether it was written


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[Write]:
    """Every write of a task the final-state guards of this test's replicas answered."""
    answered: list[Write] = []
    save = FinalStateVersionedStore.save

    async def recorded(self: FinalStateVersionedStore, task: Task, **kwargs: Any) -> TaskVersion:
        try:
            version = await save(self, task, **kwargs)
        except BaseException:
            answered.append((task.id, task.status.state, False))
            raise
        answered.append((task.id, task.status.state, True))
        return version

    monkeypatch.setattr(FinalStateVersionedStore, "save", recorded)
    return answered


@contextlib.asynccontextmanager
async def replicas(url: str) -> AsyncIterator[tuple[Served, Served, Client, Client]]:
    async with (
        serve_on_store(url) as one,
        serve_on_store(url) as two,
        sdk_client(one) as to_one,
        sdk_client(two, streaming=True) as to_two,
    ):
        yield one, two, to_one, to_two


async def _state_of(client: Client, task_id: str) -> TaskState:
    return (await get_task(client, task_id)).status.state


async def _until(client: Client, task_id: str, state: TaskState) -> Task:
    async with asyncio.timeout(STEP):
        while (task := await get_task(client, task_id)).status.state != state:
            await asyncio.sleep(0.02)
    return task


async def test_get_and_list_from_the_other_replica(pg_url: str) -> None:
    async with replicas(pg_url) as (_, _, to_one, to_two):
        [made] = await send(to_one, user_message("artifacts", context_id="c"))
        got = await get_task(to_two, made.task.id)
        listed = await list_tasks(to_two)
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(got.artifacts) == 4
    assert [t.id for t in listed] == [made.task.id]


async def test_subscribe_on_the_other_replica_follows_the_turn_to_its_end(pg_url: str) -> None:
    async with replicas(pg_url) as (one, _, to_one, to_two):
        [started] = await send(
            to_one, user_message("wait g1 finally done", context_id="c"), return_immediately=True
        )
        task_id = started.task.id
        await wait_for(one.runner.started["g1"])
        await _until(to_two, task_id, TaskState.TASK_STATE_WORKING)
        seen: list[StreamResponse] = []

        async def follow() -> None:
            async for response in to_two.subscribe(SubscribeToTaskRequest(id=task_id)):
                seen.append(response)

        follower = asyncio.create_task(follow())
        async with asyncio.timeout(STEP):
            while not seen:  # the snapshot comes first
                await asyncio.sleep(0.02)
        one.runner.gates["g1"].set()
        async with asyncio.timeout(STEP):
            await follower
    assert seen[0].task.id == task_id
    last = seen[-1]
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(last.status_update.status.message) == "finally done"
    chunks = [r.artifact_update for r in seen if r.HasField("artifact_update")]
    assert "".join(p.text for c in chunks for p in c.artifact.parts) == "finally done"


async def _cancel_elsewhere_then_finish(
    url: str, writes: list[Write]
) -> tuple[list[TaskState], Served]:
    """A turn on replica one, canceled on replica two, then its turn ends: the states seen."""
    async with replicas(url) as (one, two, to_one, to_two):
        [started] = await send(
            to_one, user_message("late g2 the answer", context_id="c"), return_immediately=True
        )
        task_id = started.task.id
        await wait_for(one.runner.started["g2"])
        await _until(to_two, task_id, TaskState.TASK_STATE_WORKING)
        canceled = await to_two.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        # The spec: cancel does not interrupt the turn. It goes on and ends on replica one,
        # which publishes an artifact and then COMPLETED.
        one.runner.gates["g2"].set()
        async with asyncio.timeout(STEP):
            while one.runner.history["c"] != ["late g2 the answer"]:
                await asyncio.sleep(0.02)
            assert await one.mailbox.drain(STEP)
            # The turn's end is the last event the SDK's consumer on replica one writes:
            # wait until the store has answered that write (written or refused).
            while not any(
                (t, s) == (task_id, TaskState.TASK_STATE_COMPLETED) for t, s, _ in writes
            ):
                await asyncio.sleep(0.02)
        states = [await _state_of(client, task_id) for client in (to_one, to_two)]
        return states, two


async def test_cancel_on_the_other_replica_is_final_when_the_turn_goes_on(
    pg_url: str, writes: list[Write]
) -> None:
    states, two = await _cancel_elsewhere_then_finish(pg_url, writes)
    assert states == [TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_CANCELED]
    assert [ok for _, s, ok in writes if s == TaskState.TASK_STATE_COMPLETED] == [False]
    assert two.runner.seen == []  # replica two never ran it


async def test_without_the_guard_the_sdk_overwrites_canceled(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, writes: list[Write]
) -> None:
    """The reproduction: the SDK reloads on the first conflicting write, sees CANCELED, and
    then still applies the turn's next event (COMPLETED) at the fresh version."""
    monkeypatch.setattr(sql_guards, "refuses", lambda stored, task: False)
    states, _ = await _cancel_elsewhere_then_finish(pg_url, writes)
    assert states == [TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_COMPLETED]


async def test_the_sdk_store_alone_overwrites_canceled_and_the_guard_refuses(pg_url: str) -> None:
    """On the SDK's own versioned store a writer that has read the current (CANCELED)
    version may move the task to COMPLETED. Through the guard the same write is refused."""
    engine = create_async_engine(pg_url)
    context = ServerCallContext()
    try:
        sdk = VersionedDatabaseTaskStore(engine)
        await sdk.initialize()
        for store in (sdk, FinalStateVersionedStore(sdk)):
            task_id = f"t-{type(store).__name__}"
            working = Task(
                id=task_id, context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
            )
            version = await sdk.save(
                working, event=None, prev=None, prev_version=TaskVersion.MISSING, context=context
            )
            canceled = Task()
            canceled.CopyFrom(working)
            canceled.status.state = TaskState.TASK_STATE_CANCELED
            await sdk.save(
                canceled, event=None, prev=working, prev_version=version, context=context
            )
            seen = await store.get(task_id, context)  # what the SDK does before it writes
            assert seen is not None
            completed = Task()
            completed.CopyFrom(seen.task)
            completed.status.state = TaskState.TASK_STATE_COMPLETED
            write = store.save(
                completed, event=None, prev=seen.task, prev_version=seen.version, context=context
            )
            if store is sdk:
                await write
            else:
                with pytest.raises(ConcurrentTaskModificationError):
                    await write
        overwritten = await sdk.get("t-VersionedDatabaseTaskStore", context)
        kept = await sdk.get("t-FinalStateVersionedStore", context)
    finally:
        await engine.dispose()
    assert overwritten is not None and kept is not None
    assert overwritten.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert kept.task.status.state == TaskState.TASK_STATE_CANCELED
