"""Task and push-config storage of one A2A endpoint (``a2a.task_store``).

:func:`build_task_stores` turns the endpoint's :class:`~mas.infra.models.TaskStoreOptions`
into what the SDK's request handler takes:

- ``memory`` (the default): a bounded in-memory task store (``max_tasks``, ``max_bytes``,
  ``ttl_seconds``: :mod:`library_ioa.plugins.a2a.server.memory_store`), the SDK's
  ``InMemoryPushNotificationConfigStore`` and the agent's conversations in memory, bounded
  by bytes in all and per conversation (``history_max_bytes``,
  ``history_max_session_bytes``: :mod:`mas.runtime.memory_history`); all die with the
  process.
- ``sql``: the SDK's ``VersionedDatabaseTaskStore`` (a compare-and-swap version per task),
  ``DatabaseTaskEventStream`` (the ``task_events`` log other replicas tail, so
  ``SubscribeToTask`` works from any replica) and ``DatabasePushNotificationConfigStore``
  (Fernet-encrypted at rest with the key of ``push_config_key_secret_key_ref``), on one
  SQLAlchemy engine: ``sqlite+aiosqlite:///file`` or ``postgresql+asyncpg://...``. The URL
  (or the key) behind a ``secret_key_ref`` is read from ``secret_env_name(ref)``. The
  agent's conversations (session history, pending question) go to the same database
  (:class:`~library_ioa.plugins.a2a.server.sql_history.SqlConversationStore`), so any
  replica continues any conversation.

Rules every variant keeps:

- **A terminal state is final.** The task store is wrapped by a guard
  (:mod:`library_ioa.plugins.a2a.server.final_state`) that refuses any write moving a
  stored COMPLETED, CANCELED, FAILED or REJECTED task to another state: a turn that goes on
  after ``CancelTask`` never overwrites CANCELED, on one replica or several.
- **Nobody waits on a task nobody runs** (``sql`` only). Each replica records which
  in-flight tasks it runs (table ``mas_task_runs``) and beats a heartbeat
  (``mas_replicas``). At start-up a replica fails the tasks its previous incarnation (same
  replica id) left running; every heartbeat it fails the tasks of replicas silent for
  longer than their lease (``$MAS_TASK_LEASE_SECONDS``, default 20; the heartbeat is a
  quarter of it). Such a task ends FAILED with a message saying its turn was lost.
  Tasks waiting for input are left as they are (their turn has ended).
  A task whose write the database refused (an outage) has had its stream ended with
  the error; every heartbeat, once the database takes writes again, the replica writes
  those tasks FAILED and drops their run rows (``RunBook.recover``).

The replica id is ``$MAS_REPLICA_ID``, else ``<hostname>:<port>`` (in a pod the hostname
is the pod name, which a container restart keeps).

Errors: :class:`TaskStoreError` (an ``OSError``, so the exposure helper reports it like a
taken port: one line naming the agent) names the field, the Secret and the variable, or
the database URL without its password.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a.server.cluster import (
    DatabaseTaskEventStream,
    LegacyTaskStoreAdapter,
    TaskEventStream,
    VersionedDatabaseTaskStore,
    VersionedTaskStore,
)
from a2a.server.tasks import (
    DatabasePushNotificationConfigStore,
    InMemoryPushNotificationConfigStore,
    PushNotificationConfigStore,
    TaskStore,
)
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from library_ioa.plugins.a2a.server.final_state import FinalStateTaskStore, refuses
from library_ioa.plugins.a2a.server.memory_store import BoundedMemoryTaskStore
from library_ioa.plugins.a2a.server.runs import RunBook
from library_ioa.plugins.a2a.server.sql_guards import FinalStateVersionedStore, GuardedEventStream
from mas.infra.models import SecretKeyRef, TaskStoreOptions
from mas.infra.secrets import secret_env_name
from mas.runtime.history import ConversationStore
from mas.runtime.memory_history import MemoryConversationStore

logger = logging.getLogger(__name__)

LEASE_SECONDS = 20.0
HEARTBEAT_SECONDS = LEASE_SECONDS / 4
LEASE_VARIABLE = "MAS_TASK_LEASE_SECONDS"
EVENT_POLL_SECONDS = 0.2


class TaskStoreError(OSError):
    """The task store cannot be configured or reached; the message says which and why."""


def default_replica_id(port: int, env: Mapping[str, str] = os.environ) -> str:
    """``$MAS_REPLICA_ID``, else ``<hostname>:<port>``."""
    return env.get("MAS_REPLICA_ID") or f"{socket.gethostname()}:{port}"


@dataclass
class TaskStores:
    """The stores of one endpoint; :meth:`start` before serving, :meth:`aclose` after."""

    agent_id: str
    task_store: TaskStore | VersionedTaskStore
    push_config_store: PushNotificationConfigStore | None = None
    event_stream: TaskEventStream | None = None
    engine: AsyncEngine | None = None
    shown_url: str = "memory"
    heartbeat: float = HEARTBEAT_SECONDS
    lease: float = LEASE_SECONDS
    runs: RunBook | None = None
    history: ConversationStore | None = None
    _beating: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def durable(self) -> bool:
        """Whether tasks outlive the process."""
        return self.engine is not None

    async def start(self, replica_id: str) -> None:
        """Create the tables, fail what a dead replica left running, start the heartbeat."""
        if self.engine is None:
            return
        _check_sqlite_directory(self.engine, self.shown_url)
        try:
            await _initialize(self)
            if self.runs is not None:
                await self.runs.start(replica_id)
                lost = await self.runs.sweep(self.inner_store(), starting=True)
                if lost:
                    logger.warning(
                        "agent %s: %d task(s) whose turn died with an earlier process are now "
                        "failed",
                        self.agent_id,
                        lost,
                    )
        except (SQLAlchemyError, OSError) as exc:
            await self.engine.dispose()
            raise TaskStoreError(
                f"a2a.task_store: cannot open {self.shown_url}: {_reason(exc)}"
            ) from None
        if self.runs is not None:
            self._beating = asyncio.create_task(
                self._beat(), name=f"task-store-heartbeat:{self.agent_id}"
            )

    def inner_store(self) -> VersionedTaskStore:
        """The versioned store under the guard."""
        store = self.task_store
        if isinstance(store, FinalStateVersionedStore):
            return store.inner
        if isinstance(store, VersionedTaskStore):
            return store
        return LegacyTaskStoreAdapter(store)

    async def _beat(self) -> None:
        assert self.runs is not None
        while True:
            await asyncio.sleep(self.heartbeat)
            try:
                await self.runs.beat()
                lost = await self.runs.sweep(self.inner_store(), starting=False)
                if lost:
                    logger.warning(
                        "agent %s: %d task(s) of replicas whose lease ran out are now failed",
                        self.agent_id,
                        lost,
                    )
                refused = await self.runs.recover(self.inner_store())
                if refused:
                    logger.warning(
                        "agent %s: %d task(s) whose write the task store refused are now failed",
                        self.agent_id,
                        refused,
                    )
            except (SQLAlchemyError, OSError) as exc:
                logger.warning(
                    "agent %s: task store heartbeat failed: %s", self.agent_id, _reason(exc)
                )
            except Exception:  # the heartbeat must outlive any surprise, or others fail our tasks
                logger.exception("agent %s: task store heartbeat failed", self.agent_id)

    async def aclose(self) -> None:
        """Stop the heartbeat, leave the replica table and close the engine."""
        if self._beating is not None:
            self._beating.cancel()
            await asyncio.gather(self._beating, return_exceptions=True)
            self._beating = None
            if self.runs is not None:
                try:
                    await self.runs.leave()
                except (SQLAlchemyError, OSError) as exc:
                    logger.warning(
                        "agent %s: cannot leave the replica table: %s", self.agent_id, _reason(exc)
                    )
        if self.engine is not None:
            await self.engine.dispose()


async def _initialize(stores: TaskStores) -> None:
    inner = stores.inner_store()
    if isinstance(inner, VersionedDatabaseTaskStore):
        await inner.initialize()
    stream = stores.event_stream
    if isinstance(stream, GuardedEventStream):
        stream = stream.inner
    if isinstance(stream, DatabaseTaskEventStream):
        await stream.initialize()
    if isinstance(stores.push_config_store, DatabasePushNotificationConfigStore):
        await stores.push_config_store.initialize()
    if stores.engine is not None:  # only a database store has loaded the SQL history
        from library_ioa.plugins.a2a.server.sql_history import SqlConversationStore

        if isinstance(stores.history, SqlConversationStore):
            await stores.history.initialize()


def _check_sqlite_directory(engine: AsyncEngine, shown: str) -> None:
    """A SQLite file needs its directory (a failed aiosqlite connect leaves a thread behind)."""
    if engine.url.get_backend_name() != "sqlite":
        return
    database = engine.url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return
    directory = Path(database).expanduser().resolve().parent
    if not directory.is_dir():
        raise TaskStoreError(
            f"a2a.task_store: cannot open {shown}: the directory {directory} does not exist; "
            "accepted: a file in an existing, writable directory (in a pod, the volume's mount)"
        )


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _engine(url: URL) -> AsyncEngine:
    """PostgreSQL: a pool with pre-ping. SQLite: one connection in WAL mode, so this
    process's writers queue for it instead of failing with "database is locked"."""
    if url.get_backend_name() != "sqlite":
        return create_async_engine(url, pool_pre_ping=True)
    engine = create_async_engine(
        url, pool_size=1, max_overflow=0, pool_timeout=60, connect_args={"timeout": 30}
    )

    def wal(connection: Any, _: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    event.listen(engine.sync_engine, "connect", wal)
    return engine


def _lease_from(env: Mapping[str, str]) -> float:
    text = env.get(LEASE_VARIABLE)
    if text is None:
        return LEASE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.5 <= value <= 3600:
        raise TaskStoreError(
            f"{LEASE_VARIABLE}: {text!r} is not a lease; accepted: 0.5 to 3600 seconds"
        )
    return value


def _secret(ref: SecretKeyRef, where: str, env: Mapping[str, str]) -> str:
    variable = secret_env_name(ref)
    value = env.get(variable)
    if not value:
        raise TaskStoreError(
            f"a2a.task_store.{where}: Secret {ref.name!r} key {ref.key!r} is not in the "
            f"environment; accepted: the variable {variable} set (the operator maps it in the pod)"
        )
    return value


def build_task_stores(
    agent_id: str,
    options: TaskStoreOptions,
    *,
    push: bool,
    env: Mapping[str, str] = os.environ,
    heartbeat: float | None = None,
    lease: float | None = None,
    event_poll: float = EVENT_POLL_SECONDS,
) -> TaskStores:
    """The stores ``options`` asks for (``push``: whether push configs are stored).

    ``lease`` (default ``$MAS_TASK_LEASE_SECONDS``, else 20): how long this replica may be
    silent before the others fail its tasks; ``heartbeat`` defaults to a quarter of it.
    """
    if options.type == "memory":
        return TaskStores(
            agent_id,
            FinalStateTaskStore(
                BoundedMemoryTaskStore(
                    agent_id=agent_id,
                    max_tasks=options.max_tasks,
                    max_bytes=options.max_bytes,
                    ttl_seconds=options.ttl_seconds,
                )
            ),
            InMemoryPushNotificationConfigStore() if push else None,
            history=MemoryConversationStore(
                agent_id=agent_id,
                max_bytes=options.history_max_bytes,
                max_session_bytes=options.history_max_session_bytes,
            ),
        )
    if options.url_secret_key_ref is not None:
        url = _secret(options.url_secret_key_ref, "url_secret_key_ref", env)
    else:
        assert options.url is not None  # the model requires one of them
        url = options.url
    try:
        parsed = make_url(url)
        shown = parsed.render_as_string(hide_password=True)
        engine = _engine(parsed)
    except (ArgumentError, ValueError, ImportError) as exc:
        raise TaskStoreError(
            f"a2a.task_store.url: not a usable database URL ({_reason(exc)}); accepted: "
            "sqlite+aiosqlite:///path or postgresql+asyncpg://user@host:port/db"
        ) from None
    key = None
    if push and options.push_config_key_secret_key_ref is not None:
        key = _secret(options.push_config_key_secret_key_ref, "push_config_key_secret_key_ref", env)
    elif push:
        logger.warning(
            "agent %s: push-notification configs are stored unencrypted in %s; set "
            "a2a.task_store.push_config_key_secret_key_ref to encrypt them",
            agent_id,
            shown,
        )
    push_store = None
    if push:
        try:
            push_store = DatabasePushNotificationConfigStore(engine, encryption_key=key)
        except ValueError:
            raise TaskStoreError(
                "a2a.task_store.push_config_key_secret_key_ref: the key is not a Fernet key; "
                "accepted: 32 bytes, urlsafe base64 (cryptography.fernet.Fernet.generate_key())"
            ) from None
    lease = lease if lease is not None else _lease_from(env)
    heartbeat = heartbeat if heartbeat is not None else lease / 4
    runs = RunBook(engine, agent_id, lease)
    # Loaded with a database store only: it pulls in the postgresql and sqlite dialects,
    # which a memory store never needs (docs/performance.md, cold start).
    from library_ioa.plugins.a2a.server.sql_history import SqlConversationStore

    return TaskStores(
        agent_id,
        FinalStateVersionedStore(VersionedDatabaseTaskStore(engine), runs),
        push_store,
        GuardedEventStream(DatabaseTaskEventStream(engine, poll_interval_s=event_poll)),
        engine,
        shown,
        heartbeat,
        lease,
        runs,
        SqlConversationStore(engine, agent_id, shown_url=shown),
    )


__all__ = [
    "FinalStateTaskStore",
    "FinalStateVersionedStore",
    "TaskStoreError",
    "TaskStores",
    "build_task_stores",
    "default_replica_id",
    "refuses",
]
