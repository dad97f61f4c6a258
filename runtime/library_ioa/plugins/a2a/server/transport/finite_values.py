"""Numbers JSON cannot carry: a request holding NaN or an infinity is invalid params.

JSON has no NaN or Infinity, and protobuf's JSON printer refuses them in a
``google.protobuf.Value`` ("Fail to serialize NaN for Value.number_value"). Yet every
transport can deliver one: Python's JSON parser reads the literals ``NaN`` and
``Infinity`` and overflows ``1e999`` to infinity (JSON-RPC, HTTP+JSON, both through the
SDK), and a gRPC client writes any double. Left in, the value reaches the executor (which
reads message metadata and data parts as JSON), the task store and every later answer
about the task, each failing with an internal error.

:func:`refuse_non_finite` is called by the request handler
(:class:`~library_ioa.plugins.a2a.server.handler.CountingRequestHandler`) before a request
runs, whatever its transport, so such a request is answered as the protocol's invalid
params (JSON-RPC -32602, HTTP 400, gRPC INVALID_ARGUMENT), naming the field by its JSON
path. It walks the fields that are set (``ListFields``); a request without a ``double`` or
``float`` field anywhere costs one walk of its set fields.
"""

from __future__ import annotations

import math
from typing import Any

from a2a.utils.errors import InvalidParamsError
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

__all__ = ["non_finite_path", "refuse_non_finite"]

_FLOATS = frozenset({FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT})
_STRUCT, _VALUE, _LIST = (
    "google.protobuf.Struct",
    "google.protobuf.Value",
    "google.protobuf.ListValue",
)


def _is_map(field: FieldDescriptor) -> bool:
    return bool(
        field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry
    )


def _is_repeated(field: FieldDescriptor) -> bool:
    is_repeated = getattr(field, "is_repeated", None)
    if is_repeated is not None:
        return bool(is_repeated)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def non_finite_path(message: Message, path: str = "") -> tuple[str, float] | None:
    """The JSON path and value of a NaN or an infinity in ``message``, else ``None``.

    Paths read as the request's JSON: ``message.parts[1].data.score``. Iterative: a
    ``Struct`` nested as deep as protobuf's decoder allows is walked without recursion.
    """
    stack: list[tuple[Any, str]] = [(message, path)]
    while stack:
        item, where = stack.pop()
        name = item.DESCRIPTOR.full_name
        if name == _STRUCT:
            stack.extend((value, _join(where, key)) for key, value in item.fields.items())
            continue
        if name == _VALUE:
            kind = item.WhichOneof("kind")
            if kind == "number_value" and not math.isfinite(item.number_value):
                return where or "value", item.number_value
            if kind == "struct_value":
                stack.append((item.struct_value, where))
            elif kind == "list_value":
                stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item.list_value.values))
            continue
        if name == _LIST:
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item.values))
            continue
        for field, value in item.ListFields():
            at = _join(where, field.json_name)
            if field.type in _FLOATS:
                values = value if _is_repeated(field) else (value,)
                bad = next((v for v in values if not math.isfinite(v)), None)
                if bad is not None:
                    return at, bad
            elif _is_map(field):
                entry = field.message_type.fields_by_name["value"]
                if entry.type in _FLOATS:
                    bad_key = next((k for k, v in value.items() if not math.isfinite(v)), None)
                    if bad_key is not None:
                        return _join(at, str(bad_key)), value[bad_key]
                elif entry.type == FieldDescriptor.TYPE_MESSAGE:
                    stack.extend((v, _join(at, str(k))) for k, v in value.items())
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                if _is_repeated(field):
                    stack.extend((v, f"{at}[{i}]") for i, v in enumerate(value))
                else:
                    stack.append((value, at))
    return None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def refuse_non_finite(params: Any) -> None:
    """Raise ``InvalidParamsError`` naming the field when a protobuf request holds NaN or
    an infinity; anything else (no protobuf, all numbers finite) passes."""
    if not isinstance(params, Message):
        return
    found = non_finite_path(params)
    if found is not None:
        where, value = found
        raise InvalidParamsError(
            message=f"{where}: {_literal(value)} is not a JSON number; send a finite number"
        )


def _literal(value: float) -> str:
    """The name a JSON parser that accepts it gives the value: NaN, Infinity, -Infinity."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
