"""An agent that checks identities, on a real a2a-sdk server on loopback: its declared
delegator is admitted on every binding (through the real A2A comm, which sends its token),
a stranger is refused 403, no token and a bad token 401, each in its protocol's form.

The tokens are signed by keys the test generates (tests/token_issuer.py); the verifier reads
them through its key source as it reads the API server's (tests/runtime has the real one).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest, a2a_pb2_grpc
from a2a_support import STEP, Served, serve_agent
from test_a2a_delegation import outbound
from test_a2a_identity_outbound import _rest_only_front
from tests.token_issuer import AUDIENCE, ISSUER, Issuer

from library_ioa.plugins.a2a.agent_comm import A2AAgentComm
from mas.ctl.conformance.probe import probe
from mas.infra.identity import IDENTITY_HEADER, TOKEN_FILE_ENV, Admission, AdmittedCaller
from mas.runtime.errors import PeerProtocolError
from mas.runtime.identity.callers import CallerCheck
from mas.runtime.identity.keys import OidcKeys
from mas.runtime.identity.verification import TokenVerifier
from mas.runtime.metrics import REGISTRY

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

CONCIERGE = "system:serviceaccount:team-a:desk-concierge"
STRANGER = "system:serviceaccount:team-a:stranger"
V1 = {"A2A-Version": "1.0"}


def signed(issuer: Issuer, subject: str, **claims: Any) -> str:
    now = int(time.time())
    namespace, _, account = subject.removeprefix("system:serviceaccount:").partition(":")
    body: dict[str, Any] = {
        "sub": subject,
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": account}},
    }
    return issuer.token(**{**body, **claims})


def rpc_send(text: str) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "messageId": text.replace(" ", "-"), "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


def grpc_request(text: str) -> SendMessageRequest:
    request = SendMessageRequest()
    request.message.message_id = text.replace(" ", "-")
    request.message.role = 1
    request.message.parts.add().text = text
    return request


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


@contextlib.asynccontextmanager
async def checked_peer(issuer: Issuer, *, grpc_on: bool = True) -> AsyncIterator[Served]:
    """A scripted agent admitting only the concierge (as its declared delegator)."""
    admission = Admission("scripted", (AdmittedCaller(CONCIERGE, "delegates_to of concierge"),))
    verifier = TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=issuer.fetch))
    check = CallerCheck(admission, verifier)
    async with serve_agent(grpc_on=grpc_on, caller_check=check) as served:
        yield served


@pytest.fixture
async def peer(issuer: Issuer) -> AsyncIterator[Served]:
    async with checked_peer(issuer) as served:
        yield served


def denied(caller: str, reason: str) -> float:
    labels = {"agent": "scripted", "caller": caller, "reason": reason}
    return REGISTRY.get_sample_value("maslab_a2a_auth_denied_total", labels) or 0.0


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_the_declared_delegator_is_admitted_and_a_stranger_refused(
    issuer: Issuer, binding: str
) -> None:
    async with checked_peer(issuer, grpc_on=binding == "GRPC") as peer:
        front = await _rest_only_front(peer.url) if binding == "HTTP+JSON" else None
        url = f"http://127.0.0.1:{front.port}" if front is not None else peer.url
        delegator = A2AAgentComm(url, timeout=STEP, identity=lambda: signed(issuer, CONCIERGE))
        stranger = A2AAgentComm(url, timeout=STEP, identity=lambda: signed(issuer, STRANGER))
        try:
            reply = await delegator.send(outbound("quick admitted", session="s1"))
            with pytest.raises(PeerProtocolError) as refused:
                await stranger.send(outbound("quick refused", session="s2"))
        finally:
            await delegator.aclose()
            await stranger.aclose()
            if front is not None:
                await front.aclose()
    # the delegating turn learns who refused it, why, and what the peer admits
    status = "gRPC PERMISSION_DENIED" if binding == "GRPC" else "HTTP 403"
    assert f"refused this caller ({status}: caller {STRANGER} is not admitted" in str(refused.value)
    assert delegator.protocol_binding == binding
    assert reply.status == "completed"
    # the session belongs to the caller: another principal naming "s1" gets its own
    assert [t.session_id for t in peer.runner.seen] == [f"{CONCIERGE}/s1"]


async def test_json_rpc_refusals_say_why_and_who(peer: Served, issuer: Issuer) -> None:
    before = denied(STRANGER, "not_admitted")
    async with httpx.AsyncClient(base_url=peer.url, timeout=STEP) as http:
        answers = {
            name: await http.post("/", json=rpc_send(f"quick {name}"), headers={**V1, **headers})
            for name, headers in {
                "none": {},
                "stranger": {IDENTITY_HEADER: signed(issuer, STRANGER)},
                "expired": {IDENTITY_HEADER: signed(issuer, CONCIERGE, exp=int(time.time()) - 60)},
                "replayed": {IDENTITY_HEADER: signed(issuer, CONCIERGE, aud=["elsewhere"])},
                "garbage": {IDENTITY_HEADER: "not-a-jwt"},
            }.items()
        }
        card = await http.get("/.well-known/agent-card.json")
    assert card.status_code == 200  # the card stays public
    assert {name: a.status_code for name, a in answers.items()} == {
        "none": 401,
        "stranger": 403,
        "expired": 401,
        "replayed": 401,
        "garbage": 401,
    }
    reasons = {name: a.json()["error"]["data"]["reason"] for name, a in answers.items()}
    assert reasons == {
        "none": "missing",
        "stranger": "not_admitted",
        "expired": "expired",
        "replayed": "wrong_audience",
        "garbage": "malformed",
    }
    error = answers["stranger"].json()["error"]
    assert error["code"] == -32600
    assert error["data"]["caller"] == STRANGER
    assert error["message"].startswith(f"caller {STRANGER} is not admitted by agent 'scripted'")
    assert f"admits: {CONCIERGE} (delegates_to of concierge)" in error["message"]
    assert "a2a.allow" in error["message"]
    assert answers["none"].headers["www-authenticate"].startswith("Bearer ")
    assert "www-authenticate" not in answers["stranger"].headers
    assert peer.runner.seen == []
    assert denied(STRANGER, "not_admitted") == before + 1


async def test_http_json_refusals_use_the_google_rpc_shape(peer: Served, issuer: Issuer) -> None:
    body = json.dumps({"message": rpc_send("quick rest")["params"]["message"]})
    headers = {"Content-Type": "application/json", **V1}
    async with httpx.AsyncClient(base_url=peer.url, timeout=STEP) as http:
        refused = await http.post(
            "/a2a/rest/message:send",
            content=body,
            headers={**headers, IDENTITY_HEADER: signed(issuer, STRANGER)},
        )
        missing = await http.get("/a2a/rest/tasks", headers=V1)
        served = await http.post(
            "/a2a/rest/message:send",
            content=body,
            headers={**headers, IDENTITY_HEADER: signed(issuer, CONCIERGE)},
        )
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert (error["code"], error["status"]) == (403, "PERMISSION_DENIED")
    assert error["details"][0]["reason"] == "NOT_ADMITTED"
    assert error["details"][0]["metadata"] == {"caller": STRANGER}
    assert missing.status_code == 401
    assert missing.json()["error"]["status"] == "UNAUTHENTICATED"
    assert served.status_code == 200, served.text
    assert [t.session_id.partition("/")[0] for t in peer.runner.seen] == [CONCIERGE]


async def test_grpc_refusals_are_permission_denied_and_unauthenticated(
    peer: Served, issuer: Issuer
) -> None:
    version = ("a2a-version", "1.0")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{peer.exposure.grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(
                grpc_request("grpc stranger"),
                metadata=(version, (IDENTITY_HEADER, signed(issuer, STRANGER))),
                timeout=STEP,
            )
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert f"caller {STRANGER} is not admitted" in (refused.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as streamed:
            async for _ in stub.SendStreamingMessage(
                grpc_request("grpc none"), metadata=(version,), timeout=STEP
            ):
                pass
        assert streamed.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "no caller identity" in (streamed.value.details() or "")
        reply = await stub.SendMessage(
            grpc_request("grpc welcome"),
            metadata=(version, (IDENTITY_HEADER, signed(issuer, CONCIERGE))),
            timeout=STEP,
        )
    assert "grpc welcome" in str(reply)
    assert [t.session_id.partition("/")[0] for t in peer.runner.seen] == [CONCIERGE]


async def test_the_conformance_probe_sends_the_token_its_job_names(
    issuer: Issuer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = tmp_path / "token"
    volume.write_text(signed(issuer, CONCIERGE))
    async with checked_peer(issuer) as peer:
        monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
        outsider = await probe(peer.url, timeout=STEP)
        monkeypatch.setenv(TOKEN_FILE_ENV, str(volume))
        admitted = await probe(peer.url, timeout=STEP)
    assert not outsider.passed
    assert admitted.passed, admitted.failures()
    assert {c.interface for c in admitted.checks} >= {"JSONRPC", "HTTP+JSON", "GRPC"}


class CountingCheck(CallerCheck):
    """The real check, counting the requests that reached its full path, and its lookups of
    remembered tokens by their hash."""

    checked = 0
    looked_up = 0

    async def check(self, *args: Any, **kwargs: Any) -> Any:
        self.checked += 1
        return await super().check(*args, **kwargs)

    def remembered_until(self, token: bytes) -> Any:
        self.looked_up += 1
        return super().remembered_until(token)


async def test_grpc_finds_an_admitted_token_by_its_hash_as_http_does(issuer: Issuer) -> None:
    admission = Admission("scripted", (AdmittedCaller(CONCIERGE, "delegates_to of concierge"),))
    verifier = TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=issuer.fetch))
    check = CountingCheck(admission, verifier)
    token = signed(issuer, CONCIERGE)
    metadata = (("a2a-version", "1.0"), (IDENTITY_HEADER, token))
    stranger = (("a2a-version", "1.0"), (IDENTITY_HEADER, signed(issuer, STRANGER)))
    async with serve_agent(caller_check=check) as served:
        port = served.exposure.grpc_port
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            for n in range(3):
                await stub.SendMessage(grpc_request(f"grpc {n}"), metadata=metadata, timeout=STEP)
            with pytest.raises(grpc.aio.AioRpcError) as refused:  # a refusal is never kept
                await stub.SendMessage(grpc_request("no"), metadata=stranger, timeout=STEP)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # the first call verified the token; the next two were admitted by its hash alone
    assert check.remembered(token.encode()) is not None
    assert check.checked == 2
    assert [t.session_id.partition("/")[0] for t in served.runner.seen] == [CONCIERGE] * 3


async def test_a_connection_repeating_its_token_skips_the_hash_and_no_other_token_rides_on_it(
    issuer: Issuer,
) -> None:
    """On HTTP the token a connection presented last is compared by its bytes: the hash is
    looked up once per connection and token. Another token on the same connection is
    checked in full, and a token past its exp is never admitted by the connection's memo."""
    now = [time.time()]
    admission = Admission("scripted", (AdmittedCaller(CONCIERGE, "delegates_to of concierge"),))
    verifier = TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=issuer.fetch))
    check = CountingCheck(admission, verifier, clock=lambda: now[0])
    token, stranger = signed(issuer, CONCIERGE), signed(issuer, STRANGER)
    one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    statuses: list[int] = []
    async with serve_agent(grpc_on=False, caller_check=check) as served:

        async def send(http: httpx.AsyncClient, sent: str) -> None:
            reply = await http.post(
                "/", json=rpc_send(f"quick {len(statuses)}"), headers={**V1, IDENTITY_HEADER: sent}
            )
            statuses.append(reply.status_code)

        async with httpx.AsyncClient(base_url=served.url, timeout=STEP, limits=one) as http:
            for sent in (token, token, token, stranger, token):
                await send(http, sent)
            counts = (check.checked, check.looked_up)
            now[0] += 601  # past the token's exp (600 s) on the check's clock
            await send(http, token)  # the same connection, the same bytes: checked again
        async with httpx.AsyncClient(base_url=served.url, timeout=STEP, limits=one) as fresh:
            await send(fresh, token)
    assert statuses == [200, 200, 200, 403, 200, 200, 200]
    # first: looked up (nothing kept yet) and checked; second: found by its hash; third and
    # fifth: the connection's own; the stranger: looked up, checked and refused
    assert counts == (2, 3)
    # past exp on the check's clock, neither the connection's memo nor the hash admits it:
    # both requests reach the full check (whose verifier reads the real time, and admits)
    assert (check.checked, check.looked_up) == (4, 5)
