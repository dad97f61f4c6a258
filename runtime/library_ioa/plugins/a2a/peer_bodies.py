"""Reading a peer's HTTP answers liberally where the protocol lets us: timestamps.

A2A says timestamps are ISO 8601; the SDK parses them as protobuf ``Timestamp``, which
needs an RFC 3339 offset (``Z`` or ``+hh:mm``). Some agents stamp ``status.timestamp``
without one (``2026-03-01T12:00:00.123456``), and the SDK then refuses the whole answer. An
ISO 8601 time without an offset is local time of an unknown zone; we read it as UTC, the
only reading a client can make, and say so once per peer.

:class:`LenientTimestamps` wraps the HTTP transport of a peer's client: in a JSON body, or
in each line of an event stream, a ``"timestamp"`` value with no offset gets ``Z`` (a space
between date and time becomes ``T``, fractions past nanoseconds are cut). Nothing else is
changed: a timestamp that is not a time at all stays as it is, and the SDK's refusal of it
becomes a :class:`~mas.runtime.errors.PeerProtocolError` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

import httpx

# "timestamp": "YYYY-MM-DD[T ]hh:mm:ss[.fraction]" with nothing after the seconds.
_NAIVE = re.compile(
    rb'("timestamp"\s*:\s*")(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?(")'
)
_KEY = b'"timestamp"'


def with_utc_offsets(body: bytes) -> tuple[bytes, int]:
    """``body`` with every naive ``"timestamp"`` value read as UTC, and how many there were."""
    if _KEY not in body:
        return body, 0

    def fix(match: re.Match[bytes]) -> bytes:
        fraction = match.group(4)
        seconds = match.group(3) + (b"." + fraction[:9] if fraction else b"")
        return match.group(1) + match.group(2) + b"T" + seconds + b"Z" + match.group(5)

    return _NAIVE.subn(fix, body)


class _FixedLines(httpx.AsyncByteStream):
    """An event stream, line by line, each line's naive timestamps read as UTC."""

    def __init__(self, inner: httpx.AsyncByteStream, fixed: Callable[[int], None]) -> None:
        self._inner = inner
        self._fixed = fixed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = b""
        async for chunk in self._inner:
            pending += chunk
            complete, newline, pending = pending.rpartition(b"\n")
            if newline:
                body, count = with_utc_offsets(complete + newline)
                if count:
                    self._fixed(count)
                yield body
        if pending:
            body, count = with_utc_offsets(pending)
            if count:
                self._fixed(count)
            yield body

    async def aclose(self) -> None:
        await self._inner.aclose()


class LenientTimestamps(httpx.AsyncBaseTransport):
    """Wraps a peer client's transport (see the module docstring); ``fixed(n)`` is called
    each time ``n`` timestamps were read as UTC."""

    def __init__(self, inner: httpx.AsyncBaseTransport, fixed: Callable[[int], None]) -> None:
        self._inner = inner
        self._fixed = fixed

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        kind = response.headers.get("content-type", "")
        if "text/event-stream" in kind:
            plain = "content-encoding" not in response.headers
            if plain and isinstance(response.stream, httpx.AsyncByteStream):
                response.stream = _FixedLines(response.stream, self._fixed)
            return response
        if "json" not in kind:
            return response
        raw = await response.aread()  # decoded: the new response carries no encoding
        body, count = with_utc_offsets(raw)
        if count:
            self._fixed(count)
        headers = [
            (k, v)
            for k, v in response.headers.raw
            if k.lower() not in (b"content-length", b"content-encoding")
        ]
        return httpx.Response(
            response.status_code, headers=headers, content=body, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
