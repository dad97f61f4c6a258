"""People with a token from a real OpenID Connect provider (tests/oidc_issuer.py), on real
a2a-sdk servers on loopback: an agent whose ``a2a.auth`` has an ``oidc`` scheme admits a token
the provider issued through its login flow, and refuses an expired one, one for another
audience and a person outside the required groups, on JSON-RPC, HTTP+JSON and gRPC, each in
its protocol's form. The agent reads the provider's discovery document and JWKS as it would a
production issuer's.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2_grpc
from a2a_support import STEP, Served, serve_agent
from test_a2a_identity_inbound import V1, grpc_request, rpc_send
from tests.oidc_issuer import Provider, provider

from mas.runtime.metrics import REGISTRY

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

USERS = {"alice": ["mas-users"], "bob": ["visitors"], "carol": ["visitors"]}
ALICE = "oidc:user:alice"


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with provider(USERS, tmp_path_factory.mktemp("oidc")) as running:
        yield running


def oidc_auth(idp: Provider, **options: Any) -> dict[str, Any]:
    scheme = {"issuer": idp.issuer, "audiences": [idp.client_id], **options}
    return {"auth": {"schemes": [{"type": "oidc", "oidc": scheme}]}}


@contextlib.asynccontextmanager
async def oidc_agent(
    idp: Provider, allow: list[str] | None = None, **options: Any
) -> AsyncIterator[Served]:
    a2a = oidc_auth(idp, **options)
    if allow:
        a2a["allow"] = allow
    async with serve_agent(a2a_options=a2a) as served:
        yield served


async def send(served: Served, binding: str, token: str | None, text: str) -> tuple[int, str, str]:
    """One SendMessage on ``binding`` with ``token`` as the bearer: (status, reason, message).

    status: the HTTP status (gRPC: 200, 401 or 403 from the status code); reason: the
    refusal's reason as the protocol carries it (gRPC carries none but the message)."""
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    if binding == "GRPC":
        codes = {grpc.StatusCode.UNAUTHENTICATED: 401, grpc.StatusCode.PERMISSION_DENIED: 403}
        address = f"127.0.0.1:{served.exposure.grpc_port}"
        metadata = [("a2a-version", "1.0"), *((k.lower(), v) for k, v in auth.items())]
        async with grpc.aio.insecure_channel(address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            try:
                await stub.SendMessage(grpc_request(text), metadata=metadata, timeout=STEP)
            except grpc.aio.AioRpcError as exc:
                return codes.get(exc.code(), 500), "", exc.details() or ""
            return 200, "", ""
    async with httpx.AsyncClient(base_url=served.url, timeout=STEP) as http:
        if binding == "JSONRPC":
            answer = await http.post("/", json=rpc_send(text), headers={**V1, **auth})
            error = answer.json().get("error") if answer.status_code != 200 else None
            if error is None:
                return answer.status_code, "", ""
            return answer.status_code, error["data"]["reason"], error["message"]
        body = json.dumps({"message": rpc_send(text)["params"]["message"]})
        answer = await http.post(
            "/a2a/rest/message:send",
            content=body,
            headers={"Content-Type": "application/json", **V1, **auth},
        )
        if answer.status_code == 200:
            return 200, "", ""
        error = answer.json()["error"]
        return answer.status_code, error["details"][0]["reason"].lower(), error["message"]


def denied(caller: str, reason: str) -> float:
    labels = {"agent": "scripted", "caller": caller, "reason": reason}
    return REGISTRY.get_sample_value("maslab_a2a_auth_denied_total", labels) or 0.0


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_token_from_the_provider_is_admitted_and_bad_ones_refused(
    idp: Provider, binding: str
) -> None:
    alice = idp.login("alice")
    bob = idp.login("bob")  # a valid token, but not in the required group
    idp.set_clock("-1h")  # a token issued an hour ago, kept past its 10 minutes
    try:
        stale = idp.login("alice")
    finally:
        idp.set_clock("0s")
    before = denied("oidc:user:bob", "missing_group")
    async with (
        oidc_agent(idp, required_groups=["mas-users"]) as agent,
        # the same provider, another audience: alice's token replayed to it
        oidc_agent(idp, audiences=["another-application"]) as elsewhere,
    ):
        answers = {
            "alice": await send(agent, binding, alice, "quick hello alice"),
            "bob": await send(agent, binding, bob, "quick hello bob"),
            "expired": await send(agent, binding, stale, "quick stale"),
            "replayed": await send(elsewhere, binding, alice, "quick replayed"),
            "none": await send(agent, binding, None, "quick nobody"),
            "garbage": await send(agent, binding, "not-a-jwt", "quick garbage"),
        }
        seen = [t.session_id.partition("/")[0] for t in agent.runner.seen]
    statuses = {name: status for name, (status, _, _) in answers.items()}
    assert statuses == {
        "alice": 200,
        "bob": 403,
        "expired": 401,
        "replayed": 401,
        "none": 401,
        "garbage": 401,
    }
    messages = {name: message for name, (_, _, message) in answers.items()}
    assert "caller oidc:user:bob is in none of the groups mas-users" in messages["bob"]
    assert "a2a.auth.schemes[0].oidc.required_groups" in messages["bob"]
    assert "the token expired" in messages["expired"]
    assert "is not for audience ['another-application']" in messages["replayed"]
    if binding != "GRPC":  # JSON-RPC and HTTP+JSON carry the reason itself
        reasons = {name: reason for name, (_, reason, _) in answers.items()}
        assert reasons == {
            "alice": "",
            "bob": "missing_group",
            "expired": "expired",
            "replayed": "wrong_audience",
            "none": "missing",
            "garbage": "malformed",
        }
    assert seen == [ALICE]  # only alice's turn ran, as her own principal
    assert denied("oidc:user:bob", "missing_group") == before + 1


async def test_the_card_advertises_the_provider_and_its_discovery_document_is_real(
    idp: Provider,
) -> None:
    async with oidc_agent(idp) as agent, httpx.AsyncClient(timeout=STEP) as http:
        card = (await http.get(f"{agent.url}/.well-known/agent-card.json")).json()
        scheme = card["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]
        discovery = (await http.get(scheme["openIdConnectUrl"])).json()
    assert scheme["openIdConnectUrl"] == f"{idp.issuer}/.well-known/openid-configuration"
    assert idp.client_id in scheme["description"]
    assert card["securityRequirements"] == [{"schemes": {"oidc": {}}}]
    assert discovery["issuer"] == idp.issuer and discovery["jwks_uri"]


async def test_a2a_allow_names_oidc_people_and_groups(idp: Provider) -> None:
    allow = ["oidc:user:alice", "oidc:group:staff"]
    async with oidc_agent(idp, allow=allow) as agent:
        alice = await send(agent, "JSONRPC", idp.login("alice"), "quick alice")
        carol = await send(agent, "JSONRPC", idp.login("carol"), "quick carol")
    assert alice[0] == 200
    assert carol[:2] == (403, "not_admitted")
    assert "caller oidc:user:carol is not admitted by agent 'scripted'" in carol[2]
    assert "oidc:group:staff (spec.endpoints.scripted.a2a.allow[1])" in carol[2]


async def test_the_principal_is_a_namespace_of_its_own(tmp_path: Path) -> None:
    """A provider whose subject looks like an agent's ServiceAccount (or holds a '/') is
    still a person of that provider: it never passes for the ServiceAccount."""
    users = {"system:serviceaccount:team-a:desk-concierge": [], "a/b": []}
    with provider(users, tmp_path) as idp:
        async with oidc_agent(idp) as agent:
            for user in users:
                status, _, _ = await send(agent, "JSONRPC", idp.login(user), f"quick {user}")
                assert status == 200
            owners = [t.session_id.rsplit("/", 1)[0] for t in agent.runner.seen]
    assert owners == ["oidc:user:system:serviceaccount:team-a:desk-concierge", "oidc:user:a%2Fb"]
