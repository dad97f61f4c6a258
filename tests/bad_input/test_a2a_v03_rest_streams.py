"""A 0.3 HTTP+JSON stream whose request is bad is answered with its HTTP error, as the 1.0
routes are: never ``200 text/event-stream`` cut mid-body, never a traceback in the log."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from bad_input_support import PROTOCOL_MARKS

pytestmark = PROTOCOL_MARKS

STREAM = "/a2a/rest/v1/message:stream"


def v03_message(**fields: Any) -> dict[str, Any]:
    message = {"role": "user", "messageId": "m-1", "content": [{"text": "hello"}]}
    message.update(fields)
    return {"message": message}


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (v03_message(content=[]), 400, "Validation failed"),
        ([1, 2], 400, "Failed to parse"),
        ({"message": 5}, 400, "Failed to parse"),
        (v03_message(taskId="no-such-task"), 404, "no-such-task"),
    ],
)
async def test_a_bad_streaming_send_is_its_http_error(
    http: httpx.AsyncClient, body: Any, status: int, words: str
) -> None:
    answer = await http.post(STREAM, json=body)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    assert words in answer.json()["error"]["message"]


async def test_subscribing_to_an_unknown_task_is_not_found(http: httpx.AsyncClient) -> None:
    answer = await http.post("/a2a/rest/v1/tasks/no-such-task:subscribe")
    assert answer.status_code == 404, answer.text
    assert answer.json()["error"]["status"] == "NOT_FOUND"


async def test_a_good_streaming_send_still_streams(http: httpx.AsyncClient) -> None:
    async with http.stream("POST", STREAM, json=v03_message()) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        body = (await answer.aread()).decode()
    assert "hello" in body and "TASK_STATE_COMPLETED" in body, body
