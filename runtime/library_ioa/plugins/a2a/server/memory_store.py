"""The bounded in-memory task store (``a2a.task_store: {type: memory}``, the default).

:class:`BoundedMemoryTaskStore` is the SDK's ``InMemoryTaskStore`` with limits, so that a
client sending task after task cannot grow the process without end:

- ``max_tasks`` and ``max_bytes`` (a task's size is its serialized protobuf size, history
  and artifacts included): after a save that passes either, the least recently written
  tasks that have **ended** (COMPLETED, CANCELED, FAILED, REJECTED) are evicted, oldest
  first, until both hold again; when no ended task is left, those waiting for input (or
  auth) go next, oldest first;
- ``ttl_seconds``: an ended or waiting task not written for that long is evicted (checked
  on every save and read, oldest first, so the cost is the number evicted).

A task still SUBMITTED or WORKING is **never** evicted: while more of them are running
than the limits allow, the store stays over its limits (the session mailbox bounds how
many turns run at once). Every eviction counts in
``maslab_a2a_task_store_evictions_total{agent, reason}`` (reason ``count``, ``bytes`` or
``ttl``) and logs at DEBUG.

What a client sees for an evicted task is what it sees for a task id never issued:
``GetTask``, ``CancelTask``, ``SubscribeToTask``, the push-config methods and a message
naming the task answer the A2A ``TaskNotFoundError`` (JSON-RPC -32001, HTTP+JSON 404,
gRPC NOT_FOUND), and ``ListTasks`` no longer lists it (docs/a2a.md).

Tasks are kept per owner (the SDK's owner scoping); the bookkeeping here is keyed by owner
and task id. The clock is injectable (``clock``) so the TTL is testable without waiting.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task
from prometheus_client import Counter

from library_ioa.plugins.a2a.server.final_state import INTERRUPTED_STATES, TERMINAL_STATES
from library_ioa.plugins.a2a.server.metrics import A2A_REGISTRY
from library_ioa.plugins.a2a.server.principals import Principal
from mas.infra.models import (
    DEFAULT_MEMORY_MAX_BYTES,
    DEFAULT_MEMORY_MAX_TASKS,
    DEFAULT_MEMORY_TTL_SECONDS,
)

logger = logging.getLogger(__name__)

TASK_STORE_EVICTIONS = Counter(
    "maslab_a2a_task_store_evictions",
    "Tasks evicted from the in-memory task store, by agent and reason (count, bytes, ttl).",
    ("agent", "reason"),
    registry=A2A_REGISTRY,
)


@dataclass
class _Entry:
    size: int
    ended: bool
    waiting: bool
    written: float


class BoundedMemoryTaskStore(TaskStore):
    """An in-memory ``TaskStore`` bounded by task count, bytes and age (module docstring)."""

    def __init__(
        self,
        *,
        agent_id: str = "",
        max_tasks: int = DEFAULT_MEMORY_MAX_TASKS,
        max_bytes: int = DEFAULT_MEMORY_MAX_BYTES,
        ttl_seconds: float = DEFAULT_MEMORY_TTL_SECONDS,
        owner_resolver: OwnerResolver = resolve_user_scope,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_tasks < 1 or max_bytes < 1 or ttl_seconds <= 0:
            raise ValueError(
                f"max_tasks {max_tasks!r}, max_bytes {max_bytes!r}, ttl_seconds "
                f"{ttl_seconds!r}: each must be positive"
            )
        self.agent_id = agent_id
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._resolve = owner_resolver
        self._clock = clock
        self._inner = InMemoryTaskStore(owner_resolver=owner_resolver)
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._inner.save(task, context)
        key = (self._resolve(context), task.id)
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old.size
        state = task.status.state
        entry = _Entry(
            task.ByteSize(), state in TERMINAL_STATES, state in INTERRUPTED_STATES, self._clock()
        )
        self._entries[key] = entry
        self.bytes += entry.size
        await self._expire()
        await self._enforce(keep=key)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        await self._expire()
        return await self._inner.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        await self._expire()
        return await self._inner.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._inner.delete(task_id, context)
        old = self._entries.pop((self._resolve(context), task_id), None)
        if old is not None:
            self.bytes -= old.size

    def _over(self) -> str | None:
        if len(self._entries) > self.max_tasks:
            return "count"
        if self.bytes > self.max_bytes:
            return "bytes"
        return None

    async def _expire(self) -> None:
        """Evict ended and waiting tasks older than the TTL (the oldest come first)."""
        cutoff = self._clock() - self.ttl_seconds
        expired = []
        for key, entry in self._entries.items():
            if entry.written > cutoff:
                break
            if entry.ended or entry.waiting:
                expired.append(key)
        for key in expired:
            await self._evict(key, "ttl")

    async def _enforce(self, *, keep: tuple[str, str]) -> None:
        """While over a limit: evict ended tasks oldest first, then waiting ones."""
        while (reason := self._over()) is not None:
            key = self._oldest(keep, waiting=False) or self._oldest(keep, waiting=True)
            if key is None:
                logger.debug(
                    "agent %s: the task store holds %d tasks (%d bytes), over its limits, "
                    "none of them evictable",
                    self.agent_id,
                    len(self._entries),
                    self.bytes,
                )
                return
            await self._evict(key, reason)

    def _oldest(self, keep: tuple[str, str], *, waiting: bool) -> tuple[str, str] | None:
        for key, entry in self._entries.items():
            if key != keep and (entry.waiting if waiting else entry.ended):
                return key
        return None

    async def _evict(self, key: tuple[str, str], reason: str) -> None:
        entry = self._entries.pop(key)
        self.bytes -= entry.size
        owner, task_id = key
        await self._inner.delete(task_id, ServerCallContext(user=Principal(owner)))
        TASK_STORE_EVICTIONS.labels(self.agent_id, reason).inc()
        logger.debug("agent %s: task %s evicted (%s)", self.agent_id, task_id, reason)
