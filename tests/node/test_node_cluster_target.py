"""An APP/AGENT target reaches a real pod through the API server's port-forward.

No route to the pods or Services is used: the client on the host talks to loopback
listeners, and each of its connections is a port-forward stream through the API server
to the kubelet and into the pod (``kubectl port-forward``'s path, without kubectl).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import AgentCard, Message, Part, Role, SendMessageRequest
from google.protobuf import json_format

from mas.ctl.cluster import ClusterTarget, open_cluster_target

from .agency import NS, Desk, reply_text

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

CARD_PATH = "/.well-known/agent-card.json"


@contextlib.asynccontextmanager
async def target_client(target: ClusterTarget, binding: str) -> AsyncIterator[Client]:
    """The a2a-sdk client on the card the pod serves, its URLs rewritten to the forwards."""
    channels: list[grpc.aio.Channel] = []

    def channel(address: str) -> grpc.aio.Channel:
        channels.append(grpc.aio.insecure_channel(address))
        return channels[-1]

    async with httpx.AsyncClient(timeout=60) as http:
        answer = await http.get(target.base_url + CARD_PATH)
        answer.raise_for_status()
        card = json_format.ParseDict(answer.json(), AgentCard(), ignore_unknown_fields=True)
        for interface in card.supported_interfaces:
            interface.url = target.rewrite(interface.url)
        # every interface the pod advertises (its Service) now leads to a local forward
        assert all(
            i.url.startswith(("http://127.0.0.1:", "127.0.0.1:")) for i in card.supported_interfaces
        ), card
        config = ClientConfig(
            streaming=False,
            httpx_client=http,
            grpc_channel_factory=channel,
            supported_protocol_bindings=[binding],
        )
        client = ClientFactory(config).create(card)
        try:
            yield client
        finally:
            await client.close()
            for made in channels:
                await made.close()


@pytest.mark.parametrize("binding", ["JSONRPC", "GRPC"])
async def test_the_concierge_answers_through_the_port_forward(desk: Desk, binding: str) -> None:
    async with open_cluster_target(
        "research-desk/concierge", NS, None, str(desk.node.kubeconfig)
    ) as target:
        assert target.base_url.startswith("http://127.0.0.1:")
        assert target.pod in {p.metadata.name for p in desk.pods("concierge")}
        async with target_client(target, binding) as client:
            message = Message(
                role=Role.ROLE_USER,
                message_id=str(uuid.uuid4()),
                parts=[Part(text="research A2A 1.0")],
            )
            async with asyncio.timeout(120):
                responses = [
                    r async for r in client.send_message(SendMessageRequest(message=message))
                ]
    # The concierge's pod delegated to the researcher's pod, whose echo says "sources on".
    assert reply_text(responses[-1]) == "found: sources on A2A 1.0"


def mas_ctl(desk: Desk, *args: str) -> subprocess.CompletedProcess[str]:
    """``mas-ctl`` on the host with the node's kubeconfig in ``KUBECONFIG``, as a user runs it."""
    env = {**os.environ, "KUBECONFIG": str(desk.node.kubeconfig)}
    return subprocess.run(
        [sys.executable, "-m", "mas.ctl.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


async def test_mas_ctl_ask_reaches_the_concierge_through_the_api_server(desk: Desk) -> None:
    done = await asyncio.to_thread(
        mas_ctl, desk, "ask", "research-desk/concierge", "-n", NS, "-m", "research A2A 1.0"
    )
    assert (done.returncode, done.stdout) == (0, "found: sources on A2A 1.0\n"), done.stderr
    assert "Traceback" not in done.stderr


async def test_mas_ctl_ask_of_an_in_process_agent_names_its_hosts(desk: Desk) -> None:
    done = await asyncio.to_thread(
        mas_ctl, desk, "ask", "research-desk/summarizer", "-n", NS, "-m", "notes"
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: 'summarizer' is not deployed: it runs in-process inside the pods of concierge, "
        "researcher; ask one of those (e.g. research-desk/concierge), which delegates to it\n"
    )
