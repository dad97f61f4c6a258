"""The JSON-RPC route with a short path for the hot request: a protocol 1.0 ``SendMessage``.

:func:`create_fast_jsonrpc_routes` takes the arguments of the SDK's
``create_jsonrpc_routes`` and returns the same one ``POST`` route, on the SDK's own
``JsonRpcDispatcher``. A request that is plainly a single 1.0 ``SendMessage`` (one
``A2A-Version: 1.0`` header; a JSON object with exactly the JSON-RPC members, ``jsonrpc``
``"2.0"``, a string or integer ``id`` and object ``params``) is parsed with orjson and
handed to the request handler directly, skipping the dispatcher's generic steps (the
base JSON-RPC model, the method table, the version decorator, the tracing spans). The
params are read as the SDK reads them (protobuf's ``ParseDict``; the plain common shape
by :func:`~library_ioa.plugins.a2a.server.codec.parse_plain_send`, to the same result), the call
context comes from the same context builder, the result and every error are shaped by
the SDK's ``MessageToDict``, ``JSONRPC20Response`` and ``build_error_response``, and the
body is rendered byte for byte as Starlette's ``JSONResponse`` renders it.

Everything else (other methods, 0.3 names, batches, bad JSON, other versions, params
protobuf refuses) goes to the SDK's dispatcher unchanged, so its errors stay the SDK's.
The route stays inside the Starlette app, so middleware (auth, limits) still applies.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson
from a2a.server.jsonrpc_models import InternalError
from a2a.server.request_handlers import RequestHandler, build_error_response
from a2a.server.routes.common import DefaultServerCallContextBuilder, ServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import SendMessageRequest, SendMessageResponse, Task
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict, ParseDict
from jsonrpc.jsonrpc2 import JSONRPC20Response  # type: ignore[import-untyped]
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from library_ioa.plugins.a2a.server.codec import parse_plain_send, plain_message_dict

logger = logging.getLogger(__name__)

__all__ = ["create_fast_jsonrpc_routes", "fast_request"]

HOT_METHOD = "SendMessage"
HOT_VERSION = "1.0"
_MEMBERS = frozenset({"jsonrpc", "method", "params", "id"})


def fast_request(request: Request, body: bytes) -> tuple[str | int, dict[str, Any]] | None:
    """``(id, params)`` when ``body`` is plainly one 1.0 ``SendMessage``, else ``None``."""
    if request.headers.getlist("a2a-version") != [HOT_VERSION]:
        return None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.keys() != _MEMBERS:
        return None
    request_id, params = data["id"], data["params"]
    if (
        data["jsonrpc"] != "2.0"
        or data["method"] != HOT_METHOD
        or type(request_id) not in (str, int)
        or not isinstance(params, dict)
    ):
        return None
    return request_id, params


def render(content: Any) -> bytes:
    """What Starlette's ``JSONResponse`` sends for ``content``."""
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


class FastJsonRpcEndpoint:
    """The route's endpoint: the hot request directly, anything else through the SDK."""

    def __init__(
        self,
        request_handler: RequestHandler,
        dispatcher: JsonRpcDispatcher,
        context_builder: ServerCallContextBuilder,
    ) -> None:
        self._handler = request_handler
        self._dispatcher = dispatcher
        self._context_builder = context_builder

    async def handle(self, request: Request) -> Response:
        """Answer one JSON-RPC POST."""
        hot = fast_request(request, await request.body())
        if hot is None:
            return await self._dispatcher.handle_requests(request)
        request_id, params = hot
        try:
            send = parse_plain_send(params) or ParseDict(
                params, SendMessageRequest(), ignore_unknown_fields=True
            )
        except Exception:
            return await self._dispatcher.handle_requests(request)  # the SDK's own error
        call_context = self._context_builder.build(request)
        call_context.tenant = send.tenant
        call_context.state["method"] = HOT_METHOD
        call_context.state["request_id"] = request_id
        try:
            answer = await self._handler.on_message_send(send, call_context)
            if isinstance(answer, Task):
                result = MessageToDict(SendMessageResponse(task=answer))
            elif (plain := plain_message_dict(answer)) is not None:
                result = {"message": plain}
            else:
                result = MessageToDict(SendMessageResponse(message=answer))
            content = JSONRPC20Response(result=result, _id=request_id).data
        except A2AError as exc:
            content = build_error_response(request_id, exc)
        except Exception as exc:
            logger.exception("SendMessage %r failed", request_id)
            content = build_error_response(request_id, InternalError(message=str(exc)))
        return Response(render(content), media_type="application/json")


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
    endpoint = FastJsonRpcEndpoint(request_handler, dispatcher, builder)
    return [Route(path=rpc_url, endpoint=endpoint.handle, methods=["POST"])]
