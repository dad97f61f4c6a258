"""``DenialEvents``: the first refusal of each caller, as a Warning Event on the Application.

Contract:

- :meth:`DenialEvents.note` is called by :class:`~.callers.CallerCheck` with every refusal,
  on the request path; it never blocks, never raises and never awaits: it only remembers the
  caller and queues the Event. The refusal the caller gets is decided before and does not
  depend on it;
- one Event per caller (``unknown`` for every caller without a verified identity) per
  process: a caller is remembered at its first refusal, whatever the reason, and never
  announced again. At most :data:`MAX_CALLERS` callers are remembered; past that, a new
  caller gets no Event (logged once), so a stream of made-up callers costs bounded memory
  and no API requests beyond the cap. A refusal that is not the caller's (``503``,
  ``keys_unavailable``) is no denial and announces nothing;
- a background task posts the queued Events one by one (at most :data:`MAX_QUEUED` wait;
  more are dropped, logged once). A post that fails is logged (the first failure as a
  warning, later ones at debug) and not retried: an Event is a hint to a person, the
  counter ``maslab_a2a_auth_denied_total`` is the record;
- :meth:`aclose` stops the task; Events still queued are dropped.

:func:`event_body` is the Event (``v1``, type ``Warning``, reason :data:`REASON`) whose
``involvedObject`` is the Application, so ``kubectl describe application`` shows it.
:func:`api_server_post` posts it to the API server with the pod's API-audience token, which
the operator binds to a Role that may only create Events (docs/security.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

REASON = "CallerDenied"
COMPONENT = "maslab-agent"
MAX_CALLERS = 1024
MAX_QUEUED = 64
APPLICATION_API_VERSION = "infra.maslab.io/v1"

Post = Callable[[Mapping[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Subject:
    """The Application an agent's Events are about."""

    namespace: str
    name: str
    uid: str = ""  # without it the Event is listed, but describe does not show it


def event_body(
    subject: Subject, agent: str, caller: str, *, reason: str, message: str, now: datetime.datetime
) -> dict[str, Any]:
    """The Warning Event of ``caller``'s first refusal by ``agent``."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    involved: dict[str, Any] = {
        "apiVersion": APPLICATION_API_VERSION,
        "kind": "Application",
        "name": subject.name,
        "namespace": subject.namespace,
    }
    if subject.uid:
        involved["uid"] = subject.uid
    text = (
        f"agent {agent!r} refused caller {caller} ({reason}); further refusals of this caller "
        f"are counted in maslab_a2a_auth_denied_total only: {message}"
    )
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{subject.name}.", "namespace": subject.namespace},
        "involvedObject": involved,
        "type": "Warning",
        "reason": REASON,
        "message": text[:1024],  # the API server keeps at most 1 KiB of an Event's message
        "source": {"component": COMPONENT},
        "reportingComponent": f"maslab.io/{COMPONENT}",
        "reportingInstance": os.environ.get("HOSTNAME", agent)[:128],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def api_server_post(base_url: str, namespace: str, ca_file: Path, token_file: Path) -> Post:
    """A post of Events to ``base_url`` (the API server), trusting ``ca_file`` and sending the
    token read from ``token_file`` (rotated by the kubelet) on each request."""
    import httpx  # loaded only in a pod that posts Events

    context = ssl.create_default_context(cafile=str(ca_file))
    url = f"{base_url}/api/v1/namespaces/{namespace}/events"

    async def post(body: Mapping[str, Any]) -> None:
        token = token_file.read_text().strip()
        async with httpx.AsyncClient(verify=context, timeout=5.0) as client:
            response = await client.post(
                url, json=dict(body), headers={"Authorization": f"Bearer {token}"}
            )
        if response.status_code >= 300:
            raise RuntimeError(f"POST {url} answered {response.status_code}: {response.text[:300]}")

    return post


class DenialEvents:
    """Posts one Warning Event per refused caller (see the module docstring)."""

    def __init__(
        self,
        post: Post,
        subject: Subject,
        agent: str,
        *,
        max_callers: int = MAX_CALLERS,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.subject = subject
        self.agent = agent
        self._post = post
        self._max_callers = max_callers
        self._now = now
        self._seen: set[str] = set()
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(MAX_QUEUED)
        self._task: asyncio.Task[None] | None = None
        self._warned: set[str] = set()  # what has been logged once: "full", "queue", "post"
        self.posted = 0  # Events the API server accepted

    def note(self, caller: str, status: int, reason: str, message: str) -> None:
        """Queue the Event of ``caller``'s refusal if it is its first (never raises)."""
        try:
            self._note(caller, status, reason, message)
        except Exception:  # an Event is a hint: never let it touch the refusal
            self._once("note", "a denial Event could not be queued", exc_info=True)

    def _note(self, caller: str, status: int, reason: str, message: str) -> None:
        if status == 503 or caller in self._seen:
            return
        if len(self._seen) >= self._max_callers:
            self._once(
                "full",
                "agent %s refused more than %d distinct callers: no Event for further callers "
                "(see maslab_a2a_auth_denied_total)",
                self.agent,
                self._max_callers,
            )
            return
        self._seen.add(caller)
        body = event_body(
            self.subject, self.agent, caller, reason=reason, message=message, now=self._now()
        )
        try:
            self._queue.put_nowait(body)
        except asyncio.QueueFull:
            self._once("queue", "denial Events are dropped: %d wait already", MAX_QUEUED)
            return
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            body = await self._queue.get()
            try:
                await self._post(body)
            except Exception as exc:  # any failure is logged, none is fatal
                if "post" in self._warned:
                    logger.debug("a denial Event was not posted: %s", exc)
                else:
                    self._warned.add("post")
                    logger.warning(
                        "a denial Event of agent %s was not posted (later failures are logged "
                        "at debug): %s",
                        self.agent,
                        exc,
                    )
            else:
                self.posted += 1

    async def aclose(self) -> None:
        """Stop posting; queued Events are dropped."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _once(self, key: str, text: str, *args: object, exc_info: bool = False) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(text, *args, exc_info=exc_info)
