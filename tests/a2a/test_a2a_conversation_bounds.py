"""A served agent's in-memory conversations are bounded by bytes (``a2a.task_store``
``history_max_bytes``): what a client sees when it follows up on an evicted conversation,
and the eviction metric on ``/metrics`` (real agent, real server, JSON-RPC)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a_support import STEP, serve_with_store

from mas.infra.models import AgentManifest
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.models.base import AskHuman, ModelOutput, ModelPlugin, ModelRequest, TextChunk

pytestmark = [pytest.mark.timeout(60)]

V1 = {"A2A-Version": "1.0"}
BIG = "x" * 300_000


class Recall(ModelPlugin):
    """Says how many user messages it was given and the first one's head; ``ask Q`` asks Q."""

    async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        said = [m.content for m in request.messages if m.role == "user"]
        if said[-1].startswith("ask "):
            yield AskHuman(said[-1].removeprefix("ask "))
            return
        answered = f"answer to {request.answers_question!r}; " if request.answers_question else ""
        yield TextChunk(f"{answered}heard {len(said)}, first {said[0][:12]!r}")


@contextlib.asynccontextmanager
async def recalling_agent(task_store: dict[str, Any]) -> AsyncIterator[httpx.AsyncClient]:
    """Agent ``recall`` served with ``task_store``, and a JSON-RPC client of it."""
    agent = Agent("recall", AgentManifest(), Recall(), DelegationContract("recall", {}))
    async with (
        serve_with_store(task_store, agent, "recall") as exposure,
        httpx.AsyncClient(base_url=exposure.url, headers=V1, timeout=STEP) as http,
    ):
        yield http


async def say(http: httpx.AsyncClient, context: str, text: str) -> str:
    """A blocking send in ``context``; the text of the answer (a Message or the task's)."""
    message = {
        "role": "ROLE_USER",
        "messageId": uuid.uuid4().hex,
        "contextId": context,
        "parts": [{"text": text}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = (await http.post("/", json=body)).json()
    result = reply["result"]
    answer = result["message"] if "message" in result else result["task"]["status"]["message"]
    return str(answer["parts"][0]["text"])


async def test_a_follow_up_on_an_evicted_conversation_starts_afresh() -> None:
    async with recalling_agent({"history_max_bytes": 1024 * 1024}) as http:
        assert await say(http, "kept-short", "alpha") == "heard 1, first 'alpha'"
        assert await say(http, "kept-short", "beta") == "heard 2, first 'alpha'"
        for n in range(4):  # each ~300 KB: past the fourth, the oldest go
            await say(http, f"big-{n}", BIG)
        assert await say(http, "kept-short", "gamma") == "heard 1, first 'gamma'"
        assert await say(http, "big-3", "again") == f"heard 2, first {BIG[:12]!r}"
        metrics = (await http.get("/metrics")).text
    assert 'maslab_conversation_evictions_total{agent="recall",reason="bytes"}' in metrics


async def test_a_pending_question_outlives_idle_conversations_but_not_the_bound() -> None:
    async with recalling_agent({"history_max_bytes": 1024 * 1024}) as http:
        assert await say(http, "asked", "ask which colour?") == "which colour?"
        await say(http, "idle", BIG)
        for n in range(3):  # ~300 KB each: past the third, the idle one goes, not the waiting
            await say(http, f"newer-{n}", BIG)
        answer = await say(http, "asked", "blue")
        assert answer == "answer to 'which colour?'; heard 2, first 'ask which co'"
        assert await say(http, "idle", "hello") == "heard 1, first 'hello'"
