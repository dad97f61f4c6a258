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
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CheckStatus = Literal["pass", "fail", "skip"]

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
