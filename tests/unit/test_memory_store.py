"""The bounded in-memory task store: count, bytes and TTL, never a running task."""

from __future__ import annotations

import pytest
from a2a.server.context import ServerCallContext
from a2a.types import Artifact, ListTasksRequest, Part, Task, TaskState, TaskStatus
from pydantic import ValidationError

from library_ioa.plugins.a2a.server.memory_store import TASK_STORE_EVICTIONS, BoundedMemoryTaskStore
from mas.infra.models import TaskStoreOptions

pytestmark = [pytest.mark.timeout(30)]

CONTEXT = ServerCallContext()
DONE = TaskState.TASK_STATE_COMPLETED
WORKING = TaskState.TASK_STATE_WORKING
ASKING = TaskState.TASK_STATE_INPUT_REQUIRED


def task(task_id: str, state: TaskState, payload: int = 0) -> Task:
    made = Task(id=task_id, context_id="c", status=TaskStatus(state=state))
    if payload:
        made.artifacts.append(Artifact(artifact_id="a", parts=[Part(text="x" * payload)]))
    return made


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def evictions(agent: str, reason: str) -> float:
    return TASK_STORE_EVICTIONS.labels(agent, reason)._value.get()


async def present(store: BoundedMemoryTaskStore, *ids: str) -> list[str]:
    return [i for i in ids if await store.get(i, CONTEXT) is not None]


async def test_past_max_tasks_the_oldest_ended_tasks_go_and_running_ones_stay() -> None:
    store = BoundedMemoryTaskStore(agent_id="count-agent", max_tasks=3)
    await store.save(task("w0", WORKING), CONTEXT)
    for index in range(1, 5):
        await store.save(task(f"c{index}", DONE), CONTEXT)
    assert await present(store, "w0", "c1", "c2", "c3", "c4") == ["w0", "c3", "c4"]
    assert len(store) == 3
    assert evictions("count-agent", "count") == 2


async def test_an_ended_task_written_again_is_young_again() -> None:
    store = BoundedMemoryTaskStore(agent_id="touch-agent", max_tasks=2)
    await store.save(task("a", DONE), CONTEXT)
    await store.save(task("b", DONE), CONTEXT)
    await store.save(task("a", DONE), CONTEXT)
    await store.save(task("c", DONE), CONTEXT)
    assert await present(store, "a", "b", "c") == ["a", "c"]


async def test_past_max_bytes_big_ended_tasks_go() -> None:
    store = BoundedMemoryTaskStore(agent_id="bytes-agent", max_bytes=250_000)
    for index in range(5):
        await store.save(task(f"big{index}", DONE, payload=100_000), CONTEXT)
    assert await present(store, *(f"big{i}" for i in range(5))) == ["big3", "big4"]
    assert store.bytes <= 250_000
    assert evictions("bytes-agent", "bytes") == 3


async def test_waiting_tasks_go_only_when_no_ended_task_is_left() -> None:
    store = BoundedMemoryTaskStore(agent_id="wait-agent", max_tasks=2)
    await store.save(task("ask", ASKING), CONTEXT)
    await store.save(task("done", DONE), CONTEXT)
    await store.save(task("run", WORKING), CONTEXT)
    assert await present(store, "ask", "done", "run") == ["ask", "run"]
    await store.save(task("run2", WORKING), CONTEXT)
    assert await present(store, "ask", "run", "run2") == ["run", "run2"]


async def test_running_tasks_are_never_evicted_even_over_the_limits() -> None:
    store = BoundedMemoryTaskStore(agent_id="busy-agent", max_tasks=2, max_bytes=10_000)
    for index in range(4):
        await store.save(task(f"w{index}", WORKING, payload=5_000), CONTEXT)
    assert len(await present(store, "w0", "w1", "w2", "w3")) == 4


async def test_the_ttl_evicts_ended_and_waiting_tasks_not_running_ones() -> None:
    clock = Clock()
    store = BoundedMemoryTaskStore(agent_id="ttl-agent", ttl_seconds=60, clock=clock)
    await store.save(task("done", DONE), CONTEXT)
    await store.save(task("ask", ASKING), CONTEXT)
    await store.save(task("run", WORKING), CONTEXT)
    clock.now += 59
    assert await present(store, "done", "ask", "run") == ["done", "ask", "run"]
    await store.save(task("fresh", DONE), CONTEXT)
    clock.now += 2
    assert await present(store, "done", "ask", "run", "fresh") == ["run", "fresh"]
    assert evictions("ttl-agent", "ttl") == 2
    listed = await store.list(ListTasksRequest(), CONTEXT)
    assert sorted(t.id for t in listed.tasks) == ["fresh", "run"]


async def test_deleting_a_task_frees_its_bytes() -> None:
    store = BoundedMemoryTaskStore(agent_id="delete-agent")
    await store.save(task("a", DONE, payload=1000), CONTEXT)
    await store.delete("a", CONTEXT)
    assert store.bytes == 0
    assert len(store) == 0


def test_the_bounds_belong_to_the_memory_store() -> None:
    assert TaskStoreOptions(max_tasks=5, ttl_seconds=1).max_tasks == 5
    with pytest.raises(ValidationError, match="type 'sql' takes no max_tasks"):
        TaskStoreOptions(type="sql", url="sqlite+aiosqlite:///x.db", max_tasks=5)
    with pytest.raises(ValidationError, match="max_bytes"):
        TaskStoreOptions(max_bytes=10)
