"""Which replica runs which in-flight task, and failing the tasks of replicas that died.

Two small tables beside the SDK's (same database):

- ``mas_replicas(replica_id, agent, seen_at, lease)``: one row per live replica, its last
  heartbeat (the writer's clock, in seconds since the epoch; the lease dwarfs ordinary
  clock skew) and its lease: it is gone when ``seen_at + lease`` has passed;
- ``mas_task_runs(task_id, agent, replica_id, owner)``: one row per task this agent's
  replicas are running (written before the task's first non-terminal save, deleted when
  it reaches a terminal state).

:meth:`RunBook.sweep` fails, through the versioned store, the tasks whose replica is gone:
at start-up those of this replica id (its previous incarnation), later those of replicas
whose lease has run out. The FAILED status is written with its event, so
subscribers on other replicas see the end too. A task waiting for input is not failed
(its turn ended); its run row is dropped, and the replica that takes the answer claims it.

A task whose write this replica could not make (the database refused or was gone: the
SDK has then ended the task's stream with the error, so nothing will write it again) is
noted (:meth:`RunBook.broke`). :meth:`RunBook.recover`, run by the live process on every
heartbeat, writes those tasks FAILED with :data:`STORE_FAILED` (and the event, so
subscribers anywhere see the end) and drops their run rows as soon as the database takes
writes again, so an outage leaves no task WORKING and no row held by a live replica.

A replica that stops waits for the turns it runs (:meth:`RunBook.settle`, bounded by its
drain timeout); those still running then are written FAILED with :data:`STOPPED_TURN` by the
replica itself and their rows dropped (:meth:`RunBook.stop`), so no survivor's sweep has to
find them after the lease.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

from a2a.server.cluster import ConcurrentTaskModificationError, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from sqlalchemy import Column, Float, MetaData, String, Table, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from library_ioa.serving.principals import Principal

logger = logging.getLogger(__name__)

LOST_TURN = (
    "the runtime process running this task's turn stopped (crash or restart) before the "
    "turn ended; the turn is lost: send the message again"
)
STOPPED_TURN = (
    "the replica running this task's turn was stopping (a drain or shutdown) and the turn "
    "did not end within its drain timeout; the turn is lost: send the message again"
)
STORE_FAILED = (
    "the task store could not save this task while its turn ran (the database was "
    "unavailable); the turn's result is lost: send the message again"
)
_INTERRUPTED = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})
_TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)

_METADATA = MetaData()
REPLICAS = Table(
    "mas_replicas",
    _METADATA,
    Column("replica_id", String(255), primary_key=True),
    Column("agent", String(63), nullable=False),
    Column("seen_at", Float, nullable=False),
    Column("lease", Float, nullable=False),
)
RUNS = Table(
    "mas_task_runs",
    _METADATA,
    Column("task_id", String(255), primary_key=True),
    Column("agent", String(63), nullable=False),
    Column("replica_id", String(255), nullable=False),
    Column("owner", String(255), nullable=False),
)


def lost_turn_task(task: Task, reason: str = LOST_TURN) -> tuple[Task, TaskStatusUpdateEvent]:
    """``task`` moved to FAILED with ``reason`` (:data:`LOST_TURN`), and the event."""
    failed = Task()
    failed.CopyFrom(task)
    if failed.status.HasField("message"):
        failed.history.append(failed.status.message)
    status = TaskStatus(
        state=TaskState.TASK_STATE_FAILED,
        message=Message(
            role=Role.ROLE_AGENT,
            message_id=f"lost-{task.id}",
            task_id=task.id,
            context_id=task.context_id,
            parts=[Part(text=reason)],
        ),
    )
    status.timestamp.FromDatetime(datetime.now(UTC))
    failed.status.CopyFrom(status)
    event = TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=status)
    return failed, event


class RunBook:
    """The run and replica rows of one agent's replica."""

    def __init__(self, engine: AsyncEngine, agent_id: str, lease: float) -> None:
        self._engine = engine
        self.lease = lease
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self.agent_id = agent_id
        self.replica_id = ""
        self._claimed: dict[str, str] = {}  # task id -> owner: the turns running here
        self._idle = asyncio.Event()  # set while no turn runs here
        self._idle.set()
        self._broken: dict[str, str] = {}  # task id -> owner: writes the store refused

    async def start(self, replica_id: str) -> None:
        """Create the tables and announce this replica."""
        self.replica_id = replica_id
        async with self._engine.begin() as conn:
            await conn.run_sync(_METADATA.create_all)
        await self.beat()

    async def beat(self) -> None:
        """Refresh this replica's heartbeat."""
        async with self._sessions.begin() as session:
            result = await session.execute(
                update(REPLICAS)
                .where(REPLICAS.c.replica_id == self.replica_id)
                .values(agent=self.agent_id, seen_at=time.time(), lease=self.lease)
            )
            if result.rowcount == 0:  # type: ignore[attr-defined]
                await session.execute(
                    REPLICAS.insert().values(
                        replica_id=self.replica_id,
                        agent=self.agent_id,
                        seen_at=time.time(),
                        lease=self.lease,
                    )
                )

    async def leave(self) -> None:
        """Drop this replica's heartbeat row (a clean stop)."""
        async with self._sessions.begin() as session:
            await session.execute(delete(REPLICAS).where(REPLICAS.c.replica_id == self.replica_id))

    async def claim(self, task_id: str, owner: str) -> None:
        """This replica runs ``task_id`` (once per task and process)."""
        if task_id in self._claimed:
            return
        async with self._sessions.begin() as session:
            result = await session.execute(
                update(RUNS).where(RUNS.c.task_id == task_id).values(replica_id=self.replica_id)
            )
            if result.rowcount == 0:  # type: ignore[attr-defined]
                try:
                    async with session.begin_nested():
                        await session.execute(
                            RUNS.insert().values(
                                task_id=task_id,
                                agent=self.agent_id,
                                replica_id=self.replica_id,
                                owner=owner,
                            )
                        )
                except IntegrityError:  # another replica claimed it at the same instant
                    await session.execute(
                        update(RUNS)
                        .where(RUNS.c.task_id == task_id)
                        .values(replica_id=self.replica_id)
                    )
        self._claimed[task_id] = owner
        self._idle.clear()

    def _unclaim(self, task_id: str) -> None:
        self._claimed.pop(task_id, None)
        if not self._claimed:
            self._idle.set()

    def broke(self, task_id: str, owner: str, *, terminal: bool) -> None:
        """A write of ``task_id`` failed in the store: its turn's result is lost.

        Noted for a task this replica runs (or was claiming: a non-terminal write), not
        for a terminal write of another replica's task (a cancel), whose turn goes on there.
        """
        if task_id in self._claimed or not terminal:
            self._broken[task_id] = owner

    @property
    def broken(self) -> frozenset[str]:
        """The tasks whose write failed, not yet failed in the store."""
        return frozenset(self._broken)

    def forget(self, task_id: str) -> None:
        """``task_id`` waits for input: whichever replica takes the answer claims it again."""
        self._unclaim(task_id)

    async def release(self, task_id: str) -> None:
        """``task_id`` reached a terminal state: nobody runs it any more (the row is gone
        before :meth:`settle` sees this replica idle)."""
        try:
            async with self._sessions.begin() as session:
                await session.execute(delete(RUNS).where(RUNS.c.task_id == task_id))
        finally:
            self._unclaim(task_id)
        self._broken.pop(task_id, None)

    @property
    def running(self) -> frozenset[str]:
        """The tasks whose turn runs on this replica."""
        return frozenset(self._claimed)

    async def settle(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until no turn runs here; ``True`` if that happened."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def stop(self, store: VersionedTaskStore) -> int:
        """Fail the turns still running here with :data:`STOPPED_TURN` and drop their rows;
        how many were failed (not those that ended or wait for input meanwhile)."""
        failed = 0
        for task_id, owner in list(self._claimed.items()):
            if await self._fail(store, task_id, owner, STOPPED_TURN):
                failed += 1
            await self.release(task_id)
        return failed

    async def _orphans(self, *, starting: bool) -> list[tuple[str, str]]:
        """(task id, owner) of the runs whose replica is gone."""
        now = time.time()
        query = (
            select(
                RUNS.c.task_id,
                RUNS.c.owner,
                RUNS.c.replica_id,
                REPLICAS.c.seen_at,
                REPLICAS.c.lease,
            )
            .select_from(RUNS.outerjoin(REPLICAS, REPLICAS.c.replica_id == RUNS.c.replica_id))
            .where(RUNS.c.agent == self.agent_id)
        )
        async with self._sessions() as session:
            rows = (await session.execute(query)).all()
        orphans = []
        for task_id, owner, replica, seen_at, lease in rows:
            if replica == self.replica_id:
                if starting:
                    orphans.append((task_id, owner))
            elif seen_at is None or seen_at + lease < now:
                orphans.append((task_id, owner))
        return orphans

    async def recover(self, store: VersionedTaskStore) -> int:
        """Fail the tasks whose write failed here (:meth:`broke`); how many were failed.

        Raises the store's error while the database is still away: the next heartbeat
        tries again.
        """
        failed = 0
        for task_id, owner in list(self._broken.items()):
            if await self._fail(store, task_id, owner, STORE_FAILED):
                failed += 1
            await self.release(task_id)
        return failed

    async def _fail(self, store: VersionedTaskStore, task_id: str, owner: str, reason: str) -> bool:
        """Write ``task_id`` FAILED with ``reason`` unless it ended or waits for input."""
        context = ServerCallContext(user=Principal(owner))
        stored = await store.get(task_id, context)
        if stored is None or stored.task.status.state in (_TERMINAL | _INTERRUPTED):
            return False
        task, event = lost_turn_task(stored.task, reason)
        try:
            await store.save(
                task, event=event, prev=stored.task, prev_version=stored.version, context=context
            )
        except ConcurrentTaskModificationError:
            return False  # another writer (its replica, a sweeper, a cancel) wrote first
        logger.warning("task %s: %s", task_id, reason)
        return True

    async def sweep(self, store: VersionedTaskStore, *, starting: bool) -> int:
        """Fail the tasks of gone replicas; how many were failed."""
        failed = 0
        for task_id, owner in await self._orphans(starting=starting):
            context = ServerCallContext(user=Principal(owner))
            stored = await store.get(task_id, context)
            if stored is not None and stored.task.status.state not in (_TERMINAL | _INTERRUPTED):
                task, event = lost_turn_task(stored.task)
                try:
                    await store.save(
                        task,
                        event=event,
                        prev=stored.task,
                        prev_version=stored.version,
                        context=context,
                    )
                    failed += 1
                    logger.warning("task %s: %s", task_id, LOST_TURN)
                except ConcurrentTaskModificationError:
                    continue  # its replica (or another sweeper) wrote first: it is alive
            await self.release(task_id)
        return failed
