"""Tokens counted (usage fields, metrics, the turn's metadata) and capped (model.budget)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_chat_server import FakeChatServer, Plan, text_chunks
from runtime_support import collect, ended, registry_with, scripted, wired

from mas.ctl.session.host import RuntimeHost
from mas.runtime import metrics
from mas.runtime.tokens import TOKENS_METADATA_KEY
from mas.runtime.turns import TurnInput

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]


def sample(name: str, **labels: str) -> float:
    """The current value of one sample of the runtime registry (0 when absent)."""
    value = metrics.REGISTRY.get_sample_value(name, labels)
    return value or 0.0


@pytest.fixture
async def server() -> AsyncIterator[FakeChatServer]:
    async with FakeChatServer() as running:
        yield running


def openai_agent(server: FakeChatServer, **extra: Any) -> dict[str, Any]:
    return {
        "model": {
            "ref": "gpt",
            **extra,
        },
    }


async def run_turn(host: RuntimeHost, agent: str, text: str, session: str = "s") -> Any:
    events = await collect(
        host.mailbox(agent).submit(TurnInput(session, f"t-{text}", text)).events()
    )
    return ended(events)


async def test_streamed_usage_is_counted_in_metrics_and_the_turn_metadata(
    server: FakeChatServer,
) -> None:
    usage = {"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38}
    server.plans.append(Plan(text_chunks("Hi ", "there"), usage=usage))
    wired_app = wired(
        {"counted": openai_agent(server)},
        models={"gpt": {"provider": "openai", "model": "gpt-test", "endpoint": server.base_url}},
        registry=registry_with(),
    )
    labels = {"agent": "counted", "model": "gpt"}
    before_in = sample("maslab_model_tokens_total", kind="input", **labels)
    before_out = sample("maslab_model_tokens_total", kind="output", **labels)
    calls = sample("maslab_model_call_tokens_count", kind="input", **labels)
    host = RuntimeHost.build(wired_app, ["counted"], registry=registry_with(), env={})
    try:
        end = await run_turn(host, "counted", "hello")
    finally:
        await host.aclose()
    assert end.status == "completed" and end.text == "Hi there"
    assert end.metadata == {
        TOKENS_METADATA_KEY: {
            "input": 31,
            "output": 7,
            "by_model": {"gpt": {"input": 31, "output": 7}},
        }
    }
    assert server.requests[0].body["stream_options"] == {"include_usage": True}
    assert sample("maslab_model_tokens_total", kind="input", **labels) == before_in + 31
    assert sample("maslab_model_tokens_total", kind="output", **labels) == before_out + 7
    assert sample("maslab_model_call_tokens_count", kind="input", **labels) == calls + 1


async def test_a_malformed_usage_block_fails_the_turn_with_a_message(
    server: FakeChatServer,
) -> None:
    server.plans.append(Plan(text_chunks("x"), usage={"prompt_tokens": "lots"}))
    wired_app = wired(
        {"counted": openai_agent(server)},
        models={"gpt": {"provider": "openai", "model": "gpt-test", "endpoint": server.base_url}},
        registry=registry_with(),
    )
    host = RuntimeHost.build(wired_app, ["counted"], registry=registry_with(), env={})
    try:
        end = await run_turn(host, "counted", "hello")
    finally:
        await host.aclose()
    assert end.status == "failed"
    assert "the usage block is not token counts" in end.message
    assert "'prompt_tokens': 'lots'" in end.message


async def test_a_delegation_loop_is_stopped_by_the_session_budget() -> None:
    rule = {"match": "^", "delegate": {"to": "ping", "message": "{input}"}}
    ping_rule = {
        "match": "^",
        "delegate": {"to": "pong", "message": "{input}"},
        "usage": {"input": 80, "output": 20},
        "reply": "{result}",
    }
    pong_rule = {**rule, "usage": {"input": 80, "output": 20}, "reply": "{result}"}
    ping = scripted(ping_rule)
    ping["budget"] = {"session": 500}
    wired_app = wired(
        {
            "ping": {"delegates_to": ["pong"], "model": ping},
            "pong": {"delegates_to": ["ping"], "model": scripted(pong_rule)},
        },
        registry=registry_with(),
    )
    pings = sample("maslab_budget_exhausted_total", agent="ping", budget="session")
    pongs = sample("maslab_budget_exhausted_total", agent="pong", budget="session")
    host = RuntimeHost.build(wired_app, ["ping"], registry=registry_with(), env={})
    try:
        end = await run_turn(host, "ping", "go round")
    finally:
        await host.aclose()
    # ping 100 -> pong 200 -> ping 300 -> pong 400 -> ping 500: the cap of the session that
    # started the chain is reached five turns deep (before the depth limit of 8), and every
    # turn of the chain comes back failed, saying which budget stopped it.
    assert end.status == "failed"
    assert end.message == (
        "agent 'ping' stopped: session budget of 500 tokens exhausted: 500 used (model.budget)"
    )
    assert end.metadata[TOKENS_METADATA_KEY]["input"] == 400
    assert end.metadata[TOKENS_METADATA_KEY]["output"] == 100
    # Stopped: ping at depth 4 (before delegating again), then each turn above it in turn.
    assert sample("maslab_budget_exhausted_total", agent="ping", budget="session") == pings + 3
    assert sample("maslab_budget_exhausted_total", agent="pong", budget="session") == pongs + 2


async def test_turn_and_period_budgets_stop_turns_and_the_agent_keeps_serving() -> None:
    rule = {"match": "^", "reply": "ok", "usage": {"input": 60, "output": 10}}
    tiny, solo = scripted(rule), scripted(rule)
    tiny["budget"] = {"turn": 50}
    solo["budget"] = {"turn": 100, "period": {"tokens": 100, "seconds": 86400}}
    wired_app = wired({"solo": {"model": solo}, "tiny": {"model": tiny}}, registry=registry_with())
    host = RuntimeHost.build(wired_app, ["solo", "tiny"], registry=registry_with(), env={})
    try:
        over = await run_turn(host, "tiny", "one")
        first = await run_turn(host, "solo", "one", session="a")
        second = await run_turn(host, "solo", "two", session="b")
        third = await run_turn(host, "solo", "three", session="c")
    finally:
        await host.aclose()
    assert (over.status, over.text) == ("failed", "ok")
    assert over.message == (
        "agent 'tiny' stopped: turn budget of 50 tokens exhausted: 70 used (model.budget)"
    )
    assert (first.status, first.text) == ("completed", "ok")
    assert second.status == "failed"
    assert "period budget of 100 tokens per 86400 s exhausted: 140 used" in second.message
    assert (third.status, third.text) == ("failed", "")  # refused before any model call
    assert "period budget of 100 tokens per 86400 s exhausted: 140 used" in third.message
    assert TOKENS_METADATA_KEY not in third.metadata
