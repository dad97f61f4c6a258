"""The ``oidc`` schemes of ``a2a.auth``: people and other systems with a token from an issuer.

Contract of :class:`OidcSchemes`:

- a request's ``Authorization: Bearer <JWT>`` is matched to the scheme whose issuer the
  token's (unverified) ``iss`` names; a token naming none of them is refused as
  ``wrong_issuer``, one that is not a JWT as ``malformed``;
- that scheme's :class:`~.verification.TokenVerifier` checks it against the issuer's own
  discovery document and JWKS (:class:`~.keys.OidcKeys`: cached, fetched again for an
  unknown key id), for the scheme's ``audiences`` (any one), with its ``principal_claim``
  and ``groups_claim``; a verified token is remembered until it expires;
- the caller is :func:`oidc_principal` of the claim's value, ``oidc:user:<value>``: a
  namespace of its own, so a person's token never passes for an agent's ServiceAccount
  (``system:serviceaccount:...``) whatever its ``sub`` says, nor for a static scheme id.

The admission of a verified caller (``required_groups``, ``a2a.allow``) is the caller
check's (:mod:`.callers`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jwt

from mas.infra.models import OIDC_GROUP_PREFIX, OIDC_PRINCIPAL_PREFIX, AuthScheme
from mas.runtime.errors import TokenRejected
from mas.runtime.identity.keys import Fetch, OidcKeys
from mas.runtime.identity.verification import Identity, TokenVerifier


def oidc_principal(value: str) -> str:
    """The principal of an OIDC caller whose principal claim is ``value``.

    ``/`` and ``%`` are percent-encoded: a principal owns its sessions as
    ``<principal>/<context id>`` (:func:`library_ioa.serving.principals.owned_session`), so
    a principal never holds a ``/``."""
    return OIDC_PRINCIPAL_PREFIX + value.replace("%", "%25").replace("/", "%2F")


def oidc_group(group: str) -> str:
    """How ``a2a.allow`` names the members of ``group``."""
    return OIDC_GROUP_PREFIX + group


@dataclass(frozen=True)
class OidcCaller:
    """A verified OIDC caller: its principal, groups, and the scheme that verified it."""

    principal: str
    groups: tuple[str, ...]
    scheme_id: str
    required_groups: tuple[str, ...]
    field: str  # where the scheme is declared, for a refusal a person reads


class OidcScheme:
    """One ``oidc`` scheme: its issuer's verifier and what a caller must hold."""

    def __init__(
        self,
        scheme_id: str,
        scheme: AuthScheme,
        field: str,
        *,
        fetch: Fetch | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        options = scheme.oidc
        if options is None:
            raise ValueError(f"{field} is not of type oidc")
        self.scheme_id, self.field = scheme_id, field
        self.issuer = options.issuer
        self.required_groups = tuple(options.required_groups)
        self.verifier = TokenVerifier(
            options.issuer,
            options.audiences,
            OidcKeys(options.issuer, fetch=fetch),
            clock=clock,
            principal_claim=options.principal_claim,
            groups_claim=options.groups_claim,
            map_service_accounts=False,
        )

    def caller(self, identity: Identity) -> OidcCaller:
        return OidcCaller(
            oidc_principal(identity.subject),
            identity.groups,
            self.scheme_id,
            self.required_groups,
            self.field,
        )


class OidcSchemes:
    """The ``oidc`` schemes of an endpoint (see the module docstring)."""

    def __init__(self, schemes: Sequence[OidcScheme]) -> None:
        if not schemes:
            raise ValueError("OidcSchemes needs at least one scheme")
        self.schemes = tuple(schemes)
        self._by_issuer = {s.issuer: s for s in self.schemes}

    async def verify(self, token: str) -> OidcCaller:
        """The caller ``token`` names, or :class:`TokenRejected` saying why not."""
        scheme = self._by_issuer.get(_issuer_of(token) or "") if len(self.schemes) > 1 else None
        if scheme is None:
            scheme = self.schemes[0]  # one issuer: its verifier says what is wrong
        return scheme.caller(await scheme.verifier.verify(token))


def _issuer_of(token: str) -> str | None:
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise TokenRejected("malformed", f"the bearer token is not a signed JWT: {exc}") from exc
    issuer = claims.get("iss")
    return issuer if isinstance(issuer, str) else None


def endpoint_oidc(
    agent_id: str,
    schemes: Sequence[AuthScheme],
    scheme_ids: Sequence[str],
    *,
    fetch: Fetch | None = None,
    clock: Callable[[], float] = time.time,
) -> OidcSchemes | None:
    """The oidc schemes among an endpoint's ``a2a.auth`` schemes, or None when there are none."""
    found = [
        OidcScheme(
            name,
            scheme,
            f"spec.endpoints.{agent_id}.a2a.auth.schemes[{index}]",
            fetch=fetch,
            clock=clock,
        )
        for index, (name, scheme) in enumerate(zip(scheme_ids, schemes, strict=True))
        if scheme.type == "oidc"
    ]
    return OidcSchemes(found) if found else None
