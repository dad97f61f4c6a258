"""A ``replace`` steer on a turn served over A2A: the ``response`` artifact drops the prefix.

A2A has no steer RPC; the control protocol steers the session's running turn. After a
``replace``, the task's status message is the new answer, and so must be the ``response``
artifact, on the stream (the chunks, applied as A2A says: ``append`` false replaces) and in
``GetTask``; otherwise an A2A client cannot tell replace from preempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from a2a.helpers import get_message_text
from a2a.types import GetTaskRequest, SendMessageRequest, StreamResponse, Task
from a2a_support import STEP, ScriptRunner, sdk_client, serve_agent, user_message, wait_for

from mas.runtime.boundary.control import STEER_METADATA_KEY
from mas.runtime.turns import TextDelta, TurnEnded, TurnEvent, TurnInput

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


class PrefixThenWait(ScriptRunner):
    """Streams a prefix and waits for a steer; the replacing turn streams a fresh answer."""

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:  # type: ignore[override]
        if turn.metadata.get(STEER_METADATA_KEY) == "replace":
            yield TextDelta("fresh ")
            yield TextDelta("answer")
            yield TurnEnded("completed", text="fresh answer")
            return
        yield TextDelta("stale ")
        yield TextDelta("prefix")
        self.started["prefix"].set()
        await asyncio.Event().wait()  # until the steer interrupts this generation


def response_text(task: Task) -> str:
    [artifact] = [a for a in task.artifacts if a.name == "response"]
    return "".join(part.text for part in artifact.parts)


def applied(responses: list[StreamResponse]) -> str:
    """The response artifact's text as a client builds it from the stream's updates."""
    chunks: list[str] = []
    for response in responses:
        if response.HasField("artifact_update"):
            update = response.artifact_update
            texts = [part.text for part in update.artifact.parts]
            chunks = [*chunks, *texts] if update.append else texts
    return "".join(chunks)


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "blocking"])
async def test_replace_drops_the_discarded_prefix_from_the_response_artifact(
    streaming: bool,
) -> None:
    runner = PrefixThenWait()
    async with (
        serve_agent(runner=runner, message_grace=0.0, grpc_on=False) as served,
        sdk_client(served, streaming=streaming) as client,
    ):
        request = SendMessageRequest(message=user_message("tell me", context_id="s-replace"))

        async def collect() -> list[StreamResponse]:
            async with asyncio.timeout(STEP):
                return [r async for r in client.send_message(request)]

        sending = asyncio.ensure_future(collect())
        await wait_for(runner.started["prefix"])
        receipt = await served.mailbox.steer("s-replace", "start over", "replace")
        assert receipt.applied == "replaced"
        responses = await sending
        task_id = next(
            r.task.id if r.HasField("task") else r.status_update.task_id
            for r in responses
            if r.HasField("task") or r.HasField("status_update")
        )
        stored = await client.get_task(GetTaskRequest(id=task_id))
    assert get_message_text(stored.status.message) == "fresh answer"
    assert response_text(stored) == "fresh answer"
    if streaming:
        assert applied(responses) == "fresh answer"
