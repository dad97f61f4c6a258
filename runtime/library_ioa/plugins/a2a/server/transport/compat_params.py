"""The 0.3 JSON-RPC methods' params, checked before the SDK's 0.3 adapter sees them.

The SDK's ``JSONRPC03Adapter`` validates a whole 0.3 request with its pydantic model and
answers any failure with -32600 (InvalidRequest), logging a traceback. The envelope is
already checked by :func:`~library_ioa.plugins.a2a.server.transport.limits.check_envelope` by then,
so what fails is the params: JSON-RPC 2.0 says -32602 (InvalidParams).
:func:`v03_params_refusal` validates the request with the adapter's own model
(``JSONRPC03Adapter.METHOD_TO_MODEL``, a public class attribute of a2a-sdk 1.3) and names the
fields that fail; ``RequestLimits`` answers it with -32602 and one log line. A request that
passes is handed on and validated once more by the SDK.
"""

from __future__ import annotations

from typing import Any

from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
from pydantic import BaseModel, ValidationError

__all__ = ["MAX_SHOWN_ERRORS", "is_v03_method", "v03_params_refusal"]

MAX_SHOWN_ERRORS = 3
_MODELS: dict[str, type[BaseModel]] = dict(JSONRPC03Adapter.METHOD_TO_MODEL)


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "params"


def is_v03_method(request: dict[str, Any]) -> bool:
    """Whether ``request`` (an object with a checked envelope) calls a 0.3 method."""
    return request.get("method", "") in _MODELS


def v03_params_refusal(request: dict[str, Any]) -> str | None:
    """Why the params of a 0.3 request (an object with a checked envelope) are invalid, or
    ``None`` when they validate or the method is not a 0.3 one."""
    model = _MODELS.get(request.get("method", ""))
    if model is None:
        return None
    try:
        model.model_validate(request)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        shown = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in errors[:MAX_SHOWN_ERRORS])
        hidden = len(errors) - MAX_SHOWN_ERRORS
        more = f" (and {hidden} more)" if hidden > 0 else ""
        return f"invalid params for {request['method']}: {shown}{more}"
    return None
