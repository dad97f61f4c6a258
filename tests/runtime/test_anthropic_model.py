"""The anthropic model plugin, through the official SDK, against a local server speaking the
Messages API: streamed text, tool use, usage, 429 with retry-after, errors, garbage."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from fake_messages_server import FakeMessagesServer, Plan, message_events
from runtime_support import RecordingModel, Waits, collect, ended, registry_with, text_of, wired

from mas.ctl.session.host import RuntimeHost
from mas.infra.models import AgentManifest, SecretKeyRef
from mas.infra.secrets import secret_env_name
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.errors import HostError, PluginConfigError
from mas.runtime.models.anthropic import AnthropicModel
from mas.runtime.tokens import TOKENS_METADATA_KEY
from mas.runtime.turns import Delegated, TextDelta, TurnEnded, TurnInput

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

KEY = "sk-ant-test-123"


@pytest.fixture
async def server() -> AsyncIterator[FakeMessagesServer]:
    async with FakeMessagesServer() as running:
        yield running


def build(server: FakeMessagesServer) -> RuntimeHost:
    app = wired(
        {
            "boss": {
                "instructions": "You route questions.",
                "delegates_to": ["data-desk"],
                "model": {"ref": "claude"},
            },
            "data-desk": {"description": "Answers data questions.", "model": {"type": "recorder"}},
        },
        models={
            "claude": {
                "provider": "anthropic",
                "model": "claude-test",
                "endpoint": server.base_url,
                "key": {"secret_key_ref": {"name": "llm", "key": "anthropic"}},
                "params": {"max_tokens": 256, "timeout": 10},
            }
        },
        registry=registry_with(),
    )
    env = {secret_env_name(SecretKeyRef(name="llm", key="anthropic")): KEY}
    return RuntimeHost.build(app, ["boss"], registry=registry_with(), env=env)


async def run(host: RuntimeHost, text: str) -> list[object]:
    return list(
        await collect(host.mailbox("boss").submit(TurnInput("s", f"t-{text}", text)).events())
    )


async def test_streamed_text_usage_and_the_request_shape(server: FakeMessagesServer) -> None:
    server.plans.append(
        Plan(message_events({"text": ["Hel", "lo ", "there"]}, input_tokens=40, output_tokens=9))
    )
    host = build(server)
    try:
        events = await run(host, "hi")
    finally:
        await host.aclose()
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo ", "there"]
    end = events[-1]
    assert isinstance(end, TurnEnded) and end.status == "completed" and end.text == "Hello there"
    assert end.metadata[TOKENS_METADATA_KEY] == {
        "input": 40,
        "output": 9,
        "by_model": {"claude": {"input": 40, "output": 9}},
    }
    [recorded] = server.requests
    # the SDK's own authentication header: x-api-key, or a bearer token in newer releases
    sent = recorded.headers.get("x-api-key") or recorded.headers["authorization"]
    assert sent in (KEY, f"Bearer {KEY}")
    assert recorded.headers["anthropic-version"]
    body = recorded.body
    assert body["model"] == "claude-test" and body["max_tokens"] == 256 and body["stream"]
    assert body["system"] == "You route questions."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    [tool] = body["tools"]
    assert tool["name"] == "delegate_to_data_desk"
    assert tool["input_schema"]["required"] == ["message"]


async def test_tool_use_delegates_and_the_result_goes_back_as_a_tool_result(
    server: FakeMessagesServer,
) -> None:
    arguments = json.dumps({"message": "rows in t?"})
    server.plans.append(
        Plan(
            message_events(
                {"text": ["Let me ask."]},
                {
                    "tool_use": ("toolu_7", "delegate_to_data_desk"),
                    "json": [arguments[:9], arguments[9:]],
                },
                input_tokens=50,
                output_tokens=20,
            )
        )
    )
    server.plans.append(
        Plan(message_events({"text": ["42 rows."]}, input_tokens=80, output_tokens=4))
    )
    RecordingModel.instances.clear()
    host = build(server)
    try:
        events = await run(host, "count t")
    finally:
        await host.aclose()
    [delegated] = [e for e in events if isinstance(e, Delegated)]
    assert delegated.target == "data-desk" and delegated.ok
    assert text_of(events) == "Let me ask.42 rows."  # type: ignore[arg-type]
    [desk] = RecordingModel.instances
    assert desk.requests[0].last_user_text == "rows in t?"
    second = server.requests[1].body["messages"]
    assert second[-2] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me ask."},
            {
                "type": "tool_use",
                "id": "toolu_7",
                "name": "delegate_to_data_desk",
                "input": {"message": "rows in t?"},
            },
        ],
    }
    assert second[-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_7", "content": "recorded: rows in t?"}
        ],
    }
    end = events[-1]
    assert isinstance(end, TurnEnded)
    assert end.metadata[TOKENS_METADATA_KEY]["input"] == 130
    assert end.metadata[TOKENS_METADATA_KEY]["output"] == 24


async def test_a_429_is_retried_as_retry_after_says(server: FakeMessagesServer) -> None:
    server.plans.append(
        Plan(
            status=429,
            error_type="rate_limit_error",
            error="slow down",
            headers={"retry-after": "4"},
        )
    )
    server.plans.append(Plan(status=529, error_type="overloaded_error", error="Overloaded"))
    server.plans.append(Plan(message_events({"text": ["ok"]})))
    model = AnthropicModel(
        model="claude-test", api_key_env="K", base_url=server.base_url, env={"K": KEY}
    )
    model.sleep = waits = Waits()
    agent = Agent("a", AgentManifest(), model, DelegationContract("a", {}))
    try:
        end = ended(await collect(agent.run(TurnInput("s", "t", "hi"))))
        server.plans.extend(
            [Plan(status=529, error_type="overloaded_error", error="Overloaded") for _ in range(3)]
        )
        down = ended(await collect(agent.run(TurnInput("s", "t2", "again"))))
    finally:
        await model.aclose()
    assert (end.status, end.text) == ("completed", "ok")
    assert waits.asked == [4.0, 1.0, 0.5, 1.0]  # retry-after, then doubling backoff
    assert down.status == "failed"
    assert down.message.endswith(
        f"anthropic model 'claude-test' at {server.base_url}/v1/messages: HTTP 529: Overloaded "
        "(after 3 attempts)"
    )
    assert KEY not in down.message


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        (
            Plan(status=400, error_type="invalid_request_error", error="max_tokens: too big"),
            "HTTP 400: max_tokens: too big",
        ),
        (
            Plan(raw="event: message_start\ndata: {not json\n\n"),
            "the stream is not Messages events",
        ),
        (
            Plan(
                raw='event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
                '"message": "Overloaded mid-stream"}}\n\n'
            ),
            "Overloaded mid-stream",
        ),
    ],
)
async def test_errors_and_garbage_fail_the_turn_with_a_message(
    server: FakeMessagesServer, plan: Plan, expected: str
) -> None:
    server.plans.append(plan)
    model = AnthropicModel(
        model="claude-test", api_key_env="K", base_url=server.base_url, env={"K": KEY}, retries=0
    )
    agent = Agent("a", AgentManifest(), model, DelegationContract("a", {}))
    try:
        end = ended(await collect(agent.run(TurnInput("s", "t", "hi"))))
    finally:
        await model.aclose()
    assert end.status == "failed"
    assert expected in end.message
    assert end.message.startswith("the model of agent 'a' failed: anthropic model 'claude-test'")


def test_bad_params_and_a_missing_key_are_config_errors() -> None:
    with pytest.raises(PluginConfigError, match=r"params\.api_key_env: is required"):
        AnthropicModel(model="m")
    with pytest.raises(PluginConfigError, match="the environment variable NOPE is not set"):
        AnthropicModel(model="m", api_key_env="NOPE", env={})
    with pytest.raises(PluginConfigError, match=r"params\.base_url: 'ftp://x'"):
        AnthropicModel(model="m", api_key_env="K", base_url="ftp://x", env={"K": "k"})


def test_a_named_models_key_missing_from_the_environment_names_the_field() -> None:
    app = wired(
        {"boss": {"model": {"ref": "claude"}}},
        models={
            "claude": {
                "provider": "anthropic",
                "model": "claude-test",
                "key": {"secret_key_ref": {"name": "llm", "key": "anthropic"}},
            }
        },
        registry=registry_with(),
    )
    variable = secret_env_name(SecretKeyRef(name="llm", key="anthropic"))
    with pytest.raises(HostError) as caught:
        RuntimeHost.build(app, ["boss"], registry=registry_with(), env={})
    assert str(caught.value) == (
        f"spec.models.claude.key: reads Secret 'llm' key 'anthropic' from the environment "
        f"variable {variable}, which is not set (the operator sets it in the pod; locally, "
        "export it)"
    )
