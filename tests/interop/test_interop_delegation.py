"""Delegation from ``mas-ctl run-mas`` to agents built on other A2A implementations.

Each peer (tests/interop/peers) is a real server from its own virtualenv: pydantic-ai's
fasta2a (A2A 1.0), Strands Agents (A2A 0.3 on a2a-sdk 0.3) and a bare a2a-sdk 0.3 server.
None runs an LLM: each answers ``<name> heard: <the text>`` in an artifact with a name of
its own. The delegating agent's scripted model puts the delegation's ``{result}`` into its
reply, so the reply on stdout is what a real model would have read from the peer.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.interop.interop_peers import CARD_PATH, POLL_SECONDS, Served
from tests.session_modes.session_modes_support import (
    STEP,
    application,
    mas_ctl,
    scripted,
    write_app,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def delegating_app(tmp_path: Path, peer_url: str) -> Path:
    """``desk`` (scripted, in-process) delegating ``ask <q>`` to the remote ``peer``."""
    rule = {
        "match": "^ask (?P<q>.+)",
        "delegate": {"to": "peer", "message": "{q}"},
        "reply": "peer said: {result}",
    }
    doc = application(
        {"desk": {"delegates_to": ["peer"], "model": scripted(rule)}},
        {"peer": {"url": peer_url, "usage": "use", "timeout": 20}},
    )
    return write_app(tmp_path / "app.yaml", doc)


async def test_the_model_reads_the_peers_words(
    peer: Served, tmp_path: Path, control_dir: Path
) -> None:
    app = delegating_app(tmp_path, peer.url)
    code, out, err = await mas_ctl(control_dir, "run-mas", "-f", str(app), "-m", "ask hello there")
    assert code == 0, err
    assert out == f"peer said: {peer.peer.heard} hello there\n", (out, err, peer.output())
    assert "Traceback" not in err


async def rpc(
    http: httpx.AsyncClient, url: str, version: str, method: str, params: dict[str, Any]
) -> Any:
    """One JSON-RPC call in A2A ``version``; its ``result``."""
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    headers = {"A2A-Version": version} if version == "1.0" else {}
    reply = await http.post(url, json=body, headers=headers)
    reply.raise_for_status()
    answer = reply.json()
    assert "result" in answer, answer
    return answer["result"]


async def completed_task(http: httpx.AsyncClient, url: str, version: str, text: str) -> Any:
    """Send ``text`` in A2A ``version`` (1.0 or 0.3.0); the task once it has completed."""
    message_id = uuid.uuid4().hex
    if version == "0.3.0":
        part = {"kind": "text", "text": text}
        message = {"kind": "message", "role": "user", "messageId": message_id, "parts": [part]}
        task = await rpc(http, url, version, "message/send", {"message": message})
        assert task["status"]["state"] == "completed", task
        return task
    message = {"role": "ROLE_USER", "messageId": message_id, "parts": [{"text": text}]}
    task = (await rpc(http, url, version, "SendMessage", {"message": message}))["task"]
    while task["status"]["state"] != "TASK_STATE_COMPLETED":  # fasta2a answers "submitted"
        assert task["status"]["state"] in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}, task
        await asyncio.sleep(POLL_SECONDS)
        task = await rpc(http, url, version, "GetTask", {"id": task["id"]})
    return task


async def test_the_peer_answers_in_an_artifact_of_its_own_name(peer: Served) -> None:
    async with httpx.AsyncClient(timeout=STEP) as http, asyncio.timeout(STEP):
        card = (await http.get(peer.url + CARD_PATH)).json()
        versions = [card.get("protocolVersion")] + [
            i["protocolVersion"] for i in card.get("supportedInterfaces", [])
        ]
        assert peer.peer.protocol_version in versions, card
        task = await completed_task(http, peer.url, peer.peer.protocol_version, "hello there")
    artifacts = [
        (a.get("name"), "".join(p.get("text", "") for p in a["parts"])) for a in task["artifacts"]
    ]
    assert artifacts == [(peer.peer.artifact, f"{peer.peer.heard} hello there")], task
