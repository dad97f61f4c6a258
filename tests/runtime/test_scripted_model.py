"""The scripted and echo model plugins: each rule action, templates, and bad params."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from runtime_support import DEADLINE, collect, ended, text_of

from mas.ctl.session.mailbox import SessionTurnMailbox
from mas.infra.models import AgentManifest
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract, ToolSpec
from mas.runtime.errors import PluginConfigError
from mas.runtime.models.base import ChatMessage, ModelPlugin, ModelRequest, ToolCall
from mas.runtime.models.echo import EchoModel
from mas.runtime.models.scripted import ScriptedModel
from mas.runtime.registry import builtin_registry
from mas.runtime.turns import ArtifactEmitted, TextDelta, TurnEvent, TurnInput

pytestmark = pytest.mark.timeout(30)


def agent_with(model: ModelPlugin) -> Agent:
    return Agent("solo", AgentManifest(), model, DelegationContract("solo", {}))


async def run(agent: Agent, text: str, session: str = "s") -> list[TurnEvent]:
    return await collect(agent.run(TurnInput(session, f"t-{text}", text)))


async def test_echo_streams_the_input_word_by_word() -> None:
    model = builtin_registry().create("model", "echo", {}, agent_id="solo")
    events = await run(agent_with(model), "  hello  wide world ")
    chunks = [e.text for e in events if isinstance(e, TextDelta)]
    assert chunks == ["  hello  ", "wide ", "world "]
    assert ended(events).text == "  hello  wide world "


async def test_reply_templates_see_the_input_and_the_groups() -> None:
    model = ScriptedModel(
        rules=[{"match": r"^order (?P<count>\d+) (\w+)", "reply": "{count} x {2} for {input!r}"}]
    )
    events = await run(agent_with(model), "order 3 pears")
    assert ended(events).text == "3 x pears for 'order 3 pears'"
    assert [e.text for e in events if isinstance(e, TextDelta)] == [
        "3 ",
        "x ",
        "pears ",
        "for ",
        "'order ",
        "3 ",
        "pears'",
    ]


async def test_first_match_wins_and_the_default_catches_the_rest() -> None:
    model = ScriptedModel(
        rules=[{"match": "a", "reply": "first"}, {"match": "ab", "reply": "second"}],
        default={"chunks": ["fall", "back"]},
    )
    agent = agent_with(model)
    assert ended(await run(agent, "ab")).text == "first"
    events = await run(agent, "zzz")
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["fall", "back"]


async def test_no_match_without_default_fails_the_turn_clearly() -> None:
    final = ended(await run(agent_with(ScriptedModel(rules=[{"match": "^x", "reply": "y"}])), "q"))
    assert final.status == "failed"
    assert final.message == (
        "the model of agent 'solo' failed: no rule of the scripted model matches 'q'; rules: '^x'"
    )


async def test_fail_rule_fails_the_turn_with_its_message() -> None:
    model = ScriptedModel(rules=[{"match": "(boom)", "fail": "exploded on {1}"}])
    final = ended(await run(agent_with(model), "boom now"))
    assert final.status == "failed" and final.message.endswith("exploded on boom")


async def test_artifacts_of_each_kind() -> None:
    pdf = base64.b64encode(b"%PDF-1.4 tiny").decode()
    model = ScriptedModel(
        rules=[
            {
                "match": "report",
                "artifacts": [
                    {
                        "kind": "text",
                        "name": "notes",
                        "text": "about {input}",
                        "media_type": "text/plain",
                    },
                    {"kind": "data", "name": "facts", "data": {"n": 3, "ok": True}},
                    {
                        "kind": "file",
                        "name": "r.pdf",
                        "content_base64": pdf,
                        "media_type": "application/pdf",
                    },
                    {"kind": "url", "name": "link", "url": "https://example.org/r"},
                ],
                "reply": "done",
            }
        ]
    )
    events = await run(agent_with(model), "report")
    artifacts = [e for e in events if isinstance(e, ArtifactEmitted)]
    assert [(a.kind, a.name) for a in artifacts] == [
        ("text", "notes"),
        ("data", "facts"),
        ("file", "r.pdf"),
        ("url", "link"),
    ]
    assert artifacts[0].text == "about report" and artifacts[0].media_type == "text/plain"
    assert artifacts[1].data == {"n": 3, "ok": True}
    assert artifacts[2].content == b"%PDF-1.4 tiny" and artifacts[2].media_type == "application/pdf"
    assert artifacts[3].url == "https://example.org/r"
    assert ended(events).text == "done"


async def test_ask_stops_input_required_and_the_next_input_answers() -> None:
    model = ScriptedModel(
        rules=[
            {"match": "^book", "reply": "Sure.", "ask": "Which day?"},
            {"match": r"^\w+day$", "reply": "Booked for {input} (you were asked: {question})"},
        ]
    )
    mailbox = SessionTurnMailbox(agent_with(model))
    first = ended(await collect(mailbox.submit(TurnInput("s", "t1", "book a table")).events()))
    assert (first.status, first.text) == ("input_required", "Which day?")
    # another session is not waiting for an answer
    other = ended(await collect(mailbox.submit(TurnInput("o", "o1", "Monday")).events()))
    assert other.text == "Booked for Monday (you were asked: )"
    second = ended(await collect(mailbox.submit(TurnInput("s", "t2", "Friday")).events()))
    assert (second.status, second.text) == (
        "completed",
        "Booked for Friday (you were asked: Which day?)",
    )
    await mailbox.aclose()


async def test_wait_ms_holds_the_generation_until_it_is_canceled() -> None:
    model = ScriptedModel(rules=[{"match": ".", "wait_ms": 600_000, "reply": "late"}])
    mailbox = SessionTurnMailbox(agent_with(model))
    ticket = mailbox.submit(TurnInput("s", "t1", "x"))
    async with asyncio.timeout(DEADLINE):
        while not mailbox.running("s"):
            await asyncio.sleep(0)
    assert await mailbox.cancel_inflight("s")
    events = await collect(ticket.events())
    assert text_of(events) == "" and ended(events).status == "canceled"
    await mailbox.aclose()


async def test_release_file_holds_after_the_first_chunk_until_the_file_appears(
    tmp_path: Path,
) -> None:
    release = tmp_path / "go"
    rule = {"match": ".", "chunks": ["one ", "two"], "release_file": str(release)}
    mailbox = SessionTurnMailbox(agent_with(ScriptedModel(rules=[rule])))
    stream = mailbox.submit(TurnInput("s", "t1", "x")).events()
    async with asyncio.timeout(DEADLINE):
        first = await anext(stream)
    assert first == TextDelta("one ")
    release.touch()
    rest = await collect(stream)
    assert text_of([first, *rest]) == "one two" and ended(rest).status == "completed"
    await mailbox.aclose()


async def test_a_release_that_never_comes_fails_the_turn_naming_the_file(tmp_path: Path) -> None:
    release = tmp_path / "never"
    rule = {"match": ".", "chunks": ["one ", "two"], "release_file": str(release)}
    model = ScriptedModel(rules=[{**rule, "release_timeout_ms": 50}])
    events = await collect(agent_with(model).run(TurnInput("s", "t1", "x")))
    assert text_of(events) == "one " and ended(events).status == "failed"
    assert ended(events).message.endswith(
        f"waited 50 ms for its release_file {str(release)!r}, which did not appear"
    )


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"rules": [{"match": "(", "reply": "x"}]}, "params.rules[0]: "),
        (
            {"rules": [{"match": "a"}, {"match": "b", "reply": "x", "chunks": ["y"]}]},
            "params.rules[1]: ",
        ),
        (
            {"rules": [{"match": "a", "reply": "{nope}"}]},
            "params.rules[0].reply: '{nope}' uses {nope}; accepted: {0}, {input}, {question}",
        ),
        (
            {"rules": [{"match": "(a)", "chunks": ["ok", "{2}"]}]},
            "params.rules[0].chunks[1]: '{2}' uses {2}",
        ),
        (
            {"rules": [{"match": "a", "reply": "{result}"}]},
            "params.rules[0].reply: '{result}' uses {result}",
        ),
        (
            {"rules": [{"match": "a", "reply": "{"}]},
            "params.rules[0].reply: '{' is not a valid template",
        ),
        (
            {"rules": [{"match": "a", "artifacts": [{"kind": "file", "name": "f"}]}]},
            "params.rules[0].artifacts[0]: ",
        ),
        ({"rules": [{"match": "a", "wait_ms": -5}]}, "params.rules[0].wait_ms: -5: "),
        (
            {"rules": [{"match": "a", "release_file": "/x", "release_timeout_ms": 0}]},
            "params.rules[0].release_timeout_ms: 0: ",
        ),
        ({"rules": [{"match": "a", "speak": "x"}]}, "params.rules[0].speak: is not a known field"),
        ({"rules": [{"reply": "x"}]}, "rules[0].match is required"),
        ({"default": {"match": "a"}}, "default.match is not accepted"),
        ({"rulez": []}, "params.rulez: is not a known field"),
    ],
)
def test_bad_params_name_the_rule_and_the_field(params: dict[str, Any], expected: str) -> None:
    with pytest.raises(PluginConfigError) as caught:
        builtin_registry().create("model", "scripted", params, agent_id="a")
    assert str(caught.value).startswith("model 'scripted': ")
    assert expected in str(caught.value)


def test_file_artifacts_need_valid_base64() -> None:
    with pytest.raises(PluginConfigError, match="content_base64 is not valid base64"):
        ScriptedModel(
            rules=[
                {
                    "match": "a",
                    "artifacts": [{"kind": "file", "name": "f", "content_base64": "***"}],
                }
            ]
        )


def test_echo_refuses_unknown_params() -> None:
    with pytest.raises(
        PluginConfigError, match=r"model 'echo': params.speed: is not a known field"
    ):
        EchoModel(speed=3)


def documented_example() -> ScriptedModel:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text()
    block = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    return ScriptedModel(**yaml.safe_load(block)["model"]["params"])


def test_the_documented_example_rules_are_valid() -> None:
    model = documented_example()
    assert len(model.params.rules) == 9 and model.params.default is not None
    costly = model.params.rules[8]
    assert costly.usage is not None and (costly.usage.input, costly.usage.output) == (1200, 80)


async def test_the_documented_typed_arguments_example_holds() -> None:
    request = ModelRequest(
        agent_id="solo",
        instructions=None,
        messages=(ChatMessage("user", "add 2 3"),),
        tools=(ToolSpec("add", "adds", {"type": "object"}),),
    )
    [call] = [output async for output in documented_example().generate(request)]
    assert isinstance(call, ToolCall)
    assert call.arguments == {"a": 2, "b": 3, "label": "2"}


async def tool_arguments(arguments: dict[str, Any], text: str) -> Any:
    """The arguments of the tool call the scripted rule makes for ``text``."""
    model = ScriptedModel(
        rules=[
            {
                "match": r"^add (?P<a>\S+) (?P<b>.*)$",
                "tool": {"name": "calc", "arguments": arguments},
                "reply": "{result}",
            }
        ]
    )
    request = ModelRequest(
        agent_id="solo",
        instructions=None,
        messages=(ChatMessage("user", text),),
        tools=(ToolSpec("calc", "adds", {"type": "object"}),),
    )
    [call] = [output async for output in model.generate(request)]
    assert isinstance(call, ToolCall)
    return call.arguments


@pytest.mark.parametrize(
    ("matched", "value"),
    [
        ("42", 42),
        ("-1.5", -1.5),
        ("1e3", 1000.0),
        ("true", True),
        ("false", False),
        ("null", None),
        ('{"k":[1,2]}', {"k": [1, 2]}),
        ("[1,2]", [1, 2]),
    ],
)
async def test_a_whole_value_placeholder_keeps_the_json_type_it_matched(
    matched: str, value: Any
) -> None:
    arguments = await tool_arguments({"a": "{a}", "deep": [{"a": "{1}"}]}, f"add {matched} x")
    assert arguments == {"a": value, "deep": [{"a": value}]}
    assert type(arguments["a"]) is type(value)  # 1.0 == 1 and True == 1: the type too


@pytest.mark.parametrize(
    "matched", ["pears", "NaN", "Infinity", "01", '"quoted"', "4-2", "1,5", "True"]
)
async def test_text_that_is_no_json_value_stays_a_string(matched: str) -> None:
    arguments = await tool_arguments({"a": "{a}"}, f"add {matched} x")
    assert arguments == {"a": matched}


async def test_surrounding_text_a_second_field_or_a_format_spec_keeps_a_string() -> None:
    arguments = await tool_arguments(
        {"text": "n={a}", "two": "{a}{a}", "spec": "{a:>4}", "spaced": "{b}", "plain": "7"},
        "add 7  8",
    )
    assert arguments == {"text": "n=7", "two": "77", "spec": "   7", "spaced": " 8", "plain": "7"}


async def test_the_s_conversion_forces_a_string() -> None:
    arguments = await tool_arguments({"a": "{a!s}", "b": "{a}"}, "add 42 x")
    assert arguments == {"a": "42", "b": 42}
