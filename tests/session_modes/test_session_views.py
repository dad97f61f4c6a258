"""The pure parts of the session modes, without sockets: which agents a process hosts, the
activity records of a real in-process host, the console transcript and the TUI state."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest
from session_modes_support import application, scripted
from tests.conftest import EXAMPLES

from mas.ctl.session.activity import (
    Activity,
    ActivityHub,
    Canceled,
    DelegationFinished,
    DelegationStarted,
    ObservedControl,
    Steered,
    SteeredTurnEnded,
    observe_delegations,
)
from mas.ctl.session.host import RuntimeHost
from mas.ctl.session.modes import hosted_roots
from mas.ctl.session.transcript import ConsoleTranscript, activity_line
from mas.ctl.session.tui_screen import AgentRow, TuiState
from mas.infra.documents import bind_overrides, load_document
from mas.infra.wiring import Wired, wire
from mas.runtime.registry import default_registry
from mas.runtime.turns import TextDelta, TurnEnded, TurnInput

pytestmark = pytest.mark.timeout(30)


def _wired(document: dict[str, Any]) -> Wired:
    return wire(document, default_registry().known_plugins())


def test_the_entry_and_every_deployed_agent_are_hosted_and_a_bind_is_not() -> None:
    example = EXAMPLES / "agency.yaml"
    assert hosted_roots(_wired(load_document(example))) == ["concierge", "researcher"]
    bound = load_document(example, edits=bind_overrides("researcher=a2a://127.0.0.1:9"))
    assert hosted_roots(_wired(bound)) == ["concierge"]


async def test_a_real_host_reports_delegations_steers_and_cancels() -> None:
    ask = {"match": "^ask (?P<q>.+)", "delegate": {"to": "helper", "message": "{q}"}}
    ask["reply"] = "helper said: {result}"
    document = application(
        {
            "desk": {"delegates_to": ["helper"], "model": scripted(ask)},
            "helper": {"model": scripted(default="did {input}")},
        }
    )
    host = RuntimeHost.build(_wired(document), ["desk"])
    hub = ActivityHub()
    seen: list[Activity] = []
    hub.subscribe(seen.append)
    observe_delegations({a: host.runner(a) for a in host.agents}, hub)
    observe_delegations({a: host.runner(a) for a in host.agents}, hub)  # wraps only once
    control = ObservedControl("desk", host.mailbox("desk"), hub)
    try:
        ticket = host.mailbox("desk").submit(TurnInput("s", "t1", "ask tea"))
        async with asyncio.timeout(10):
            assert (await ticket.result).text == "helper said: did tea"
            receipt = await control.steer("s", "later", "wait")
            assert (await receipt.result).text == "heard: later"
            await asyncio.sleep(0)  # the done-callback runs on the next loop turn
            assert not await control.cancel_inflight("s")
    finally:
        await host.aclose()
    assert seen == [
        DelegationStarted("desk", "helper", "s", "tea"),
        DelegationFinished("desk", "helper", "s", True, "did tea"),
        Steered("desk", "s", "wait", "later", "queued", receipt.turn_id),
        SteeredTurnEnded(
            "desk", "s", "wait", receipt.turn_id, TurnEnded("completed", "heard: later")
        ),
        Canceled("desk", "s", False),
    ]


def test_a_chat_transcript_keeps_notes_on_their_own_lines() -> None:
    screen = io.StringIO()
    view = ConsoleTranscript(screen, screen, prefix_turns=True)
    view.begin("desk")
    view.activity(DelegationStarted("desk", "helper", "s", "tea"))
    view.event(TextDelta("one "))
    view.activity(Steered("desk", "s", "preempt", "left", "preempted", "steer-1"))
    view.event(TextDelta("heard: left"))
    view.event(TurnEnded("completed", "one heard: left"))
    view.idle_prompt = "you> "
    view.activity(Canceled("desk", "s", False))
    assert screen.getvalue() == (
        "· desk -> helper: working on 'tea'\n"
        "desk> one \n"
        "· steer preempt on desk/s: 'left' (preempted: the prefix is kept, the rest replaced)\n"
        "desk> heard: left\n"
        "· cancel on desk/s: no turn was running\n"
        "you> "
    )


def test_run_mas_streams_the_answer_and_says_when_a_replace_changed_it() -> None:
    out, err = io.StringIO(), io.StringIO()
    view = ConsoleTranscript(out, err)
    view.begin("desk")
    view.event(TextDelta("one "))
    view.activity(Steered("desk", "s", "replace", "new", "replaced", "steer-2"))
    view.event(TextDelta("heard: new"))
    view.event(TurnEnded("completed", "heard: new"))
    view.begin("desk")
    view.event(TurnEnded("failed", message="the model failed"))
    assert out.getvalue() == "one heard: new\n"
    assert err.getvalue() == (
        "· steer replace on desk/s: 'new' (replaced: the prefix above is discarded)\n"
        "· final answer: heard: new\n"
        "· turn failed: the model failed\n"
    )


def test_activity_lines_name_agents_sessions_and_outcomes() -> None:
    assert activity_line(DelegationFinished("desk", "web", "s", False, "peer down")) == (
        "web -> desk: failed: peer down"
    )
    ended = TurnEnded("canceled", "one ", "stopped")
    assert activity_line(SteeredTurnEnded("desk", "s", "preempt", "steer-3", ended)) == (
        "steered turn steer-3 (preempt) ended canceled: one  (stopped)"
    )
    assert activity_line(Canceled("desk", "s", True)) == (
        "cancel on desk/s: the running turn was interrupted"
    )


def test_the_tui_state_streams_lines_and_counts_remote_work() -> None:
    state = TuiState("desk", "s")
    state.agents = {"desk": AgentRow("desk", "here", working=1), "web": AgentRow("web", "remote")}
    state.remote_busy["web"] = 0
    state.say("desk", "")
    state.stream("one\ntwo ")
    state.stream("three")
    assert list(state.conversation) == ["desk: one", "two three"]
    state.record(DelegationStarted("desk", "web", "s", "q"))
    assert state.agent_lines() == [
        "* desk           working  here   q=0",
        "* web            working  remote q=0",
    ]
    state.record(DelegationFinished("desk", "web", "s", True, "ok"))
    assert state.agent_lines()[1] == "  web            idle     remote q=0"
    assert list(state.activity) == ["desk -> web: working on 'q'", "web -> desk: done"]


def test_the_steer_demo_example_wires() -> None:
    wired = _wired(load_document(EXAMPLES / "steer-demo.yaml"))
    assert hosted_roots(wired) == ["concierge"]
    assert wired.routes.hosted_with(("concierge",)) == ("concierge", "librarian")
