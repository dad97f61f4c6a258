"""Outbound gRPC under a CLIENT span, with the W3C trace context in the call metadata.

The gRPC twin of :mod:`mas.telemetry.httpclient`: :func:`traced_interceptors` gives the
interceptors of a ``grpc.aio`` channel that sends A2A calls to a peer. Each call gets its
span (named ``<method> <purpose>``, with the ``rpc.*`` attributes of the OTel semantic
conventions and ``server.address``) and a ``traceparent`` metadata entry, so the peer's
request span continues the caller's trace. When tracing is off it returns no interceptor,
and the channel is exactly an untraced one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from opentelemetry.trace import SpanKind, Status, StatusCode

from mas.telemetry import tracing


def _split(method: str | bytes) -> tuple[str, str]:
    text = method.decode() if isinstance(method, bytes) else method
    service, _, name = text.lstrip("/").rpartition("/")
    return service, name


class _Traced:
    """What the unary and streaming interceptors share: the span and the metadata."""

    def __init__(self, purpose: str, target: str) -> None:
        self.purpose = purpose
        host, _, port = target.rpartition(":")
        self._server = {"server.address": host.strip("[]") or target}
        if port.isdigit():
            self._server["server.port"] = port

    def _start(self, details: grpc.aio.ClientCallDetails) -> tuple[Any, Any]:
        service, name = _split(details.method)
        attributes: dict[str, str | int] = {
            "rpc.system": "grpc",
            "rpc.service": service,
            "rpc.method": name,
            "mas.grpc.purpose": self.purpose,
            **{k: int(v) if k == "server.port" else v for k, v in self._server.items()},
        }
        manager = tracing.tracer().start_as_current_span(
            f"{name} {self.purpose}", kind=SpanKind.CLIENT, attributes=attributes
        )
        span = manager.__enter__()
        carrier: dict[str, str] = {}
        tracing.inject(carrier)
        metadata = list(details.metadata or ()) + list(carrier.items())
        traced = grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )
        return (manager, span), traced

    @staticmethod
    def _end(handle: tuple[Any, Any], error: BaseException | None) -> None:
        manager, span = handle
        code = error.code() if isinstance(error, grpc.aio.AioRpcError) else None
        if error is None:
            span.set_attribute("rpc.grpc.status_code", grpc.StatusCode.OK.value[0])
        elif code is not None:
            span.set_attribute("rpc.grpc.status_code", code.value[0])
            span.set_status(Status(StatusCode.ERROR, code.name))
        manager.__exit__(type(error) if error else None, error, None)


class UnaryTracing(_Traced, grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """One CLIENT span per unary call (SendMessage, GetTask, CancelTask...)."""

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        handle, traced = self._start(details)
        try:
            call = await continuation(traced, request)
            response = await call
        except BaseException as exc:
            self._end(handle, exc)
            raise
        self._end(handle, None)
        return response


class StreamTracing(_Traced, grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """The trace context on streaming calls (the span covers starting the stream)."""

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        handle, traced = self._start(details)
        try:
            call = await continuation(traced, request)
        except BaseException as exc:
            self._end(handle, exc)
            raise
        self._end(handle, None)
        return call


def traced_interceptors(purpose: str, target: str) -> list[grpc.aio.ClientInterceptor]:
    """The channel interceptors that trace outbound calls to ``target``; none when off."""
    if not tracing.on():
        return []
    return [UnaryTracing(purpose, target), StreamTracing(purpose, target)]
