"""Inbound auth on gRPC: ``GrpcAuth`` refuses a call without a valid credential, and
``GrpcPrincipals`` names the call's principal (``auth`` and ``principals`` have the rest).

Its own module so that gRPC is imported only by a process that serves it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.request_handlers.grpc_handler import DefaultGrpcServerCallContextBuilder

from library_ioa.serving.auth import Authenticator
from library_ioa.serving.principals import Principal

logger = logging.getLogger(__name__)


class GrpcAuth(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """A gRPC server interceptor: every call must authenticate in its metadata."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        wanted = self.authenticator.headers
        presented: dict[str, bytes] = {}
        for key, value in handler_call_details.invocation_metadata or ():
            if key.lower() in wanted:
                presented[key.lower()] = value.encode() if isinstance(value, str) else value
        if handler is None or self.authenticator.accepts(presented):
            return handler
        reason = "missing credentials" if not presented else "invalid credentials"
        logger.info("A2A gRPC call %s refused: %s", handler_call_details.method, reason)
        return _refusal(handler, f"authentication required ({reason})")


def _refusal(handler: Any, message: str) -> Any:
    async def unary(request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def streaming(request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # pragma: no cover - abort raises

    kw = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(streaming, **kw)
    return grpc.unary_unary_rpc_method_handler(unary, **kw)


class GrpcPrincipals(DefaultGrpcServerCallContextBuilder):
    """The gRPC context builder that names the principal from the call's metadata."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    def build_user(self, context: Any) -> User:
        wanted = self.authenticator.headers
        presented: dict[str, bytes] = {}
        for key, value in context.invocation_metadata() or ():
            if key.lower() in wanted:
                presented[key.lower()] = value.encode() if isinstance(value, str) else value
        name = self.authenticator.principal(presented)
        return Principal(name) if name is not None else UnauthenticatedUser()
