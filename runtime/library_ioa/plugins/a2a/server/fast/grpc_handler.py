"""``FastGrpcHandler``: the SDK's ``GrpcHandler`` with a short ``SendMessage`` for plain requests.

The SDK's servicer hands every ``SendMessageRequest`` to ``on_message_send``, which checks
each REQUIRED field by walking the descriptors, reads the turn back out of the protobuf
and answers a ``Message`` that ``SendMessageResponse(message=...)`` then copies. For the
common shape (what :func:`plain_send_of` accepts: one message with a known ``role``, a
non-empty ``messageId``, an optional ``contextId`` and one or more parts that each hold
only a text; no tenant, configuration, metadata, extensions, task or reference ids) every
one of those checks passes, so this handler reads the request into the
:class:`~library_ioa.plugins.a2a.server.fast.codec.PlainSend` the JSON-RPC route uses and calls
the request handler's ``on_plain_send`` (``handler.FastSendHandler``); a quick
answer's response is built directly (:func:`send_response`), byte for byte what the SDK's
servicer sends for the same ``Message``.

Everything else is the SDK's servicer unchanged: another request shape, another method, a
request handler without ``on_plain_send``. Errors are the SDK's too: an ``A2AError`` from
the handler is answered by the SDK's ``abort_context`` (the same status and details), as
``GrpcHandler._handle_unary`` does, and the call context is the one the configured context
builder builds (the principal of ``a2a.auth``, the requested extensions).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.request_handlers import GrpcHandler
from a2a.server.request_handlers.grpc_handler import (
    DefaultGrpcServerCallContextBuilder,
    GrpcServerCallContextBuilder,
)
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import Message, Role, SendMessageRequest, SendMessageResponse, Task
from a2a.utils.errors import A2AError

from library_ioa.plugins.a2a.server.fast.codec import PlainSend
from library_ioa.plugins.a2a.server.publisher import QuickAnswer

__all__ = ["FastGrpcHandler", "plain_send_of", "send_response"]

# Role numbers a plain request may carry, with their names (ROLE_UNSPECIFIED fails the
# SDK's required-field check; an unknown number is left to the SDK).
_ROLES = {number: name for name, number in Role.items() if number != Role.ROLE_UNSPECIFIED}
_MESSAGE_FIELDS = frozenset({"message_id", "context_id", "role", "parts"})
_REQUIRED = frozenset({"message_id", "role", "parts"})


def plain_send_of(request: SendMessageRequest) -> PlainSend | None:
    """The :class:`PlainSend` of a plain request (module docstring), else ``None``.

    ``plain_send_of(request).request() == request`` for every request it accepts.
    """
    fields = request.ListFields()
    if len(fields) != 1 or fields[0][0].name != "message":
        return None  # no message, or a tenant, configuration or metadata
    message = fields[0][1]
    names = {field.name for field, _ in message.ListFields()}
    if not (_REQUIRED <= names <= _MESSAGE_FIELDS):
        return None  # a required field unset (the SDK's error), or a field plain params lack
    role = _ROLES.get(message.role)
    if role is None:
        return None
    texts: list[str] = []
    for part in message.parts:
        content = part.ListFields()
        if len(content) != 1 or content[0][0].name != "text":
            return None  # a file, data, media type, filename or metadata; or no content
        texts.append(content[0][1])
    return PlainSend(role, message.message_id, message.context_id, tuple(texts))


def send_response(answer: QuickAnswer | Task | Message) -> SendMessageResponse:
    """The ``SendMessageResponse`` the SDK's servicer sends for ``answer`` (a quick answer
    as its ``Message``), the quick answer's built in place rather than built and copied."""
    if isinstance(answer, Task):
        return SendMessageResponse(task=answer)
    if isinstance(answer, Message):
        return SendMessageResponse(message=answer)
    response = SendMessageResponse()
    message = response.message
    message.role = Role.ROLE_AGENT
    message.message_id = answer.message_id
    message.context_id = answer.context_id
    message.parts.add(text=answer.text)
    return response


class FastGrpcHandler(GrpcHandler):
    """``GrpcHandler`` with the short ``SendMessage`` of a plain request (module docstring)."""

    def __init__(
        self,
        request_handler: RequestHandler,
        context_builder: GrpcServerCallContextBuilder | None = None,
    ) -> None:
        super().__init__(request_handler, context_builder)
        self._builder = context_builder or DefaultGrpcServerCallContextBuilder()
        self._plain: Callable[[PlainSend, Any], Awaitable[Any]] | None = getattr(
            request_handler, "on_plain_send", None
        )

    async def SendMessage(self, request: SendMessageRequest, context: Any) -> SendMessageResponse:
        on_plain = self._plain
        plain = None if on_plain is None else plain_send_of(request)
        if on_plain is None or plain is None:
            response: SendMessageResponse = await super().SendMessage(request, context)
            return response
        try:
            # A plain request names no tenant: the built context's default ("") is the
            # SDK's getattr(request, "tenant", "").
            answer = await on_plain(plain, self._builder.build(context))
        except A2AError as exc:
            await self.abort_context(exc, context)
            return SendMessageResponse()
        return send_response(answer)
