"""The JSON log form and the spans keep the redaction: no secret in any line or attribute.

front (API key from ``value_env``) delegates to peer (bearer from a Secret) with an outbound
``Authorization`` header from a Secret, traced, every logger at DEBUG in the JSON form.
"""

from __future__ import annotations

import io
import json
import logging
import secrets

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from security_support import V1, echo_endpoint, rpc_send, serve

from mas.infra.models import SecretKeyRef
from mas.infra.secrets import secret_env_name
from mas.telemetry import tracing
from mas.telemetry.logs import JsonFormatter

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

STEP = 10.0
PEER_REF = SecretKeyRef(name="peer-inbound", key="token")
OUTBOUND_REF = SecretKeyRef(name="front-outbound", key="authorization")


async def test_no_secret_reaches_a_json_log_line_or_a_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    peer_token = f"peertok-{secrets.token_hex(16)}"
    front_key = f"frontkey-{secrets.token_hex(16)}"
    monkeypatch.setenv(secret_env_name(PEER_REF), peer_token)
    monkeypatch.setenv(secret_env_name(OUTBOUND_REF), f"Bearer {peer_token}")
    monkeypatch.setenv("FRONT_API_KEY", front_key)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    tracing.enable(provider)
    try:
        peer_auth = {"schemes": [{"type": "bearer", "secret_key_ref": PEER_REF.model_dump()}]}
        front_auth = {"schemes": [{"type": "api_key", "value_env": "FRONT_API_KEY"}]}
        rule = {"match": "^(?P<q>.+)", "delegate": {"to": "peer", "message": "{q}"}}
        front_model = {"type": "scripted", "params": {"rules": [rule | {"reply": "{result}"}]}}
        agents = {"front": {"delegates_to": ["peer"], "model": front_model}}
        async with serve(
            {"peer": {"model": {"type": "echo"}}}, {"peer": echo_endpoint(auth=peer_auth)}, "peer"
        ) as peer:
            outbound = {"Authorization": {"secret_key_ref": OUTBOUND_REF.model_dump()}}
            endpoints = {
                "front": echo_endpoint(auth=front_auth),
                "peer": {"url": peer.url, "usage": "use", "headers": outbound, "timeout": 5},
            }
            async with (
                serve(agents, endpoints, "front") as front,
                httpx.AsyncClient(base_url=front.url, timeout=STEP) as http,
            ):
                authed = {**V1, "X-API-Key": front_key}
                reply = await http.post("/", json=rpc_send("hello peer"), headers=authed)
                assert "hello peer" in reply.text, reply.text
                refused = await http.post(
                    "/", json=rpc_send("x"), headers={**V1, "X-API-Key": "no"}
                )
                assert refused.status_code == 401
    finally:
        tracing.disable()
        provider.shutdown()
        root.removeHandler(handler)
        root.setLevel(level)
    lines = out.getvalue().splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert any(r.get("event") == "a2a_request" and r.get("trace_id") for r in records)
    attributes = [str(dict(s.attributes or {})) for s in exporter.get_finished_spans()]
    assert any("a2a.peer" in a for a in attributes)  # the hop carrying the header was traced
    for secret in (peer_token, front_key):
        assert secret not in out.getvalue()
        assert not [a for a in attributes if secret in a]
