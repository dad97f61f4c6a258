"""Retries of the openai plugin (429 and 5xx with Retry-After, bounded), and its Azure form,
against the local chat-completions server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fake_chat_server import FakeChatServer, Plan, text_chunks
from runtime_support import Waits, collect, ended

from mas.infra.models import AgentManifest
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.errors import PluginConfigError
from mas.runtime.models.openai import OpenAIModel
from mas.runtime.models.retries import retry_after
from mas.runtime.turns import TurnEnded, TurnInput

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]


@pytest.fixture
async def server() -> AsyncIterator[FakeChatServer]:
    async with FakeChatServer() as running:
        yield running


async def turn(model: OpenAIModel, text: str = "hi") -> TurnEnded:
    agent = Agent("a", AgentManifest(), model, DelegationContract("a", {}))
    try:
        return ended(await collect(agent.run(TurnInput("s", f"t-{text}", text))))
    finally:
        await model.aclose()


async def test_a_429_waits_as_retry_after_says_then_succeeds(server: FakeChatServer) -> None:
    server.plans.extend(
        [
            Plan(status=429, error="Rate limit reached", headers={"Retry-After": "7"}),
            Plan(status=503, error="overloaded", headers={"retry-after-ms": "250"}),
            Plan(text_chunks("fine")),
        ]
    )
    model = OpenAIModel(base_url=server.base_url, model="m", retry_max_seconds=10)
    model.sleep = waits = Waits()
    end = await turn(model)
    assert (end.status, end.text) == ("completed", "fine")
    assert waits.asked == [7.0, 0.25]
    assert len(server.requests) == 3
    assert server.requests[0].body == server.requests[2].body  # the same request, asked again


async def test_a_provider_that_stays_down_fails_the_turn_with_its_message(
    server: FakeChatServer,
) -> None:
    server.plans.extend([Plan(status=500, error=f"backend broke #{i}") for i in range(3)])
    server.plans.append(Plan(text_chunks("served again")))
    model = OpenAIModel(base_url=server.base_url, model="m", backoff=0.5)
    model.sleep = waits = Waits()
    agent = Agent("a", AgentManifest(), model, DelegationContract("a", {}))
    try:
        down = ended(await collect(agent.run(TurnInput("s", "t1", "hi"))))
        # The agent keeps serving: the next turn reaches the provider, now back.
        up = ended(await collect(agent.run(TurnInput("s", "t2", "again"))))
    finally:
        await model.aclose()
    assert down.status == "failed"
    assert down.message == (
        f"the model of agent 'a' failed: openai model 'm' at {server.base_url}/chat/completions: "
        "HTTP 500: backend broke #2 (after 3 attempts)"
    )
    assert waits.asked == [0.5, 1.0]  # backoff doubling, no Retry-After
    assert (up.status, up.text) == ("completed", "served again")


async def test_too_long_a_retry_after_and_a_client_error_are_not_waited_for(
    server: FakeChatServer,
) -> None:
    server.plans.append(Plan(status=429, error="quota", headers={"Retry-After": "3600"}))
    model = OpenAIModel(base_url=server.base_url, model="m")
    model.sleep = waits = Waits()
    end = await turn(model)
    assert end.status == "failed"
    assert end.message.endswith(
        "HTTP 429: quota (the provider asked to wait 3600 s (Retry-After), past "
        "retry_max_seconds 30)"
    )
    server.plans.append(Plan(status=400, error="bad request"))
    model = OpenAIModel(base_url=server.base_url, model="m")
    model.sleep = waits
    end = await turn(model)
    assert end.message.endswith("HTTP 400: bad request")
    assert waits.asked == []
    assert len(server.requests) == 2


async def test_retries_zero_fails_at_once(server: FakeChatServer) -> None:
    server.plans.append(Plan(status=502, error="bad gateway"))
    model = OpenAIModel(base_url=server.base_url, model="m", retries=0)
    end = await turn(model)
    assert end.message.endswith("HTTP 502: bad gateway (after 1 attempt)")


async def test_the_azure_form_posts_to_the_deployment_with_the_api_key_header(
    server: FakeChatServer,
) -> None:
    server.plans.append(Plan(text_chunks("from azure")))
    model = OpenAIModel(
        base_url=server.root_url,
        model="gpt-4o",
        api_key_env="AZ_KEY",
        azure={"deployment": "prod-gpt4o", "api_version": "2024-10-21"},
        env={"AZ_KEY": "az-secret"},
    )
    end = await turn(model)
    assert (end.status, end.text) == ("completed", "from azure")
    [recorded] = server.requests
    assert recorded.path == "/openai/deployments/prod-gpt4o/chat/completions"
    assert recorded.query == "api-version=2024-10-21"
    assert recorded.headers["api-key"] == "az-secret"
    assert "authorization" not in recorded.headers


def test_azure_needs_its_endpoint_and_well_formed_names() -> None:
    with pytest.raises(PluginConfigError, match=r"params\.base_url: is required with azure"):
        OpenAIModel(model="m", azure={"deployment": "d", "api_version": "v"})
    with pytest.raises(PluginConfigError, match=r"params.azure.deployment: 'a/b'"):
        OpenAIModel(
            base_url="https://x.openai.azure.com",
            model="m",
            azure={"deployment": "a/b", "api_version": "v"},
        )


def test_retry_after_reads_seconds_milliseconds_and_dates() -> None:
    assert retry_after({"Retry-After": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert (
        retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=lambda: 1445412480) == 10
    )
    assert retry_after({"Retry-After": "soon"}) is None
    assert retry_after({"Retry-After": "-3"}) is None
    assert retry_after({}) is None
