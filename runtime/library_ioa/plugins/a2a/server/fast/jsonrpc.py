"""The JSON-RPC route with a short path for the hot requests: 1.0 ``SendMessage`` and
``SendStreamingMessage``.

:func:`create_fast_jsonrpc_routes` takes the arguments of the SDK's
``create_jsonrpc_routes`` and returns the same one ``POST`` route, on the SDK's own
``JsonRpcDispatcher``. A request that is plainly a single 1.0 ``SendMessage`` or
``SendStreamingMessage`` (one
``A2A-Version: 1.0`` header; a JSON object with exactly the JSON-RPC members, ``jsonrpc``
``"2.0"``, a string or integer ``id`` and object ``params``) is parsed with orjson and
handed to the request handler directly, skipping the dispatcher's generic steps (the
base JSON-RPC model, the method table, the version decorator, the tracing spans). The
params are read as the SDK reads them (protobuf's ``ParseDict``; the plain common shape
by :func:`~library_ioa.plugins.a2a.server.fast.codec.parse_plain_send`, to the same result), the
call context comes from the same context builder, the result and every error are shaped by
the SDK's ``MessageToDict``, ``JSONRPC20Response`` and ``build_error_response``, and the
body is rendered byte for byte as Starlette's ``JSONResponse`` renders it. A plain
``SendMessage`` goes to the handler's ``on_plain_send`` when it has one
(``FastSendHandler``): the params as read (``codec.read_plain_send``), no protobuf built
unless the turn needs a task, and a quick answer comes back as its ``QuickAnswer``, whose
JSON is written without building the ``Message`` (the same bytes).

A stream is answered as the dispatcher answers it: an error before the first event as a
JSON error, then sse-starlette's ``EventSourceResponse`` (its headers, pings, disconnect
and shutdown handling) with each event as the dispatcher frames it (``data: `` and the
JSON-RPC item, ``event: error`` for an error). When the handler offers batches
(``FastSendHandler.message_stream_batches``), the frames of the events that are ready
together go out as one chunk: the same bytes, fewer writes through the middleware and
the socket.

Everything else (other methods, 0.3 names, batches, bad JSON, other versions, params
protobuf refuses) goes to the SDK's dispatcher unchanged, so its errors stay the SDK's.
The route stays inside the Starlette app, so middleware (auth, limits) still applies.
:meth:`FastJsonRpcEndpoint.answer` is also what the hot lane
(:mod:`~library_ioa.plugins.a2a.server.fast.hot_lane`) calls, in front of the app, for the
requests every layer between would pass through untouched.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

import a2a.client  # noqa: F401  # first: see library_ioa.plugins.a2a.__init__
import orjson
from a2a.auth.user import UnauthenticatedUser
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import InternalError
from a2a.server.request_handlers import RequestHandler, build_error_response
from a2a.server.routes.common import (
    DefaultServerCallContextBuilder,
    ServerCallContextBuilder,
    StarletteUser,
    create_event_source_response,
)
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import SendMessageRequest, SendMessageResponse, Task
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict, ParseDict
from jsonrpc.jsonrpc2 import JSONRPC20Response  # type: ignore[import-untyped]
from sse_starlette import EventSourceResponse
from sse_starlette.event import ensure_bytes
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from library_ioa.plugins.a2a.server.fast.codec import (
    PLAIN_SEND_STATE,
    PlainSend,
    plain_message_dict,
    read_plain_send,
    stream_response_dict,
)
from library_ioa.plugins.a2a.server.publisher import QuickAnswer

logger = logging.getLogger(__name__)

__all__ = [
    "FastJsonRpcEndpoint",
    "create_fast_jsonrpc_routes",
    "fast_endpoint",
    "fast_request",
    "hot_body",
]

HOT_METHOD = "SendMessage"
STREAM_METHOD = "SendStreamingMessage"
HOT_METHODS = frozenset({HOT_METHOD, STREAM_METHOD})
HOT_VERSION = "1.0"
JSON = "application/json"
_MEMBERS = frozenset({"jsonrpc", "method", "params", "id"})


def fast_request(request: Request, body: bytes) -> tuple[str | int, str, dict[str, Any]] | None:
    """``(id, method, params)`` when ``body`` is plainly one 1.0 hot request, else ``None``."""
    if request.headers.getlist("a2a-version") != [HOT_VERSION]:
        return None
    return hot_body(body)


def hot_body(body: bytes) -> tuple[str | int, str, dict[str, Any]] | None:
    """``(id, method, params)`` when ``body`` is plainly one hot JSON-RPC request, else ``None``."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.keys() != _MEMBERS:
        return None
    request_id, method, params = data["id"], data["method"], data["params"]
    if (
        data["jsonrpc"] != "2.0"
        or type(method) is not str  # an array or object is not hashable: never `in` a set
        or method not in HOT_METHODS
        or type(request_id) not in (str, int)
        or not isinstance(params, dict)
    ):
        return None
    return request_id, method, params


def render(content: Any) -> bytes:
    """What Starlette's ``JSONResponse`` sends for ``content``."""
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


def render_plain(content: dict[str, Any]) -> bytes:
    """:func:`render` of content holding only strings, integers, lists and dicts (no float,
    whose text orjson writes differently), by orjson: the same bytes, a fraction of the
    time (``tests/unit/test_a2a_codec.py`` compares them); an integer past 64 bits goes
    to :func:`render`."""
    try:
        return orjson.dumps(content)
    except orjson.JSONEncodeError:
        return render(content)


class FastJsonRpcEndpoint:
    """The route's endpoint: the hot request directly, anything else through the SDK."""

    def __init__(
        self,
        request_handler: RequestHandler,
        dispatcher: JsonRpcDispatcher,
        context_builder: ServerCallContextBuilder,
        shutdown_grace_period: float = 0,
    ) -> None:
        self._handler = request_handler
        self._dispatcher = dispatcher
        self._context_builder = context_builder
        self._shutdown_grace_period = shutdown_grace_period
        # The SDK's builder, built faster (default_call_context); any other is called.
        self._default_context = type(context_builder) is DefaultServerCallContextBuilder
        # The SDK's own checks of the grace period (and of sse-starlette), once.
        create_event_source_response(iter(()), shutdown_grace_period=shutdown_grace_period)
        # The handler's batched stream (FastSendHandler.message_stream_batches), if it has one.
        self._batches: Callable[[Any, Any], AsyncGenerator[list[Any], None]] | None = getattr(
            request_handler, "message_stream_batches", None
        )
        # The handler's send of plain params (FastSendHandler.on_plain_send), if it has one.
        self._plain: Callable[[PlainSend, Any], Awaitable[Any]] | None = getattr(
            request_handler, "on_plain_send", None
        )

    async def handle(self, request: Request) -> Response:
        """Answer one JSON-RPC POST."""
        hot = fast_request(request, await request.body())
        answer = None if hot is None else await self.answer(request, *hot)
        if answer is None:
            return await self._dispatcher.handle_requests(request)
        return answer

    async def answer(
        self, request: Request, request_id: str | int, method: str, params: dict[str, Any]
    ) -> Response | None:
        """The answer to one hot request, or ``None`` for the SDK's dispatcher to give."""
        if method == STREAM_METHOD and self._batches is None:
            return None
        plain = read_plain_send(params)
        send: SendMessageRequest | None = None
        if plain is None:
            try:
                send = ParseDict(params, SendMessageRequest(), ignore_unknown_fields=True)
            except Exception:
                return None  # the SDK's own error
        elif method == STREAM_METHOD or self._plain is None:
            send = plain.request()
        tenant = "" if send is None else send.tenant  # plain params name no tenant
        if self._default_context:
            call_context = default_call_context(request, tenant)
        else:
            call_context = self._context_builder.build(request)
            call_context.tenant = tenant
        if plain is not None:  # every required field is there (codec.read_plain_send)
            call_context.state[PLAIN_SEND_STATE] = True
        call_context.state["method"] = method
        call_context.state["request_id"] = request_id
        if method == STREAM_METHOD:
            assert send is not None
            return await self._stream(request_id, send, call_context)
        try:
            if send is None:
                assert plain is not None and self._plain is not None
                answer = await self._plain(plain, call_context)
            else:
                answer = await self._handler.on_message_send(send, call_context)
            if isinstance(answer, QuickAnswer):
                message = answer.message_dict()
                body = {"result": {"message": message}, "id": request_id, "jsonrpc": "2.0"}
                return Response(render_plain(body), media_type=JSON)
            if isinstance(answer, Task):  # MessageToDict(SendMessageResponse(task=answer))
                result = stream_response_dict(answer)
            elif (plain_dict := plain_message_dict(answer)) is not None:
                body = {"result": {"message": plain_dict}, "id": request_id, "jsonrpc": "2.0"}
                return Response(render_plain(body), media_type=JSON)
            else:
                result = MessageToDict(SendMessageResponse(message=answer))
            content = JSONRPC20Response(result=result, _id=request_id).data
        except A2AError as exc:
            content = build_error_response(request_id, exc)
        except Exception as exc:
            logger.exception("SendMessage %r failed", request_id)
            content = build_error_response(request_id, InternalError(message=str(exc)))
        return Response(render(content), media_type=JSON)

    async def _stream(
        self, request_id: str | int, send: SendMessageRequest, context: Any
    ) -> Response:
        """A ``SendStreamingMessage``: what the SDK's dispatcher answers, the ready events of
        each batch written together."""
        assert self._batches is not None
        batches = self._batches(send, context)
        try:  # the first batch at once, as the dispatcher does: upfront errors are JSON
            first = await anext(batches, None)
        except A2AError as exc:
            await batches.aclose()
            return Response(render(build_error_response(request_id, exc)), media_type=JSON)
        except Exception as exc:
            await batches.aclose()
            logger.exception("SendStreamingMessage %r failed", request_id)
            error = InternalError(message=str(exc))
            return Response(render(build_error_response(request_id, error)), media_type=JSON)
        frames = _frames(request_id, first, batches)
        if self._shutdown_grace_period:  # create_event_source_response, its check done once
            return EventSourceResponse(frames, shutdown_grace_period=self._shutdown_grace_period)
        return EventSourceResponse(frames)


def default_call_context(request: Request, tenant: str = "") -> ServerCallContext:
    """What ``DefaultServerCallContextBuilder.build(request)`` builds, from the raw headers:
    the same user, state (``auth``, then every header's first value by its lowercase name,
    as ``dict(request.headers)``) and requested extensions; ``tenant`` set at once (not by
    the model's validated assignment)."""
    scope = request.scope
    headers: dict[str, str] = {}
    extensions: list[str] = []
    for key, value in scope["headers"]:
        name, text = key.decode("latin-1"), value.decode("latin-1")
        headers.setdefault(name, text)
        if name == _EXTENSIONS:
            extensions.append(text)
    state: dict[str, Any] = {}
    if "auth" in scope:
        state["auth"] = request.auth
    state["headers"] = headers
    return ServerCallContext(
        user=StarletteUser(request.user) if "user" in scope else UnauthenticatedUser(),
        state=state,
        requested_extensions=get_requested_extensions(extensions),
        tenant=tenant,
    )


_EXTENSIONS = HTTP_EXTENSION_HEADER.lower()
# json_utils.dumps is json.dumps(obj, ensure_ascii=False): this encoder, made once.
_ENCODER = json.JSONEncoder(ensure_ascii=False)


def frame(item: dict[str, Any]) -> bytes:
    """The SSE bytes sse-starlette writes for one item of the dispatcher's stream."""
    data = _ENCODER.encode(item)
    if "\r" in data or "\n" in data:  # never for JSON without indent; the library's way
        event = {"data": data, "event": "error"} if "error" in item else {"data": data}
        return ensure_bytes(event, "\r\n")
    if "error" in item:
        return f"event: error\r\ndata: {data}\r\n\r\n".encode()
    return f"data: {data}\r\n\r\n".encode()


def stream_item(request_id: str | int, event: Any) -> dict[str, Any]:
    """The dispatcher's JSON-RPC item of one stream event (what ``JSONRPC20Response`` shapes)."""
    return {"result": stream_response_dict(event), "id": request_id, "jsonrpc": "2.0"}


async def _frames(
    request_id: str | int, first: list[Any] | None, batches: AsyncGenerator[list[Any], None]
) -> AsyncGenerator[bytes, None]:
    """The SSE body: one chunk per batch of events, errors as the dispatcher frames them."""
    try:
        if first is not None:
            yield b"".join(frame(stream_item(request_id, event)) for event in first)
        async for batch in batches:
            yield b"".join(frame(stream_item(request_id, event)) for event in batch)
    except A2AError as exc:
        yield frame(build_error_response(request_id, exc))
    except Exception as exc:
        logger.exception("Unhandled error during JSON-RPC SSE stream")
        yield frame(build_error_response(request_id, InternalError(message=str(exc))))
    finally:
        await batches.aclose()


def create_fast_jsonrpc_routes(
    request_handler: RequestHandler,
    rpc_url: str,
    context_builder: ServerCallContextBuilder | None = None,
    enable_v0_3_compat: bool = False,
    shutdown_grace_period: float = 0,
) -> list[Route]:
    """``create_jsonrpc_routes`` with the short path for the hot request (module docstring)."""
    builder = context_builder or DefaultServerCallContextBuilder()
    dispatcher = JsonRpcDispatcher(
        request_handler=request_handler,
        context_builder=builder,
        enable_v0_3_compat=enable_v0_3_compat,
        shutdown_grace_period=shutdown_grace_period,
    )
    endpoint = FastJsonRpcEndpoint(request_handler, dispatcher, builder, shutdown_grace_period)
    return [Route(path=rpc_url, endpoint=endpoint.handle, methods=["POST"])]


def fast_endpoint(routes: Sequence[BaseRoute]) -> FastJsonRpcEndpoint | None:
    """The fast endpoint behind the routes :func:`create_fast_jsonrpc_routes` made, if any."""
    for route in routes:
        owner = getattr(getattr(route, "endpoint", None), "__self__", None)
        if isinstance(owner, FastJsonRpcEndpoint):
            return owner
    return None
