"""Our compliance report: the TCK's ``compatibility.json`` folded per level and transport.

The JSON report is ``{"sut", "sut_url", "tck_commit", "tck_branch", "tck_summary": {the TCK's
own summary}, "levels": {LEVEL: {TRANSPORT: {"passed", "failed", "skipped", "rate"}}},
"failures": [{"requirement", "level", "transport", "error"}]}``. The Markdown report is the same
as tables. A requirement fails on a transport when the TCK says so or when any of its tests
failed there (read from the TCK's JUnit XML).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

LEVELS = ("MUST", "SHOULD", "MAY")
# The TCK's transport names, and ours.
TRANSPORT_NAMES = {"jsonrpc": "JSON-RPC", "http_json": "HTTP+JSON", "grpc": "gRPC"}


@dataclass
class Counts:
    """Outcomes of requirement checks."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def add(self, status: str) -> None:
        """Count one requirement-on-a-transport outcome."""
        if status == "PASS":
            self.passed += 1
        elif status == "FAIL":
            self.failed += 1
        else:
            self.skipped += 1

    @property
    def rate(self) -> str:
        """Passed over run (skips excluded), as the TCK computes it."""
        run = self.passed + self.failed
        return f"{100 * self.passed / run:.1f}%" if run else "n/a"


@dataclass
class Report:
    """One TCK run of one system under test."""

    sut: str
    sut_url: str
    tck_commit: str
    tck_branch: str
    tck_summary: dict[str, Any]
    levels: dict[str, dict[str, Counts]] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> str:
        """The JSON report."""
        data = asdict(self)
        for per in data["levels"].values():
            for transport, counts in per.items():
                per[transport] = {**counts, "rate": Counts(**counts).rate}
        return json.dumps(data, indent=2)

    def to_markdown(self) -> str:
        """The Markdown report: a results table, then every failure."""
        transports = sorted({t for per in self.levels.values() for t in per})
        lines = [
            f"## A2A TCK: {self.sut}",
            "",
            f"TCK `{self.tck_branch}` at `{self.tck_commit[:12]}`, SUT `{self.sut_url}`. "
            f"TCK summary: overall {self.tck_summary.get('overall_compatibility', '?')}, "
            f"MUST {self.tck_summary.get('must_compatibility', '?')}, "
            f"SHOULD {self.tck_summary.get('should_compatibility', '?')}, "
            f"MAY {self.tck_summary.get('may_compatibility', '?')}.",
            "",
            "| level | " + " | ".join(TRANSPORT_NAMES.get(t, t) for t in transports) + " |",
            "|---|" + "---|" * len(transports),
        ]
        for level in LEVELS:
            per = self.levels.get(level, {})
            cells = []
            for t in transports:
                c = per.get(t, Counts())
                cells.append(f"{c.rate} ({c.passed} pass / {c.failed} fail / {c.skipped} skip)")
            lines.append(f"| {level} | " + " | ".join(cells) + " |")
        lines += ["", f"### Failures ({len(self.failures)})", ""]
        if not self.failures:
            lines.append("None.")
        for f in self.failures:
            first = f["error"].strip().splitlines()[0] if f["error"].strip() else "(no message)"
            where = TRANSPORT_NAMES.get(f["transport"], f["transport"])
            lines.append(f"- `{f['requirement']}` ({f['level']}, {where}): {first[:300]}")
        return "\n".join(lines) + "\n"


# The TCK's assertion messages: "<REQ-ID> [<title>] failed on <transport>: <detail>".
_FAILED_ON = re.compile(r"([A-Z][A-Z0-9_]+-[A-Z]+-\d+) \[[^\]]*\] failed on (\w+): (.*)")


def junit_failures(junit: Path) -> dict[tuple[str, str], str]:
    """(requirement, transport) -> message for every failed TCK test that names its requirement.

    The TCK's own aggregate can list a requirement as passed on a transport when one of its
    tests passed and another failed; we count such a requirement as failed.
    """
    if not junit.exists():
        return {}
    out: dict[tuple[str, str], str] = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        for failure in case.findall("failure"):
            text = (failure.get("message") or "") + "\n" + (failure.text or "")
            for m in _FAILED_ON.finditer(text):
                out.setdefault((m.group(1), m.group(2)), m.group(3).strip())
    return out


def build_report(
    compatibility: dict[str, Any],
    *,
    sut: str,
    tck_commit: str,
    tck_branch: str,
    junit: Path | None = None,
) -> Report:
    """Fold the TCK's per-requirement results into our per-level, per-transport report."""
    levels: dict[str, dict[str, Counts]] = {lvl: defaultdict(Counts) for lvl in LEVELS}
    failures: list[dict[str, str]] = []
    failed_tests = junit_failures(junit) if junit else {}
    for req_id, req in sorted(compatibility.get("per_requirement", {}).items()):
        level = str(req.get("level", "MUST")).upper()
        errors = list(req.get("errors", []))
        transports = {t: str(raw).upper() for t, raw in req.get("transports", {}).items()}
        # The TCK can fail a requirement overall while its per-transport map says PASS (a
        # transport-free test, such as the card's schema, failed): it fails everywhere it ran.
        overall_only = (
            str(req.get("status", "")).upper() == "FAIL" and "FAIL" not in transports.values()
        )
        for transport, reported in sorted(transports.items()):
            status, detail = reported, _error_for(errors, transport)
            if overall_only and status == "PASS":
                status = "FAIL"
            if (req_id, transport) in failed_tests:
                status, detail = "FAIL", failed_tests[(req_id, transport)]
            levels.setdefault(level, defaultdict(Counts))[transport].add(status)
            if status == "FAIL":
                failures.append(
                    {"requirement": req_id, "level": level, "transport": transport, "error": detail}
                )
    summary = compatibility.get("summary", {})
    return Report(
        sut=sut,
        sut_url=str(summary.get("sut_url", "")),
        tck_commit=tck_commit,
        tck_branch=tck_branch,
        tck_summary=summary,
        levels={lvl: dict(per) for lvl, per in levels.items()},
        failures=failures,
    )


def _error_for(errors: list[str], transport: str) -> str:
    for e in errors:
        if transport in e:
            return e
    return errors[0] if errors else ""


def write_reports(report: Report, out: Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.md`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "report.json", out / "report.md"
    js.write_text(report.to_json(), encoding="utf-8")
    md.write_text(report.to_markdown(), encoding="utf-8")
    return js, md
