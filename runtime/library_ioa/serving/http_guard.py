"""Connection limits of every HTTP listener: head and body size and time, idle time, count.

uvicorn bounds neither the size of a request head (with httptools it buffers a header of
any length) nor the time a client may take to send a head or a body, nor the time a
response may wait for a client that does not read, so one client could hold memory (a
256 MB header) or connections (slowloris: many heads or bodies sent a byte at a time) for
ever.
:class:`HttpLimits` states the bounds and :func:`uvicorn_options` turns them into
``uvicorn.Config`` arguments; :class:`GuardedHttpToolsProtocol`, uvicorn's httptools
protocol with a guard, enforces what uvicorn cannot:

- a request head (request line and headers) larger than ``max_header_bytes``, or with more
  than ``max_headers`` header fields, is answered **431** (Request Header Fields Too Large)
  and the connection closed: a parsed head is measured field by field, and a head still
  incomplete after a socket read is measured in bytes received, so at most one read
  (256 KiB) is buffered past the limit;
- a head not complete ``head_timeout`` seconds after the connection opened (or after the
  first byte of the next request on a kept-alive connection) is answered **408** (nothing
  is written when no byte came) and the connection closed;
- a request body not complete ``body_timeout`` seconds after its head is answered **408**
  and the connection closed (closed without a word when the app already answered);
- when the app answers before the request body is complete (a 401, a 413), the connection
  is not kept for the next request: the answer says ``connection: close`` (so a client
  never sends its next request on it), the server sends it, then ends its side
  (``write_eof``) and discards what still comes for at most ``LINGER`` seconds of silence
  (and never past the body deadline), then closes, so the client reads the answer rather
  than a reset and a body trickled in after it holds no slot;
- a connection past ``max_connections`` open ones, or past ``max_connections_per_client``
  (default: half of ``max_connections``) open ones from the same address (an IPv6
  address counts by its /64), is answered **503** and closed at once, so no single
  client can take every slot and ``/healthz`` stays answerable to the others (the
  kubelet);
- a response that the client does not read: the transport buffers at most
  ``OUTPUT_HIGH_WATER`` bytes before the app's next ``send`` waits (uvicorn's flow
  control), plus the one message being written; a connection whose buffer stays above
  that mark for ``send_timeout`` seconds is aborted, which frees the buffer;
- an idle kept-alive connection is closed after ``keep_alive`` seconds (uvicorn's
  ``timeout_keep_alive``).

So memory per connection is bounded by ``max_header_bytes`` plus the body limit of the app
(:mod:`~library_ioa.plugins.a2a.server.transport.limits`) plus ``OUTPUT_HIGH_WATER`` and one
response message, memory in heads by ``max_connections * max_header_bytes``, and the time any
connection holds a slot without progress by the head, body, send and keep-alive timeouts.

Written against uvicorn 0.55 and httptools 0.9: the guard relies on the protocol's parser
callbacks (``on_message_begin``, ``on_header``, ``on_headers_complete``,
``on_message_complete``, ``on_url``), ``on_response_complete``, ``pause_writing`` and
``resume_writing``, its ``connections`` set, ``transport``, ``flow``, ``cycle`` (its
``response_started``) and ``send_400_response``, and on httptools
raising ``HttpParserCallbackError`` when a callback raises;
``tests/security/test_http_limits.py`` pins that behaviour.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from library_ioa.errors import LibraryError
from mas.infra.models import ConnectionLimits

logger = logging.getLogger(__name__)

REASONS = {
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}
OUTPUT_HIGH_WATER = 64 * 1024  # bytes a transport buffers before the app's sends wait
OUTPUT_LOW_WATER = 16 * 1024
LINGER = 2.0  # seconds of silence after which a connection answered early is closed


@dataclass(frozen=True)
class HttpLimits:
    """The bounds of one HTTP listener (module docstring)."""

    max_header_bytes: int = 32 * 1024
    max_headers: int = 100
    head_timeout: float = 20.0
    body_timeout: float = 30.0
    send_timeout: float = 30.0
    keep_alive: float = 30.0
    max_connections: int = 512
    max_connections_per_client: int | None = None  # None: half of max_connections

    def __post_init__(self) -> None:
        for name in (
            "max_header_bytes",
            "max_headers",
            "head_timeout",
            "body_timeout",
            "send_timeout",
            "keep_alive",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"HttpLimits.{name} {getattr(self, name)!r}: must be positive")
        if self.max_connections < 1:
            raise ValueError(f"HttpLimits.max_connections {self.max_connections!r}: must be >= 1")
        if self.max_connections_per_client is not None and self.max_connections_per_client < 1:
            raise ValueError(
                f"HttpLimits.max_connections_per_client {self.max_connections_per_client!r}: "
                "must be >= 1 (at or above max_connections: no cap per client)"
            )

    @property
    def per_client_cap(self) -> int:
        """``max_connections_per_client``, else half of ``max_connections`` (at least 1)."""
        if self.max_connections_per_client is not None:
            return self.max_connections_per_client
        return max(1, self.max_connections // 2)

    @classmethod
    def from_options(cls, options: ConnectionLimits) -> HttpLimits:
        """The limits an endpoint's ``a2a.connections`` states (head sizes keep theirs)."""
        return cls(
            head_timeout=options.head_timeout_seconds,
            body_timeout=options.body_timeout_seconds,
            send_timeout=options.send_timeout_seconds,
            keep_alive=options.idle_timeout_seconds,
            max_connections=options.max_open,
            max_connections_per_client=options.max_open_per_client,
        )


DEFAULT_HTTP_LIMITS = HttpLimits()


class _HeadRefused(LibraryError):
    """Raised from a parser callback to stop parsing a head that is refused."""


def client_key(host: str) -> str:
    """What counts as one client for ``max_connections_per_client``: an IPv4 address, an
    IPv6 address's /64 (one host commonly holds a whole /64), else the host as given."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return host


# Scope key of the connection's own state: a dict that lives as long as the connection, for
# what a layer keeps between the requests of one connection (serving/callers.py).
CONNECTION_STATE = "maslab.connection"


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head, time and connection limits."""

    limits: HttpLimits = DEFAULT_HTTP_LIMITS
    per_client: ClassVar[
        dict[str, int]
    ] = {}  # open connections by client_key, one dict per listener

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._in_body = False
        self._head_bytes = 0
        self._header_count = 0
        self._parsed_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None
        self._refusal: tuple[int, str] | None = None
        self._refused = False
        self._client_key: str | None = None
        self._connection_state: dict[object, Any] = {}

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        transport.set_write_buffer_limits(high=OUTPUT_HIGH_WATER, low=OUTPUT_LOW_WATER)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(503, f"more than {self.limits.max_connections} connections are open")
            return
        key = client_key(self.client[0]) if self.client else ""
        held = self.per_client.get(key, 0)
        if held >= self.limits.per_client_cap:
            self._refuse(
                503,
                f"more than {self.limits.per_client_cap} connections are open from this address",
            )
            return
        self.per_client[key] = held + 1
        self._client_key = key
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        self._body_timer = _cancel(self._body_timer)
        self._send_timer = _cancel(self._send_timer)
        self._linger_timer = _cancel(self._linger_timer)
        if self._client_key is not None:
            held = self.per_client.get(self._client_key, 1) - 1
            if held > 0:
                self.per_client[self._client_key] = held
            else:
                self.per_client.pop(self._client_key, None)
            self._client_key = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            if self._linger_timer is not None:  # answered early: discard, wait for silence
                self._linger_timer.cancel()
                self._linger_timer = self.loop.call_later(LINGER, self._close)
            return
        self._unset_keepalive_if_required()
        if self._in_head:
            if self._head_timer is None:
                self._arm_head_timer()
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            if self._refusal is None:
                raise
            self._refuse(*self._refusal)
            return
        except httptools.HttpParserError:
            msg = "Invalid HTTP request received."
            logger.info("HTTP request refused (400): %s", msg)
            self.send_400_response(msg)
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._in_head and self._head_bytes > self.limits.max_header_bytes:
            self._refuse(431, self._too_large())  # a head still incomplete past the limit
        elif self._in_body and self._body_timer is None:  # a body still incomplete
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_timed_out)

    def _too_large(self) -> str:
        return f"the request head is larger than {self.limits.max_header_bytes} bytes"

    def on_message_begin(self) -> None:
        self._header_count = 0
        self._parsed_bytes = 0
        super().on_message_begin()
        self.scope[CONNECTION_STATE] = self._connection_state  # type: ignore[literal-required]

    def on_url(self, url: bytes) -> None:
        self._parsed_bytes += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        self._parsed_bytes += len(name) + len(value) + 4
        if self._header_count > self.limits.max_headers:
            self._refusal = (431, f"the request has more than {self.limits.max_headers} headers")
            raise _HeadRefused
        if self._parsed_bytes > self.limits.max_header_bytes:
            self._refusal = (431, self._too_large())
            raise _HeadRefused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._in_body = True
        self._disarm_head_timer()
        super().on_headers_complete()
        if self.cycle is not None:
            self._mark_early_answers(self.cycle)

    def _mark_early_answers(self, cycle: Any) -> None:
        """An answer started before its request's body is in says ``connection: close``, so
        the client does not send its next request on a connection that :meth:`_linger`
        closes. uvicorn writes that header for a cycle not kept alive; the cycle is kept
        alive again once the head is written, so that uvicorn does not close the socket at
        the end of the answer with the body still arriving (a reset the client could read
        instead of the answer): :meth:`_linger` closes it."""
        send = cycle.send

        async def first_send(message: Any) -> None:
            cycle.send = send  # only the response start is looked at
            early = self._in_body and message["type"] == "http.response.start"
            if early:
                cycle.keep_alive = False
            await send(message)
            if early:
                cycle.keep_alive = True

        cycle.send = first_send

    def on_message_complete(self) -> None:
        self._in_head = True
        self._in_body = False
        self._head_bytes = 0
        self._body_timer = _cancel(self._body_timer)
        super().on_message_complete()

    def on_response_complete(self) -> None:
        if self._in_body and not self.transport.is_closing():
            self._linger()  # answered before the body came: never kept for another request
            return
        super().on_response_complete()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.limits.send_timeout, self._send_timed_out)

    def resume_writing(self) -> None:
        self._send_timer = _cancel(self._send_timer)
        super().resume_writing()

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if not self._in_body or self.transport.is_closing():
            return
        if self.cycle is not None and self.cycle.response_started:
            self._close()  # answered already (a 401 while the body trickles in)
            return
        self._refuse(408, f"the request body took longer than {self.limits.body_timeout:g} s")

    def _send_timed_out(self) -> None:
        self._send_timer = None
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        logger.info(
            "HTTP connection from %s aborted: it read no response bytes for %g s",
            client,
            self.limits.send_timeout,
        )
        self._refused = True
        self.transport.abort()  # drops the buffered output; the app's send sees a disconnect

    def _linger(self) -> None:
        """End our side after an early answer; discard the rest of the body until silence
        (``LINGER``), the body deadline or the client's close, whichever comes first."""
        self._refused = True
        self._disarm_head_timer()
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._linger_timer = self.loop.call_later(LINGER, self._close)

    def _close(self) -> None:
        self._linger_timer = None
        self._refused = True
        if not self.transport.is_closing():
            self.transport.close()

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self.limits.head_timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self._head_bytes == 0:
            self._refused = True
            self.transport.close()
            return
        self._refuse(408, f"the request head took longer than {self.limits.head_timeout:g} s")

    def _refuse(self, status: int, reason: str) -> None:
        self._refused = True
        self._disarm_head_timer()
        self._body_timer = _cancel(self._body_timer)
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        logger.info("HTTP connection from %s refused (%d): %s", client, status, reason)
        body = reason.encode()
        head = b"HTTP/1.1 %d %s\r\n" % (status, REASONS[status])
        self.transport.write(
            head
            + b"content-type: text/plain; charset=utf-8\r\n"
            + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
            + body
        )
        self.transport.close()


def _cancel(timer: asyncio.TimerHandle | None) -> asyncio.TimerHandle | None:
    """Cancel ``timer`` if any; ``None`` (to assign back)."""
    if timer is not None:
        timer.cancel()
    return None


def guarded_protocol(limits: HttpLimits) -> type[GuardedHttpToolsProtocol]:
    """The guarded protocol class bound to ``limits`` (for ``uvicorn.Config(http=...)``),
    with its own count of connections per client (one listener's)."""
    return type(
        "GuardedHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"limits": limits, "per_client": {}},
    )


def uvicorn_options(limits: HttpLimits = DEFAULT_HTTP_LIMITS) -> dict[str, Any]:
    """The ``uvicorn.Config`` arguments enforcing ``limits``."""
    return {
        "http": guarded_protocol(limits),
        "timeout_keep_alive": limits.keep_alive,
        "limit_concurrency": limits.max_connections + 1,  # uvicorn counts the new one too
        "h11_max_incomplete_event_size": limits.max_header_bytes,
    }
