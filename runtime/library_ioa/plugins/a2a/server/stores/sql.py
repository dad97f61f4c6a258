"""The stores of a ``sql`` task store (``a2a.task_store``): :func:`build_sql_stores`.

What they are and the rules they keep are in :mod:`library_ioa.plugins.a2a.server.stores.endpoint`
(``sql``, "Nobody waits on a task nobody runs"). :class:`SqlTaskStores` opens the database
before serving (tables, the sweep of the tasks an earlier process left running) and beats
the heartbeat while serving.

Imported by :func:`~library_ioa.plugins.a2a.server.stores.endpoint.build_task_stores` for a ``sql``
store only: it loads SQLAlchemy, the dialect's driver and the SDK's database stores, which
it imports by their own modules (``library_ioa.plugins.a2a.sdk_extras``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from a2a.server.cluster import VersionedTaskStore
from a2a.server.cluster.database_event_stream import DatabaseTaskEventStream
from a2a.server.cluster.database_task_store import VersionedDatabaseTaskStore
from a2a.server.tasks.database_push_notification_config_store import (
    DatabasePushNotificationConfigStore,
)
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from library_ioa.plugins.a2a.server.stores.runs import RunBook
from library_ioa.plugins.a2a.server.stores.sql_guards import (
    FinalStateVersionedStore,
    GuardedEventStream,
)
from library_ioa.plugins.a2a.server.stores.sql_history import SqlConversationStore
from library_ioa.plugins.a2a.server.stores.task_stores import (
    EVENT_POLL_SECONDS,
    LEASE_SECONDS,
    LEASE_VARIABLE,
    TaskStoreError,
    TaskStores,
)
from mas.infra.models import SecretKeyRef, TaskStoreOptions
from mas.infra.secrets import secret_env_name

logger = logging.getLogger(__name__)


class SqlTaskStores(TaskStores):
    """The stores on one database engine; :meth:`start` before serving, :meth:`aclose` after."""

    async def start(self, replica_id: str) -> None:
        """Create the tables, fail what a dead replica left running, start the heartbeat."""
        assert self.engine is not None
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
        return super().inner_store()

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

    async def drain(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until no turn runs on this replica; those still
        running then are written FAILED (``STOPPED_TURN``) here, their run rows dropped."""
        if self.runs is None or await self.runs.settle(timeout):
            return True
        try:
            stopped = await self.runs.stop(self.inner_store())
        except (SQLAlchemyError, OSError) as exc:
            logger.warning(
                "agent %s: cannot fail the turns still running at shutdown: %s",
                self.agent_id,
                _reason(exc),
            )
            return False
        logger.warning(
            "agent %s: %d turn(s) still running after the drain timeout (%gs) are now failed",
            self.agent_id,
            stopped,
            timeout,
        )
        return False

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


def build_sql_stores(
    agent_id: str,
    options: TaskStoreOptions,
    *,
    push: bool,
    env: Mapping[str, str] = os.environ,
    heartbeat: float | None = None,
    lease: float | None = None,
    event_poll: float = EVENT_POLL_SECONDS,
) -> SqlTaskStores:
    """The stores of a ``sql`` ``options`` (the parameters of ``build_task_stores``)."""
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
    return SqlTaskStores(
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


__all__ = ["SqlTaskStores", "build_sql_stores"]
