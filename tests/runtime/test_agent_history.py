"""The agent: per-session history (bounded, isolated), model failures, instructions."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from runtime_support import RecordingModel, collect, ended

from mas.infra.models import AgentManifest, AgentSpec
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.models.base import ModelOutput, ModelPlugin, ModelRequest, TextChunk
from mas.runtime.turns import TurnInput

pytestmark = pytest.mark.timeout(30)


def make(model: ModelPlugin, **kwargs: int) -> Agent:
    manifest = AgentManifest(spec=AgentSpec(instructions="Be brief."))
    return Agent("a", manifest, model, DelegationContract("a", {}), **kwargs)


async def say(agent: Agent, session: str, text: str) -> str:
    return ended(await collect(agent.run(TurnInput(session, text, text)))).text


async def test_history_is_per_session_and_reaches_the_model() -> None:
    model = RecordingModel(agent_id="a")
    agent = make(model)
    await say(agent, "s1", "one")
    await say(agent, "s2", "other")
    await say(agent, "s1", "two")
    last = model.requests[-1]
    assert last.instructions == "Be brief."
    assert [(m.role, m.content) for m in last.messages] == [
        ("user", "one"),
        ("assistant", "recorded: one"),
        ("user", "two"),
    ]
    assert [m.content for m in await agent.history("s2")] == ["other", "recorded: other"]
    assert await agent.history("nobody") == ()


async def test_history_and_sessions_are_bounded() -> None:
    agent = make(RecordingModel(agent_id="a"), max_history=3, max_sessions=2)
    for text in ("m1", "m2", "m3"):
        await say(agent, "s1", text)
    assert [m.content for m in await agent.history("s1")] == ["recorded: m2", "m3", "recorded: m3"]
    await say(agent, "s2", "x")
    await say(agent, "s3", "y")  # s1 is the least recently used: dropped
    assert await agent.history("s1") == ()
    assert len(await agent.history("s2")) == 2
    assert len(await agent.history("s3")) == 2


async def test_a_model_exception_ends_the_turn_failed_with_the_text_so_far() -> None:
    class Flaky(ModelPlugin):
        async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
            yield TextChunk("partial ")
            raise ConnectionError("vendor went away")

    events = await collect(make(Flaky()).run(TurnInput("s", "t", "hi")))
    final = ended(events)
    assert final.status == "failed" and final.text == "partial "
    assert final.message == "the model of agent 'a' failed: vendor went away"
