"""The origin of a chain travels with it: a person signs in to a real OpenID Connect provider
(tests/oidc_issuer.py) and asks agent a, which delegates to b, which delegates to c, each in
its own runtime host on its own real A2A server, each hop authenticated by the caller's
ServiceAccount token (signed by keys the test holds, tests/token_issuer.py) and checked
against the delegation graph. The last agent sees ``mas.origin_principal`` = the person, on
its turn and on its request's span; a claim sent by the person is dropped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_support import STEP, Served, free_port, serve_agent
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_a2a_identity_inbound import V1, rpc_send
from tests.fast_path import fast_path_document
from tests.oidc_issuer import Provider, provider
from tests.token_issuer import AUDIENCE, ISSUER, Issuer

from library_ioa.plugins.a2a.exposure import A2AExposure
from mas.ctl.session.exposure import bind_listeners
from mas.ctl.session.host import RuntimeHost
from mas.infra.identity import TOKEN_FILE_ENV, Admission, AdmittedCaller
from mas.infra.wiring import wire
from mas.runtime.identity.callers import CallerCheck
from mas.runtime.identity.keys import OidcKeys
from mas.runtime.identity.verification import TokenVerifier
from mas.runtime.registry import default_registry
from mas.runtime.turns import ORIGIN_PRINCIPAL, origin_principal
from mas.telemetry import tracing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

ORIGIN = "mas.origin_principal"  # the metadata key and span attribute, as a reader names them


def account(name: str) -> str:
    return f"system:serviceaccount:team-a:chain-{name}"


def agent_token(issuer: Issuer, name: str) -> str:
    now = int(time.time())
    kube = {"namespace": "team-a", "serviceaccount": {"name": f"chain-{name}"}}
    return issuer.token(
        sub=account(name), iat=now, nbf=now, exp=now + 600, **{"kubernetes.io": kube}
    )


def check(issuer: Issuer, agent: str, delegator: str | None) -> CallerCheck:
    callers = (AdmittedCaller(account(delegator), f"delegates_to of {delegator}"),)
    admission = Admission(agent, callers if delegator else (), schemes=delegator is None)
    return CallerCheck(
        admission, TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=issuer.fetch))
    )


def chain_app(ports: dict[str, int], c_url: str, idp: Provider) -> dict[str, Any]:
    def relay(to: str) -> dict[str, Any]:
        rule = {"match": "^relay (?P<q>.+)", "delegate": {"to": to, "message": "{q}"}}
        return {"type": "scripted", "params": {"rules": [{**rule, "reply": f"{to}: {{result}}"}]}}

    oidc = {"issuer": idp.issuer, "audiences": [idp.client_id]}
    return fast_path_document(
        {
            "apiVersion": "infra.maslab.io/v1",
            "kind": "Application",
            "metadata": {"name": "chain", "namespace": "team-a"},
            "spec": {
                "agency": {
                    "entry": "a",
                    "agents": {
                        "a": {"spec": {"delegates_to": ["b"], "model": relay("b")}},
                        "b": {"spec": {"delegates_to": ["c"], "model": relay("c")}},
                        "c": {"spec": {"model": {"type": "echo"}}},
                    },
                },
                "endpoints": {
                    "a": {
                        "url": f"http://127.0.0.1:{ports['a']}",
                        "usage": "deploy",
                        "a2a": {"auth": {"schemes": [{"type": "oidc", "oidc": oidc}]}},
                    },
                    "b": {"url": f"http://127.0.0.1:{ports['b']}", "usage": "use-and-deploy"},
                    "c": {"url": c_url, "usage": "use-and-deploy", "timeout": 10},
                },
            },
        }
    )


@contextlib.asynccontextmanager
async def hosted(
    wired: Any, agent: str, caller_check: CallerCheck, token_file: Path
) -> AsyncIterator[A2AExposure]:
    """``agent`` in a runtime host of its own, sending the token of ``token_file``."""
    host = RuntimeHost.build(wired, [agent], env={TOKEN_FILE_ENV: str(token_file)})
    listeners = await bind_listeners(
        wired, host, agents=[agent], drain_timeout=2, caller_check=caller_check
    )
    try:
        yield listeners.get(agent).exposure  # type: ignore[misc]
    finally:
        await listeners.aclose()
        await host.aclose()


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with provider({"alice": ["mas-users"]}, tmp_path_factory.mktemp("oidc")) as running:
        yield running


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(tracer_provider)
    try:
        yield exporter
    finally:
        tracing.disable()
        tracer_provider.shutdown()


@contextlib.asynccontextmanager
async def chain(idp: Provider, tmp_path: Path) -> AsyncIterator[tuple[str, Served]]:
    """a -> b -> c served; yields a's URL and c (whose runner records its turns)."""
    issuer = Issuer()
    tokens = {}
    for name in ("a", "b"):
        tokens[name] = tmp_path / f"{name}.token"
        tokens[name].write_text(agent_token(issuer, name))
    async with serve_agent(grpc_on=False, caller_check=check(issuer, "scripted", "b")) as c:
        ports = {"a": free_port(), "b": free_port()}
        wired = wire(chain_app(ports, c.url, idp), default_registry().known_plugins())
        async with (
            hosted(wired, "b", check(issuer, "b", "a"), tokens["b"]),
            hosted(wired, "a", check(issuer, "a", None), tokens["a"]) as a,
        ):
            yield a.url, c


async def ask(url: str, token: str, text: str, metadata: dict[str, Any] | None = None) -> str:
    body = rpc_send(text)
    if metadata:
        body["params"]["message"]["metadata"] = metadata
    headers = {**V1, "Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=STEP) as http:
        answer = await http.post(url, json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    message = result.get("message") or result["task"]["status"]["message"]
    return "".join(part.get("text", "") for part in message["parts"])


async def test_the_last_agent_of_a_chain_sees_who_asked_first(
    idp: Provider, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    alice = idp.login("alice")
    async with chain(idp, tmp_path) as (a_url, c):
        reply = await ask(a_url, alice, "relay relay quick hello")
        # a person cannot name someone else as the origin: her claim is dropped
        claimed = await ask(a_url, alice, "relay relay quick again", {ORIGIN: "oidc:user:ceo"})
    assert reply == "b: c: hello" and claimed == "b: c: again"
    first, second = c.runner.seen
    assert first.metadata[ORIGIN] == "oidc:user:alice"
    assert second.metadata[ORIGIN] == "oidc:user:alice"
    # c was called by b's ServiceAccount, and its request span names the origin beside it
    served = [
        s for s in spans.get_finished_spans() if s.attributes.get("mas.caller") == account("b")
    ]
    assert served and all(s.attributes.get(ORIGIN) == "oidc:user:alice" for s in served)


async def test_an_unauthenticated_hop_cannot_claim_an_origin() -> None:
    """An anonymous agent's caller (no identity) claiming an origin: dropped, not replaced by
    anything it says."""
    async with serve_agent(grpc_on=False) as open_agent, httpx.AsyncClient(timeout=STEP) as http:
        body = rpc_send("quick hi")
        body["params"]["message"]["metadata"] = {ORIGIN: "oidc:user:ceo"}
        answer = await http.post(open_agent.url, json=body, headers=V1)
    assert answer.status_code == 200
    [turn] = open_agent.runner.seen
    assert ORIGIN not in turn.metadata


def test_only_an_agent_hop_relays_a_claimed_origin() -> None:
    assert ORIGIN_PRINCIPAL == ORIGIN
    assert origin_principal("oidc:user:alice", account("b")) == "oidc:user:alice"
    assert origin_principal("oidc:user:ceo", "oidc:user:mallory") == "oidc:user:mallory"
    assert origin_principal("oidc:user:ceo", "bearer") == "bearer"
    assert origin_principal("oidc:user:ceo", "") == ""
    assert origin_principal(None, account("b")) == account("b")  # an agent that starts one
    assert origin_principal(42, account("b")) == account("b")
