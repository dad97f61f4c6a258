"""``GrpcTracing``: the SERVER span of each gRPC call (``tracing`` has the HTTP side).

Its own module so that gRPC is imported only by a process that serves it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from library_ioa.plugins.a2a.server.tracing import _REQUEST_SPAN
from mas.telemetry import tracing


class GrpcTracing(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """gRPC server interceptor: the SERVER span of each call, under the caller's metadata."""

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or not tracing.on():
            return handler
        full = str(handler_call_details.method)  # "/lf.a2a.v1.A2AService/SendMessage"
        service, _, method = full.lstrip("/").rpartition("/")
        carrier = {
            str(k).lower(): v if isinstance(v, str) else v.decode("latin-1")
            for k, v in handler_call_details.invocation_metadata or ()
        }
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}

        def start() -> Any:
            return tracing.tracer().start_as_current_span(
                full.lstrip("/"),
                context=tracing.extract(carrier),
                kind=SpanKind.SERVER,
                attributes=attributes,
            )

        kw = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: Any) -> Any:
                with start() as span:
                    token = _REQUEST_SPAN.set(span)
                    try:
                        return await inner(request, context)
                    finally:
                        _REQUEST_SPAN.reset(token)
                        _grpc_status(span, context)

            return grpc.unary_unary_rpc_method_handler(unary, **kw)
        if handler.unary_stream is not None:
            stream = handler.unary_stream

            async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
                with start() as span:
                    token = _REQUEST_SPAN.set(span)
                    try:
                        async for item in stream(request, context):
                            yield item
                    finally:
                        _REQUEST_SPAN.reset(token)
                        _grpc_status(span, context)

            return grpc.unary_stream_rpc_method_handler(streaming, **kw)
        return handler  # A2A has no client-streaming method


def _grpc_status(span: Span, context: Any) -> None:
    code = context.code() if hasattr(context, "code") else None
    value = getattr(code, "value", (0,))[0] if code is not None else 0
    span.set_attribute("rpc.grpc.status_code", int(value))
    if value not in (0,):
        span.set_status(Status(StatusCode.ERROR))
