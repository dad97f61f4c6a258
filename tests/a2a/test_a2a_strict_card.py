"""``a2a.compat_0_3: false``: a strict 1.0 card and no 0.3 method names."""

from __future__ import annotations

import httpx
from tests.a2a.a2a_support import ScriptRunner, free_port
from tests.fast_path import fast_path_options

from library_ioa.plugins.a2a.exposure import A2AExposure
from mas.ctl.session.mailbox import SessionTurnMailbox
from mas.infra.models import AgentManifest, Endpoint


async def test_strict_endpoint_lists_only_1_0_and_refuses_0_3_names() -> None:
    port = free_port()
    endpoint = Endpoint(
        url=f"http://127.0.0.1:{port}", usage="deploy", a2a=fast_path_options({"compat_0_3": False})
    )
    mailbox = SessionTurnMailbox(ScriptRunner())
    exposure = A2AExposure(
        agent_id="strict", manifest=AgentManifest(), endpoint=endpoint, mailbox=mailbox
    )
    await exposure.start()
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            card = (await http.get(f"{exposure.url}/.well-known/agent-card.json")).json()
            legacy = await http.post(
                exposure.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}},
            )
    finally:
        await exposure.aclose()
        await mailbox.aclose()
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0"}
    assert "preferredTransport" not in card and "url" not in card
    assert legacy.json()["error"] == {"code": -32601, "message": "Method not found"}
