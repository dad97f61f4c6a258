"""Who an agent admits (the delegation graph, a2a.allow, a2a.auth, anonymous) and the
decisions of CallerCheck on tokens the test signs: 401 with the reason, 403 naming the
caller and what is admitted, each counted."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from library_ioa.serving.auth import REDACTED, redact_credentials
from library_ioa.serving.callers import HttpCallers
from mas.infra import identity
from mas.infra.documents import read_yaml_file
from mas.infra.errors import ApplicationInvalid
from mas.infra.wiring import wire
from mas.runtime.errors import HostError
from mas.runtime.identity.callers import CallerCheck
from mas.runtime.identity.cluster import cluster_verifier
from mas.runtime.identity.keys import OidcKeys
from mas.runtime.identity.verification import TokenVerifier
from mas.runtime.metrics import REGISTRY
from tests.conftest import EXAMPLES
from tests.token_issuer import AUDIENCE, ISSUER, NOW, Clock, Issuer

pytestmark = pytest.mark.timeout(30)

NS = "team-a"
CONCIERGE = "system:serviceaccount:team-a:research-desk-concierge"
STRANGER = "system:serviceaccount:team-a:stranger"
RESEARCHER = "system:serviceaccount:team-a:research-desk-researcher"
OWN = "its own ServiceAccount: its conformance probe"


def example(**researcher_a2a: Any) -> dict[str, Any]:
    document = copy.deepcopy(read_yaml_file(EXAMPLES / "agency.yaml"))
    document["spec"]["endpoints"]["researcher"].setdefault("a2a", {}).update(researcher_a2a)
    return dict(document)


def admission_of(document: dict[str, Any], agent: str) -> identity.Admission:
    wired = wire(document)
    return identity.admission(wired.app, wired.routes, agent, NS)


def check_for(
    admission: identity.Admission, issuer: Issuer, clock: Clock | None = None
) -> CallerCheck:
    clock = clock or Clock()
    keys = OidcKeys(ISSUER, fetch=issuer.fetch, clock=clock)
    verifier = TokenVerifier(ISSUER, AUDIENCE, keys, clock=clock)
    return CallerCheck(admission, verifier, clock=clock)


def token(issuer: Issuer, subject: str, **claims: Any) -> str:
    namespace, account = identity.parse_subject(subject) or ("", "")
    return issuer.token(
        sub=subject,
        **{"kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": account}}},
        **claims,
    )


def denied(agent: str, caller: str, reason: str) -> float:
    sample = REGISTRY.get_sample_value(
        "maslab_a2a_auth_denied_total", {"agent": agent, "caller": caller, "reason": reason}
    )
    return sample or 0.0


def test_the_researcher_admits_the_pod_of_its_delegator_and_says_why() -> None:
    researcher = admission_of(example(), "researcher")
    assert [(c.principal, c.source) for c in researcher.callers] == [
        (RESEARCHER, OWN),
        (CONCIERGE, "delegates_to of concierge"),
    ]
    assert not researcher.anonymous
    # nobody delegates to the concierge: only its probe, and a2a.anonymous opens it
    concierge = admission_of(example(), "concierge")
    assert [c.principal for c in concierge.callers] == [CONCIERGE]
    assert concierge.anonymous


def test_a_private_worker_delegating_from_another_pod_admits_that_pod() -> None:
    document = example()
    summarizer = document["spec"]["agency"]["agents"]["summarizer"]["spec"]
    summarizer["delegates_to"] = ["researcher"]  # hosted in the concierge's pod (and its own)
    researcher = admission_of(document, "researcher")
    assert [(c.principal, c.source) for c in researcher.callers] == [
        (RESEARCHER, OWN),
        (CONCIERGE, "delegates_to of concierge"),  # the concierge's own edge is named first
    ]
    document["spec"]["agency"]["agents"]["concierge"]["spec"]["delegates_to"] = ["summarizer"]
    researcher = admission_of(document, "researcher")
    assert [(c.principal, c.source) for c in researcher.callers] == [
        (RESEARCHER, OWN),
        (CONCIERGE, "delegates_to of summarizer, hosted in the pod of concierge"),
    ]


def test_allow_admits_accounts_and_namespaces_and_refuses_other_text() -> None:
    allow = ["system:serviceaccount:ops:probe", "system:serviceaccounts:batch"]
    researcher = admission_of(example(allow=allow), "researcher")
    assert researcher.admitted("system:serviceaccount:ops:probe") is not None
    rule = researcher.admitted("system:serviceaccount:batch:anyone")
    assert rule is not None and rule.source == "spec.endpoints.researcher.a2a.allow[1]"
    assert researcher.admitted("system:serviceaccount:ops:other") is None
    assert researcher.admitted("system:serviceaccount:batchx:a") is None
    with pytest.raises(ApplicationInvalid) as caught:
        wire(example(allow=["alice"]))
    text = str(caught.value)
    assert text.startswith("spec.endpoints.researcher.a2a.allow: ")
    assert "allow[0] 'alice' names no caller" in text
    assert "'system:serviceaccount:NAMESPACE:NAME'" in text


async def test_a_delegator_is_admitted_as_its_subject() -> None:
    issuer = Issuer()
    check = check_for(admission_of(example(), "researcher"), issuer)
    decision = await check.check(token(issuer, CONCIERGE))
    assert (decision.status, decision.principal, decision.caller) == (200, CONCIERGE, CONCIERGE)


async def test_a_stranger_is_refused_403_naming_it_and_what_is_admitted() -> None:
    issuer = Issuer()
    check = check_for(admission_of(example(), "researcher"), issuer)
    before = denied("researcher", STRANGER, "not_admitted")
    decision = await check.check(token(issuer, STRANGER))
    assert (decision.status, decision.reason, decision.caller) == (403, "not_admitted", STRANGER)
    assert decision.message == (
        f"caller {STRANGER} is not admitted by agent 'researcher', which admits: "
        f"{RESEARCHER} ({OWN}); {CONCIERGE} (delegates_to of concierge). To admit it, name "
        "the agent it runs as in "
        f"the delegates_to of a calling agent, or add {STRANGER} to a2a.allow of "
        "'researcher''s endpoint"
    )
    assert denied("researcher", STRANGER, "not_admitted") == before + 1
    assert b"maslab_a2a_auth_denied_total{" in generate_latest(REGISTRY)


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": int(NOW) - 60}, "expired"),
        ({"aud": ["https://kubernetes.default.svc"]}, "wrong_audience"),
        ({"iss": "https://elsewhere.example"}, "wrong_issuer"),
    ],
)
async def test_a_bad_token_is_refused_401_with_its_reason_even_from_a_delegator(
    claims: dict[str, Any], reason: str
) -> None:
    issuer = Issuer()
    check = check_for(admission_of(example(anonymous=True), "researcher"), issuer)
    decision = await check.check(token(issuer, CONCIERGE, **claims))
    assert (decision.status, decision.reason, decision.caller) == (401, reason, "unknown")
    assert decision.message.startswith(f"{identity.IDENTITY_HEADER}: ")
    assert token(issuer, CONCIERGE, **claims) not in decision.message


async def test_an_unknown_key_and_a_forged_signature_are_401() -> None:
    issuer, forger = Issuer(), Issuer()
    check = check_for(admission_of(example(), "researcher"), issuer)
    forger.add("other", forger.keys["rsa-1"])
    assert (await check.check(token(forger, CONCIERGE, kid="other"))).reason == "unknown_key"
    # signed with another key under the issuer's key id
    assert (await check.check(token(forger, CONCIERGE))).reason == "bad_signature"


async def test_no_token_is_401_missing_unless_anonymous_or_a_scheme_matched() -> None:
    issuer = Issuer()
    closed = check_for(admission_of(example(), "researcher"), issuer)
    decision = await closed.check(None)
    assert (decision.status, decision.reason) == (401, "missing")
    assert f"{CONCIERGE} (delegates_to of concierge)" in decision.message
    assert (await closed.check(None, scheme="bearer")).principal == "bearer"
    # a stranger holding a credential of a2a.auth is an external caller through it
    stranger = await closed.check(token(issuer, STRANGER), scheme="bearer")
    assert (stranger.status, stranger.principal, stranger.caller) == (200, "bearer", STRANGER)
    open_ = check_for(admission_of(example(anonymous=True), "researcher"), issuer)
    assert (await open_.check(None)).status == 200
    anyone = await open_.check(token(issuer, STRANGER))
    assert (anyone.status, anyone.principal) == (200, STRANGER)


async def test_keys_that_cannot_be_read_are_503_not_the_callers_fault() -> None:
    issuer = Issuer()

    async def down(url: str) -> Any:
        raise OSError("connection refused")

    clock = Clock()
    verifier = TokenVerifier(
        ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=down, clock=clock), clock=clock
    )
    check = CallerCheck(admission_of(example(), "researcher"), verifier)
    decision = await check.check(token(issuer, CONCIERGE))
    assert (decision.status, decision.reason) == (503, "keys_unavailable")


def test_the_cluster_verifier_is_off_unless_asked_and_names_what_is_missing(
    tmp_path: Path,
) -> None:
    assert cluster_verifier({}, tmp_path) is None
    with pytest.raises(HostError) as unknown:
        cluster_verifier({"MAS_A2A_IDENTITY": "spiffe"}, tmp_path)
    assert str(unknown.value) == (
        "MAS_A2A_IDENTITY='spiffe' is not a known identity mode; accepted: 'kubernetes' "
        "(set by the operator), or unset"
    )
    on = {"MAS_A2A_IDENTITY": "kubernetes"}
    with pytest.raises(HostError) as missing:
        cluster_verifier(on, tmp_path)
    assert f"{tmp_path / 'ca.crt'} is missing" in str(missing.value)
    (tmp_path / "ca.crt").write_text("pem")
    (tmp_path / "api-token").write_text("t")
    with pytest.raises(HostError) as nowhere:
        cluster_verifier(on, tmp_path)
    assert "KUBERNETES_SERVICE_HOST=''" in str(nowhere.value)


async def test_an_admitted_token_is_remembered_until_it_expires_and_no_other_is() -> None:
    issuer, clock = Issuer(), Clock()
    check = check_for(admission_of(example(), "researcher"), issuer, clock)
    admitted, stranger = token(issuer, CONCIERGE), token(issuer, STRANGER)
    assert check.remembered(admitted.encode()) is None  # never seen
    first = await check.check(admitted, remember=admitted.encode())
    assert first.admitted and check.remembered(admitted.encode()) == first
    refused = await check.check(stranger, remember=stranger.encode())
    assert refused.status == 403 and check.remembered(stranger.encode()) is None
    clock.now = NOW + 601  # past its exp: forgotten, and the full check says why
    assert check.remembered(admitted.encode()) is None
    clock.now = NOW + 700
    late = await check.check(admitted, remember=admitted.encode())
    assert (late.status, late.reason) == (401, "expired")


async def test_the_http_check_hands_on_no_credential_on_either_path() -> None:
    """What the layers inside (the SDK, which logs headers) see of an admitted request, on
    the full check and on the remembered token's path: every credential header's value
    redacted in place, the other headers as sent, and the caller as the ASGI user."""
    issuer = Issuer()
    check = check_for(admission_of(example(), "researcher"), issuer)
    seen: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope)

    async def refused(message: dict[str, Any]) -> None:
        raise AssertionError(f"an admitted request was answered by the check: {message}")

    callers = HttpCallers(app, check)
    sent = token(issuer, CONCIERGE).encode()
    for _ in range(2):  # the full check, then the remembered token
        headers = [
            (b"content-type", b"application/json"),
            (b"maslab-identity", sent),
            (b"authorization", b"Bearer not-for-the-sdk"),
            (b"cookie", b"session=secret"),
            (b"x-trace", b"keep"),
        ]
        await callers({"type": "http", "path": "/", "headers": headers}, None, refused)
    assert check.remembered(sent) is not None
    for scope in seen:
        assert scope["headers"] == [
            (b"content-type", b"application/json"),
            (b"maslab-identity", REDACTED),
            (b"authorization", REDACTED),
            (b"cookie", REDACTED),
            (b"x-trace", b"keep"),
        ]
        assert scope["user"].user_name == CONCIERGE
        assert redact_credentials(scope) is scope  # nothing left for the inner layers
