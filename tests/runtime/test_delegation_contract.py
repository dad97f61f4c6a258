"""Delegation: the tool surface, local routes between two agents, depth limit, peer errors."""

from __future__ import annotations

import pytest
from runtime_support import (
    DownComm,
    RecordingComm,
    RecordingModel,
    collect,
    ended,
    registry_with,
    scripted,
    wired,
)

from mas.ctl.session.host import RuntimeHost
from mas.runtime import metrics
from mas.runtime.boundary.agentcomm import OutboundMessage
from mas.runtime.boundary.delegation import DelegationContract, callee_session_id
from mas.runtime.comm.local import LocalAgentComm, LocalBus
from mas.runtime.errors import PeerUnavailable
from mas.runtime.turns import (
    CALLER_CALL_ID,
    CORRELATION_ID,
    DELEGATION_DEPTH,
    Delegated,
    TurnInput,
)

pytestmark = pytest.mark.timeout(30)


def test_one_tool_per_target_with_a_function_calling_schema() -> None:
    contract = DelegationContract(
        "boss",
        {"web-search": RecordingComm(), "notes": RecordingComm()},
        descriptions={"notes": "Keeps notes."},
    )
    tools = contract.tools()
    assert [t.name for t in tools] == ["delegate_to_web_search", "delegate_to_notes"]
    assert contract.target_of("delegate_to_web_search") == "web-search"
    assert contract.target_of("delegate_to_web-search") is None
    assert tools[1].description == "Delegate a task to the agent 'notes': Keeps notes."
    spec = tools[0].as_openai()
    assert spec["type"] == "function"
    params = spec["function"]["parameters"]
    assert params["required"] == ["message"]
    assert params["properties"]["message"]["type"] == "string"
    assert params["properties"]["data"]["type"] == "object"


async def test_a_call_is_exactly_one_send_with_ids_and_depth() -> None:
    comm = RecordingComm()
    contract = DelegationContract("boss", {"worker": comm})
    result = await contract.call(
        "delegate_to_worker",
        '{"message": "do it", "data": {"n": 1}}',
        session_id="s1",
        turn_id="t1",
        correlation_id="c1",
        depth=2,
    )
    assert result.ok and result.text == "remote answer to do it"
    [sent] = comm.sent
    assert (sent.source, sent.target, sent.text, sent.data) == ("boss", "worker", "do it", {"n": 1})
    assert sent.correlation_id == "c1" and sent.depth == 3
    assert sent.call_id == result.call_id and sent.call_id.startswith("t1.")
    assert sent.session_id == callee_session_id("s1", "worker") != "s1"
    again = await contract.call(
        "delegate_to_worker",
        {"message": "more"},
        session_id="s1",
        turn_id="t2",
        correlation_id="c2",
        depth=0,
    )
    assert again.ok and comm.sent[1].session_id == sent.session_id  # one peer session


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{not json", "arguments are not valid JSON"),
        ('["x"]', "arguments must be a JSON object"),
        ({}, "argument 'message' must be a non-empty string, got None"),
        ({"message": "x", "data": [1]}, "argument 'data' must be a JSON object when given"),
        ({"message": "x", "extra": 1}, "unknown arguments ['extra']; accepted: message, data"),
    ],
)
async def test_bad_arguments_are_a_tool_error_without_a_send(
    arguments: object, expected: str
) -> None:
    comm = RecordingComm()
    contract = DelegationContract("boss", {"worker": comm})
    result = await contract.call(
        "delegate_to_worker",
        arguments,  # type: ignore[arg-type]
        session_id="s",
        turn_id="t",
        correlation_id="c",
        depth=0,
    )
    assert not result.ok and expected in result.text
    assert comm.sent == []


async def test_unknown_tool_and_depth_limit_are_refused() -> None:
    comm = RecordingComm()
    contract = DelegationContract("boss", {"worker": comm}, max_depth=3)
    unknown = await contract.call(
        "delegate_to_nobody",
        {"message": "x"},
        session_id="s",
        turn_id="t",
        correlation_id="c",
        depth=0,
    )
    assert not unknown.ok
    assert (
        unknown.text
        == "unknown tool 'delegate_to_nobody'; the tools of agent 'boss' are: delegate_to_worker"
    )
    deep = await contract.call(
        "delegate_to_worker",
        {"message": "x"},
        session_id="s",
        turn_id="t",
        correlation_id="c",
        depth=3,
    )
    assert not deep.ok
    assert "would run at depth 4, past the limit of 3" in deep.text
    assert comm.sent == []


async def test_local_delegation_carries_the_metadata_to_the_callee() -> None:
    app = wired(
        {
            "boss": {
                "delegates_to": ["worker"],
                "model": scripted(
                    {
                        "match": "^ask (.*)",
                        "delegate": {"to": "worker", "message": "please {1}"},
                        "reply": "worker said: {result}",
                    }
                ),
            },
            "worker": {"model": {"type": "recorder"}},
        },
        registry=registry_with(),
    )
    RecordingModel.instances.clear()
    host = RuntimeHost.build(app, ["boss"], registry=registry_with())
    try:
        assert host.agents == ("boss", "worker")
        events = await collect(
            host.mailbox("boss").submit(TurnInput("s", "t1", "ask sum")).events()
        )
        final = ended(events)
        assert final.status == "completed"
        assert final.text == "worker said: recorded: please sum"
        [delegated] = [e for e in events if isinstance(e, Delegated)]
        assert delegated.target == "worker" and delegated.ok
        [worker_model] = RecordingModel.instances
        [request] = worker_model.requests
        assert request.last_user_text == "please sum"
        assert request.metadata[CALLER_CALL_ID] == delegated.call_id
        assert request.metadata[CORRELATION_ID] == "t1"  # the root turn's id
        assert request.metadata[DELEGATION_DEPTH] == 1
        assert request.metadata["mas.caller_agent"] == "boss"
    finally:
        await host.aclose()


async def test_a_delegation_cycle_stops_at_the_depth_limit() -> None:
    ping = {"match": "^ping", "reply": "got: {result}"}
    app = wired(
        {
            "left": {
                "delegates_to": ["right"],
                "model": scripted({**ping, "delegate": {"to": "right", "message": "{input}"}}),
            },
            "right": {
                "delegates_to": ["left"],
                "model": scripted({**ping, "delegate": {"to": "left", "message": "{input}"}}),
            },
        }
    )
    host = RuntimeHost.build(app, ["left"])
    try:
        final = ended(
            await collect(host.mailbox("left").submit(TurnInput("s", "t", "ping")).events())
        )
        assert final.status == "completed"
        # eight hops succeed, the ninth is refused, and every level answers on the way back
        assert final.text.count("got: ") == 9
        assert (
            "delegation refused: 'left' -> 'right' would run at depth 9, past the limit of 8"
            in final.text
        )
    finally:
        await host.aclose()


async def test_a_peer_that_is_down_is_a_tool_error_and_the_turn_goes_on() -> None:
    app = wired(
        {
            "boss": {
                "delegates_to": ["ext"],
                "model": scripted(
                    {
                        "match": ".",
                        "delegate": {"to": "ext", "message": "{input}"},
                        "reply": "fallback after: {result}",
                    }
                ),
            }
        },
        endpoints={"ext": {"url": "http://127.0.0.1:9", "usage": "use", "timeout": 2}},
    )
    before = (
        metrics.REGISTRY.get_sample_value(
            "maslab_delegation_calls_total",
            {"source": "boss", "target": "ext", "outcome": "unreachable"},
        )
        or 0.0
    )
    host = RuntimeHost.build(app, ["boss"], registry=registry_with(a2a=DownComm))
    try:
        events = await collect(host.mailbox("boss").submit(TurnInput("s", "t", "hello")).events())
        final = ended(events)
        assert final.status == "completed"
        assert final.text == (
            "fallback after: delegation to 'ext' failed: cannot reach 'ext' at http://127.0.0.1:9"
        )
        [delegated] = [e for e in events if isinstance(e, Delegated)]
        assert not delegated.ok
        after = metrics.REGISTRY.get_sample_value(
            "maslab_delegation_calls_total",
            {"source": "boss", "target": "ext", "outcome": "unreachable"},
        )
        assert after == before + 1
    finally:
        await host.aclose()


async def test_a_slow_local_peer_is_a_timeout_tool_error_and_keeps_running() -> None:
    app = wired(
        {
            "boss": {
                "delegates_to": ["sloth"],
                "model": scripted(
                    {
                        "match": ".",
                        "delegate": {"to": "sloth", "message": "{input}"},
                        "reply": "gave up: {result}",
                    }
                ),
            },
            "sloth": {"model": scripted({"match": ".", "wait_ms": 600_000, "reply": "late"})},
        },
        agent_comm={"type": "local", "params": {"timeout": 0.5}},
    )
    host = RuntimeHost.build(app, ["boss"])
    try:
        final = ended(
            await collect(host.mailbox("boss").submit(TurnInput("s", "t", "hurry")).events())
        )
        assert (
            final.text
            == "gave up: delegation to 'sloth' failed: agent 'sloth' did not answer within 0.5 s"
        )
        # the peer's turn was not interrupted: it is still running in its own session
        [peer_session] = host.mailbox("sloth").sessions()
        assert host.mailbox("sloth").running(peer_session)
    finally:
        await host.aclose()


async def test_the_local_bus_names_what_it_hosts() -> None:
    bus = LocalBus()
    comm = LocalAgentComm(bus=bus)
    message = OutboundMessage("a", "ghost", "hi", "s", "c1", "c1", 1)
    with pytest.raises(
        PeerUnavailable, match=r"agent 'ghost' is not hosted in this process \(hosted: \(none\)\)"
    ):
        await comm.send(message)
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        LocalAgentComm(bus=bus, timeout=0)
