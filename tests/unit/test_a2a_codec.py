"""The hot-path codec agrees with the SDK: the same request as ParseDict, the same verdict as
``validate_proto_required_fields``, on generated inputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import to_stream_response, validate_proto_required_fields
from google.protobuf.json_format import MessageToDict, ParseDict
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonrpc.jsonrpc2 import JSONRPC20Response  # type: ignore[import-untyped]

from library_ioa.plugins.a2a.server.executor import turn_from_message
from library_ioa.plugins.a2a.server.fast.codec import (
    PlainSend,
    has_required_fields,
    message_dict,
    parse_plain_send,
    plain_message_dict,
    read_plain_send,
    stream_response_dict,
)
from library_ioa.plugins.a2a.server.fast.jsonrpc import render, render_plain, stream_item
from library_ioa.plugins.a2a.server.publisher import QuickAnswer

texts = st.text(max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), texts)
roles = st.sampled_from(["ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED", "ROLE_NOBODY", ""])
parts = st.one_of(
    st.fixed_dictionaries({"text": texts}),
    st.fixed_dictionaries({"text": scalars}),
    st.fixed_dictionaries({"data": st.dictionaries(texts, scalars, max_size=2)}),
    st.fixed_dictionaries({"url": texts, "mediaType": texts}),
    st.fixed_dictionaries({"text": texts, "metadata": st.dictionaries(texts, scalars, max_size=2)}),
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "role": st.one_of(roles, scalars),
        "messageId": st.one_of(texts, scalars),
        "contextId": st.one_of(texts, scalars),
        "taskId": texts,
        "parts": st.one_of(st.lists(parts, max_size=3), scalars),
        "metadata": st.dictionaries(texts, scalars, max_size=2),
        "referenceTaskIds": st.lists(texts, max_size=2),
    },
)
params = st.one_of(
    st.fixed_dictionaries({"message": messages}),
    st.fixed_dictionaries(
        {"message": messages},
        optional={
            "configuration": st.fixed_dictionaries(
                {},
                optional={"historyLength": st.integers(-2, 3), "returnImmediately": st.booleans()},
            )
        },
    ),
    st.dictionaries(st.sampled_from(["message", "tenant", "other"]), scalars, max_size=2),
)


def sdk_parse(value: dict[str, Any]) -> SendMessageRequest | None:
    try:
        return ParseDict(value, SendMessageRequest(), ignore_unknown_fields=True)
    except Exception:
        return None


def assert_turn_is_plain(request: SendMessageRequest, plain: PlainSend) -> None:
    """The fast handler builds the turn from the read params as the executor builds it
    from the parsed message (the ids and text; plain params carry no data or metadata)."""
    turn = turn_from_message(request.message, "ctx", "task")
    assert (turn.turn_id, turn.text, turn.data, dict(turn.metadata)) == (
        plain.message_id,
        plain.text,
        None,
        {},
    )


def sdk_valid(request: SendMessageRequest) -> bool:
    try:
        validate_proto_required_fields(request)
    except InvalidParamsError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(params)
def test_plain_parse_is_parse_dict_or_declines(value: dict[str, Any]) -> None:
    fast = parse_plain_send(value)
    if fast is not None:
        expected = sdk_parse(value)
        assert expected is not None, value
        assert fast == expected
        assert fast.SerializeToString(deterministic=True) == expected.SerializeToString(
            deterministic=True
        )
        # The handler skips the required-field check for these (codec.PLAIN_SEND_STATE).
        assert sdk_valid(fast), value


@settings(max_examples=400, deadline=None)
@given(params)
def test_required_fields_verdict_is_the_sdks(value: dict[str, Any]) -> None:
    request = sdk_parse(value)
    if request is not None:
        assert has_required_fields(request) == sdk_valid(request), request


@settings(max_examples=400, deadline=None)
@given(params)
def test_the_plain_read_takes_what_the_plain_parse_takes(value: dict[str, Any]) -> None:
    plain, fast = read_plain_send(value), parse_plain_send(value)
    assert (plain is None) == (fast is None), value
    if plain is not None and fast is not None:
        assert plain.request() == fast
        assert_turn_is_plain(fast, plain)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(max_size=3), st.text(max_size=40))
def test_a_quick_answer_writes_the_json_of_its_message(
    text: str, message_id: str, context_id: str
) -> None:
    answer = QuickAnswer(message_id, context_id, text)
    message = answer.message()
    expected = MessageToDict(message)
    assert answer.message_dict() == expected == plain_message_dict(message)
    assert list(answer.message_dict()) == list(expected)  # the same key order
    body = {"result": {"message": answer.message_dict()}, "id": 7, "jsonrpc": "2.0"}
    assert render_plain(body) == render(body)


def test_the_common_shape_takes_the_plain_parse() -> None:
    value = {
        "message": {
            "role": "ROLE_USER",
            "messageId": "m-1",
            "contextId": "c",
            "parts": [{"text": "hello"}, {"text": "again"}],
        }
    }
    fast = parse_plain_send(value)
    assert fast is not None and fast == sdk_parse(value)
    assert has_required_fields(fast)


@pytest.mark.parametrize(
    "value",
    [
        {
            "message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]},
            "tenant": "t",
        },
        {"message": {"role": 1, "messageId": "m", "parts": [{"text": "x"}]}},
        {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"data": {}}]}},
        {"message": {"role": "ROLE_USER", "messageId": "m", "taskId": "t", "parts": []}},
    ],
)
def test_other_shapes_are_left_to_parse_dict(value: dict[str, Any]) -> None:
    assert parse_plain_send(value) is None


def test_a_missing_required_field_is_reported_by_both() -> None:
    request = sdk_parse({"message": {"role": "ROLE_USER", "parts": [{"text": "no id"}]}})
    assert request is not None
    assert not has_required_fields(request)
    assert not sdk_valid(request)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "role": roles.filter(lambda r: r not in {"ROLE_NOBODY", ""}),
            "messageId": texts,
            "contextId": texts,
            "taskId": texts,
            "parts": st.lists(
                parts.filter(lambda p: isinstance(p.get("text", ""), str)), max_size=3
            ),
            "metadata": st.dictionaries(texts, scalars, max_size=2),
            "extensions": st.lists(texts, max_size=1),
        },
    )
)
def test_plain_message_dict_is_message_to_dict_or_declines(value: dict[str, Any]) -> None:
    try:
        message = ParseDict(value, Message(), ignore_unknown_fields=True)
    except Exception:
        return
    fast = plain_message_dict(message)
    if fast is not None:
        expected = MessageToDict(message)
        assert fast == expected
        assert list(fast) == list(expected)  # the same key order, so the same bytes


def test_the_fast_answer_is_rendered_by_the_plain_dict() -> None:
    message = Message(role=Role.ROLE_AGENT, message_id="m", context_id="c", task_id="t")
    message.parts.append(Part(text=""))
    assert plain_message_dict(message) == MessageToDict(message)
    message.metadata["k"] = "v"
    assert plain_message_dict(message) is None


# Stream events as JSON, parsed into a StreamResponse and compared as the dispatcher renders
# them: every kind of part, status, metadata, timestamps, unknown enum numbers.
stamps = st.sampled_from(
    ["2026-12-02T19:15:12Z", "2026-12-02T19:15:12.120Z", "2026-12-02T19:15:12.123456789Z"]
)
states = st.one_of(
    st.sampled_from(list(TaskState.keys())), st.integers(0, 12), st.sampled_from(["", "NOPE"])
)
wire_messages = st.fixed_dictionaries(
    {"role": roles, "parts": st.lists(parts, max_size=3)},
    optional={
        "messageId": texts,
        "contextId": texts,
        "taskId": texts,
        "metadata": st.dictionaries(texts, scalars, max_size=2),
        "referenceTaskIds": st.lists(texts, max_size=2),
    },
)
statuses = st.fixed_dictionaries(
    {"state": states}, optional={"message": wire_messages, "timestamp": stamps}
)
artifacts = st.fixed_dictionaries(
    {"artifactId": texts, "parts": st.lists(parts, max_size=3)},
    optional={
        "name": texts,
        "description": texts,
        "metadata": st.dictionaries(texts, scalars, max_size=1),
        "extensions": st.lists(texts, max_size=1),
    },
)
events = st.one_of(
    st.fixed_dictionaries(
        {"task": st.fixed_dictionaries(
            {"id": texts, "contextId": texts, "status": statuses},
            optional={
                "history": st.lists(wire_messages, max_size=2),
                "artifacts": st.lists(artifacts, max_size=2),
                "metadata": st.dictionaries(texts, scalars, max_size=1),
            },
        )}
    ),
    st.fixed_dictionaries({"message": wire_messages}),
    st.fixed_dictionaries(
        {"statusUpdate": st.fixed_dictionaries(
            {"taskId": texts, "contextId": texts, "status": statuses},
            optional={"metadata": st.dictionaries(texts, scalars, max_size=1)},
        )}
    ),
    st.fixed_dictionaries(
        {"artifactUpdate": st.fixed_dictionaries(
            {"taskId": texts, "contextId": texts, "artifact": artifacts},
            optional={"append": st.booleans(), "lastChunk": st.booleans()},
        )}
    ),
)  # fmt: skip


def event_of(value: dict[str, Any]) -> Any:
    response = ParseDict(value, StreamResponse(), ignore_unknown_fields=True)
    return getattr(response, response.WhichOneof("payload"))


def maps_sorted(value: Any, in_map: bool = False) -> Any:
    """``value`` with the keys of its protobuf maps (``metadata``, ``data``: Structs) sorted.

    Protobuf leaves a map's order unspecified and upb's differs between processes and between
    a map and its copy, so the SDK's own renderings of one event disagree on it; everything
    else keeps its order.
    """
    if isinstance(value, list):
        return [maps_sorted(item, in_map) for item in value]
    if not isinstance(value, dict):
        return value
    keys = sorted(value) if in_map else list(value)
    return {key: maps_sorted(value[key], in_map or key in ("metadata", "data")) for key in keys}


def test_only_the_maps_are_sorted() -> None:
    item = {"b": 1, "metadata": {"z": {"y": 1, "x": 2}, "a": None}, "a": [{"data": {"q": 1}}]}
    assert json.dumps(maps_sorted(item)) == (
        '{"b": 1, "metadata": {"a": null, "z": {"x": 2, "y": 1}}, "a": [{"data": {"q": 1}}]}'
    )


@settings(max_examples=500, deadline=None)
@given(events, st.one_of(st.integers(-5, 5), texts))
def test_a_stream_item_is_what_the_dispatcher_renders(value: dict[str, Any], rid: Any) -> None:
    try:
        event = event_of(value)
    except Exception:
        return
    result = MessageToDict(to_stream_response(event), preserving_proto_field_name=False)
    expected = JSONRPC20Response(result=result, _id=rid).data
    fast = stream_item(rid, event)
    assert fast == expected
    # The same bytes, up to the order inside protobuf maps (see maps_sorted).
    assert json.dumps(maps_sorted(fast), ensure_ascii=False) == json.dumps(
        maps_sorted(expected), ensure_ascii=False
    )


def test_the_streamed_turn_takes_the_direct_conversion() -> None:
    status = TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
    status.message.CopyFrom(Message(role=Role.ROLE_AGENT, message_id="m", parts=[Part(text="hi")]))
    status.timestamp.FromJsonString("2026-12-02T19:15:12.5Z")
    chunk = TaskArtifactUpdateEvent(task_id="t", context_id="c", append=True)
    chunk.artifact.artifact_id = "response-1"
    chunk.artifact.parts.append(Part(text="word"))
    for event in (
        TaskStatusUpdateEvent(task_id="t", context_id="c", status=status),
        chunk,
        Task(id="t", context_id="c", status=status, history=[status.message]),
    ):
        assert message_dict(event) is not None
        assert stream_response_dict(event) == MessageToDict(to_stream_response(event))
    # A Struct (the metadata a delegation leaves on the task): that Struct by MessageToDict.
    status.message.metadata["k"] = "v"
    task = Task(id="t", context_id="c", status=status)
    task.metadata.update({"mas.delegated": {"target": "remote", "ok": True, "n": 2}})
    for event in (status, task):
        assert message_dict(event) == MessageToDict(event)
    assert stream_response_dict(task) == MessageToDict(to_stream_response(task))
    status.message.extensions.append("x")  # a repeated string: still direct
    assert message_dict(status) == MessageToDict(status)
    part = Part(raw=b"\x00")  # bytes: left to MessageToDict
    assert message_dict(part) is None
