"""The one reading of a peer's answer (library_ioa.plugins.a2a.answers): where the text is
found, in which order, and what is passed on beside it."""

from __future__ import annotations

import pytest
from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus

from library_ioa.plugins.a2a.answers import reply_of_message, reply_of_task
from library_ioa.plugins.a2a.parts import data_part
from library_ioa.plugins.a2a.peer_bodies import with_utc_offsets
from mas.runtime.errors import PeerProtocolError

WHERE = "peer http://peer:1 answered SendMessage"


def text_artifact(name: str, *texts: str) -> Artifact:
    return Artifact(artifact_id=f"id-{name}", name=name, parts=[Part(text=t) for t in texts])


def message(role: Role, text: str) -> Message:
    return Message(message_id="m", role=role, parts=[Part(text=text)])


def task(
    state: TaskState = TaskState.TASK_STATE_COMPLETED,
    status_text: str | None = None,
    artifacts: list[Artifact] | None = None,
    history: list[Message] | None = None,
) -> Task:
    status = TaskStatus(state=state)
    if status_text is not None:
        status.message.CopyFrom(message(Role.ROLE_AGENT, status_text))
    return Task(
        id="t-1", context_id="c", status=status, artifacts=artifacts or [], history=history or []
    )


def test_a_message_is_its_text_and_its_data_parts_are_artifacts() -> None:
    answer = Message(
        message_id="m-9",
        role=Role.ROLE_AGENT,
        parts=[Part(text="hello "), Part(text="there"), data_part({"n": 1})],
    )
    reply = reply_of_message(answer, WHERE)
    assert (reply.status, reply.text) == ("completed", "hello there")
    assert [(a.kind, a.data) for a in reply.artifacts] == [("data", {"n": 1})]


def test_the_status_message_comes_first_and_our_response_artifact_is_not_repeated() -> None:
    reply = reply_of_task(
        task(
            status_text="the answer",
            artifacts=[text_artifact("response", "the ", "answer"), text_artifact("notes", "n")],
        ),
        WHERE,
    )
    assert reply.text == "the answer"
    assert [(a.name, a.text) for a in reply.artifacts] == [("notes", "n")]
    assert reply.task_id == "t-1"


@pytest.mark.parametrize("name", ["result", "agent_response", "response", ""])
def test_without_a_status_message_the_artifacts_text_is_the_reply_whatever_their_name(
    name: str,
) -> None:
    reply = reply_of_task(task(artifacts=[text_artifact(name, "peer ", "words")]), WHERE)
    assert reply.text == "peer words"
    assert reply.artifacts == ()


def test_several_artifacts_join_in_order_and_their_data_is_passed_on() -> None:
    mixed = Artifact(
        artifact_id="x", name="report", parts=[Part(text="second"), data_part({"k": "v"})]
    )
    reply = reply_of_task(task(artifacts=[text_artifact("result", "first"), mixed]), WHERE)
    assert reply.text == "first\n\nsecond"
    assert [(a.kind, a.name, a.data) for a in reply.artifacts] == [("data", "report", {"k": "v"})]


def test_then_the_last_agent_message_of_the_history() -> None:
    history = [
        message(Role.ROLE_USER, "question"),
        message(Role.ROLE_AGENT, "older answer"),
        message(Role.ROLE_AGENT, "latest answer"),
        message(Role.ROLE_USER, "thanks"),
    ]
    assert reply_of_task(task(history=history), WHERE).text == "latest answer"


def test_an_input_required_task_reads_the_question() -> None:
    reply = reply_of_task(task(TaskState.TASK_STATE_INPUT_REQUIRED, "which day?"), WHERE)
    assert (reply.status, reply.text) == ("input_required", "which day?")


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (Task(status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)), "task.id is missing"),
        (Task(id="t"), "task t has no status.state"),
        (Task(id="t", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)), "still"),
    ],
)
def test_a_task_without_what_the_protocol_requires_is_refused(answer: Task, words: str) -> None:
    with pytest.raises(PeerProtocolError, match=f"^{WHERE}: .*{words}"):
        reply_of_task(answer, WHERE)


def test_a_message_without_parts_is_refused() -> None:
    with pytest.raises(PeerProtocolError, match=r"message\.parts is empty"):
        reply_of_message(Message(message_id="m", role=Role.ROLE_AGENT), WHERE)


@pytest.mark.parametrize(
    ("stamp", "read"),
    [
        (b"2026-03-01T12:00:00", b"2026-03-01T12:00:00Z"),
        (b"2026-03-01 12:00:00.5", b"2026-03-01T12:00:00.5Z"),
        (b"2026-03-01T12:00:00.1234567891234", b"2026-03-01T12:00:00.123456789Z"),
    ],
)
def test_a_timestamp_without_offset_is_read_as_utc(stamp: bytes, read: bytes) -> None:
    body = b'{"status": {"timestamp" : "' + stamp + b'"}}'
    assert with_utc_offsets(body) == (b'{"status": {"timestamp" : "' + read + b'"}}', 1)


@pytest.mark.parametrize(
    "stamp", [b"2026-03-01T12:00:00Z", b"2026-03-01T12:00:00+02:00", b"yesterday"]
)
def test_other_timestamps_are_left_as_they_are(stamp: bytes) -> None:
    body = b'{"timestamp": "' + stamp + b'"}'
    assert with_utc_offsets(body) == (body, 0)
