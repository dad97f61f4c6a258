"""The openai model plugin against a local server speaking the chat-completions protocol."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from fake_chat_server import FakeChatServer, Plan, text_chunks, tool_call_chunks
from runtime_support import RecordingModel, collect, ended, registry_with, text_of, wired

from mas.ctl.session.activity import ActivityHub, observe_delegations
from mas.ctl.session.host import RuntimeHost
from mas.ctl.session.transcript import activity_line
from mas.infra.models import AgentManifest
from mas.infra.wiring import Wired
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.errors import PluginConfigError
from mas.runtime.models.openai import OpenAIModel
from mas.runtime.turns import Delegated, TextDelta, TurnInput

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]


@pytest.fixture
async def server() -> AsyncIterator[FakeChatServer]:
    async with FakeChatServer() as running:
        yield running


def app_for(server: FakeChatServer) -> Wired:
    return wired(
        {
            "boss": {
                "instructions": "You route questions.",
                "delegates_to": ["data-desk"],
                "model": {
                    "type": "openai",
                    "params": {
                        "base_url": server.base_url,
                        "model": "gpt-test",
                        "api_key_env": "TEST_LLM_KEY",
                        "temperature": 0.2,
                        "timeout": 10,
                    },
                },
            },
            "data-desk": {"description": "Answers data questions.", "model": {"type": "recorder"}},
        },
        registry=registry_with(),
    )


async def build(server: FakeChatServer) -> RuntimeHost:
    return RuntimeHost.build(
        app_for(server),
        ["boss"],
        registry=registry_with(),
        env={"TEST_LLM_KEY": "sk-test-123"},
    )


async def test_streamed_text_and_the_request_shape(server: FakeChatServer) -> None:
    server.plans.append(Plan(text_chunks("Hel", "lo ", "there")))
    host = await build(server)
    try:
        events = await collect(host.mailbox("boss").submit(TurnInput("s", "t", "hi")).events())
    finally:
        await host.aclose()
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo ", "there"]
    assert ended(events).text == "Hello there"
    [recorded] = server.requests
    assert recorded.headers["authorization"] == "Bearer sk-test-123"
    body = recorded.body
    assert body["model"] == "gpt-test" and body["stream"] is True and body["temperature"] == 0.2
    assert body["messages"] == [
        {"role": "system", "content": "You route questions."},
        {"role": "user", "content": "hi"},
    ]
    [tool] = body["tools"]
    assert tool["type"] == "function"
    assert tool["function"]["name"] == "delegate_to_data_desk"
    assert tool["function"]["description"] == (
        "Delegate a task to the agent 'data-desk': Answers data questions."
    )
    assert tool["function"]["parameters"]["required"] == ["message"]


async def test_a_tool_call_delegates_and_the_result_goes_back_to_the_model(
    server: FakeChatServer,
) -> None:
    server.plans.append(
        Plan(
            tool_call_chunks(
                "call_7", "delegate_to_data_desk", json.dumps({"message": "rows in t?"})
            )
        )
    )
    server.plans.append(Plan(text_chunks("There are ", "42 rows.")))
    RecordingModel.instances.clear()
    host = await build(server)
    try:
        events = await collect(host.mailbox("boss").submit(TurnInput("s", "t", "count t")).events())
    finally:
        await host.aclose()
    [delegated] = [e for e in events if isinstance(e, Delegated)]
    assert delegated.target == "data-desk" and delegated.ok
    assert ended(events).text == "There are 42 rows."
    [desk] = RecordingModel.instances
    assert desk.requests[0].last_user_text == "rows in t?"
    second = server.requests[1].body["messages"]
    assert second[-2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_7",
                "type": "function",
                "function": {
                    "name": "delegate_to_data_desk",
                    "arguments": '{"message": "rows in t?"}',
                },
            }
        ],
    }
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "call_7",
        "content": "recorded: rows in t?",
    }


async def test_the_transcript_names_what_an_openai_tool_call_delegates(
    server: FakeChatServer,
) -> None:
    # The openai model hands the tool arguments over as the JSON string the server sent.
    arguments = json.dumps({"message": "rows in t?"})
    server.plans.append(Plan(tool_call_chunks("call_8", "delegate_to_data_desk", arguments)))
    server.plans.append(Plan(text_chunks("42 rows.")))
    host = await build(server)
    hub = ActivityHub()
    lines: list[str] = []
    hub.subscribe(lambda record: lines.append(activity_line(record)))
    observe_delegations({a: host.runner(a) for a in host.agents}, hub)
    try:
        await collect(host.mailbox("boss").submit(TurnInput("s", "t", "count t")).events())
    finally:
        await host.aclose()
    assert lines == ["boss -> data-desk: working on 'rows in t?'", "data-desk -> boss: done"]


async def test_an_http_error_fails_the_turn_with_the_server_message(server: FakeChatServer) -> None:
    server.plans.append(Plan(status=401, error="Incorrect API key provided"))
    host = await build(server)
    try:
        final = ended(
            await collect(host.mailbox("boss").submit(TurnInput("s", "t", "hi")).events())
        )
    finally:
        await host.aclose()
    assert final.status == "failed"
    assert final.message == (
        f"the model of agent 'boss' failed: openai model 'gpt-test' at "
        f"{server.base_url}/chat/completions: HTTP 401: Incorrect API key provided"
    )
    assert "sk-test-123" not in final.message


async def test_an_unreachable_server_fails_the_turn_clearly() -> None:
    async with FakeChatServer() as gone:
        url = gone.base_url
    model = OpenAIModel(base_url=url, model="m", timeout=5)
    agent = Agent("a", AgentManifest(), model, DelegationContract("a", {}))
    try:
        events = await collect(agent.run(TurnInput("s", "t", "hi")))
    finally:
        await model.aclose()
    final = ended(events)
    assert final.status == "failed" and text_of(events) == ""
    assert f"openai model 'm' at {url}/chat/completions: cannot reach the server" in final.message


def test_bad_params_and_a_missing_key_variable_are_config_errors() -> None:
    with pytest.raises(
        PluginConfigError, match=r"params.base_url: 'ftp://x': Value error, must start"
    ):
        OpenAIModel(base_url="ftp://x", model="m")
    with pytest.raises(PluginConfigError, match=r"params.model: is required"):
        OpenAIModel(base_url="http://127.0.0.1:1/v1")
    with pytest.raises(PluginConfigError, match="the environment variable NO_SUCH_KEY is not set"):
        OpenAIModel(base_url="http://127.0.0.1:1/v1", model="m", api_key_env="NO_SUCH_KEY", env={})


async def test_structured_input_reaches_the_model_as_json(server: FakeChatServer) -> None:
    server.plans.append(Plan(text_chunks("ok")))
    host = await build(server)
    try:
        turn = TurnInput("s", "t", "sum these", data={"values": [1, 2]})
        await collect(host.mailbox("boss").submit(turn).events())
    finally:
        await host.aclose()
    user = server.requests[0].body["messages"][-1]
    assert user == {"role": "user", "content": 'sum these\n\nData (JSON): {"values": [1, 2]}'}
