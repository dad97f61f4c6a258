"""Task and push-config storage of one A2A endpoint (``a2a.task_store``).

:func:`build_task_stores` turns the endpoint's :class:`~mas.infra.models.TaskStoreOptions`
into what the SDK's request handler takes:

- ``memory`` (the default): a bounded in-memory task store (``max_tasks``, ``max_bytes``,
  ``ttl_seconds``: :mod:`library_ioa.plugins.a2a.server.stores.memory`), the SDK's
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
  (:class:`~library_ioa.plugins.a2a.server.stores.sql_history.SqlConversationStore`), so any
  replica continues any conversation.
  Built by :mod:`library_ioa.plugins.a2a.server.stores.sql`, imported for a ``sql`` store
  only (SQLAlchemy and the driver are never loaded with ``memory``).

Rules every variant keeps:

- **A terminal state is final.** The task store is wrapped by a guard
  (:mod:`library_ioa.plugins.a2a.server.stores.final_state`) that refuses any write moving a
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

import os
import socket
from collections.abc import Mapping

from a2a.server.tasks import InMemoryPushNotificationConfigStore

from library_ioa.plugins.a2a.server.stores.final_state import FinalStateTaskStore, refuses
from library_ioa.plugins.a2a.server.stores.memory import BoundedMemoryTaskStore
from library_ioa.plugins.a2a.server.stores.task_stores import (
    EVENT_POLL_SECONDS,
    TaskStoreError,
    TaskStores,
)
from mas.infra.models import TaskStoreOptions
from mas.runtime.memory_history import MemoryConversationStore


def default_replica_id(port: int, env: Mapping[str, str] = os.environ) -> str:
    """``$MAS_REPLICA_ID``, else ``<hostname>:<port>``."""
    return env.get("MAS_REPLICA_ID") or f"{socket.gethostname()}:{port}"


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
    # Loaded for a sql store only: SQLAlchemy, its dialects and the SDK's database stores,
    # which a memory store never needs (library_ioa.plugins.a2a.sdk_extras).
    from library_ioa.plugins.a2a.server.stores.sql import build_sql_stores

    return build_sql_stores(
        agent_id,
        options,
        push=push,
        env=env,
        heartbeat=heartbeat,
        lease=lease,
        event_poll=event_poll,
    )


__all__ = [
    "FinalStateTaskStore",
    "TaskStoreError",
    "TaskStores",
    "build_task_stores",
    "default_replica_id",
    "refuses",
]
