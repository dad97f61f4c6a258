"""The result of a conformance probe of one agent (``mas-ctl conformance -o json``).

Pure data: the probe (``mas.ctl.conformance``) writes it, the operator reads it to set an
agent's ``Conformant`` condition, and neither needs the other's imports. The JSON is exactly
this model::

    {"url": "http://researcher:8402", "checked_at": "2026-12-02T15:00:00Z",
     "checks": [{"interface": "JSONRPC", "check": "send-message", "status": "pass",
                 "detail": "task 1f0c... completed"}, ...]}

``interface`` is ``card`` for the AgentCard itself, else the interface's protocol binding
(``JSONRPC``, ``HTTP+JSON``, ``GRPC``). ``check`` is one of :data:`CHECKS`. A result passes
when it has at least one check and none failed; ``skip`` (a capability the card does not
declare) never fails it.

:meth:`ConformanceResult.compact_json` is the same JSON made to fit a byte budget (a
container's termination message, which Kubernetes cuts at 4096 bytes): details are shortened
first, so the verdict and the names of the failed checks survive.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CheckStatus = Literal["pass", "fail", "skip"]

# The webhook the probe's push-config check sets and deletes again (never called). The
# ``.invalid`` top-level domain never resolves (RFC 6761), and a MAS Lab server's push policy
# accepts this one name while it does not resolve, so the check needs no DNS (an air-gapped
# cluster) and no relaxed policy; nothing can ever be sent to it.
PROBE_PUSH_HOST = "push-receiver.mas-conformance.invalid"
PROBE_PUSH_URL = f"https://{PROBE_PUSH_HOST}/mas-conformance"

# Kubernetes keeps at most this many bytes of a container's termination message.
TERMINATION_MESSAGE_BYTES = 4096
# Shortened details end with this mark.
ELLIPSIS = "..."

# What the probe checks, in the order it runs them.
CHECKS = (
    "agent-card",
    "send-message",
    "streaming",
    "get-task",
    "cancel-task",
    "unknown-task-error",
    "push-config",
    "version-header",
)


class ConformanceCheck(BaseModel):
    """One check on one interface."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interface: str = Field(min_length=1)
    check: str = Field(min_length=1)
    status: CheckStatus
    detail: str = ""


class ConformanceResult(BaseModel):
    """Every check of one probe run against one AgentCard URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1)
    checked_at: datetime
    checks: list[ConformanceCheck] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when something was checked and nothing failed."""
        return bool(self.checks) and not self.failures()

    def failures(self) -> list[ConformanceCheck]:
        """The failed checks, in probe order."""
        return [c for c in self.checks if c.status == "fail"]

    def summary(self, limit: int = 5) -> str:
        """One line for a status condition message: the counts, then the first failures."""
        counts = {s: sum(1 for c in self.checks if c.status == s) for s in ("pass", "fail", "skip")}
        head = f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped"
        failed = self.failures()
        if not failed:
            return head
        shown = "; ".join(f"{c.interface} {c.check}: {c.detail}" for c in failed[:limit])
        more = f"; and {len(failed) - limit} more" if len(failed) > limit else ""
        return f"{head}: {shown}{more}"

    def compact_json(self, limit: int = TERMINATION_MESSAGE_BYTES) -> str:
        """This result as compact JSON of at most ``limit`` UTF-8 bytes, still a valid result.

        In order, until it fits: the details of passed and skipped checks are dropped; the
        details of failed checks are shortened (ending in ``...``), down to nothing; passed
        and skipped checks are dropped (only when there is a failure: the verdict stays the
        same); the last failures are dropped, keeping at least one. Raises ``ValueError``
        when even that does not fit (``limit`` shorter than the url).
        """

        def fits(result: ConformanceResult) -> str | None:
            text = result.model_dump_json()
            return text if len(text.encode()) <= limit else None

        def shortened(check: ConformanceCheck, width: int) -> ConformanceCheck:
            if check.status != "fail":
                return check.model_copy(update={"detail": ""})
            if len(check.detail) <= width:
                return check
            cut = check.detail[: max(0, width - len(ELLIPSIS))] + ELLIPSIS if width else ""
            return check.model_copy(update={"detail": cut})

        text = fits(self)
        if text is not None:
            return text
        longest = max((len(c.detail) for c in self.checks), default=0)
        widths = [w for w in (1000, 500, 250, 120, 60, 30) if w < longest] + [0]
        for width in widths:
            short = self.model_copy(update={"checks": [shortened(c, width) for c in self.checks]})
            text = fits(short)
            if text is not None:
                return text
        failed = [shortened(c, 0) for c in self.failures()]
        while failed:
            text = fits(self.model_copy(update={"checks": failed}))
            if text is not None:
                return text
            if len(failed) == 1:
                break
            failed = failed[:-1]
        raise ValueError(f"a conformance result of {self.url!r} cannot fit in {limit} bytes")
