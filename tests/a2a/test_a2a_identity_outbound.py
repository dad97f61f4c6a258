"""The caller's token goes with every A2A send, on each binding, and follows a rotation.

The peer admits a request only through ``a2a.auth`` schemes that read the
``maslab-identity`` header (two of them: the token before a rotation and the one after),
and the principal that matched names the peer's session (``apiKey/...`` or
``apiKey2/...``): the test sees which token arrived on each call.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
import pytest
from a2a.types import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from a2a_support import STEP, free_port, serve_agent
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from test_a2a_delegation import outbound

from library_ioa.plugins.a2a.agent_comm import A2AAgentComm
from library_ioa.serving.listeners import HttpListener
from mas.infra.identity import IDENTITY_HEADER
from mas.runtime.errors import PeerProtocolError
from mas.runtime.identity.token_file import TokenFile

pytestmark = pytest.mark.integration

AUTH = {
    "schemes": [
        {"type": "api_key", "name": IDENTITY_HEADER, "value_env": "PEER_ID_BEFORE"},
        {"type": "api_key", "name": IDENTITY_HEADER, "value_env": "PEER_ID_AFTER"},
    ]
}


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    before, after = f"before-{secrets.token_hex(8)}", f"after-{secrets.token_hex(8)}"
    monkeypatch.setenv("PEER_ID_BEFORE", before)
    monkeypatch.setenv("PEER_ID_AFTER", after)
    return before, after


async def _rest_only_front(url: str) -> HttpListener:
    """A card front that advertises only the peer's HTTP+JSON interface."""
    async with httpx.AsyncClient() as http:
        real = (await http.get(f"{url}{AGENT_CARD_WELL_KNOWN_PATH}")).json()
    card = ParseDict(real, AgentCard(), ignore_unknown_fields=True)
    rest = [i for i in card.supported_interfaces if i.protocol_binding == "HTTP+JSON"]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(rest)

    async def card_route(_: Request) -> Response:
        return JSONResponse(MessageToDict(card))

    front = HttpListener(
        Starlette(routes=[Route(AGENT_CARD_WELL_KNOWN_PATH, card_route)]), "127.0.0.1", free_port()
    )
    await front.start()
    return front


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_each_binding_sends_the_current_token_and_its_rotation(
    tmp_path: Path, tokens: tuple[str, str], binding: str
) -> None:
    before, after = tokens
    volume = tmp_path / "token"
    volume.write_text(before)
    token_file = TokenFile(volume, check_interval=0)
    async with serve_agent(grpc_on=binding == "GRPC", a2a_options={"auth": AUTH}) as peer:
        front = await _rest_only_front(peer.url) if binding == "HTTP+JSON" else None
        url = f"http://127.0.0.1:{front.port}" if front is not None else peer.url
        comm = A2AAgentComm(url, {"X-Tenant": "t1"}, timeout=STEP, identity=token_file.current)
        try:
            first = await comm.send(outbound("quick one", session="s1"))
            volume.write_text(after)  # the kubelet rotated it
            second = await comm.send(outbound("quick two", session="s2"))
        finally:
            await comm.aclose()
            if front is not None:
                await front.aclose()
    assert comm.protocol_binding == TransportProtocol(binding).value
    assert (first.status, second.status) == ("completed", "completed")
    assert [t.session_id for t in peer.runner.seen] == ["apiKey/s1", "apiKey2/s2"]


async def test_a_comm_without_an_identity_sends_none(tokens: tuple[str, str]) -> None:
    async with serve_agent(a2a_options={"auth": AUTH}) as peer:
        comm = A2AAgentComm(peer.url, timeout=STEP)
        try:
            with pytest.raises(PeerProtocolError):
                await comm.send(outbound("quick refused"))
        finally:
            await comm.aclose()
    assert peer.runner.seen == []
