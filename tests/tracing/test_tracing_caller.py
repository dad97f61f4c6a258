"""The caller an agent's caller check names is an attribute of the request's span, admitted
or refused, on HTTP and gRPC (real OpenTelemetry SDK, real a2a-sdk server on loopback)."""

from __future__ import annotations

import asyncio
import time

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest, a2a_pb2_grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.security.security_support import V1, echo_endpoint, rpc_send, serve
from tests.token_issuer import AUDIENCE, ISSUER, Issuer

from mas.infra.identity import IDENTITY_HEADER, Admission, AdmittedCaller
from mas.runtime.identity.callers import CallerCheck
from mas.runtime.identity.keys import OidcKeys
from mas.runtime.identity.verification import TokenVerifier

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

STEP = 15.0
CONCIERGE = "system:serviceaccount:team-a:desk-concierge"
STRANGER = "system:serviceaccount:team-a:stranger"


def signed(issuer: Issuer, subject: str) -> str:
    now = int(time.time())
    return issuer.token(sub=subject, iat=now, nbf=now, exp=now + 600, **{"kubernetes.io": None})


async def test_the_request_span_names_the_caller(spans: InMemorySpanExporter) -> None:
    issuer = Issuer()
    verifier = TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=issuer.fetch))
    check = CallerCheck(Admission("peer", (AdmittedCaller(CONCIERGE, "test"),)), verifier)
    agents = {"peer": {"model": {"type": "echo"}}}
    async with serve(agents, {"peer": echo_endpoint()}, "peer", caller_check=check) as peer:
        async with httpx.AsyncClient(base_url=peer.url, timeout=STEP) as http:
            admitted = await http.post(
                "/",
                json=rpc_send("traced caller"),
                headers={**V1, IDENTITY_HEADER: signed(issuer, CONCIERGE)},
            )
        assert admitted.status_code == 200, admitted.text
        request = SendMessageRequest()
        request.message.message_id = "m-1"
        request.message.role = 1
        request.message.parts.add().text = "refused"
        assert peer.grpc_port is not None
        async with grpc.aio.insecure_channel(f"127.0.0.1:{peer.grpc_port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            metadata = (("a2a-version", "1.0"), (IDENTITY_HEADER, signed(issuer, STRANGER)))
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.SendMessage(request, metadata=metadata, timeout=STEP)

        def callers() -> dict[str, dict[str, object]]:
            return {
                str(s.attributes["mas.caller"]): dict(s.attributes)
                for s in spans.get_finished_spans()
                if s.attributes and "mas.caller" in s.attributes
            }

        async with asyncio.timeout(STEP):
            while len(callers()) < 2:
                await asyncio.sleep(0.02)
    seen = callers()
    assert set(seen) == {CONCIERGE, STRANGER}
    assert seen[CONCIERGE]["http.response.status_code"] == 200
    assert seen[STRANGER]["rpc.grpc.status_code"] == grpc.StatusCode.PERMISSION_DENIED.value[0]
