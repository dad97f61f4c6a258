"""A follow-up on an ``input-required`` task leaves the same task, however it is sent.

The conversation: a turn that says something, then asks (the task waits for input), and the
answer, a turn that says something and completes at once. It is sent blocking and streaming
over JSON-RPC, HTTP+JSON and gRPC with the official client, to an exposure on the fast path
and one on the SDK's path, and the completed task (``GetTask``) must be the same: each
turn's streamed text is its own ``response`` artifact (own ``artifactId``), chunk for chunk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.helpers import get_message_text
from a2a.types import GetTaskRequest, Role, StreamResponse, Task, TaskState
from a2a_support import TRANSPORTS, ScriptRunner, Served, sdk_client, send, user_message
from fast_path_support import EXPOSURES, MAILBOXES, exposure

from mas.runtime.turns import TextDelta, TurnEnded, TurnEvent, TurnInput

pytestmark = pytest.mark.integration

SAID = ["Let", " me", " check."]
ANSWERED = ["Booked", " for", " friday."]


class Booking(ScriptRunner):
    """Says ``SAID`` then asks a day; the answer says ``ANSWERED`` and completes at once."""

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:  # type: ignore[override]
        self.seen.append(turn)
        if turn.session_id in self.asked:
            self.asked.discard(turn.session_id)
            for chunk in ANSWERED:
                yield TextDelta(chunk)
            yield TurnEnded("completed", text="".join(ANSWERED))
            return
        self.asked.add(turn.session_id)
        for chunk in SAID:
            yield TextDelta(chunk)
        yield TurnEnded("input_required", text="Which day?")


def task_of(responses: list[StreamResponse]) -> tuple[str, str]:
    """The task id and context id the responses of one send name."""
    for response in responses:
        for payload in ("task", "status_update", "artifact_update"):
            if response.HasField(payload):
                event = getattr(response, payload)
                task_id = event.id if payload == "task" else event.task_id
                return task_id, event.context_id
    raise AssertionError(f"no task in {responses}")


def shape(task: Task) -> dict[str, Any]:
    """What a client sees of a task, without the generated ids."""
    ids = [artifact.artifact_id for artifact in task.artifacts]
    return {
        "state": TaskState.Name(task.status.state),
        "status": get_message_text(task.status.message),
        "artifacts": [
            (a.name, [p.text for p in a.parts], ids.index(a.artifact_id)) for a in task.artifacts
        ],
        "distinct_ids": len(set(ids)),
        "history": [(Role.Name(m.role), get_message_text(m)) for m in task.history],
    }


async def conversation(served: Served, transport: str, first: str, then: str) -> Task:
    """Ask (sent ``first``: blocking or streaming), answer on the task (sent ``then``), and
    read the task back."""
    async with (
        sdk_client(served, transport) as blocking,
        sdk_client(served, transport, streaming=True) as streaming,
    ):
        clients = {"blocking": blocking, "streaming": streaming}
        task_id, context_id = task_of(await send(clients[first], user_message("book a table")))
        asked = await blocking.get_task(GetTaskRequest(id=task_id))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        answer = user_message("friday", task_id=task_id, context_id=context_id)
        await send(clients[then], answer)
        return await blocking.get_task(GetTaskRequest(id=task_id))


EXPECTED = {
    "state": "TASK_STATE_COMPLETED",
    "status": "Booked for friday.",
    "artifacts": [
        ("response", [*SAID, ""], 0),
        ("response", [*ANSWERED, ""], 1),
    ],
    "distinct_ids": 2,
    "history": [
        ("ROLE_USER", "book a table"),
        ("ROLE_AGENT", "Which day?"),
        ("ROLE_USER", "friday"),
    ],
}


MODES = ("blocking", "streaming")


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "sdk"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_blocking_and_a_streaming_follow_up_leave_the_same_artifacts(
    transport: str, fast: bool
) -> None:
    runner = Booking()
    async with exposure(fast, runner=runner, grpc=transport == "grpc") as url:
        served = Served(EXPOSURES[url], runner, MAILBOXES[-1], url)
        seen = {
            (first, then): shape(await conversation(served, transport, first, then))
            for first in MODES
            for then in MODES
        }
    assert seen == {modes: EXPECTED for modes in seen}
