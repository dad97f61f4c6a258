"""Connection limits of every HTTP listener: request-head size and time, idle time, count.

uvicorn bounds neither the size of a request head (with httptools it buffers a header of
any length) nor the time a client may take to send it, so one client could hold memory
(a 256 MB header) or connections (slowloris: many heads sent a byte at a time) for ever.
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
- a connection past ``max_connections`` open ones is answered **503** and closed at once;
- an idle kept-alive connection is closed after ``keep_alive`` seconds (uvicorn's
  ``timeout_keep_alive``).

So memory per connection is bounded by ``max_header_bytes`` plus the body limit of the app
(:mod:`~library_ioa.plugins.a2a.server.limits`), and memory in heads by
``max_connections * max_header_bytes``.

Written against uvicorn 0.55 and httptools 0.9: the guard relies on the protocol's parser
callbacks (``on_message_begin``, ``on_header``, ``on_headers_complete``,
``on_message_complete``, ``on_url``), its ``connections`` set, ``transport`` and
``send_400_response``, and on httptools
raising ``HttpParserCallbackError`` when a callback raises;
``tests/security/test_http_limits.py`` pins that behaviour.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

logger = logging.getLogger(__name__)

REASONS = {
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


@dataclass(frozen=True)
class HttpLimits:
    """The bounds of one HTTP listener (module docstring)."""

    max_header_bytes: int = 32 * 1024
    max_headers: int = 100
    head_timeout: float = 20.0
    keep_alive: float = 30.0
    max_connections: int = 512

    def __post_init__(self) -> None:
        for name in ("max_header_bytes", "max_headers", "head_timeout", "keep_alive"):
            if getattr(self, name) <= 0:
                raise ValueError(f"HttpLimits.{name} {getattr(self, name)!r}: must be positive")
        if self.max_connections < 1:
            raise ValueError(f"HttpLimits.max_connections {self.max_connections!r}: must be >= 1")


DEFAULT_HTTP_LIMITS = HttpLimits()


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head that is refused."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head, time and connection limits."""

    limits: HttpLimits = DEFAULT_HTTP_LIMITS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0
        self._header_count = 0
        self._parsed_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._refusal: tuple[int, str] | None = None
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(503, f"more than {self.limits.max_connections} connections are open")
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
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

    def _too_large(self) -> str:
        return f"the request head is larger than {self.limits.max_header_bytes} bytes"

    def on_message_begin(self) -> None:
        self._header_count = 0
        self._parsed_bytes = 0
        super().on_message_begin()

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
        self._disarm_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        super().on_message_complete()

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


def guarded_protocol(limits: HttpLimits) -> type[GuardedHttpToolsProtocol]:
    """The guarded protocol class bound to ``limits`` (for ``uvicorn.Config(http=...)``)."""
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), {"limits": limits})


def uvicorn_options(limits: HttpLimits = DEFAULT_HTTP_LIMITS) -> dict[str, Any]:
    """The ``uvicorn.Config`` arguments enforcing ``limits``."""
    return {
        "http": guarded_protocol(limits),
        "timeout_keep_alive": limits.keep_alive,
        "limit_concurrency": limits.max_connections + 1,  # uvicorn counts the new one too
        "h11_max_incomplete_event_size": limits.max_header_bytes,
    }
