"""The hot lane's shortcuts give what the SDK and Starlette give: the rendered bytes, the
SSE frame and the call context, on generated inputs."""

from __future__ import annotations

from typing import Any

from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.utils import json_utils
from hypothesis import given, settings
from hypothesis import strategies as st
from sse_starlette.event import ensure_bytes
from starlette.authentication import SimpleUser
from starlette.requests import Request

from library_ioa.plugins.a2a.server.fast.hot_lane import _plain_head
from library_ioa.plugins.a2a.server.fast.jsonrpc import (
    default_call_context,
    frame,
    render,
    render_plain,
)

texts = st.text(max_size=20)
plain = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(texts, plain, max_size=4))
def test_render_plain_is_the_json_response_body(value: dict[str, Any]) -> None:
    assert render_plain(value) == render(value)


def sdk_frame(item: dict[str, Any]) -> bytes:
    """What sse-starlette writes for the dispatcher's item (json_utils.dumps, then framing)."""
    event = {"data": json_utils.dumps(item)}
    if "error" in item:
        event["event"] = "error"
    return ensure_bytes(event, "\r\n")


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(texts, plain, max_size=4), st.booleans())
def test_a_frame_is_what_sse_starlette_writes(value: dict[str, Any], error: bool) -> None:
    item = {"result": value, "id": 1, "jsonrpc": "2.0"}
    if error:
        item = {"error": value, "id": 1, "jsonrpc": "2.0"}
    assert frame(item) == sdk_frame(item)


header_names = st.sampled_from(
    ["a2a-extensions", "a2a-version", "x-one", "authorization", "content-type"]
)
header_values = st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(header_names, header_values), max_size=6),
    st.sampled_from(["none", "anonymous", "user"]),
)
def test_the_call_context_is_the_default_builders(headers: list[tuple[str, str]], who: str) -> None:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
    }
    if who == "user":
        scope["user"], scope["auth"] = SimpleUser("ada"), ["scope-a"]
    elif who == "anonymous":
        scope["auth"] = None
    fast = default_call_context(Request(scope))
    sdk = DefaultServerCallContextBuilder().build(Request(scope))
    assert fast.state == sdk.state
    assert fast.requested_extensions == sdk.requested_extensions
    assert type(fast.user) is type(sdk.user)
    assert fast.user.is_authenticated == sdk.user.is_authenticated
    assert fast.user.user_name == sdk.user.user_name


def test_only_a_plain_head_takes_the_lane() -> None:
    def head(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
        return [(k.encode(), v.encode()) for k, v in pairs]

    good = (("content-type", "application/json"), ("a2a-version", "1.0"))
    assert _plain_head(head(*good, ("content-length", "12")), 100) == 12
    assert _plain_head(head(*good, ("content-length", "101")), 100) is None
    assert _plain_head(head(*good), 100) is None  # chunked: RequestLimits reads it
    assert _plain_head(head(*good, ("content-length", "1"), ("content-length", "1")), 9) is None
    assert _plain_head(head(*good, ("a2a-version", "1.0"), ("content-length", "1")), 9) is None
    assert _plain_head(head(good[0], ("a2a-version", "0.3"), ("content-length", "1")), 9) is None
    assert (
        _plain_head(head(good[1], ("content-type", "text/plain"), ("content-length", "1")), 9)
        is None
    )
    assert _plain_head(head(good[1], ("content-length", "1")), 9) is None
