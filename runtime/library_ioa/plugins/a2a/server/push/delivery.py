"""Push notifications delivered off the event path: per-config queues, per-receiver pools.

The SDK's ``BasePushNotificationSender`` POSTs inline: the task's next event waits for
every receiver (up to the HTTP timeout each), so one receiver that accepts and never
answers holds a ``returnImmediately`` send until the timeout, and every event of a task
behind it. :class:`QueuedPushSender` takes its place (the same ``PushNotificationSender``
contract, called by the SDK's active task and by ``fast/stream.py``):

- ``send_notification`` copies the event into the task's queue and returns at once; it
  never waits for the network or the config store.
- One dispatcher per task (while it has events) reads the task's configs from the store
  and hands each event to one queue **per config**, in order; one worker per config
  delivers them in order, so a slow receiver delays only its own notifications.
- Every queue holds at most ``queue_size`` events; past it the oldest is dropped (counted
  in ``maslab_a2a_push_dropped_total`` and logged once per config), the newest kept.
- Receivers are isolated by their ``scheme://host:port``: each has its own HTTP client
  (its own connection pool, at most ``receiver_connections`` POSTs in flight) and at most
  ``receiver_queue_size`` events waiting for it across all its configs; past that the
  oldest event of the config being queued is dropped (counted as above). So a receiver
  that accepts and never answers, however many configs name it, holds only its own
  connections and its own queue: another receiver's push is not delayed. A receiver's
  client is closed when nothing is queued or in flight for it.
- A delivery is retried on a connection error, a timeout, HTTP 429 or a 5xx, up to
  ``attempts`` times in all, waiting ``backoff * 2**n`` seconds between tries (capped at
  ``max_backoff``); any other 4xx is final. The URL is checked by the endpoint's policy
  (``push_url_validator``) before every try.
- A delivery that fails for good logs **one** line: the task, the URL without its query,
  fragment or credentials, the attempts and the reason (exception type or HTTP status),
  never a traceback, the token or the body; httpx's own request lines lose their query
  too (a filter on the ``httpx`` logger, process-wide). Outcomes count in
  ``maslab_a2a_push_deliveries_total{agent, outcome}`` (``ok``, ``failed``, ``refused``).

Each POST carries the config's token in ``X-A2A-Notification-Token`` and its
``authentication`` as ``Authorization``, as the SDK's sender does. :meth:`aclose` gives
queued deliveries ``grace`` seconds, then cancels the rest.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field

import httpx
from a2a.server.tasks import PushNotificationConfigStore, PushNotificationSender
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types import TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict
from prometheus_client import Counter

from library_ioa.errors import LibraryError
from library_ioa.plugins.a2a.server.metrics import A2A_REGISTRY
from mas.infra.models import DEFAULT_PUSH_RECEIVER_CONNECTIONS, DEFAULT_PUSH_RECEIVER_QUEUE_SIZE

logger = logging.getLogger(__name__)

PUSH_DELIVERIES = Counter(
    "maslab_a2a_push_deliveries",
    "Push notifications by agent and outcome (ok, failed after retries, refused by policy).",
    ("agent", "outcome"),
    registry=A2A_REGISTRY,
)
PUSH_DROPPED = Counter(
    "maslab_a2a_push_dropped",
    "Push notifications dropped because a receiver's queue was full, by agent.",
    ("agent",),
    registry=A2A_REGISTRY,
)
RETRIED_STATUS = frozenset({408, 425, 429})


def shown_url(url: str) -> str:
    """``url`` without credentials, query or fragment: what a log line may show."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unparseable URL)"
    host = f"[{host}]" if ":" in host else host
    return urllib.parse.urlunsplit((parts.scheme, host + port, parts.path, "", ""))


class _QueryRedaction(logging.Filter):
    """httpx logs every request's full URL at INFO: a push URL's query may hold a secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(a, httpx.URL) and (a.query or a.userinfo) for a in record.args
        ):
            record.args = tuple(
                shown_url(str(a)) if isinstance(a, httpx.URL) else a for a in record.args
            )
        return True


_REDACTION = _QueryRedaction()


def redact_httpx_queries() -> None:
    """Install the filter on httpx's logger (idempotent): its lines show no query."""
    httpx_logger = logging.getLogger("httpx")
    if _REDACTION not in httpx_logger.filters:
        httpx_logger.addFilter(_REDACTION)


class _Failed(LibraryError):
    """One try failed; ``retry`` says whether another may succeed."""

    def __init__(self, reason: str, *, retry: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry


@dataclass
class _Queue:
    """The pending events of one task or one config, and whether a worker drains them."""

    events: deque[PushNotificationEvent] = field(default_factory=deque)
    dropped: int = 0
    receiver: _Receiver | None = None  # a config's queue: the receiver it delivers to


@dataclass
class _Receiver:
    """One receiver (``scheme://host:port``): its client, its slots, what waits for it."""

    client: httpx.AsyncClient
    slots: asyncio.Semaphore
    pending: int = 0  # events queued or being delivered to it, across its configs
    busy: int = 0  # config workers alive for it


def receiver_of(url: str) -> str:
    """The receiver a push URL names: ``scheme://host:port`` (the port made explicit)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return url
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}:{port}"


class QueuedPushSender(PushNotificationSender):
    """A ``PushNotificationSender`` that delivers off the event path (module docstring)."""

    def __init__(
        self,
        client_factory: Callable[[int], httpx.AsyncClient],
        config_store: PushNotificationConfigStore,
        *,
        push_url_validator: Callable[[str], Awaitable[bool]] | None = None,
        agent_id: str = "",
        queue_size: int = 64,
        receiver_queue_size: int = DEFAULT_PUSH_RECEIVER_QUEUE_SIZE,
        receiver_connections: int = DEFAULT_PUSH_RECEIVER_CONNECTIONS,
        attempts: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
    ) -> None:
        """``client_factory(n)``: a new client whose pool holds at most ``n`` connections."""
        if min(queue_size, receiver_queue_size, receiver_connections, attempts) < 1 or backoff < 0:
            raise ValueError(
                "queue_size, receiver_queue_size, receiver_connections and attempts must be "
                ">= 1, backoff >= 0"
            )
        self._client_factory = client_factory
        self._store = config_store
        self._validator = push_url_validator
        self.agent_id = agent_id
        self.queue_size = queue_size
        self.receiver_queue_size = receiver_queue_size
        self.receiver_connections = receiver_connections
        self.attempts = attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._tasks: dict[str, _Queue] = {}
        self._configs: dict[tuple[str, str], _Queue] = {}
        self._receivers: dict[str, _Receiver] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._workers: set[asyncio.Task[None]] = set()
        redact_httpx_queries()

    @property
    def pending(self) -> int:
        """Events queued and not yet delivered (or given up)."""
        queued = (*self._tasks.values(), *self._configs.values())
        return sum(len(q.events) for q in queued)

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        copied = type(event)()
        copied.CopyFrom(event)
        queue = self._tasks.get(task_id)
        if queue is None:
            queue = self._tasks[task_id] = _Queue()
            self._spawn(self._dispatch(task_id, queue), f"push-dispatch:{task_id}")
        self._put(queue, copied, f"task {task_id}")

    def receiver_pending(self, url: str) -> int:
        """Events queued or being delivered to the receiver of ``url`` (0: none)."""
        found = self._receivers.get(receiver_of(url))
        return 0 if found is None else found.pending

    def _put(self, queue: _Queue, event: PushNotificationEvent, what: str) -> None:
        queue.events.append(event)
        receiver = queue.receiver
        if receiver is not None:
            receiver.pending += 1
        full = len(queue.events) > self.queue_size
        if receiver is not None and receiver.pending > self.receiver_queue_size:
            full = True
        if full:
            queue.events.popleft()
            if receiver is not None:
                receiver.pending -= 1
            queue.dropped += 1
            PUSH_DROPPED.labels(self.agent_id).inc()
            if queue.dropped == 1:
                logger.warning(
                    "push notifications of %s: the queue is full (%d for the config, %d for "
                    "the receiver); dropping the oldest",
                    what,
                    self.queue_size,
                    self.receiver_queue_size,
                )

    def _spawn(self, work: Coroutine[None, None, None], name: str) -> None:
        worker = asyncio.get_running_loop().create_task(work, name=name)
        self._workers.add(worker)
        worker.add_done_callback(self._workers.discard)

    async def _dispatch(self, task_id: str, queue: _Queue) -> None:
        try:
            while queue.events:
                event = queue.events.popleft()
                try:
                    configs = await self._store.get_info_for_dispatch(task_id)
                except Exception as exc:  # best effort: the store's failure is not the task's
                    logger.warning(
                        "push notifications of task %s: cannot read the configs (%s)",
                        task_id,
                        type(exc).__name__,
                    )
                    continue
                for config in configs:
                    self._to_config(task_id, config, event)
        finally:
            if self._tasks.get(task_id) is queue:
                del self._tasks[task_id]

    def _to_config(
        self, task_id: str, config: TaskPushNotificationConfig, event: PushNotificationEvent
    ) -> None:
        key = (task_id, config.id or config.url)
        queue = self._configs.get(key)
        if queue is None:
            name = receiver_of(config.url)
            receiver = self._receivers.get(name)
            if receiver is None:
                receiver = self._receivers[name] = _Receiver(
                    self._client_factory(self.receiver_connections),
                    asyncio.Semaphore(self.receiver_connections),
                )
            receiver.busy += 1
            queue = self._configs[key] = _Queue(receiver=receiver)
            self._spawn(self._deliver_all(key, name, config, queue), f"push:{task_id}")
        self._put(queue, event, f"task {task_id} to {shown_url(config.url)}")

    async def _deliver_all(
        self, key: tuple[str, str], name: str, config: TaskPushNotificationConfig, queue: _Queue
    ) -> None:
        receiver = queue.receiver
        assert receiver is not None
        try:
            while queue.events:
                event = queue.events.popleft()
                try:
                    await self._deliver(key[0], receiver, config, event)
                finally:
                    receiver.pending -= 1  # counted until its delivery ends
        finally:
            receiver.pending -= len(queue.events)
            queue.events.clear()
            if self._configs.get(key) is queue:
                del self._configs[key]
            receiver.busy -= 1
            if receiver.busy == 0 and self._receivers.get(name) is receiver:
                del self._receivers[name]  # idle: its connections go
                closing = asyncio.get_running_loop().create_task(receiver.client.aclose())
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)

    async def _deliver(
        self,
        task_id: str,
        receiver: _Receiver,
        config: TaskPushNotificationConfig,
        event: PushNotificationEvent,
    ) -> None:
        body = MessageToDict(to_stream_response(event))
        headers = {}
        if config.token:
            headers["X-A2A-Notification-Token"] = config.token
        if config.HasField("authentication") and config.authentication.credentials:
            auth = config.authentication
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}".strip()
        for attempt in range(1, self.attempts + 1):
            try:
                async with receiver.slots:
                    await self._try(receiver.client, config.url, body, headers)
            except _Failed as failure:
                if failure.reason == "refused by the push policy":
                    PUSH_DELIVERIES.labels(self.agent_id, "refused").inc()
                    logger.warning(
                        "push notification of task %s to %s refused by the push policy",
                        task_id,
                        shown_url(config.url),
                    )
                    return
                if failure.retry and attempt < self.attempts:
                    await asyncio.sleep(min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))
                    continue
                PUSH_DELIVERIES.labels(self.agent_id, "failed").inc()
                logger.warning(
                    "push notification of task %s to %s failed after %d attempt(s): %s",
                    task_id,
                    shown_url(config.url),
                    attempt,
                    failure.reason,
                )
                return
            PUSH_DELIVERIES.labels(self.agent_id, "ok").inc()
            logger.debug("push notification of task %s sent to %s", task_id, shown_url(config.url))
            return

    async def _try(
        self, client: httpx.AsyncClient, url: str, body: object, headers: dict[str, str]
    ) -> None:
        if self._validator is not None:
            try:
                accepted = await self._validator(url)
            except Exception:  # fail closed
                accepted = False
            if not accepted:
                raise _Failed("refused by the push policy", retry=False)
        try:
            response = await client.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise _Failed(type(exc).__name__, retry=True) from None
        if response.status_code >= 400:
            status = response.status_code
            retry = status >= 500 or status in RETRIED_STATUS
            raise _Failed(f"HTTP {status}", retry=retry)

    async def aclose(self, grace: float = 2.0) -> None:
        """Let queued deliveries finish within ``grace`` seconds, then cancel the rest."""
        if self._workers:
            _, late = await asyncio.wait(set(self._workers), timeout=grace)
            for worker in late:
                worker.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        self._tasks.clear()
        self._configs.clear()
        receivers, self._receivers = list(self._receivers.values()), {}
        for receiver in receivers:
            await receiver.client.aclose()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
