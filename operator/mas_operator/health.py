"""The operator's liveness and readiness endpoints, on one small HTTP listener.

- liveness (``--liveness`` URL, e.g. ``/healthz``): 200 ``{"status": "ok", "leader": ...}``
  while the process's event loop answers, on the leader and on a standby alike.
- readiness (``/readyz`` on the same listener): 200 ``{"status": "ready", "leader": ...}``
  when this instance could do its job now, else 503 ``{"status": "not ready", "reason":
  ...}``. With leader election, that is when the API server answered this instance's last
  Lease call within one lease term (a standby asks every few seconds whether the Lease is
  free, the leader renews it), and, on the leader, once kopf has started (its startup
  handlers ran; it lists and watches from then on). **A standby that reaches the API server
  is ready**: it would take over within a lease term, so a rolling update may stop the old
  leader once its successor is ready, and the operator's PodDisruptionBudget counts both
  replicas (a standby reported unready would count as disrupted and block every drain of
  the leader's node). Without leader election only kopf's start is checked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web

READINESS_PATH = "/readyz"


@dataclass
class Readiness:
    """What ``/readyz`` reports, updated by the Lease calls and kopf's start."""

    term: float | None  # seconds an API answer vouches for; None: no leader election
    answered: float | None = None  # time.monotonic() of the API server's last answer
    kopf_started: asyncio.Event = field(default_factory=asyncio.Event)

    def api_answered(self) -> None:
        """The API server answered a Lease call (whatever it said)."""
        self.answered = time.monotonic()

    def not_ready(self, leading: bool) -> str | None:
        """Why this instance is not ready, or ``None`` when it is."""
        if self.term is not None:
            if self.answered is None:
                return "the API server has not answered yet"
            silent = time.monotonic() - self.answered
            if silent > self.term:
                return f"the API server has not answered for {silent:.0f}s"
        if (leading or self.term is None) and not self.kopf_started.is_set():
            return "kopf is starting"
        return None


async def serve_health(
    url: str, leading: Callable[[], bool], readiness: Readiness
) -> tuple[web.AppRunner, int | None]:
    """Serve liveness at ``url``'s path and readiness at ``/readyz``; returns the runner
    (to clean up) and the port bound (``url`` may name port 0)."""
    parts = urlsplit(url)
    path = parts.path or "/healthz"

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "leader": leading()})

    async def readyz(_: web.Request) -> web.Response:
        reason = readiness.not_ready(leading())
        if reason is None:
            return web.json_response({"status": "ready", "leader": leading()})
        return web.json_response({"status": "not ready", "reason": reason}, status=503)

    app = web.Application()
    app.router.add_get(path, healthz)
    if path != READINESS_PATH:
        app.router.add_get(READINESS_PATH, readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(
        runner, parts.hostname or "0.0.0.0", 8080 if parts.port is None else parts.port
    )
    await site.start()
    server = getattr(site, "_server", None)
    sockets = getattr(server, "sockets", None) or []
    return runner, sockets[0].getsockname()[1] if sockets else parts.port
