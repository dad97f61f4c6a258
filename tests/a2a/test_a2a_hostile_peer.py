"""Delegating to a peer that answers malformed A2A: every class is a PeerProtocolError that
names the peer's URL and what was wrong, becomes a tool error, and the turn goes on."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hostile_peer import PEER_WORDS, HostilePeer, hostile_peer

from library_ioa.plugins.a2a.agent_comm import A2AAgentComm
from mas.ctl.session.host import RuntimeHost
from mas.infra.wiring import wire
from mas.runtime import metrics
from mas.runtime.boundary.agentcomm import OutboundMessage
from mas.runtime.errors import PeerProtocolError
from mas.runtime.registry import default_registry
from mas.runtime.turns import Delegated, TurnEnded, TurnInput

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# Each malformed class, and words its error must carry (the field, or what was wrong).
MALFORMED = {
    "bad-timestamp": "timestamp",
    "result-not-an-object": "its result is a string, not an object",
    "artifacts-not-a-list": "artifacts",
    "state-not-a-state": "has no status.state",
    "task-without-id": "task.id is missing",
    "task-without-status": "has no status.state",
    "message-without-parts": "message.parts is empty",
    "not-json": "JSON",
    "html-content-type": "JSON",
    "server-error": "500",
    "neither-result-nor-error": "neither 'result' nor 'error'",
}


@pytest.fixture
async def peer() -> AsyncIterator[HostilePeer]:
    async with hostile_peer() as serving:
        yield serving


def outbound(text: str = "hello") -> OutboundMessage:
    return OutboundMessage(
        source="boss",
        target="ext",
        text=text,
        session_id=f"s-{uuid.uuid4().hex[:8]}",
        call_id="c-1",
        correlation_id="corr",
        depth=1,
    )


async def send(url: str) -> Any:
    comm = A2AAgentComm(url, timeout=30)
    try:
        return await comm.send(outbound())
    finally:
        await comm.aclose()


@pytest.mark.parametrize("mode", sorted(MALFORMED))
async def test_each_malformed_answer_is_a_protocol_error_naming_url_and_field(
    peer: HostilePeer, mode: str
) -> None:
    url = peer.url(mode)
    with pytest.raises(PeerProtocolError) as raised:
        await send(url)
    message = str(raised.value)
    assert message.startswith(f"peer {url} answered"), message
    assert MALFORMED[mode] in message, message
    assert "\n" not in message and "Traceback" not in message


async def test_a_timestamp_without_offset_is_read_as_utc_with_one_warning_per_peer(
    peer: HostilePeer, caplog: pytest.LogCaptureFixture
) -> None:
    url = peer.url("naive-timestamp")
    comm = A2AAgentComm(url, timeout=30)
    caplog.set_level(logging.WARNING, logger="library_ioa.plugins.a2a.agent_comm")
    try:
        first = await comm.send(outbound())
        second = await comm.send(outbound())
    finally:
        await comm.aclose()
    assert (first.status, first.text) == ("completed", PEER_WORDS)
    assert second.text == PEER_WORDS
    warned = [r.getMessage() for r in caplog.records if "UTC offset" in r.getMessage()]
    assert len(warned) == 1 and url in warned[0]


async def test_a_subscription_cut_mid_event_is_followed_by_reading_the_task(
    peer: HostilePeer,
) -> None:
    reply = await send(peer.url("stream-cut-mid-event"))
    assert (reply.status, reply.text) == ("completed", PEER_WORDS)
    assert peer.asked["stream-cut-mid-event"] == ["SendMessage", "SubscribeToTask", "GetTask"]


def delegating_app(url: str) -> dict[str, Any]:
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "hostile"},
        "spec": {
            "agency": {
                "entry": "boss",
                "agents": {
                    "boss": {
                        "spec": {
                            "delegates_to": ["ext"],
                            "model": {
                                "type": "scripted",
                                "params": {
                                    "rules": [
                                        {
                                            "match": ".",
                                            "delegate": {"to": "ext", "message": "{input}"},
                                            "reply": "went on after: {result}",
                                        }
                                    ]
                                },
                            },
                        }
                    }
                },
            },
            "endpoints": {"ext": {"protocol": "a2a", "url": url, "usage": "use", "timeout": 30}},
        },
    }


def protocol_errors() -> float:
    sample = metrics.REGISTRY.get_sample_value(
        "maslab_delegation_calls_total", {"source": "boss", "target": "ext", "outcome": "protocol"}
    )
    return sample or 0.0


@pytest.mark.parametrize("mode", ["result-not-an-object", "bad-timestamp", "not-json"])
async def test_the_turn_goes_on_with_a_tool_error_and_the_outcome_is_counted(
    peer: HostilePeer, mode: str
) -> None:
    before = protocol_errors()
    peer.mode = mode
    wired = wire(delegating_app(peer.root), default_registry().known_plugins())
    host = RuntimeHost.build(wired, ["boss"])
    try:
        events = [e async for e in host.mailbox("boss").submit(TurnInput("s", "t", "hi")).events()]
    finally:
        await host.aclose()
    [end] = [e for e in events if isinstance(e, TurnEnded)]
    [delegated] = [e for e in events if isinstance(e, Delegated)]
    assert end.status == "completed"
    assert end.text.startswith(f"went on after: delegation to 'ext' failed: peer {peer.root}")
    assert not delegated.ok
    assert protocol_errors() == before + 1


@pytest.mark.parametrize("verbose", [[], ["-v"], ["-vv"]])
async def test_run_mas_prints_no_traceback_for_a_malformed_peer(
    peer: HostilePeer, tmp_path: Path, verbose: list[str]
) -> None:
    document = tmp_path / "app.yaml"
    peer.mode = "result-not-an-object"
    document.write_text(yaml.safe_dump(delegating_app(peer.root)))
    env = {k: v for k, v in os.environ.items() if k != "MAS_DEBUG"}
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "mas.ctl.cli", *verbose, "run-mas", "-f", str(document)],
        *["-m", "hello"],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    stdout, stderr = out.decode(), err.decode()
    assert process.returncode == 0, stderr
    assert "went on after: delegation to 'ext' failed: peer" in stdout
    assert "its result is a string, not an object" in stdout
    assert "Traceback" not in stderr + stdout
