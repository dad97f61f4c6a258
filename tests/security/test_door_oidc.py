"""The MCP door of an agent whose ``a2a.auth`` is an ``oidc`` scheme enforces it as the A2A
door does: a person with a token from the real provider (tests/oidc_issuer.py) is served, a
request without one is 401, one outside the required group 403."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from test_door_auth import INITIALIZE, MCP_HEADERS, rpc
from tests.oidc_issuer import Provider, provider
from tests.ports import free_port
from tests.session_modes.session_modes_support import STEP, application, scripted

from mas.ctl.session.modes import SessionProcess
from mas.infra.wiring import wire

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

V1 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    users = {"alice": ["mas-users"], "bob": ["visitors"]}
    with provider(users, tmp_path_factory.mktemp("oidc")) as running:
        yield running


@pytest.fixture
async def doors(idp: Provider) -> AsyncIterator[tuple[str, str]]:
    a2a, mcp = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    scheme = {"issuer": idp.issuer, "audiences": [idp.client_id], "required_groups": ["mas-users"]}
    rows: dict[str, dict[str, Any]] = {
        "desk": {"url": a2a, "usage": "deploy"},
        "desk-mcp": {"protocol": "mcp", "agent": "desk", "url": mcp, "usage": "deploy"},
    }
    rows["desk-mcp"]["a2a"] = {"auth": {"schemes": [{"type": "oidc", "oidc": scheme}]}}
    doc = application({"desk": {"model": scripted(default="heard: {input}")}}, rows)
    process = SessionProcess(wire(doc), control=False)
    await process.start()
    try:
        yield a2a, f"{mcp}/mcp"
    finally:
        await process.aclose(drain=False)


async def test_the_mcp_door_enforces_the_oidc_scheme(idp: Provider, doors: tuple[str, str]) -> None:
    a2a, mcp = doors
    alice, bob = idp.login("alice"), idp.login("bob")
    async with httpx.AsyncClient(timeout=STEP) as http:

        async def initialize(token: str | None) -> httpx.Response:
            auth = {"Authorization": f"Bearer {token}"} if token else {}
            return await http.post(mcp, json=INITIALIZE, headers={**MCP_HEADERS, **auth})

        nobody, outsider, member = (
            await initialize(None),
            await initialize(bob),
            await initialize(alice),
        )
        a2a_nobody = await http.post(a2a + "/", json=rpc("SendMessage", "x", "c"), headers=V1)
    assert nobody.status_code == 401 and "www-authenticate" in nobody.headers
    assert nobody.json()["error"]["data"]["reason"] == "missing"
    assert outsider.status_code == 403
    assert outsider.json()["error"]["data"]["reason"] == "missing_group"
    assert member.status_code == 200, member.text
    assert a2a_nobody.status_code == 401  # the A2A door enforces the same auth
