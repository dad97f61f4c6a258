"""What the SDK's request handler takes from an endpoint's stores: :class:`TaskStores`.

The contract both backends fill (:mod:`.endpoint` for ``memory``, :mod:`.sql` for ``sql``):
the task store, the push-config store, the event stream, the conversations and, for a
durable store, its engine and the replicas' run book with their lease and heartbeat.
:meth:`TaskStores.start` opens them before serving, :meth:`TaskStores.drain` waits for the
turns this replica runs once it no longer accepts requests, and :meth:`TaskStores.aclose`
closes them after; a store that cannot be configured or reached is a :class:`TaskStoreError` naming
the field, the Secret and the variable, or the URL without its password.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from a2a.server.cluster import LegacyTaskStoreAdapter, TaskEventStream, VersionedTaskStore
from a2a.server.tasks import PushNotificationConfigStore, TaskStore

from library_ioa.errors import LibraryError
from mas.runtime.history import ConversationStore

if TYPE_CHECKING:  # a sql store's (server/stores/sql.py): loaded with one only
    from sqlalchemy.ext.asyncio import AsyncEngine

    from library_ioa.plugins.a2a.server.stores.runs import RunBook

LEASE_SECONDS = 20.0
HEARTBEAT_SECONDS = LEASE_SECONDS / 4
LEASE_VARIABLE = "MAS_TASK_LEASE_SECONDS"
EVENT_POLL_SECONDS = 0.2


class TaskStoreError(LibraryError, OSError):
    """The task store cannot be configured or reached; the message says which and why."""


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
        """Open the stores before serving (in memory: nothing to open)."""

    def inner_store(self) -> VersionedTaskStore:
        """The task store as a versioned store (the SDK's adapter around an unversioned one)."""
        store = self.task_store
        if isinstance(store, VersionedTaskStore):
            return store
        return LegacyTaskStoreAdapter(store)

    async def drain(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) for the turns this replica runs, then end the rest
        FAILED; ``True`` when none had to be failed (in memory: nothing outlives the
        process, nothing to wait for)."""
        return True

    async def aclose(self) -> None:
        """Close the stores after serving (in memory: nothing to close)."""
