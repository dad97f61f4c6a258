"""Cheaper equivalents of two SDK steps on the hot path, each falling back to the SDK's own.

- :func:`parse_plain_send`: the ``SendMessageRequest`` of the common JSON-RPC params shape
  (one message with a ``role`` other than unspecified, a non-empty ``messageId``, optional
  ``contextId`` and one or more text parts, nothing else: every REQUIRED field set), built
  directly; ``None`` for anything else, which the caller then reads with
  protobuf's ``ParseDict`` as the SDK does. For the shape it accepts it builds exactly what
  ``ParseDict(params, SendMessageRequest(), ignore_unknown_fields=True)`` builds.
  :func:`read_plain_send` reads the same shape into a :class:`PlainSend` without building
  the protobuf (its ``request()`` does), for a caller that may not need it.
- :func:`plain_message_dict`: ``MessageToDict`` of a ``Message`` holding only ids, a role
  and text parts (the fast handler's answer), built directly; ``None`` for any other.
- :func:`stream_response_dict`: ``MessageToDict(to_stream_response(event))`` of a stream
  event whose fields are all strings, booleans, 32-bit integers, known enum values,
  timestamps and nested messages of the same kinds, built directly from ``ListFields``
  in the same order, a ``Struct`` (metadata) by ``MessageToDict`` of that ``Struct`` alone;
  anything else (bytes, a map, a 64-bit number...) through ``MessageToDict`` itself. The
  fast JSON-RPC route answers a blocking send's ``Task`` with it too.
- :func:`has_required_fields`: whether the SDK's ``validate_proto_required_fields`` would
  pass, with the field plan of each message type computed once instead of on every call.
  Only a ``True`` is trusted; on ``False`` the caller runs the SDK's validator, which
  raises its own error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)
from a2a.utils.proto_utils import to_stream_response
from google.api.field_behavior_pb2 import (  # type: ignore[import-untyped]
    FieldBehavior,
    field_behavior,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message as ProtoMessage

__all__ = [
    "PLAIN_SEND_STATE",
    "PlainSend",
    "has_required_fields",
    "message_dict",
    "parse_plain_send",
    "plain_message_dict",
    "read_plain_send",
    "stream_response_dict",
]

_MESSAGE_KEYS = frozenset({"role", "messageId", "contextId", "parts"})
_ROLES = frozenset(Role.keys()) - {"ROLE_UNSPECIFIED"}

# Set in a call context's state when its request came from parse_plain_send, which takes
# only requests whose every REQUIRED field is set: the handler skips has_required_fields.
PLAIN_SEND_STATE = "mas.plain_send"


@dataclass(frozen=True)
class PlainSend:
    """Plain params (module docstring) as read, before protobuf is built from them."""

    role: str
    message_id: str
    context_id: str
    texts: tuple[str, ...]

    @property
    def text(self) -> str:
        """The text parts joined as the executor joins them (``turn_from_message``)."""
        return "\n".join(self.texts)

    def request(self) -> SendMessageRequest:
        """The ``SendMessageRequest`` of these params (what ``ParseDict`` builds)."""
        return SendMessageRequest(
            message=Message(
                role=Role.Value(self.role),
                message_id=self.message_id,
                context_id=self.context_id,
                parts=[Part(text=text) for text in self.texts],
            )
        )


def read_plain_send(params: dict[str, Any]) -> PlainSend | None:
    """The :class:`PlainSend` of plain params (module docstring), else ``None``."""
    if params.keys() != {"message"}:
        return None
    message = params["message"]
    if not isinstance(message, dict) or not message.keys() <= _MESSAGE_KEYS:
        return None
    role, message_id = message.get("role"), message.get("messageId")
    context_id, parts = message.get("contextId", ""), message.get("parts")
    if (
        type(role) is not str
        or role not in _ROLES
        or type(message_id) is not str
        or not message_id
        or type(context_id) is not str
        or type(parts) is not list
        or not parts
    ):
        return None  # ParseDict's, and the required-field check's, to handle
    texts: list[str] = []
    for part in parts:
        if type(part) is not dict or part.keys() != {"text"} or type(part["text"]) is not str:
            return None
        texts.append(part["text"])
    return PlainSend(role, message_id, context_id, tuple(texts))


def parse_plain_send(params: dict[str, Any]) -> SendMessageRequest | None:
    """The request of plain params (module docstring), else ``None``."""
    plain = read_plain_send(params)
    return None if plain is None else plain.request()


_PLAIN_MESSAGE_FIELDS = frozenset({"message_id", "context_id", "task_id", "role", "parts"})
_JSON_NAMES = (("message_id", "messageId"), ("context_id", "contextId"), ("task_id", "taskId"))


def plain_message_dict(message: Message) -> dict[str, Any] | None:
    """``MessageToDict(message)`` for a plain message (module docstring), else ``None``."""
    present = {field.name for field, _ in message.ListFields()}
    if not present <= _PLAIN_MESSAGE_FIELDS:
        return None
    texts = []
    for part in message.parts:
        if [field.name for field, _ in part.ListFields()] != ["text"]:
            return None
        texts.append(part.text)
    # MessageToDict's order is the field numbers' (ids, role, parts); unset fields are left out.
    result: dict[str, Any] = {
        json_name: getattr(message, name) for name, json_name in _JSON_NAMES if name in present
    }
    if "role" in present:
        result["role"] = Role.Name(message.role)
    if texts:
        result["parts"] = [{"text": text} for text in texts]
    return result


_STREAM_KEYS: dict[type, str] = {
    Task: "task",
    Message: "message",
    TaskStatusUpdateEvent: "statusUpdate",
    TaskArtifactUpdateEvent: "artifactUpdate",
}


def stream_response_dict(event: ProtoMessage) -> dict[str, Any]:
    """``MessageToDict(to_stream_response(event))`` (module docstring)."""
    key = _STREAM_KEYS.get(type(event))
    if key is not None:
        body = message_dict(event)
        if body is not None:
            return {key: body}
    result: dict[str, Any] = MessageToDict(
        to_stream_response(event),
        preserving_proto_field_name=False,
    )
    return result


_SCALAR, _ENUM, _TIMESTAMP, _MESSAGE, _STRUCT = range(5)
_SCALAR_TYPES = frozenset(
    {FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_INT32}
)


@dataclass(frozen=True)
class _Out:
    json_name: str
    kind: int
    repeated: bool
    enum_names: dict[int, str]


_OUT_PLANS: dict[FieldDescriptor, _Out | None] = {}
_UNPLANNED: Any = object()


def _out_plan(field: FieldDescriptor) -> _Out | None:
    """How ``MessageToDict`` writes ``field``; ``None`` for a kind left to it."""
    if field in _OUT_PLANS:
        return _OUT_PLANS[field]
    kind: int | None = None
    names: dict[int, str] = {}
    if field.type in _SCALAR_TYPES:
        kind = _SCALAR
    elif field.type == FieldDescriptor.TYPE_ENUM:
        kind = _ENUM
        names = {value.number: value.name for value in field.enum_type.values}
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        full_name = field.message_type.full_name
        if full_name == "google.protobuf.Timestamp":
            kind = None if _is_repeated(field) else _TIMESTAMP
        elif full_name == "google.protobuf.Struct":
            kind = None if _is_repeated(field) else _STRUCT
        elif not full_name.startswith("google.protobuf.") and not (
            field.message_type.GetOptions().map_entry
        ):
            kind = _MESSAGE
    plan = None if kind is None else _Out(field.json_name, kind, _is_repeated(field), names)
    _OUT_PLANS[field] = plan
    return plan


def message_dict(message: ProtoMessage) -> dict[str, Any] | None:
    """``MessageToDict(message)`` when every field is of a plain kind, else ``None``."""
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        plan = _OUT_PLANS.get(field, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = _out_plan(field)
        if plan is None:
            return None
        kind = plan.kind
        if kind == _SCALAR:
            out[plan.json_name] = list(value) if plan.repeated else value
        elif kind == _ENUM:
            values = value if plan.repeated else (value,)
            if not all(v in plan.enum_names for v in values):
                return None  # an unknown number: MessageToDict writes it as a number
            names = [plan.enum_names[v] for v in values]
            out[plan.json_name] = names if plan.repeated else names[0]
        elif kind == _TIMESTAMP:
            out[plan.json_name] = value.ToJsonString()
        elif kind == _STRUCT:
            out[plan.json_name] = MessageToDict(value)
        elif plan.repeated:
            items = []
            for item in value:
                converted = message_dict(item)
                if converted is None:
                    return None
                items.append(converted)
            out[plan.json_name] = items
        else:
            converted = message_dict(value)
            if converted is None:
                return None
            out[plan.json_name] = converted
    return out


@dataclass(frozen=True)
class _Field:
    name: str
    required: bool
    repeated: bool
    presence: bool
    default: Any
    message: bool  # a singular message or a repeated one (not a map)
    map_of_messages: bool


_PLANS: dict[str, tuple[_Field, ...]] = {}


def _is_repeated(field: FieldDescriptor) -> bool:
    """As the SDK decides it: ``is_repeated`` on newer protobuf, the label before."""
    is_repeated = getattr(field, "is_repeated", None)
    if is_repeated is not None:
        return bool(is_repeated)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _plan(descriptor: Descriptor) -> tuple[_Field, ...]:
    plan = _PLANS.get(descriptor.full_name)
    if plan is None:
        fields = []
        for field in descriptor.fields:
            options = field.GetOptions()
            is_message = field.type == FieldDescriptor.TYPE_MESSAGE
            is_map = bool(
                is_message
                and field.message_type is not None
                and field.message_type.GetOptions().map_entry
            )
            value_is_message = bool(
                is_map
                and field.message_type.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE
            )
            fields.append(
                _Field(
                    name=field.name,
                    required=FieldBehavior.REQUIRED in options.Extensions[field_behavior],
                    repeated=_is_repeated(field),
                    presence=field.has_presence,
                    default=field.default_value,
                    message=is_message and not is_map,
                    map_of_messages=value_is_message,
                )
            )
        plan = _PLANS[descriptor.full_name] = tuple(fields)
    return plan


def has_required_fields(msg: ProtoMessage) -> bool:
    """Whether every REQUIRED field of ``msg`` and of its nested messages is set."""
    for field in _plan(msg.DESCRIPTOR):
        value = getattr(msg, field.name)
        if field.required:
            if field.repeated:
                if not value:
                    return False
            elif field.presence:
                if not msg.HasField(field.name):
                    return False
            elif value == field.default:
                return False
        if field.message:
            if field.repeated:
                if not all(has_required_fields(item) for item in value):
                    return False
            elif msg.HasField(field.name) and not has_required_fields(value):
                return False
        elif field.map_of_messages and not all(has_required_fields(v) for v in value.values()):
            return False
    return True
