"""The hot lane (``server/fast/hot_lane.py``) answers what the full middleware chain answers.

The lane takes a plain 1.0 ``SendMessage`` in front of the Starlette app and hands every
other request down the chain with its body replayed. Each case posts the same bytes to an
exposure with the lane (the default) and to one on the SDK's own path (``fast_send=False``,
no lane) and compares status, the headers that describe the body, and the body itself as
bytes (generated ids replaced): the requests at the lane's edges, which it must leave to
the layers it skips, and the ones it takes, whose bytes it renders itself.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a_support import STEP
from fast_path_support import V1, body, exposure, normalised

from library_ioa.plugins.a2a.server.publisher import QuickAnswer

pytestmark = pytest.mark.integration

JSON = "application/json"


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


async def both_raw(
    http: httpx.AsyncClient,
    fast: str,
    sdk: str,
    content: bytes | None = None,
    *,
    headers: list[tuple[str, str]] | None = None,
    chunks: list[bytes] | None = None,
) -> tuple[int, dict[str, str], str]:
    """Post to both; assert the same status, body headers and body text (ids replaced)."""
    answers = []
    for base in (fast, sdk):

        async def stream() -> AsyncIterator[bytes]:
            for chunk in chunks or ():
                yield chunk

        sent: bytes | AsyncIterator[bytes] | None = stream() if chunks is not None else content
        reply = await http.post(base + "/", content=sent, headers=headers or list(V1.items()))
        described = {
            name: reply.headers.get(name, "") for name in ("content-type", "content-length")
        }
        if chunks is None and content is not None:  # the ids differ in length only by accident
            described.pop("content-length")
        answers.append((reply.status_code, described, normalised(reply.text)))
    assert answers[0] == answers[1]
    return answers[0]


@pytest.mark.parametrize(
    "text", ["quick hello", 'quick "quoted" \\ back\tslash', "quick héllo ✓ 😀", "quick \x01\x1f"]
)
async def test_the_lane_renders_the_bytes_the_chain_renders(
    pair: tuple[httpx.AsyncClient, str, str], text: str
) -> None:
    status, headers, answer = await both_raw(*pair, body(text))
    assert status == 200 and headers["content-type"] == JSON, headers
    assert json.loads(answer)["result"]["message"]["parts"] == [{"text": text[len("quick ") :]}]


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "application/a2a+json", "text/plain", ""]
)
async def test_every_content_type_is_answered_alike(
    pair: tuple[httpx.AsyncClient, str, str], content_type: str
) -> None:
    headers = [("A2A-Version", "1.0")] + ([("Content-Type", content_type)] if content_type else [])
    status, _, answer = await both_raw(*pair, body("quick typed"), headers=headers)
    assert status == 200 and ("error" in answer) == (content_type in ("text/plain", "")), answer


@pytest.mark.parametrize(
    "headers",
    [
        [("A2A-Version", "1.0"), ("A2A-Version", "1.0"), ("Content-Type", JSON)],
        [("A2A-Version", "1.0"), ("Content-Type", JSON), ("Content-Type", "text/plain")],
        [("A2A-Version", "1.0.0"), ("Content-Type", JSON)],
        [("Content-Type", JSON)],
    ],
)
async def test_repeated_and_missing_headers_take_the_long_way(
    pair: tuple[httpx.AsyncClient, str, str], headers: list[tuple[str, str]]
) -> None:
    status, _, _ = await both_raw(*pair, body("quick repeated"), headers=headers)
    assert status == 200


async def test_a_chunked_body_is_read_by_the_chain(
    pair: tuple[httpx.AsyncClient, str, str],
) -> None:
    content = body("quick chunked")
    status, _, answer = await both_raw(*pair, chunks=[content[:20], content[20:]])
    assert status == 200 and '"result"' in answer, answer


async def test_an_oversize_body_is_refused_alike(pair: tuple[httpx.AsyncClient, str, str]) -> None:
    big = body("quick " + "x" * (1024 * 1024))
    status, _, answer = await both_raw(*pair, big)
    assert status == 413 and "Payload too large" in answer, answer


async def test_too_deep_a_body_is_refused_alike(pair: tuple[httpx.AsyncClient, str, str]) -> None:
    message: dict[str, Any] = {"role": "ROLE_USER", "messageId": "m"}
    message["parts"] = [{"text": "quick deep"}]
    message["metadata"] = nested(70)
    status, _, answer = await both_raw(*pair, body(message=message))
    assert status == 200 and "deeper than" in answer, answer


async def test_params_the_codec_leaves_to_protobuf_are_answered_alike(
    pair: tuple[httpx.AsyncClient, str, str],
) -> None:
    message: dict[str, Any] = {"role": "ROLE_USER", "messageId": "m"}
    message["parts"] = [{"text": "quick meta"}]
    message["metadata"] = {"k": [1, 2.5, 1e16, None, True]}
    status, _, answer = await both_raw(*pair, body(message=message))
    assert status == 200 and '"result"' in answer, answer


async def test_a_quick_plain_send_is_answered_without_building_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The lane hands plain params to FastSendHandler.on_plain_send, whose quick answer is
    # written from its ids and text: building the protobuf Message would fail here.
    def refuse(_: QuickAnswer) -> None:
        raise AssertionError("the quick answer built a Message")

    monkeypatch.setattr(QuickAnswer, "message", refuse)
    async with exposure(fast=True) as url, httpx.AsyncClient(timeout=STEP) as http:
        reply = await http.post(url + "/", content=body("quick plain"), headers=V1)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert normalised(answer) == {
        "result": {
            "message": {
                "messageId": "<uuid>",
                "contextId": "<uuid>",
                "role": "ROLE_AGENT",
                "parts": [{"text": "plain"}],
            }
        },
        "id": 7,
        "jsonrpc": "2.0",
    }
