"""``CallerCheck``: whether one request to an agent is admitted, and what to answer if not.

The transports (HTTP middleware, gRPC interceptor) hand it what the request presented: the
caller's token (header :data:`~mas.infra.identity.IDENTITY_HEADER`) and the ``a2a.auth``
scheme that matched, if any. The rules, in order:

- a token is verified (:class:`~.verification.TokenVerifier`); a token that fails is refused
  ``401`` with its reason (``expired``, ``wrong_audience``, ``unknown_key``,
  ``bad_signature``, ...), even where anonymous callers are admitted: a caller that sends a
  bad token learns so. Keys that cannot be read are ``503`` (``keys_unavailable``): not the
  caller's fault;
- a verified caller that the :class:`~mas.infra.identity.Admission` names is admitted, its
  principal being its subject (``system:serviceaccount:NS:NAME``);
- otherwise an ``a2a.auth`` scheme that matched admits the request as that scheme; an
  ``oidc`` scheme (:mod:`.oidc`) verifies the request's bearer token when no static scheme
  matched: a token that fails is ``401`` with its reason, a caller in none of the scheme's
  ``required_groups`` is ``403`` (``missing_group``), and when ``a2a.allow`` names OIDC
  callers (``oidc:user:...``, ``oidc:group:...``) a caller named by none is ``403``
  (``not_admitted``); else it is admitted as ``oidc:user:<principal>``;
- otherwise, with ``a2a.anonymous: true``, anyone is admitted (as its subject when it sent
  a valid token, else the anonymous principal ``""``);
- otherwise a verified caller is refused ``403`` (``not_admitted``) naming the caller, the
  callers this agent admits and where each comes from; a request with neither token nor
  credential is refused ``401`` (``missing``).

The hot path: a token admitted once is remembered by the sha256 of its bytes until its
``exp`` (:meth:`CallerCheck.remembered`, synchronous), so the next request presenting it is
admitted after one hash and one lookup, without verifying or mapping it again (on HTTP an
open connection's next request with the same token's bytes skips the hash as well:
:mod:`library_ioa.serving.callers`). Only
admissions that depend on nothing but the token are remembered (a declared or allowed
caller), at most :data:`MAX_REMEMBERED` tokens, all forgotten when full.

Every refusal is counted in ``maslab_a2a_auth_denied_total{agent,caller,reason}`` (caller:
the verified subject or OIDC principal, else ``unknown``), and handed to the
:class:`~.denial_events.DenialEvents` when given, which posts the first refusal of each
caller as a Warning Event on the Application, off the request path. No token text is ever logged or
echoed. Without a verifier (a local run: no cluster identity) only the ``a2a.auth`` schemes
and ``a2a.anonymous`` apply; an ``maslab-identity`` token is then ignored.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter

from mas.infra.identity import IDENTITY_HEADER, Admission
from mas.infra.models import OIDC_GROUP_PREFIX
from mas.runtime.errors import KeysUnavailable, TokenRejected
from mas.runtime.metrics import REGISTRY

if TYPE_CHECKING:
    from mas.runtime.identity.denial_events import DenialEvents
    from mas.runtime.identity.oidc import OidcCaller, OidcSchemes
    from mas.runtime.identity.verification import TokenVerifier

logger = logging.getLogger(__name__)

UNKNOWN_CALLER = "unknown"
MAX_REMEMBERED = 1024

AUTH_DENIED = Counter(
    "maslab_a2a_auth_denied",
    "A2A requests refused by the caller check, by agent, caller (the verified ServiceAccount "
    "subject, else 'unknown') and reason (missing, a token rejection such as expired, "
    "not_admitted, keys_unavailable).",
    ("agent", "caller", "reason"),
    registry=REGISTRY,
)


@dataclass(frozen=True)
class Decision:
    """The outcome of one check: admitted (``status`` 200) or the refusal to answer."""

    status: int
    principal: str = ""
    caller: str = ""
    reason: str = ""
    message: str = ""

    @property
    def admitted(self) -> bool:
        return self.status == 200


class CallerCheck:
    """Admits or refuses the requests of one agent (see the module docstring)."""

    def __init__(
        self,
        admission: Admission,
        verifier: TokenVerifier | None,
        oidc: OidcSchemes | None = None,
        *,
        clock: Callable[[], float] = time.time,
        denials: DenialEvents | None = None,
    ) -> None:
        self.admission = admission
        self.denials = denials
        self.verifier = verifier
        self.oidc = oidc
        self.agent = admission.agent
        self._oidc_listed = any(c.principal.startswith("oidc:") for c in admission.callers)
        # subject -> its admission (the rules never change while the agent runs); bounded by
        # the callers that pass verification
        self._admitted: dict[str, Decision] = {}
        # sha256 of an admitted token's bytes -> (its admission, its exp)
        self._tokens: dict[bytes, tuple[Decision, float]] = {}
        self._clock = clock

    def remembered(self, token: bytes) -> Decision | None:
        """The admission of ``token`` (the header's bytes) when a request presented it
        before and it has not expired, else None (then :meth:`check` decides)."""
        entry = self.remembered_until(token)
        return entry[0] if entry is not None else None

    def remembered_until(self, token: bytes) -> tuple[Decision, float] | None:
        """:meth:`remembered`, with the token's ``exp``: until when it holds."""
        if not self._tokens:
            return None
        digest = hashlib.sha256(token).digest()
        entry = self._tokens.get(digest)
        if entry is None:
            return None
        if self._clock() > entry[1]:
            del self._tokens[digest]
            return None
        return entry

    def quick(
        self,
        raw: bytes | None,
        authorization: object,
        kept: dict[object, Any] | None = None,
    ) -> Decision | None:
        """The admission of a request by its remembered token (``raw``: the header's bytes)
        alone, when that decides it: not when an OIDC bearer token (``authorization``) must
        be checked as well. None: :meth:`check` decides.

        ``kept``: the state of the request's connection (HTTP), where the token it presented
        last is kept with its admission and ``exp``: the same bytes again are admitted
        without the hash; any other token is looked up by its hash (and kept instead once
        found), and none past its ``exp`` is admitted.
        """
        if not raw or (authorization is not None and self.oidc is not None):
            return None
        last = kept.get(self) if kept is not None else None
        if last is not None and last[0] == raw and self._clock() <= last[2]:
            return last[1]  # type: ignore[no-any-return]
        entry = self.remembered_until(raw)
        if entry is None:
            return None
        if kept is not None:
            kept[self] = (raw, *entry)
        return entry[0]

    def with_oidc(self, oidc: OidcSchemes | None) -> CallerCheck:
        """This check with the endpoint's ``oidc`` schemes (itself when there are none)."""
        if oidc is None or oidc is self.oidc:
            return self
        return CallerCheck(
            self.admission, self.verifier, oidc, clock=self._clock, denials=self.denials
        )

    async def check(
        self,
        token: str | None,
        scheme: str | None = None,
        bearer: str | None = None,
        *,
        remember: bytes | None = None,
    ) -> Decision:
        """The decision for a request presenting ``token`` (or none), the ``a2a.auth``
        scheme id that matched (or none) and its ``Authorization`` bearer token (or none).
        ``remember``: the token's bytes, to find its admission by :meth:`remembered` next
        time."""
        if scheme is None and bearer and self.oidc is not None:
            person = await self._oidc_caller(bearer)
            if isinstance(person, Decision):
                return person
            scheme = person.principal
        if token and self.verifier is not None:
            try:
                who = await self.verifier.verify(token)
            except TokenRejected as exc:
                return self._refuse(401, UNKNOWN_CALLER, exc.reason, f"{IDENTITY_HEADER}: {exc}")
            except KeysUnavailable as exc:
                return self._refuse(503, UNKNOWN_CALLER, "keys_unavailable", str(exc))
            known = self._admitted.get(who.subject)
            if known is None and self.admission.admitted(who.subject) is not None:
                known = Decision(200, principal=who.subject, caller=who.subject)
                if len(self._admitted) < MAX_REMEMBERED:
                    self._admitted[who.subject] = known
            if known is not None:
                if remember is not None:
                    if len(self._tokens) >= MAX_REMEMBERED:
                        self._tokens.clear()
                    digest = hashlib.sha256(remember).digest()
                    self._tokens[digest] = (known, who.expires_at)
                return known
            if scheme is not None:
                return Decision(200, principal=scheme, caller=who.subject)
            if self.admission.anonymous:
                return Decision(200, principal=who.subject, caller=who.subject)
            return self._refuse(
                403,
                who.subject,
                "not_admitted",
                f"caller {who.subject} is not admitted by agent {self.agent!r}, which admits: "
                f"{self.admission.describe()}. To admit it, name the agent it runs as in the "
                f"delegates_to of a calling agent, or add {who.subject} to a2a.allow of "
                f"{self.agent!r}'s endpoint",
            )
        if scheme is not None:
            return Decision(200, principal=scheme)
        if self.admission.anonymous:
            return Decision(200)
        return self._refuse(
            401,
            UNKNOWN_CALLER,
            "missing",
            f"no caller identity ({IDENTITY_HEADER}) and no a2a.auth credential; agent "
            f"{self.agent!r} admits: {self.admission.describe()}",
        )

    async def _oidc_caller(self, bearer: str) -> OidcCaller | Decision:
        """The verified OIDC caller of ``bearer`` when admitted, else the refusal."""
        assert self.oidc is not None
        try:
            person = await self.oidc.verify(bearer)
        except TokenRejected as exc:
            return self._refuse(401, UNKNOWN_CALLER, exc.reason, f"Authorization: {exc}")
        except KeysUnavailable as exc:
            return self._refuse(503, UNKNOWN_CALLER, "keys_unavailable", str(exc))
        if person.required_groups and not set(person.required_groups) & set(person.groups):
            return self._refuse(
                403,
                person.principal,
                "missing_group",
                f"caller {person.principal} is in none of the groups "
                f"{', '.join(person.required_groups)} that {person.field}.oidc.required_groups "
                f"of agent {self.agent!r} requires (its groups: "
                f"{', '.join(person.groups) or 'none'})",
            )
        if self._oidc_listed and not self._oidc_allowed(person):
            return self._refuse(
                403,
                person.principal,
                "not_admitted",
                f"caller {person.principal} is not admitted by agent {self.agent!r}, which "
                f"admits: {self.admission.describe()}. To admit it, add {person.principal} "
                f"or one of its groups (oidc:group:NAME) to a2a.allow of {self.agent!r}'s "
                "endpoint",
            )
        return person

    def _oidc_allowed(self, person: OidcCaller) -> bool:
        if self.admission.admitted(person.principal) is not None:
            return True
        return any(self.admission.admitted(OIDC_GROUP_PREFIX + g) for g in person.groups)

    def _refuse(self, status: int, caller: str, reason: str, message: str) -> Decision:
        AUTH_DENIED.labels(self.agent, caller, reason).inc()
        logger.info(
            "A2A request to %s refused (%s, caller %s): %s", self.agent, status, caller, reason
        )
        if self.denials is not None:  # queued for a background task, never awaited here
            self.denials.note(caller, status, reason, message)
        return Decision(status, caller=caller, reason=reason, message=message)
