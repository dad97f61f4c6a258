"""The fast gRPC servicer agrees with the SDK's: the requests it reads plainly are exactly the
plain ones, its responses are the SDK's bytes, its errors the SDK's abort."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import GrpcHandler
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Struct
from hypothesis import given, settings
from hypothesis import strategies as st

from library_ioa.plugins.a2a.server.fast.codec import PlainSend, read_plain_send
from library_ioa.plugins.a2a.server.fast.grpc_handler import (
    FastGrpcHandler,
    plain_send_of,
    send_response,
)
from library_ioa.plugins.a2a.server.fast.handler import fast_eligible
from library_ioa.plugins.a2a.server.publisher import QuickAnswer
from library_ioa.plugins.a2a.server.transport.grpc_decode import GrpcDecodeCheck, Undecodable
from tests.unit.test_a2a_codec import assert_turn_is_plain, sdk_valid

texts = st.text(max_size=8)
parts = st.one_of(
    st.builds(lambda t: Part(text=t), texts),
    st.builds(lambda t, m: Part(text=t, media_type=m), texts, texts),
    st.builds(lambda t: Part(url=t), texts),
    st.builds(lambda t: Part(raw=t.encode()), texts),
    st.builds(lambda t: Part(text=t, filename="f"), texts),
    st.builds(lambda t: Part(text=t, metadata=Struct(fields={})), texts),
    st.just(Part()),
)
messages = st.builds(
    lambda role, ids, parts, refs, meta, ext: Message(
        role=role,
        message_id=ids[0],
        context_id=ids[1],
        task_id=ids[2],
        parts=parts,
        reference_task_ids=refs,
        extensions=ext,
        **({"metadata": Struct(fields={})} if meta else {}),
    ),
    st.sampled_from([0, 1, 2, 7]),
    st.tuples(texts, texts, st.sampled_from(["", "", "t-1"])),
    st.lists(parts, max_size=3),
    st.lists(texts, max_size=1),
    st.booleans(),
    st.lists(texts, max_size=1),
)
requests = st.builds(
    lambda message, tenant, config: SendMessageRequest(
        message=message,
        tenant=tenant,
        **({"configuration": config} if config is not None else {}),
    ),
    messages,
    st.sampled_from(["", "", "t"]),
    st.one_of(
        st.none(),
        st.none(),
        st.builds(SendMessageConfiguration),
        st.builds(lambda n: SendMessageConfiguration(history_length=n), st.integers(-1, 2)),
    ),
) | st.just(SendMessageRequest())


@settings(max_examples=500, deadline=None)
@given(requests)
def test_a_plain_read_is_the_request_and_passes_every_check(request: SendMessageRequest) -> None:
    plain = plain_send_of(request)
    if plain is None:
        return
    assert plain.request() == request
    assert plain.request().SerializeToString(deterministic=True) == request.SerializeToString(
        deterministic=True
    )
    # What the fast handler's plain send skips: the required fields, the fast path's
    # conditions, the configuration (none) and media types (none).
    assert sdk_valid(request) and fast_eligible(request)
    assert not request.HasField("configuration")
    assert all(not part.media_type for part in request.message.parts)
    assert_turn_is_plain(request, plain)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["ROLE_USER", "ROLE_AGENT"]),
    st.text(min_size=1, max_size=6),
    st.one_of(st.none(), st.text(max_size=6)),
    st.lists(st.text(max_size=6), min_size=1, max_size=3),
)
def test_plain_json_params_read_alike_from_their_protobuf(
    role: str, message_id: str, context_id: str | None, text_parts: list[str]
) -> None:
    message: dict[str, Any] = {"role": role, "messageId": message_id}
    if context_id is not None:
        message["contextId"] = context_id
    message["parts"] = [{"text": text} for text in text_parts]
    params = {"message": message}
    expected = read_plain_send(params)
    assert expected is not None
    assert plain_send_of(ParseDict(params, SendMessageRequest())) == expected


def _plain(**fields: Any) -> SendMessageRequest:
    message = {"role": Role.ROLE_USER, "message_id": "m", "parts": [Part(text="hi")], **fields}
    return SendMessageRequest(message=Message(**message))


@pytest.mark.parametrize(
    "request_",
    [
        SendMessageRequest(),
        _plain(message_id=""),
        _plain(role=Role.ROLE_UNSPECIFIED),
        _plain(role=9),
        _plain(parts=[]),
        _plain(parts=[Part()]),
        _plain(parts=[Part(text="a"), Part(url="u")]),
        _plain(parts=[Part(text="a", media_type="text/plain")]),
        _plain(task_id="t"),
        _plain(metadata=Struct(fields={})),
        _plain(reference_task_ids=["t"]),
        _plain(extensions=["e"]),
        SendMessageRequest(message=_plain().message, tenant="t"),
        SendMessageRequest(message=_plain().message, configuration=SendMessageConfiguration()),
        SendMessageRequest(message=_plain().message, metadata=Struct(fields={})),
    ],
)
def test_anything_but_the_plain_shape_is_left_to_the_sdk(request_: SendMessageRequest) -> None:
    assert plain_send_of(request_) is None


def test_the_plain_shape_is_read() -> None:
    request = _plain(context_id="c", parts=[Part(text="a"), Part(text="")])
    assert plain_send_of(request) == PlainSend("ROLE_USER", "m", "c", ("a", ""))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.text(max_size=3), st.text(max_size=40))
def test_a_quick_answer_response_is_the_sdks_bytes(
    text: str, message_id: str, context_id: str
) -> None:
    answer = QuickAnswer(message_id, context_id, text)
    expected = SendMessageResponse(message=answer.message())  # what GrpcHandler builds
    built = send_response(answer)
    assert built == expected
    assert built.SerializeToString() == expected.SerializeToString()


def test_a_task_or_message_answer_is_wrapped_as_the_sdk_wraps_it() -> None:
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    message = Message(role=Role.ROLE_AGENT, message_id="m", task_id="t", parts=[Part(text="x")])
    assert send_response(task) == SendMessageResponse(task=task)
    assert send_response(message) == SendMessageResponse(message=message)


# -- the servicer, with a recording request handler and gRPC context -------------------


class _Aborted(Exception):
    pass


class _Context:
    """The parts of ``grpc.aio.ServicerContext`` the servicers use."""

    def __init__(self, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self.metadata = metadata
        self.trailing: tuple[Any, ...] = ()
        self.aborted: tuple[Any, str] | None = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def trailing_metadata(self) -> tuple[Any, ...]:
        return self.trailing

    def set_trailing_metadata(self, metadata: tuple[Any, ...]) -> None:
        self.trailing = metadata

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise _Aborted


class _Handler:
    """A request handler that records its calls and answers (or raises) ``outcome``."""

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.calls: list[tuple[str, Any, ServerCallContext]] = []

    async def _answer(self, name: str, params: Any, context: ServerCallContext) -> Any:
        self.calls.append((name, params, context))
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    async def on_message_send(self, params: Any, context: ServerCallContext) -> Any:
        return await self._answer("on_message_send", params, context)

    async def on_plain_send(self, plain: PlainSend, context: ServerCallContext) -> Any:
        return await self._answer("on_plain_send", plain, context)


class _SdkOnly:
    """A request handler without ``on_plain_send``."""

    def __init__(self, outcome: Any) -> None:
        self.inner = _Handler(outcome)

    async def on_message_send(self, params: Any, context: ServerCallContext) -> Any:
        return await self.inner.on_message_send(params, context)


EXTENSIONS = (("a2a-version", "1.0"), ("a2a-extensions", "https://e.invalid/a, https://e/b"))


async def test_a_plain_request_goes_to_the_plain_send_with_the_sdks_call_context() -> None:
    answer = QuickAnswer("id", "ctx", "hello")
    fast, sdk = _Handler(answer), _Handler(answer.message())
    fast_context, sdk_context = _Context(EXTENSIONS), _Context(EXTENSIONS)
    fast_reply = await FastGrpcHandler(fast).SendMessage(_plain(), fast_context)  # type: ignore[arg-type]
    sdk_reply = await GrpcHandler(sdk).SendMessage(_plain(), sdk_context)  # type: ignore[arg-type]
    assert fast_reply.SerializeToString() == sdk_reply.SerializeToString()
    (name, params, built), (_, _, expected) = fast.calls[0], sdk.calls[0]
    assert (name, params) == ("on_plain_send", plain_send_of(_plain()))
    assert built.state == {"grpc_context": fast_context}
    assert expected.state == {"grpc_context": sdk_context}
    assert built.requested_extensions == {"https://e.invalid/a", "https://e/b"}
    assert built.requested_extensions == expected.requested_extensions
    assert (built.tenant, type(built.user)) == (expected.tenant, type(expected.user))


@pytest.mark.parametrize(
    "error",
    [
        UnsupportedOperationError(message="not now"),
        TaskNotFoundError(),
        InvalidParamsError(message="bad", data={"errors": [{"field": "x", "message": "no"}]}),
    ],
)
async def test_an_error_of_the_plain_send_is_aborted_as_the_sdk_aborts_it(error: Exception) -> None:
    contexts = _Context(), _Context()
    for servicer, context in zip(
        (FastGrpcHandler(_Handler(error)), GrpcHandler(_Handler(error))), contexts, strict=True
    ):
        with pytest.raises(_Aborted):
            await servicer.SendMessage(_plain(), context)  # type: ignore[arg-type]
    assert contexts[0].aborted is not None
    assert contexts[0].aborted == contexts[1].aborted
    assert contexts[0].trailing == contexts[1].trailing


async def test_other_requests_and_handlers_take_the_sdks_send() -> None:
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
    handler = _Handler(task)
    reply = await FastGrpcHandler(handler).SendMessage(_plain(task_id="t"), _Context())  # type: ignore[arg-type]
    assert reply == SendMessageResponse(task=task)
    assert [call[0] for call in handler.calls] == ["on_message_send"]
    without = _SdkOnly(task)
    reply = await FastGrpcHandler(without).SendMessage(_plain(), _Context())  # type: ignore[arg-type]
    assert reply == SendMessageResponse(task=task)
    assert [call[0] for call in without.inner.calls] == ["on_message_send"]


# -- GrpcDecodeCheck keeps each method's wrapped handler ------------------------------


class _Details:
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def _method_handler(answer: str) -> Any:
    async def unary(request: Any, context: Any) -> str:
        return f"{answer}:{request}"

    return grpc.unary_unary_rpc_method_handler(
        unary, request_deserializer=SendMessageRequest.FromString, response_serializer=str.encode
    )


async def test_the_decode_check_wraps_a_handler_once_and_again_when_it_changes() -> None:
    check = GrpcDecodeCheck()
    first, second = _method_handler("one"), _method_handler("two")
    current = first

    async def continuation(_: Any) -> Any:
        return current

    method = "/lf.a2a.v1.A2AService/SendMessage"
    wrapped = await check.intercept_service(continuation, _Details(method))
    assert wrapped is not first
    assert await check.intercept_service(continuation, _Details(method)) is wrapped
    assert await wrapped.unary_unary("r", _Context()) == "one:r"
    undecodable = wrapped.request_deserializer(b"\xff")
    assert isinstance(undecodable, Undecodable)
    assert undecodable.type_name == "lf.a2a.v1.SendMessageRequest"
    context = _Context()
    with pytest.raises(_Aborted):
        await wrapped.unary_unary(undecodable, context)
    assert context.aborted is not None and context.aborted[0] == grpc.StatusCode.INVALID_ARGUMENT
    current = second
    rewrapped = await check.intercept_service(continuation, _Details(method))
    assert rewrapped is not wrapped
    assert await rewrapped.unary_unary("r", _Context()) == "two:r"
    other = await check.intercept_service(continuation, _Details("/lf.a2a.v1.A2AService/GetTask"))
    assert other is not rewrapped
