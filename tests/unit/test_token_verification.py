"""TokenVerifier against keys the test generates: every rejection, skew, rotation, the cache."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from mas.runtime.errors import TOKEN_REJECTIONS, KeysUnavailable, TokenRejected
from mas.runtime.identity.keys import OidcKeys
from mas.runtime.identity.verification import TokenVerifier
from tests.token_issuer import AUDIENCE, DISCOVERY, ISSUER, JWKS, NOW, Clock, Issuer

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def verifier(issuer: Issuer, clock: Clock, **kwargs: Any) -> TokenVerifier:
    keys = OidcKeys(ISSUER, fetch=issuer.fetch, refresh_interval=10, clock=clock)
    return TokenVerifier(ISSUER, AUDIENCE, keys, skew=30, clock=clock, **kwargs)


async def reason(check: TokenVerifier, token: str) -> str:
    with pytest.raises(TokenRejected) as caught:
        await check.verify(token)
    assert caught.value.reason in TOKEN_REJECTIONS
    assert str(caught.value)  # a message a person can read
    return caught.value.reason


async def test_a_service_account_token_names_its_workload(issuer: Issuer, clock: Clock) -> None:
    who = await verifier(issuer, clock).verify(issuer.token())
    assert who.subject == "system:serviceaccount:team-a:desk-concierge"
    assert (who.namespace, who.service_account, who.pod) == (
        "team-a",
        "desk-concierge",
        "desk-concierge-7d9-abc",
    )
    assert who.is_service_account
    assert who.expires_at == NOW + 600


async def test_an_oidc_token_names_its_subject_and_groups(issuer: Issuer, clock: Clock) -> None:
    token = issuer.token(sub="alice", groups=["ops", "dev"], **{"kubernetes.io": None})
    who = await verifier(issuer, clock).verify(token)
    assert (who.subject, who.groups, who.is_service_account) == ("alice", ("ops", "dev"), False)


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"exp": int(NOW) - 31}, "expired"),
        ({"nbf": int(NOW) + 31}, "not_yet_valid"),
        ({"iat": int(NOW) + 31}, "not_yet_valid"),
        ({"aud": ["https://kubernetes.default.svc"]}, "wrong_audience"),
        ({"iss": "https://elsewhere.example"}, "wrong_issuer"),
        ({"sub": None}, "missing_claim"),
        ({"exp": None}, "missing_claim"),
        ({"exp": "soon"}, "malformed"),
    ],
)
async def test_each_bad_claim_is_refused_with_its_reason(
    issuer: Issuer, clock: Clock, claims: dict[str, Any], why: str
) -> None:
    assert await reason(verifier(issuer, clock), issuer.token(**claims)) == why


async def test_times_within_the_clock_skew_pass(issuer: Issuer, clock: Clock) -> None:
    check = verifier(issuer, clock)
    await check.verify(issuer.token(exp=int(NOW) - 29))
    await check.verify(issuer.token(nbf=int(NOW) + 29, iat=int(NOW) + 29))


async def test_a_token_replayed_to_another_audience_is_refused(
    issuer: Issuer, clock: Clock
) -> None:
    token = issuer.token(aud=["maslab.io/a2a"])
    other = TokenVerifier(
        ISSUER, "https://other.example/api", OidcKeys(ISSUER, fetch=issuer.fetch), clock=clock
    )
    assert await reason(other, token) == "wrong_audience"
    await verifier(issuer, clock).verify(token)  # where it was meant to go, it passes


async def test_malformed_tokens_are_refused(issuer: Issuer, clock: Clock) -> None:
    check = verifier(issuer, clock)
    for text in ("", "not-a-jwt", "a.b.c", issuer.token() + "x"):
        assert await reason(check, text) in {"malformed", "bad_signature"}
    unsigned = jwt.encode({"sub": "x"}, None, algorithm="none", headers={"kid": "rsa-1"})
    assert await reason(check, unsigned) == "malformed"
    hmac = jwt.encode({"sub": "x"}, "secret" * 8, algorithm="HS256", headers={"kid": "rsa-1"})
    assert await reason(check, hmac) == "malformed"
    no_kid = jwt.encode({"sub": "x"}, issuer.keys["rsa-1"], algorithm="RS256")
    assert await reason(check, no_kid) == "malformed"


async def test_a_forged_signature_is_refused(issuer: Issuer, clock: Clock) -> None:
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    issuer.keys["mallory"] = forger
    header, body, _ = issuer.token().split(".")
    _, _, forged = issuer.token("mallory").split(".")
    assert await reason(verifier(issuer, clock), f"{header}.{body}.{forged}") == "bad_signature"


async def test_an_unknown_key_is_refused_after_one_refresh(issuer: Issuer, clock: Clock) -> None:
    issuer.add("secret", rsa.generate_private_key(public_exponent=65537, key_size=2048), False)
    check = verifier(issuer, clock)
    assert await reason(check, issuer.token("secret")) == "unknown_key"
    assert issuer.fetched == [DISCOVERY, JWKS]
    # made-up key ids do not turn into a fetch each within the refresh interval
    assert await reason(check, issuer.token("secret", sub="system:serviceaccount:a:b")) == (
        "unknown_key"
    )
    assert issuer.fetched == [DISCOVERY, JWKS]


async def test_a_rotated_key_is_fetched_when_a_token_names_it(issuer: Issuer, clock: Clock) -> None:
    check = verifier(issuer, clock)
    await check.verify(issuer.token())
    issuer.add("ec-2", ec.generate_private_key(ec.SECP256R1()))
    clock.now += 11  # past the refresh interval
    who = await check.verify(issuer.token("ec-2", exp=int(clock.now) + 600))
    assert who.service_account == "desk-concierge"
    assert issuer.fetched == [DISCOVERY, JWKS, DISCOVERY, JWKS]


async def test_a_verified_token_is_cached_until_it_expires(issuer: Issuer, clock: Clock) -> None:
    check = verifier(issuer, clock)
    token = issuer.token()
    await check.verify(token)
    issuer.published.clear()  # the key is withdrawn: the remembered token still passes
    clock.now += 301
    await check.verify(token)
    assert issuer.fetched == [DISCOVERY, JWKS]
    clock.now += 330  # past exp and the skew
    assert await reason(check, token) == "unknown_key"  # checked afresh once expired


async def test_the_cache_is_bounded(issuer: Issuer, clock: Clock) -> None:
    check = verifier(issuer, clock, cache_size=2)
    tokens = [issuer.token(jti=str(n)) for n in range(3)]
    for token in tokens:
        await check.verify(token)
    issuer.published.clear()
    clock.now += 301  # past the key set's max age: fetched again, now empty
    await check.verify(tokens[2])  # the newest are remembered
    assert await reason(check, tokens[0]) == "unknown_key"  # the oldest was dropped


async def test_a_kubernetes_claim_that_contradicts_sub_is_refused(
    issuer: Issuer, clock: Clock
) -> None:
    token = issuer.token(
        **{"kubernetes.io": {"namespace": "other", "serviceaccount": {"name": "x"}}}
    )
    assert await reason(verifier(issuer, clock), token) == "malformed"


async def test_a_discovery_document_for_another_issuer_is_not_trusted(clock: Clock) -> None:
    async def fetch(url: str) -> Mapping[str, Any]:
        return {"issuer": "https://evil.example", "jwks_uri": JWKS}

    check = TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=fetch), clock=clock)
    with pytest.raises(KeysUnavailable, match=r"evil\.example"):
        await check.verify(Issuer().token())


async def test_an_unreachable_issuer_is_not_the_callers_fault(clock: Clock) -> None:
    async def fetch(url: str) -> Mapping[str, Any]:
        raise OSError("connection refused")

    check = TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=fetch), clock=clock)
    with pytest.raises(KeysUnavailable, match="connection refused"):
        await check.verify(Issuer().token())


async def test_a_failed_fetch_stays_keys_unavailable_not_an_unknown_key(clock: Clock) -> None:
    """Within the refresh interval after a failed fetch, a token is still refused as
    ``keys_unavailable`` (not the caller's fault), never as an ``unknown_key`` it may hold.
    Seen in a pod whose NetworkPolicy blocked the API server: "key id ... is not among the
    issuer's keys" for its own cluster's tokens."""
    up = Issuer()
    down = True

    async def fetch(url: str) -> Mapping[str, Any]:
        if down:
            raise OSError("connection refused")
        return await up.fetch(url)

    keys = OidcKeys(ISSUER, fetch=fetch, refresh_interval=10, clock=clock)
    check = TokenVerifier(ISSUER, AUDIENCE, keys, clock=clock)
    for _ in range(2):  # the first fetch fails; the second lookup is within the interval
        with pytest.raises(KeysUnavailable, match="connection refused"):
            await check.verify(up.token())
    assert up.fetched == []
    down = False
    clock.now += 11  # past the refresh interval: fetched again, and the token verifies
    assert (await check.verify(up.token(exp=int(clock.now) + 600))).service_account


async def test_an_issuer_learnt_from_the_discovery_document_is_then_enforced(
    issuer: Issuer, clock: Clock
) -> None:
    keys = OidcKeys(None, fetch=issuer.fetch, discovery_url=DISCOVERY, clock=clock)
    check = TokenVerifier(None, AUDIENCE, keys, skew=30, clock=clock)
    with pytest.raises(KeysUnavailable):
        check.expected_issuer()  # never a claim check without an issuer
    assert (await check.verify(issuer.token())).issuer == ISSUER
    assert check.expected_issuer() == ISSUER
    assert await reason(check, issuer.token(iss="https://elsewhere.example")) == "wrong_issuer"
