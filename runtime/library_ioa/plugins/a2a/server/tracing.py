"""The A2A request's span and log line, on every transport.

- :class:`HttpTracing` (ASGI, outermost) and :class:`GrpcTracing` (the first gRPC server
  interceptor) read the caller's W3C trace context (``traceparent`` header or metadata) and
  open the request's SERVER span under it, with the ``http.*`` or ``rpc.grpc.*`` attributes
  of the OTel semantic conventions. The exposure adds them only when tracing is on
  (:func:`mas.telemetry.tracing.on`), so an untraced server runs exactly as before.
- :func:`request_done` is called by the request handler once per A2A request (the SDK's
  path and the fast paths alike): it names the span after the A2A method (``rpc.*``,
  ``a2a.task_id``, ``a2a.context_id``, ``mas.agent``) and writes the one INFO line of the
  request (method, transport, outcome, duration, task id).

The SDK's own spans (its dispatcher, request handler and event queues) nest under the
request span; the turn's span nests under them through the mailbox.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mas.telemetry import tracing
from mas.telemetry.logs import FIELDS

logger = logging.getLogger(__name__)

RPC_SERVICE = "lf.a2a.v1.A2AService"
JSONRPC, HTTP_JSON, GRPC = "JSONRPC", "HTTP+JSON", "GRPC"
UNTRACED_PATHS = frozenset(("/healthz", "/readyz", "/metrics"))  # probes and scrapes: no trace
_REQUEST_SPAN: ContextVar[Span | None] = ContextVar("maslab_a2a_request_span", default=None)


def transport_of(context: Any) -> str:
    """The A2A transport of a request, from the SDK's ``ServerCallContext``."""
    state = getattr(context, "state", None) or {}
    if "grpc_context" in state:
        return GRPC
    return JSONRPC if "request_id" in state else HTTP_JSON


def _ids(params: Any, result: Any) -> tuple[str, str]:
    """``(task id, context id)`` of a request, from its answer or else its parameters."""
    for item in (result, getattr(params, "message", None), params):
        if item is None:
            continue
        has = getattr(item, "HasField", None)
        found = item.task if has is not None and _has(item, "task") else item
        task_id = getattr(found, "task_id", "") or (
            getattr(found, "id", "") if type(found).__name__ == "Task" else ""
        )
        context_id = getattr(found, "context_id", "")
        if task_id or context_id:
            return str(task_id), str(context_id)
    return "", ""


def _has(message: Any, name: str) -> bool:
    try:
        return bool(message.HasField(name))
    except ValueError:  # not a field of this message type
        return False


def annotate_request(name: str, value: str) -> None:
    """Set the attribute ``name`` on the request's SERVER span (when traced and ``value``)."""
    span = _REQUEST_SPAN.get() if tracing.on() and value else None
    if span is not None:
        span.set_attribute(name, value)


def request_done(  # noqa: PLR0917 - one call site, the handler's hot path: no kwargs dict
    agent: str,
    method: str,
    transport: str,
    outcome: str,
    seconds: float,
    params: Any = None,
    result: Any = None,
) -> None:
    """Annotate the request span (when traced) and write the request's INFO line."""
    span = _REQUEST_SPAN.get() if tracing.on() else None
    info = logger.isEnabledFor(logging.INFO)
    if span is None and not info:
        return
    task_id, context_id = _ids(params, result)
    if span is not None:
        span.update_name(f"{RPC_SERVICE}/{method}")
        span.set_attributes(
            {
                "rpc.system": "a2a",
                "rpc.service": RPC_SERVICE,
                "rpc.method": method,
                "a2a.transport": transport,
                "a2a.outcome": outcome,
                tracing.MAS_AGENT: agent,
            }
        )
        if task_id:
            span.set_attribute(tracing.A2A_TASK_ID, task_id)
        if context_id:
            span.set_attribute(tracing.A2A_CONTEXT_ID, context_id)
            span.set_attribute(tracing.MAS_SESSION_ID, context_id)
        if outcome != "ok":
            span.set_status(Status(StatusCode.ERROR, outcome))
    if info:
        logger.info(
            "A2A %s over %s for agent %s: %s in %.1f ms, task %s",
            method,
            transport,
            agent,
            outcome,
            seconds * 1000,
            task_id or "-",
            extra={
                FIELDS: {
                    "event": "a2a_request",
                    "agent": agent,
                    "method": method,
                    "transport": transport,
                    "status": outcome,
                    "duration_ms": round(seconds * 1000, 3),
                    "task_id": task_id or None,
                    "context_id": context_id or None,
                }
            },
        )


class HttpTracing:
    """ASGI middleware: the SERVER span of each HTTP request, under the caller's context."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not tracing.on() or scope.get("path") in UNTRACED_PATHS:
            await self.app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        method, path = scope["method"], scope.get("path", "")
        server = scope.get("server") or ("", None)
        attributes = {
            "http.request.method": method,
            "url.path": path,
            "url.scheme": scope.get("scheme", "http"),
            "server.address": server[0],
            "server.port": server[1],
            "network.protocol.version": scope.get("http_version"),
        }
        with tracing.tracer().start_as_current_span(
            f"{method} {path}",
            context=tracing.extract(carrier),
            kind=SpanKind.SERVER,
            attributes={k: v for k, v in attributes.items() if v},
        ) as span:
            token = _REQUEST_SPAN.set(span)

            async def traced_send(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)

            try:
                await self.app(scope, receive, traced_send)
            finally:
                _REQUEST_SPAN.reset(token)
