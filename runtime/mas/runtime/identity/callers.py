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
- otherwise an ``a2a.auth`` scheme that matched admits the request as that scheme;
- otherwise, with ``a2a.anonymous: true``, anyone is admitted (as its subject when it sent
  a valid token, else the anonymous principal ``""``);
- otherwise a verified caller is refused ``403`` (``not_admitted``) naming the caller, the
  callers this agent admits and where each comes from; a request with neither token nor
  credential is refused ``401`` (``missing``).

Every refusal is counted in ``maslab_a2a_auth_denied_total{agent,caller,reason}`` (caller:
the verified subject, else ``unknown``). No token text is ever logged or echoed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import Counter

from mas.infra.identity import IDENTITY_HEADER, Admission
from mas.runtime.errors import KeysUnavailable, TokenRejected
from mas.runtime.metrics import REGISTRY

if TYPE_CHECKING:
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

    def __init__(self, admission: Admission, verifier: TokenVerifier) -> None:
        self.admission = admission
        self.verifier = verifier
        self.agent = admission.agent
        # subject -> its admission (the rules never change while the agent runs); bounded by
        # the callers that pass verification
        self._admitted: dict[str, Decision] = {}

    async def check(self, token: str | None, scheme: str | None = None) -> Decision:
        """The decision for a request presenting ``token`` (or none) and the ``a2a.auth``
        scheme id that matched (or none)."""
        if token:
            try:
                who = await self.verifier.verify(token)
            except TokenRejected as exc:
                return self._refuse(401, UNKNOWN_CALLER, exc.reason, f"{IDENTITY_HEADER}: {exc}")
            except KeysUnavailable as exc:
                return self._refuse(503, UNKNOWN_CALLER, "keys_unavailable", str(exc))
            known = self._admitted.get(who.subject)
            if known is not None:
                return known
            if self.admission.admitted(who.subject) is not None:
                if len(self._admitted) < MAX_REMEMBERED:
                    known = self._admitted[who.subject] = Decision(
                        200, principal=who.subject, caller=who.subject
                    )
                    return known
                return Decision(200, principal=who.subject, caller=who.subject)
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

    def _refuse(self, status: int, caller: str, reason: str, message: str) -> Decision:
        AUTH_DENIED.labels(self.agent, caller, reason).inc()
        logger.info(
            "A2A request to %s refused (%s, caller %s): %s", self.agent, status, caller, reason
        )
        return Decision(status, caller=caller, reason=reason, message=message)
