"""The caller check on gRPC (:mod:`.callers` has the HTTP form and the rules' module).

:class:`GrpcCallers`, a server interceptor in place of :class:`~.grpc_auth.GrpcAuth`, wraps
each call's behaviour: the check runs inside the call (under the request span, so the
caller is an attribute of it), reads ``maslab-identity`` and the ``a2a.auth`` credentials
from the call's metadata (a token admitted before is found by its hash alone,
:meth:`~mas.runtime.identity.callers.CallerCheck.remembered`, as on HTTP), and either
aborts with ``UNAUTHENTICATED`` (401), ``PERMISSION_DENIED`` (403) or ``UNAVAILABLE`` (503)
and the check's message, or runs the call with its principal set for
:class:`CallerPrincipals`, the context builder that gives the SDK's servicers that
principal. Its own module so that gRPC is imported only by a process that serves it.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.request_handlers.grpc_handler import DefaultGrpcServerCallContextBuilder

from library_ioa.serving.auth import Authenticator
from library_ioa.serving.callers import full_check
from library_ioa.serving.principals import Principal
from mas.infra.identity import IDENTITY_HEADER
from mas.runtime.identity.callers import CallerCheck, Decision
from mas.telemetry import tracing

CODES = {
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    503: grpc.StatusCode.UNAVAILABLE,
}

_PRINCIPAL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "maslab_grpc_principal", default=None
)


class GrpcCallers(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """A gRPC server interceptor: the caller check of every call (module docstring)."""

    def __init__(self, check: CallerCheck, authenticator: Authenticator | None = None) -> None:
        self.check = check
        self.authenticator = authenticator

    async def _decide(self, context: Any) -> Decision:
        wanted = self.authenticator.headers if self.authenticator is not None else frozenset()
        token: str | None = None
        authorization: str | bytes | None = None
        presented: dict[str, bytes] = {}
        for key, value in context.invocation_metadata() or ():
            name = str(key).lower()
            if name == IDENTITY_HEADER:
                token = (value.decode("latin-1") if isinstance(value, bytes) else value).strip()
                continue
            if name in wanted:
                presented[name] = value.encode() if isinstance(value, str) else value
            if name == "authorization":
                authorization = value
        raw = token.encode("latin-1") if token else None
        decision = self.check.quick(raw, authorization)
        if decision is None:
            decision = await full_check(
                self.check, self.authenticator, raw, authorization, presented
            )
        tracing.annotate(tracing.MAS_CALLER, decision.caller or decision.principal)
        if not decision.admitted:
            await context.abort(
                CODES.get(decision.status, grpc.StatusCode.UNAUTHENTICATED), decision.message
            )
        return decision

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        kw = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: Any) -> Any:
                decision = await self._decide(context)
                token = _PRINCIPAL.set(decision.principal)
                try:
                    return await inner(request, context)
                finally:
                    _PRINCIPAL.reset(token)

            return grpc.unary_unary_rpc_method_handler(unary, **kw)
        if handler.unary_stream is not None:
            stream = handler.unary_stream

            async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
                decision = await self._decide(context)
                token = _PRINCIPAL.set(decision.principal)
                try:
                    async for item in stream(request, context):
                        yield item
                finally:
                    _PRINCIPAL.reset(token)

            return grpc.unary_stream_rpc_method_handler(streaming, **kw)
        return handler  # A2A has no client-streaming method


class CallerPrincipals(DefaultGrpcServerCallContextBuilder):
    """The gRPC context builder that names the principal :class:`GrpcCallers` admitted."""

    def build_user(self, context: Any) -> User:
        name = _PRINCIPAL.get()
        return Principal(name) if name else UnauthenticatedUser()
