"""Conversations that survive: with a ``sql`` task store the session history and a pending
human-input question live in the database, so another replica, or the same one restarted,
continues the conversation (PostgreSQL and SQLite, real agents, real a2a-sdk clients)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from a2a.client import Client
from a2a.helpers import get_message_text
from a2a.types import StreamResponse, TaskState
from durable_support import STEP, client_for, sql_endpoint
from tests.a2a.a2a_support import free_port, send, user_message

from library_ioa.plugins.a2a.exposure import A2AExposure
from library_ioa.plugins.a2a.server.stores.endpoint import build_task_stores
from mas.ctl.session.mailbox import SessionTurnMailbox
from mas.infra.models import AgentManifest, TaskStoreOptions
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.models.base import AskHuman, ModelOutput, ModelPlugin, ModelRequest, TextChunk

pytestmark = pytest.mark.integration


class RecallModel(ModelPlugin):
    """Says back every user message of the conversation so far; ``ask Q`` asks Q; an answer
    is said back with its question. Only what the agent gives it: no state of its own."""

    async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        said = [m.content for m in request.messages if m.role == "user"]
        if request.answers_question:
            yield TextChunk(f"{request.answers_question} -> {said[-1]}; heard: {' | '.join(said)}")
        elif said[-1].startswith("ask "):
            yield AskHuman(said[-1].removeprefix("ask "))
        else:
            yield TextChunk(f"heard: {' | '.join(said)}")


@dataclass
class Replica:
    exposure: A2AExposure
    agent: Agent
    client: Client


@contextlib.asynccontextmanager
async def replica(url: str, port: int | None = None) -> AsyncIterator[Replica]:
    """One replica of agent ``recall`` on the task store at ``url``, and a client of it."""
    agent = Agent("recall", AgentManifest(), RecallModel(), DelegationContract("recall", {}))
    mailbox = SessionTurnMailbox(agent)
    port = port or free_port()
    stores = build_task_stores(
        "recall", TaskStoreOptions(type="sql", url=url), push=False, env={}, event_poll=0.05
    )
    exposure = A2AExposure(
        agent_id="recall",
        manifest=AgentManifest(),
        endpoint=sql_endpoint(port, url),
        mailbox=mailbox,
        drain_timeout=2.0,
        task_stores=stores,
    )
    await exposure.start()
    try:
        async with client_for(exposure.url) as client:
            yield Replica(exposure, agent, client)
    finally:
        await exposure.aclose()
        await mailbox.aclose()


@dataclass
class Answer:
    state: TaskState
    text: str
    task_id: str = ""


def answer_of(responses: list[StreamResponse]) -> Answer:
    """What a person reads of a blocking send: a quick Message, or the task's last status."""
    (response,) = responses
    if response.HasField("message"):
        return Answer(TaskState.TASK_STATE_COMPLETED, get_message_text(response.message))
    task = response.task
    text = get_message_text(task.status.message)
    if not text:
        text = "".join(get_message_text(a) for a in task.artifacts)
    return Answer(task.status.state, text, task.id)


async def say(to: Replica, text: str, context: str, task_id: str | None = None) -> Answer:
    message = user_message(text, context_id=context, task_id=task_id)
    return answer_of(await send(to.client, message))


async def test_a_follow_up_on_the_other_replica_and_after_a_restart_keeps_the_context(
    pg_url: str,
) -> None:
    port = free_port()
    async with replica(pg_url, port) as one, replica(pg_url) as two:
        assert (await say(one, "my name is Ada", "c1")).text == "heard: my name is Ada"
        follow_up = await say(two, "what is my name?", "c1")
        assert follow_up.text == "heard: my name is Ada | what is my name?"
        assert await two.agent.history("c1") == await one.agent.history("c1")
        assert (await say(one, "other chat", "c9")).text == "heard: other chat"
    # Both replicas stop; the first comes back on its port (a restarted pod).
    async with replica(pg_url, port) as again:
        third = await say(again, "still there?", "c1")
    assert third.text == "heard: my name is Ada | what is my name? | still there?"


async def test_a_question_asked_on_one_replica_is_answered_on_the_other(pg_url: str) -> None:
    async with replica(pg_url) as one, replica(pg_url) as two:
        assert (await say(one, "book a table", "c2")).state == TaskState.TASK_STATE_COMPLETED
        asked = await say(one, "ask Which day?", "c2")
        assert (asked.state, asked.text) == (TaskState.TASK_STATE_INPUT_REQUIRED, "Which day?")
        answered = await say(two, "friday", "c2", task_id=asked.task_id)
        assert answered.state == TaskState.TASK_STATE_COMPLETED
        assert (
            answered.text == "Which day? -> friday; heard: book a table | ask Which day? | friday"
        )
        # The question was taken by that answer: the next message is an ordinary turn.
        assert (await say(one, "thanks", "c2")).text.startswith("heard: book a table")


async def test_turns_of_one_session_on_two_replicas_at_once_stay_whole(pg_url: str) -> None:
    """Concurrent turns of one session on two replicas: every turn's messages stay together
    (user message, then its reply), in commit order, none lost."""
    async with replica(pg_url) as one, replica(pg_url) as two:
        texts = [f"n{i}" for i in range(8)]
        async with asyncio.timeout(STEP * 2):
            await asyncio.gather(
                *(say(one if i % 2 else two, text, "c3") for i, text in enumerate(texts))
            )
        history = await one.agent.history("c3")
    assert sorted(m.content for m in history if m.role == "user") == texts
    for user, reply in zip(history[::2], history[1::2], strict=True):
        assert (user.role, reply.role) == ("user", "assistant")
        assert reply.content.startswith("heard: ") and reply.content.endswith(user.content)


async def test_sqlite_keeps_the_conversation_across_a_restart(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}"
    async with replica(url) as first:
        asked = await say(first, "ask Which size?", "c4")
        assert asked.state == TaskState.TASK_STATE_INPUT_REQUIRED
    async with replica(url) as restarted:
        answered = await say(restarted, "large", "c4", task_id=asked.task_id)
    assert answered.text == "Which size? -> large; heard: ask Which size? | large"
