"""An agent's MCP door checks callers as its A2A door does (mas-ctl serve's bind_listeners,
a real MCP client, tokens the test signs)."""

from __future__ import annotations

import time

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from security_support import echo_endpoint, serve
from tests.ports import free_port
from tests.token_issuer import AUDIENCE, ISSUER, Issuer

from mas.infra.identity import IDENTITY_HEADER, Admission, AdmittedCaller
from mas.runtime.identity.callers import CallerCheck
from mas.runtime.identity.keys import OidcKeys
from mas.runtime.identity.verification import TokenVerifier

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

STEP = 15.0
CONCIERGE = "system:serviceaccount:team-a:desk-concierge"
STRANGER = "system:serviceaccount:team-a:stranger"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def signed(issuer: Issuer, subject: str) -> str:
    now = int(time.time())
    return issuer.token(sub=subject, iat=now, nbf=now, exp=now + 600, **{"kubernetes.io": None})


async def test_the_mcp_door_refuses_a_stranger_and_admits_the_delegator() -> None:
    issuer = Issuer()
    verifier = TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=issuer.fetch))
    check = CallerCheck(Admission("echo", (AdmittedCaller(CONCIERGE, "test"),)), verifier)
    door = f"http://127.0.0.1:{free_port()}"
    endpoints = {
        "echo": echo_endpoint(),
        "echo-mcp": {"protocol": "mcp", "agent": "echo", "url": door, "usage": "deploy"},
    }
    agents = {"echo": {"model": {"type": "echo"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with serve(agents, endpoints, "echo", caller_check=check):
        async with httpx.AsyncClient(timeout=STEP) as http:
            missing = await http.post(f"{door}/mcp", json=INITIALIZE, headers=headers)
            stranger = await http.post(
                f"{door}/mcp",
                json=INITIALIZE,
                headers={**headers, IDENTITY_HEADER: signed(issuer, STRANGER)},
            )
        token = {IDENTITY_HEADER: signed(issuer, CONCIERGE)}
        http2 = httpx2.AsyncClient(headers=token, timeout=httpx2.Timeout(STEP))
        async with http2, Client(streamable_http_client(f"{door}/mcp", http_client=http2)) as mcp:
            tools = await mcp.list_tools()
    assert missing.status_code == 401
    assert missing.json()["error"]["data"]["reason"] == "missing"
    assert stranger.status_code == 403
    assert stranger.json()["error"]["data"] == {"reason": "not_admitted", "caller": STRANGER}
    assert "ask" in [t.name for t in tools.tools]
