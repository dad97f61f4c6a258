"""The exposure end to end: the official a2a-sdk client over JSON-RPC, HTTP+JSON and gRPC."""

from __future__ import annotations

import base64

import pytest
from a2a.helpers import get_message_text
from a2a.types import GetTaskRequest, StreamResponse, Task, TaskState
from a2a_support import (
    TRANSPORTS,
    Served,
    sdk_client,
    send,
    serve_agent,
    user_message,
)

from library_ioa.plugins.a2a.parts import text_of

pytestmark = pytest.mark.integration


def final_task(responses: list[StreamResponse]) -> Task:
    assert len(responses) == 1 and responses[0].HasField("task"), responses
    return responses[0].task


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_blocking_send_of_a_quick_streamed_reply_is_one_message(
    served: Served, transport: str
) -> None:
    async with sdk_client(served, transport) as client:
        [response] = await send(client, user_message("hello there agent"))
    assert response.HasField("message"), response
    assert get_message_text(response.message) == "hello there agent"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_blocking_send_past_the_grace_completes_a_task_with_the_chunks(
    transport: str,
) -> None:
    async with serve_agent(message_grace=0.0) as agent, sdk_client(agent, transport) as client:
        task = final_task(await send(client, user_message("hello there agent")))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(task.status.message) == "hello there agent"
    [artifact] = task.artifacts
    assert artifact.name == "response"
    assert text_of(artifact.parts) == "hello there agent"
    assert task.history[0].parts[0].text == "hello there agent"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_turn_that_ends_at_once_is_answered_with_a_message(
    served: Served, transport: str
) -> None:
    async with sdk_client(served, transport) as client:
        [response] = await send(client, user_message("quick right away", context_id="ctx-quick"))
    assert response.HasField("message"), response
    assert get_message_text(response.message) == "right away"
    assert response.message.context_id == "ctx-quick"
    assert served.runner.seen[-1].session_id == "ctx-quick"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_streaming_sends_artifact_chunks_then_completes(
    served: Served, transport: str
) -> None:
    async with sdk_client(served, transport, streaming=True) as client:
        responses = await send(client, user_message("one two three four"))
    kinds = [r.WhichOneof("payload") for r in responses]
    assert kinds[0] == "task"
    chunks = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    assert [text_of(c.artifact.parts) for c in chunks] == ["one", " two", " three", " four", ""]
    assert [c.append for c in chunks] == [False, True, True, True, True]
    assert [c.last_chunk for c in chunks] == [False, False, False, False, True]
    assert len({c.artifact.artifact_id for c in chunks}) == 1
    states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_text_data_file_and_url_artifacts(served: Served, transport: str) -> None:
    async with sdk_client(served, transport) as client:
        task = final_task(await send(client, user_message("artifacts")))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    by_name = {a.name: a.parts[0] for a in task.artifacts}
    assert by_name["notes.txt"].text == "some notes"
    assert dict(by_name["result.json"].data.struct_value) == {"answer": 42.0, "ok": True}
    assert by_name["blob.bin"].raw == b"\x00\x01binary"
    assert by_name["blob.bin"].media_type == "application/octet-stream"
    assert by_name["link"].url == "https://example.invalid/report.pdf"
    assert by_name["link"].media_type == "application/pdf"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_input_required_then_the_next_message_resumes(served: Served, transport: str) -> None:
    async with sdk_client(served, transport) as client:
        asked = final_task(await send(client, user_message("ask which colour?")))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert get_message_text(asked.status.message) == "question: which colour?"
        answer = user_message("blue", task_id=asked.id, context_id=asked.context_id)
        done = final_task(await send(client, answer))
    assert done.id == asked.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(done.status.message) == "resumed with: blue"
    assert [m.parts[0].text for m in done.history if m.role == 1] == ["ask which colour?", "blue"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_failed_turn_reports_its_message(served: Served, transport: str) -> None:
    async with sdk_client(served, transport) as client:
        task = final_task(await send(client, user_message("fail the model is down")))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(task.status.message) == "the model is down"


async def test_data_parts_and_metadata_reach_the_turn(served: Served) -> None:
    message = user_message(
        "quick ok",
        context_id="ctx-meta",
        metadata={
            "mas.caller_call_id": "call-1",
            "mas.correlation_id": "corr-1",
            "mas.delegation_depth": 2,
            "unrelated": "dropped",
        },
    )
    message.parts.add().data.struct_value.update({"k": "v"})
    async with sdk_client(served) as client:
        await send(client, message)
    turn = served.runner.seen[-1]
    assert turn.session_id == "ctx-meta"
    assert turn.turn_id == message.message_id
    assert turn.text == "quick ok"
    assert turn.data == {"k": "v"}
    assert turn.metadata == {
        "mas.caller_call_id": "call-1",
        "mas.correlation_id": "corr-1",
        "mas.delegation_depth": 2,
    }


async def test_missing_context_id_gets_a_generated_session(served: Served) -> None:
    async with sdk_client(served) as client:
        [first] = await send(client, user_message("quick a"))
        [second] = await send(client, user_message("quick b"))
    sessions = [t.session_id for t in served.runner.seen[-2:]]
    assert all(sessions) and sessions[0] != sessions[1]
    assert [first.message.context_id, second.message.context_id] == sessions


async def test_get_task_after_completion(served: Served) -> None:
    async with sdk_client(served, "rest") as client:
        task = final_task(await send(client, user_message("artifacts")))
        again = await client.get_task(GetTaskRequest(id=task.id))
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(again.status.message) == "4 artifacts"
    assert len(again.artifacts) == 4


def test_file_bytes_survive_base64_on_the_wire() -> None:
    # guards the expectation above: raw parts travel base64-encoded in JSON
    assert base64.b64decode(base64.b64encode(b"\x00\x01binary")) == b"\x00\x01binary"
