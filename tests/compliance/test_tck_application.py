"""The TCK's Application: its scripted rules pick a behaviour by the turn id (A2A messageId)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from mas.infra.models import AgentManifest
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.errors import PluginConfigError
from mas.runtime.models.scripted import ScriptedModel
from mas.runtime.turns import ArtifactEmitted, TextDelta, TurnEnded, TurnEvent, TurnInput

pytestmark = pytest.mark.timeout(30)

APP = Path(__file__).resolve().parents[2] / "compliance" / "a2a" / "application.yaml"


def tck_agent() -> Agent:
    document = yaml.safe_load(APP.read_text())
    params = document["spec"]["agency"]["agents"]["tck"]["spec"]["model"]["params"]
    return Agent("tck", AgentManifest(), ScriptedModel(**params), DelegationContract("tck", {}))


async def turn(
    agent: Agent, message_id: str, text: str = "TCK prerequisite task creation"
) -> list[TurnEvent]:
    events: AsyncIterator[TurnEvent] = agent.run(TurnInput("s-" + message_id, message_id, text))
    return [e async for e in events]


async def test_the_same_text_gets_the_behaviour_its_message_id_asks_for() -> None:
    agent = tck_agent()
    asked = await turn(agent, "tck-input-required-abc123")
    done = await turn(agent, "tck-complete-task-abc123")
    assert asked[-1] == TurnEnded("input_required", text="Need more input")
    assert isinstance(done[-1], TurnEnded) and done[-1].status == "completed"
    assert [e.text for e in done if isinstance(e, TextDelta)] == ["Hello from TCK"]


async def test_artifact_prefixes_emit_their_artifact_kind() -> None:
    agent = tck_agent()
    kinds = {}
    for prefix in ("text", "file-url", "file", "data"):
        events = await turn(agent, f"tck-artifact-{prefix}-s1", "TCK artifact test")
        kinds[prefix] = [(e.kind, e.name) for e in events if isinstance(e, ArtifactEmitted)]
    assert kinds == {
        "text": [("text", "text-artifact")],
        "file-url": [("url", "output.txt")],
        "file": [("file", "output.txt")],
        "data": [("data", "data-artifact")],
    }


async def test_other_message_ids_are_echoed() -> None:
    events = await turn(tck_agent(), "tck-dm-test-001-x", "Hello from TCK data model test")
    assert isinstance(events[-1], TurnEnded)
    assert events[-1].text == "Hello from TCK data model test"


def test_a_bad_turn_regex_is_refused_naming_it() -> None:
    with pytest.raises(PluginConfigError, match=r"turn '\(' is not a valid regex"):
        ScriptedModel(rules=[{"match": "", "turn": "(", "reply": "x"}])
