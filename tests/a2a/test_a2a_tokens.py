"""A turn's tokens ride in its A2A task's metadata (maslab.tokens), on every transport,
and come back to a delegating caller through A2AAgentComm."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from a2a_support import STEP, TRANSPORTS, sdk_client, send, serve_agent, user_message
from google.protobuf.json_format import MessageToDict

from library_ioa.plugins.a2a.agent_comm import A2AAgentComm
from mas.infra.model_choice import ModelChoice
from mas.infra.models import AgentManifest
from mas.runtime.agent import Agent
from mas.runtime.boundary.agentcomm import OutboundMessage
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.models.scripted import ScriptedModel
from mas.runtime.registry import default_registry
from mas.runtime.tokens import TOKENS_METADATA_KEY

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

EXPECTED = {"input": 12.0, "output": 3.0, "by_model": {"scripted": {"input": 12.0, "output": 3.0}}}


def counting_agent() -> Agent:
    model = ScriptedModel(default={"reply": "counted", "usage": {"input": 12, "output": 3}})
    contract = DelegationContract("scripted", {})
    return Agent("scripted", AgentManifest(), model, contract, choice=ModelChoice("scripted"))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_task_metadata_carries_the_turn_tokens(transport: str) -> None:
    async with (
        serve_agent(runner=counting_agent()) as served,  # type: ignore[arg-type]
        sdk_client(served, transport) as client,
    ):
        [response] = await send(client, user_message("hello"))
    assert response.HasField("task"), response  # a turn with tokens is a task, not a Message
    task = MessageToDict(response.task)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["metadata"][TOKENS_METADATA_KEY] == EXPECTED


async def test_the_streamed_task_ends_with_the_tokens() -> None:
    async with (
        serve_agent(runner=counting_agent()) as served,  # type: ignore[arg-type]
        sdk_client(served, streaming=True) as client,
    ):
        responses = await send(client, user_message("hello"))
    finals = [
        MessageToDict(r.status_update)
        for r in responses
        if r.HasField("status_update")
        and MessageToDict(r.status_update)["status"]["state"] == "TASK_STATE_COMPLETED"
    ]
    assert len(finals) == 1
    assert finals[0]["metadata"][TOKENS_METADATA_KEY] == EXPECTED


async def test_a_delegating_caller_reads_the_peer_tokens() -> None:
    async with serve_agent(runner=counting_agent()) as served:  # type: ignore[arg-type]
        comm = default_registry().create("agent_comm", "a2a", {"url": served.url, "timeout": STEP})
        assert isinstance(comm, A2AAgentComm)
        message = OutboundMessage(
            source="front",
            target="scripted",
            text="count this",
            session_id="caller",
            call_id=f"call-{uuid.uuid4().hex[:6]}",
            correlation_id="corr",
            depth=1,
        )
        try:
            reply = await comm.send(message)
        finally:
            await comm.aclose()
    assert reply.status == "completed" and reply.text == "counted"
    tokens: Any = reply.metadata[TOKENS_METADATA_KEY]
    assert tokens == EXPECTED
