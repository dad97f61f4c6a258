"""The contract of a console source: the Applications there are, kept current, and a signal
when one changes.

Rules every source keeps:

- :meth:`Source.applications` and :meth:`Source.application` answer from memory, at once;
  they never wait on the network (a page renders what the source last saw);
- every change of an Application's view (a new status, an edge's state, an Event) replaces
  its :class:`~mas.console.views.ApplicationView` with a higher ``version`` and publishes its
  key through :attr:`Source.changes`; a removed Application publishes its key too, and
  :meth:`Source.application` then answers ``None``;
- :meth:`Source.start` returns once the first state is known (or failed: the view then
  carries ``problems``); :meth:`Source.stop` ends every task and thread it started.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator

from mas.console.views import ApplicationView

QUEUE_SIZE = 256  # changes a slow subscriber may lag behind before it is told to reload


class Changes:
    """Publishes the keys of changed Applications to every subscriber (an SSE stream).

    A subscriber that falls :data:`QUEUE_SIZE` changes behind gets ``"*"`` (everything may
    have changed) instead of the keys it missed.
    """

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[str]] = set()

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[str]]:
        queue: asyncio.Queue[str] = asyncio.Queue(QUEUE_SIZE)
        self._queues.add(queue)
        try:
            yield queue
        finally:
            self._queues.discard(queue)

    def publish(self, key: str) -> None:
        for queue in self._queues:
            try:
                queue.put_nowait(key)
            except asyncio.QueueFull:
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait("*")

    @property
    def subscribers(self) -> int:
        return len(self._queues)


class Source(ABC):
    """Where the console's Applications come from (see the module docstring)."""

    def __init__(self) -> None:
        self.changes = Changes()

    @property
    @abstractmethod
    def mode(self) -> str:
        """``laptop`` or ``cluster``, for the page header."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    @abstractmethod
    def applications(self) -> list[ApplicationView]:
        """Every Application, by namespace then name."""

    def application(self, namespace: str, name: str) -> ApplicationView | None:
        return next(
            (a for a in self.applications() if a.namespace == namespace and a.name == name),
            None,
        )
