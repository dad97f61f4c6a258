"""Outbound HTTP under a CLIENT span, with the W3C trace context in the request headers.

:func:`traced_transport` gives an ``httpx`` transport for an ``AsyncClient`` that sends A2A
requests (peer delegations) or push notifications: each request gets its span (``http.*``
attributes; ``server.address`` and ``url.path``, never the query or a header value) and a
``traceparent`` header. When tracing is off it returns ``None``, httpx's own default, so an
untraced client is unchanged.
"""

from __future__ import annotations

import httpx
from opentelemetry.trace import SpanKind, Status, StatusCode

from mas.telemetry import tracing


class TracingTransport(httpx.AsyncBaseTransport):
    """Wraps another transport: one CLIENT span per request, context injected."""

    def __init__(self, purpose: str, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.purpose = purpose
        self._inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not tracing.on():
            return await self._inner.handle_async_request(request)
        url = request.url
        attributes: dict[str, str | int] = {
            "http.request.method": request.method,
            "server.address": url.host,
            "server.port": url.port or (443 if url.scheme == "https" else 80),
            "url.scheme": url.scheme,
            "url.path": url.path,
            "mas.http.purpose": self.purpose,
        }
        with tracing.tracer().start_as_current_span(
            f"{request.method} {self.purpose}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            carrier: dict[str, str] = {}
            tracing.inject(carrier)
            request.headers.update(carrier)
            response = await self._inner.handle_async_request(request)
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 400:
                span.set_status(Status(StatusCode.ERROR, f"HTTP {response.status_code}"))
            return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def traced_transport(purpose: str) -> TracingTransport | None:
    """A :class:`TracingTransport` when tracing is on, else ``None`` (httpx's default)."""
    return TracingTransport(purpose) if tracing.on() else None
