"""Outbound A2A over gRPC: used when the peer advertises it, HTTP otherwise or as a fallback."""

from __future__ import annotations

import secrets

import httpx
import pytest
from a2a.types import AgentCard, AgentInterface
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from a2a_support import STEP, Served, free_port, serve_agent
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from test_a2a_delegation import outbound
from tests.security.security_support import AUTH, BEARER_REF, echo_endpoint, serve

from library_ioa.plugins.a2a.agent_comm import A2AAgentComm, grpc_interface
from library_ioa.serving.listeners import HttpListener
from mas.infra.secrets import secret_env_name
from mas.runtime.errors import PeerProtocolError

pytestmark = pytest.mark.integration


async def test_a_peer_that_advertises_grpc_is_called_over_grpc(served: Served) -> None:
    comm = A2AAgentComm(served.url, timeout=STEP)
    try:
        reply = await comm.send(outbound("over grpc"))
        again = await comm.send(outbound("and again", session="other"))
    finally:
        await comm.aclose()
    assert comm.protocol_binding == TransportProtocol.GRPC.value
    assert (reply.status, reply.text) == ("completed", "over grpc")
    assert (again.status, again.text) == ("completed", "and again")
    assert [t.session_id for t in served.runner.seen] == ["caller-session", "other"]
    assert served.runner.seen[0].metadata["mas.correlation_id"] == "corr-42"


async def test_a_peer_without_grpc_is_called_over_jsonrpc() -> None:
    async with serve_agent(grpc_on=False) as peer:
        comm = A2AAgentComm(peer.url, timeout=STEP)
        try:
            reply = await comm.send(outbound("over http"))
        finally:
            await comm.aclose()
    assert comm.protocol_binding == TransportProtocol.JSONRPC.value
    assert (reply.status, reply.text) == ("completed", "over http")


async def test_an_advertised_grpc_port_that_does_not_answer_falls_back_to_http() -> None:
    async with serve_agent(grpc_on=False) as peer:
        async with httpx.AsyncClient() as http:
            real = (await http.get(f"{peer.url}{AGENT_CARD_WELL_KNOWN_PATH}")).json()
        card = ParseDict(real, AgentCard(), ignore_unknown_fields=True)
        closed = f"127.0.0.1:{free_port()}"  # advertised, nobody listens
        card.supported_interfaces.insert(
            0, AgentInterface(url=closed, protocol_binding="GRPC", protocol_version="1.0")
        )
        assert grpc_interface(card) == closed

        async def card_route(_: Request) -> Response:
            return JSONResponse(MessageToDict(card))

        front = HttpListener(
            Starlette(routes=[Route(AGENT_CARD_WELL_KNOWN_PATH, card_route)]),
            "127.0.0.1",
            free_port(),
        )
        await front.start()
        comm = A2AAgentComm(f"http://127.0.0.1:{front.port}", timeout=STEP)
        try:
            reply = await comm.send(outbound("after the fallback"))
        finally:
            await comm.aclose()
            await front.aclose()
    assert comm.protocol_binding == TransportProtocol.JSONRPC.value
    assert (reply.status, reply.text) == ("completed", "after the fallback")


async def test_the_endpoint_headers_are_sent_as_grpc_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = f"tok-{secrets.token_hex(8)}"
    monkeypatch.setenv(secret_env_name(BEARER_REF), token)
    monkeypatch.setenv("SEC_TEST_API_KEY", f"key-{secrets.token_hex(8)}")
    async with serve(
        {"echo": {"model": {"type": "echo"}}}, {"echo": echo_endpoint(auth=AUTH)}, "echo"
    ) as guarded:
        good = A2AAgentComm(guarded.url, {"Authorization": f"Bearer {token}"}, timeout=STEP)
        bad = A2AAgentComm(guarded.url, {"Authorization": "Bearer wrong"}, timeout=STEP)
        try:
            reply = await good.send(outbound("with a credential"))
            with pytest.raises(PeerProtocolError):
                await bad.send(outbound("with a wrong one"))
        finally:
            await good.aclose()
            await bad.aclose()
    assert good.protocol_binding == bad.protocol_binding == TransportProtocol.GRPC.value
    assert (reply.status, reply.text) == ("completed", "with a credential")
