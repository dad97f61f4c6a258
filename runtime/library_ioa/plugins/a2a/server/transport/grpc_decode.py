"""``GrpcDecodeCheck``: a gRPC request whose bytes do not decode is INVALID_ARGUMENT.

grpc.aio calls a method's ``request_deserializer`` before the servicer runs; when protobuf
raises ``DecodeError`` there, grpc answers UNKNOWN ("Unexpected <class DecodeError>") and
logs a traceback, though the fault is the client's bytes. This interceptor wraps every
method handler so the deserializer hands back an :class:`Undecodable` instead of raising,
and the call is then aborted with INVALID_ARGUMENT naming the message type, with one log
line. Decoding work is unchanged for good requests: one ``isinstance`` per call. The
wrapped handler of each method is made once and kept (the servicer's handlers do not
change while the server runs), not rebuilt on every call.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

logger = logging.getLogger(__name__)

__all__ = ["GrpcDecodeCheck", "Undecodable"]


@dataclass(frozen=True)
class Undecodable:
    """What a wrapped deserializer returns for bytes that are not its message type."""

    type_name: str
    reason: str

    @property
    def message(self) -> str:
        return f"the request is not a valid {self.type_name}: {self.reason}"


def _type_name(deserializer: Callable[[bytes], Any]) -> str:
    owner = getattr(deserializer, "__self__", None)  # SendMessageRequest.FromString
    descriptor = getattr(owner, "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", "") or "request message")


def _safe(deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    type_name = _type_name(deserializer)

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError as exc:
            return Undecodable(type_name, str(exc) or "the bytes do not decode")

    return decode


async def _abort(context: Any, method: str, request: Undecodable) -> None:
    logger.info("A2A gRPC call %s refused: %s", method, request.message)
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)


class GrpcDecodeCheck(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Answer undecodable request bytes with INVALID_ARGUMENT (module docstring)."""

    def __init__(self) -> None:
        # By method: the handler the continuation gave and its wrapped handler.
        self._wrapped: dict[str, tuple[Any, Any]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method = str(handler_call_details.method or "")
        kept = self._wrapped.get(method)
        if kept is not None and kept[0] is handler:
            return kept[1]
        wrapped = _wrap(handler, method)
        self._wrapped[method] = (handler, wrapped)
        return wrapped


def _wrap(handler: Any, method: str) -> Any:
    """``handler`` with its deserializer made safe and its behaviour refusing an
    :class:`Undecodable` request."""
    kw = {
        "request_deserializer": _safe(handler.request_deserializer),
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        inner_unary = handler.unary_unary

        async def unary(request: Any, context: Any) -> Any:
            if isinstance(request, Undecodable):
                await _abort(context, method, request)
            return await inner_unary(request, context)

        return grpc.unary_unary_rpc_method_handler(unary, **kw)
    if handler.unary_stream is not None:
        inner_stream = handler.unary_stream

        async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
            if isinstance(request, Undecodable):
                await _abort(context, method, request)
            async for item in inner_stream(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(streaming, **kw)
    return handler  # client-streaming methods: A2A has none
