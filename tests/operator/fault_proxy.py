"""A fault-injecting reverse proxy in front of the real kube-apiserver (tests only).

It listens on 127.0.0.1 with the API server's own serving certificate (so clients verify it
with the control plane's CA, as they verify the API server) and forwards every request to the
API server over HTTPS. Rules the test sets (methods, a path pattern, the answers to give)
make it answer a matching request itself with a Kubernetes ``Status`` body: 409 Conflict,
429 TooManyRequests, 500 InternalError, 503 ServiceUnavailable (with ``Retry-After`` when
the rule says so). Watches (``watch=true``) are never faulted and stream through unchanged,
but a test can cut the watches of some paths (:meth:`FaultProxy.cut_watches`): their
streams are closed and their reconnections held until :meth:`FaultProxy.resume_watches`,
which answers each held one with the API server's ``410 Gone`` watch event (the resource
version is too old), so the client lists again. Every request is recorded with its arrival
time (``time.monotonic``) and the status it got.

The proxy runs its own event loop in a thread of its own, like the operator under test.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from tests.envtest.controlplane import write_kubeconfig

# Headers that belong to one connection, not to the message (RFC 9110 7.6.1), plus the ones
# the proxy recomputes. Accept-Encoding is dropped so the API server answers uncompressed.
_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
    "content-encoding",
}
_REASONS = {
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}
_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/[^/]+)?/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?"
)


@dataclass
class Rule:
    """Answer matching requests with ``answers`` in turn; with ``forever``, the last one
    until the rule is removed."""

    methods: frozenset[str]
    path: re.Pattern[str]
    answers: list[int]
    retry_after: int | None = None
    forever: bool = False
    used: int = 0

    def matches(self, method: str, path: str) -> bool:
        live = self.forever or self.used < len(self.answers)
        return live and method in self.methods and self.path.search(path) is not None

    def take(self) -> int:
        status = self.answers[min(self.used, len(self.answers) - 1)]
        self.used += 1
        return status


@dataclass(frozen=True)
class Seen:
    """One request as the proxy saw it."""

    at: float
    method: str
    path: str
    query: str
    status: int
    injected: bool


def status_body(code: int, path: str, retry_after: int | None) -> dict[str, Any]:
    """The ``Status`` object the API server itself sends with such an answer."""
    found = _PATH.match(path)
    group, plural, name = found.group("group", "plural", "name") if found else (None,) * 3
    resource = f"{plural}.{group}" if group else str(plural)
    message = {
        409: (
            f'Operation cannot be fulfilled on {resource} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again"
        ),
        429: "Too many requests, please try again later.",
        500: "Internal error occurred: injected by the test's fault proxy",
        503: "the server is currently unable to handle the request",
    }[code]
    details: dict[str, Any] = {k: v for k, v in (("name", name), ("kind", plural)) if v}
    if group:
        details["group"] = group
    if retry_after is not None:
        details["retryAfterSeconds"] = retry_after
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": _REASONS[code],
        "details": details,
        "code": code,
    }


@dataclass
class FaultProxy:
    """``FaultProxy(upstream, ca, cert, key).start()``; ``url``, ``fail()``, ``seen()``."""

    upstream: str
    ca_path: Path
    cert_path: Path
    key_path: Path
    port: int = 0
    _rules: list[Rule] = field(default_factory=list, repr=False)
    _seen: list[Seen] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _ready: threading.Event = field(default_factory=threading.Event, repr=False)
    _stopped: asyncio.Event | None = field(default=None, repr=False)
    _error: BaseException | None = field(default=None, repr=False)
    _transports: set[asyncio.BaseTransport] = field(default_factory=set, repr=False)
    _watches: dict[asyncio.BaseTransport, str] = field(default_factory=dict, repr=False)
    _cut: re.Pattern[str] | None = field(default=None, repr=False)
    _resumed: asyncio.Event | None = field(default=None, repr=False)
    _held: int = field(default=0, repr=False)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    # -- the test's side -------------------------------------------------------

    def fail(
        self,
        methods: Iterable[str],
        path: str,
        *answers: int,
        retry_after: int | None = None,
        forever: bool = False,
    ) -> Rule:
        """Answer the next requests of ``methods`` whose path matches the regex ``path``
        with ``answers`` (each one of 409, 429, 500, 503), in order."""
        assert answers and all(a in _REASONS for a in answers), answers
        rule = Rule(frozenset(m.upper() for m in methods), re.compile(path), list(answers))
        rule.retry_after, rule.forever = retry_after, forever
        with self._lock:
            self._rules.append(rule)
        return rule

    def cut_watches(self, path: str, timeout: float = 10.0) -> None:
        """Close every watch stream whose path matches the regex ``path`` and hold every
        watch request of such a path until :meth:`resume_watches`."""
        assert self._loop is not None
        done = threading.Event()

        def cut() -> None:
            self._cut = re.compile(path)
            self._resumed = asyncio.Event()
            for transport, watched in list(self._watches.items()):
                if self._cut.search(watched):
                    transport.abort()
            done.set()

        self._loop.call_soon_threadsafe(cut)
        if not done.wait(timeout):
            raise RuntimeError(f"the fault proxy did not cut the watches within {timeout:.0f}s")

    def held_watches(self) -> int:
        """How many watch requests wait for :meth:`resume_watches`."""
        with self._lock:
            return self._held

    def resume_watches(self) -> None:
        """Answer every held watch request with a ``410 Gone`` event; forward the next."""
        assert self._loop is not None

        def resume() -> None:
            self._cut = None
            if self._resumed is not None:
                self._resumed.set()

        self._loop.call_soon_threadsafe(resume)

    def clear(self) -> None:
        """Remove every rule: from now on every request reaches the API server."""
        with self._lock:
            self._rules.clear()

    def seen(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        """The requests so far (optionally of one method, path matching a regex), each with
        its arrival time, listed as recorded: a forwarded one once the API server answered."""
        pattern = re.compile(path) if path else None
        with self._lock:
            return [
                s
                for s in self._seen
                if (method is None or s.method == method)
                and (pattern is None or pattern.search(s.path))
            ]

    # -- lifecycle ---------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> FaultProxy:
        self._thread = threading.Thread(target=self._main, name="fault-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"the fault proxy did not start within {timeout:.0f}s")
        if self._error is not None:
            raise self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"the fault proxy did not stop within {timeout:.0f}s")

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        upstream_tls = ssl.create_default_context(cafile=str(self.ca_path))
        serving_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        serving_tls.load_cert_chain(str(self.cert_path), str(self.key_path))
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=upstream_tls),
            timeout=timeout,
            auto_decompress=False,
        ) as session:
            app = web.Application(client_max_size=64 * 1024 * 1024)

            async def handle(request: web.Request) -> web.StreamResponse:
                return await self._handle(request, session)

            app.router.add_route("*", "/{tail:.*}", handle)
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", self.port, ssl_context=serving_tls)
            await site.start()
            server = getattr(site, "_server", None)
            self.port = server.sockets[0].getsockname()[1] if server else self.port
            self._ready.set()
            try:
                await self._stopped.wait()
            finally:
                await runner.cleanup()
                for transport in self._transports:  # a watch cut off mid-stream included
                    transport.abort()
                await asyncio.sleep(0)  # let them run their connection_lost

    # -- forwarding -----------------------------------------------------------------

    def _injected(self, request: web.Request) -> tuple[int, int | None] | None:
        if request.query.get("watch") in ("true", "1"):
            return None
        with self._lock:
            for rule in self._rules:
                if rule.matches(request.method, request.path):
                    return rule.take(), rule.retry_after
        return None

    def _record(self, request: web.Request, status: int, injected: bool, at: float) -> None:
        seen = Seen(at, request.method, request.path, request.query_string, status, injected)
        with self._lock:
            self._seen.append(seen)

    async def _handle(
        self, request: web.Request, session: aiohttp.ClientSession
    ) -> web.StreamResponse:
        at = time.monotonic()
        if request.transport is not None:
            self._transports.add(request.transport)
        body = await request.read()
        watching = request.query.get("watch") in ("true", "1")
        if watching and self._cut is not None and self._cut.search(request.path):
            return await self._gone(request, at)
        fault = self._injected(request)
        if fault is not None:
            status, retry_after = fault
            self._record(request, status, True, at)
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
            return web.json_response(
                status_body(status, request.path, retry_after), status=status, headers=headers
            )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with session.request(
            request.method,
            self.upstream.rstrip("/") + request.rel_url.raw_path_qs,
            headers=headers,
            data=body or None,
            # no Content-Type where the client sent none (the API server reads that as JSON,
            # aiohttp would say octet-stream), no compression the client did not ask for
            skip_auto_headers=("Content-Type", "Accept-Encoding", "User-Agent"),
        ) as upstream:
            self._record(request, upstream.status, False, at)
            reply_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
            if request.query.get("watch") not in ("true", "1"):
                payload = await upstream.read()
                return web.Response(status=upstream.status, body=payload, headers=reply_headers)
            reply = web.StreamResponse(status=upstream.status, headers=reply_headers)
            await reply.prepare(request)
            if request.transport is not None:
                self._watches[request.transport] = request.path
            try:
                async for chunk in upstream.content.iter_any():
                    await reply.write(chunk)
                await reply.write_eof()
            except (ConnectionError, aiohttp.ClientError):
                pass  # the watcher went away (or the API server ended the watch)
            finally:
                if request.transport is not None:
                    self._watches.pop(request.transport, None)
            return reply

    async def _gone(self, request: web.Request, at: float) -> web.StreamResponse:
        """Hold a watch request until the watches resume, then answer ``410 Gone``."""
        resumed = self._resumed
        with self._lock:
            self._held += 1
        try:
            if resumed is not None:
                await resumed.wait()
        finally:
            with self._lock:
                self._held -= 1
        self._record(request, 410, True, at)
        event = {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "too old resource version (injected by the test's fault proxy)",
                "reason": "Expired",
                "code": 410,
            },
        }
        reply = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await reply.prepare(request)
        await reply.write(json.dumps(event).encode() + b"\n")
        await reply.write_eof()
        return reply


def proxied_kubeconfig(control_plane: Any, proxy: FaultProxy, path: Path) -> Path:
    """A kubeconfig for the admin that reaches the API server through ``proxy``."""
    return write_kubeconfig(path, proxy.url, control_plane.ca_path, control_plane.admin_token)
