"""``TokenVerifier``: a caller's JWT checked locally, and the workload or person it names.

Rules:

- the token's header names a key id; the key comes from the issuer's :class:`~.keys.KeySource`
  (an unknown id refreshes the set once, then the token is refused as ``unknown_key``), and
  only asymmetric algorithms are accepted, the one the key is for;
- the signature is checked first, then the claims: ``iss`` must be the issuer, ``aud`` must
  hold the audience (a token minted for another audience, replayed here, is refused as
  ``wrong_audience``), ``exp`` must not be past and ``nbf`` / ``iat`` not ahead, each by
  more than ``skew`` seconds of the verifier's clock; ``sub`` and ``exp`` are required;
- a token that passed is remembered until its ``exp`` (plus the skew), keyed by the sha256 of
  its text, so the hot path verifies each token once; at most ``cache_size`` are kept, the
  expired first out. A key withdrawn from the JWKS does not end a token already remembered
  (it ends with the token's ``exp``: 10 minutes for the agents' own tokens);
- a Kubernetes ServiceAccount token (``sub`` ``system:serviceaccount:NS:NAME``, and the
  ``kubernetes.io`` claim) maps to its namespace, account and pod; any other token to its
  ``principal_claim`` (default ``sub``, required) and ``groups_claim`` (default ``groups``).
  A verifier of an OIDC scheme (``map_service_accounts=False``) never maps a token to a
  ServiceAccount: its callers are people and systems of that issuer, whatever ``sub`` says.

Every refusal is :class:`~mas.runtime.errors.TokenRejected` with a ``reason`` among
:data:`~mas.runtime.errors.TOKEN_REJECTIONS` and a message a person can act on; an issuer
whose keys cannot be read is :class:`~mas.runtime.errors.KeysUnavailable`.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jwt

from mas.infra.identity import parse_subject
from mas.runtime.errors import KeysUnavailable, TokenRejected
from mas.runtime.identity.keys import ALGORITHMS, KeySource

DEFAULT_SKEW_SECONDS = 30.0
DEFAULT_CACHE_SIZE = 4096


@dataclass(frozen=True)
class Identity:
    """Who a verified token names."""

    subject: str
    issuer: str
    expires_at: float
    groups: tuple[str, ...] = ()
    namespace: str | None = None
    service_account: str | None = None
    pod: str | None = None

    @property
    def is_service_account(self) -> bool:
        return self.service_account is not None


class TokenVerifier:
    """Checks tokens of one issuer for one audience (see the module docstring)."""

    def __init__(
        self,
        issuer: str | None,
        audience: str | Sequence[str],
        keys: KeySource,
        *,
        skew: float = DEFAULT_SKEW_SECONDS,
        cache_size: int = DEFAULT_CACHE_SIZE,
        clock: Callable[[], float] = time.time,
        principal_claim: str = "sub",
        groups_claim: str = "groups",
        map_service_accounts: bool = True,
    ) -> None:
        self.issuer = issuer
        self.audience: str | list[str] = audience if isinstance(audience, str) else list(audience)
        self.principal_claim, self.groups_claim = principal_claim, groups_claim
        self.map_service_accounts = map_service_accounts
        self._keys = keys
        self._skew = skew
        self._cache_size = cache_size
        self._clock = clock
        self._verified: OrderedDict[bytes, Identity] = OrderedDict()

    def expected_issuer(self) -> str:
        """The issuer tokens must name: the one given, else the one the key source learnt
        (its keys are fetched before any claim is checked)."""
        issuer = self.issuer or self._keys.issuer
        if not issuer:  # never check claims without an issuer: PyJWT would skip it
            raise KeysUnavailable("the issuer's discovery document has not been read yet")
        return issuer

    async def verify(self, token: str) -> Identity:
        """The identity ``token`` names, or :class:`TokenRejected` saying why not."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        known = self._verified.get(digest)
        now = self._clock()
        if known is not None:
            if now <= known.expires_at + self._skew:
                return known
            del self._verified[digest]
        identity = await self._check(token, now)
        self._remember(digest, identity, now)
        return identity

    async def _check(self, token: str, now: float) -> Identity:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRejected("malformed", f"the token is not a signed JWT: {exc}") from exc
        kid, alg = header.get("kid"), header.get("alg")
        if alg not in ALGORITHMS:
            raise TokenRejected(
                "malformed",
                f"the token's algorithm {alg!r} is not accepted: {', '.join(ALGORITHMS)}",
            )
        if not isinstance(kid, str) or not kid:
            raise TokenRejected("malformed", "the token's header names no key id (kid)")
        key = await self._keys.key(kid)
        if key is None:
            raise TokenRejected("unknown_key", f"key id {kid!r} is not among the issuer's keys")
        if key.algorithm_name != alg:
            raise TokenRejected(
                "bad_signature", f"the token says {alg}, key {kid!r} is for {key.algorithm_name}"
            )
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.expected_issuer(),
                # the times are checked below against this verifier's clock
                options={
                    "require": ["exp", "iss", "aud", "sub"],
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.PyJWTError as exc:
            raise _rejection(exc, self) from exc
        self._check_times(claims, now)
        if self.map_service_accounts:
            return _identity(claims)
        return self._person(claims)

    def _person(self, claims: Mapping[str, Any]) -> Identity:
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str | int) or isinstance(principal, bool) or principal == "":
            claim = self.principal_claim
            raise TokenRejected("missing_claim", f"the token has no {claim!r} naming the caller")
        groups = claims.get(self.groups_claim)
        return Identity(
            subject=str(principal),
            issuer=str(claims["iss"]),
            expires_at=float(claims["exp"]),
            groups=tuple(str(g) for g in groups) if isinstance(groups, list) else (),
        )

    def _check_times(self, claims: Mapping[str, Any], now: float) -> None:
        times = {}
        for name in ("exp", "nbf", "iat"):
            value = claims.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TokenRejected("malformed", f"the token's {name!r} is not a number")
            times[name] = float(value)
        if now > times["exp"] + self._skew:
            raise TokenRejected("expired", f"the token expired {now - times['exp']:.0f} s ago")
        for name in ("nbf", "iat"):
            if name in times and times[name] > now + self._skew:
                raise TokenRejected(
                    "not_yet_valid", f"the token's {name} is {times[name] - now:.0f} s ahead"
                )

    def _remember(self, digest: bytes, identity: Identity, now: float) -> None:
        self._verified[digest] = identity
        if len(self._verified) <= self._cache_size:
            return
        for key in [k for k, v in self._verified.items() if v.expires_at + self._skew < now]:
            del self._verified[key]
        while len(self._verified) > self._cache_size:
            self._verified.popitem(last=False)


def _rejection(exc: jwt.PyJWTError, verifier: TokenVerifier) -> TokenRejected:
    if isinstance(exc, jwt.InvalidAudienceError):
        return TokenRejected(
            "wrong_audience", f"the token is not for audience {verifier.audience!r}"
        )
    if isinstance(exc, jwt.InvalidIssuerError):
        return TokenRejected(
            "wrong_issuer", f"the token is not from issuer {verifier.expected_issuer()!r}"
        )
    if isinstance(exc, jwt.InvalidSignatureError):
        return TokenRejected("bad_signature", "the token's signature does not verify")
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return TokenRejected("missing_claim", f"the token has no {exc.claim!r} claim")
    return TokenRejected("malformed", f"the token cannot be read: {exc}")


def _identity(claims: Mapping[str, Any]) -> Identity:
    subject = str(claims["sub"])
    groups = claims.get("groups")
    common: dict[str, Any] = {
        "subject": subject,
        "issuer": str(claims["iss"]),
        "expires_at": float(claims["exp"]),
        "groups": tuple(str(g) for g in groups) if isinstance(groups, list) else (),
    }
    account = parse_subject(subject)
    if account is None:
        return Identity(**common)
    kube = claims.get("kubernetes.io")
    kube = kube if isinstance(kube, dict) else {}
    namespace, name = account
    claimed_ns = kube.get("namespace")
    claimed_sa = (kube.get("serviceaccount") or {}).get("name")
    if (claimed_ns, claimed_sa) not in ((None, None), (namespace, name)):
        raise TokenRejected(
            "malformed", f"the kubernetes.io claim names {claimed_ns}/{claimed_sa}, sub {subject}"
        )
    pod = (kube.get("pod") or {}).get("name")
    return Identity(
        **common, namespace=namespace, service_account=name, pod=str(pod) if pod else None
    )
