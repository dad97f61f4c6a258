"""A full flow with distinctive secrets: no value in any log line (DEBUG), reply, card or task.

front (API key from ``value_env``) delegates to peer (bearer from a Secret) over A2A with an
outbound ``Authorization`` header from a Secret; refusals and a failing delegation are part
of the flow. Every log record of every logger at DEBUG is captured and searched.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from typing import Any

import httpx
import pytest
from security_support import V1, echo_endpoint, rpc_send, serve

from mas.infra.models import SecretKeyRef
from mas.infra.secrets import secret_env_name

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

STEP = 10.0
PEER_REF = SecretKeyRef(name="peer-inbound", key="token")
OUTBOUND_REF = SecretKeyRef(name="front-outbound", key="authorization")


def front_agents() -> dict[str, Any]:
    rule = {
        "match": "^remote (?P<q>.+)",
        "delegate": {"to": "peer", "message": "{q}"},
        "reply": "peer: {result}",
    }
    model = {"type": "scripted", "params": {"rules": [rule], "default": {"reply": "ok {input}"}}}
    return {"front": {"delegates_to": ["peer"], "model": model}}


async def test_no_secret_value_reaches_a_log_a_reply_or_the_card(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    peer_token = f"peertok-{secrets.token_hex(16)}"
    front_key = f"frontkey-{secrets.token_hex(16)}"
    monkeypatch.setenv(secret_env_name(PEER_REF), peer_token)
    monkeypatch.setenv(secret_env_name(OUTBOUND_REF), f"Bearer {peer_token}")
    monkeypatch.setenv("FRONT_API_KEY", front_key)
    seen: list[str] = []  # everything a client saw

    peer_auth = {"schemes": [{"type": "bearer", "secret_key_ref": PEER_REF.model_dump()}]}
    front_auth = {"schemes": [{"type": "api_key", "value_env": "FRONT_API_KEY"}]}
    peer_endpoint = echo_endpoint(auth=peer_auth)
    async with serve(
        {"peer": {"model": {"type": "echo"}}}, {"peer": peer_endpoint}, "peer"
    ) as peer:
        outbound = {"Authorization": {"secret_key_ref": OUTBOUND_REF.model_dump()}}
        endpoints = {
            "front": echo_endpoint(auth=front_auth),
            "peer": {"url": peer.url, "usage": "use", "headers": outbound, "timeout": 5},
        }
        async with (
            serve(front_agents(), endpoints, "front") as front,
            httpx.AsyncClient(base_url=front.url, timeout=STEP) as http,
        ):
            authed = {**V1, "X-API-Key": front_key}
            reply = await http.post("/", json=rpc_send("remote hello peer"), headers=authed)
            seen.append(reply.text)
            assert "peer: hello peer" in reply.text, reply.text
            task_id = reply.json()["result"]["task"]["id"]
            get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
            seen.append((await http.post("/", json=get, headers=authed)).text)
            stream = rpc_send("remote streamed words") | {"method": "SendStreamingMessage"}
            seen.append((await http.post("/", json=stream, headers=authed)).text)
            assert "peer: streamed words" in seen[-1]
            refused = await http.post("/", json=rpc_send("x"), headers={**V1, "X-API-Key": "no"})
            assert refused.status_code == 401
            seen.append(refused.text + str(refused.headers))
            seen.append((await http.get("/.well-known/agent-card.json")).text)
        async with httpx.AsyncClient(timeout=STEP) as bare:
            direct = await bare.post(peer.url, json=rpc_send("skip the front"), headers=V1)
        assert direct.status_code == 401
        seen.append(direct.text)

        # the same front with a wrong outbound credential: a clear tool error, still no secret
        monkeypatch.setenv(secret_env_name(OUTBOUND_REF), f"Bearer wrong-{uuid.uuid4().hex}")
        endpoints["front"] = echo_endpoint(auth=front_auth)
        async with (
            serve(front_agents(), endpoints, "front") as front,
            httpx.AsyncClient(base_url=front.url, timeout=STEP) as http,
        ):
            failed = await http.post(
                "/", json=rpc_send("remote anyone?"), headers={**V1, "X-API-Key": front_key}
            )
            seen.append(failed.text)
            assert "delegation to 'peer' failed" in failed.text, failed.text
            assert (
                "401" in failed.text or "nauthorized" in failed.text or "uthenticat" in failed.text
            )

    logged = caplog.text + "\n".join(
        f"{r.name} {r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records
    )
    assert len(caplog.records) > 50  # DEBUG really was captured
    assert "delegation" in logged.lower() or "peer" in logged
    for value in (peer_token, front_key):
        assert value not in logged, [
            r.getMessage() for r in caplog.records if value in r.getMessage()
        ][:3]
        for text in seen:
            assert value not in text
