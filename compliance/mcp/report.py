"""Our MCP conformance report: the framework's ``checks.json`` files folded per scenario.

The framework (``@modelcontextprotocol/conformance``) writes one folder per scenario run,
``<out>/[server-]<scenario>-<timestamp>/checks.json``: a list of checks, each with ``id``,
``status`` (``SUCCESS``, ``FAILURE``, ``WARNING``, ``INFO``, ``SKIPPED``) and, when it failed,
``errorMessage``. ``INFO`` checks are the framework's traffic log and are not counted.

The JSON report is ``{"mode", "framework", "scenarios": {SCENARIO: {"passed", "failed",
"warnings"}}, "totals": {...}, "failures": [{"scenario", "check", "status", "message"}]}``;
the Markdown report is the same as tables.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@dataclass
class Counts:
    """Outcomes of the checks of one scenario."""

    passed: int = 0
    failed: int = 0
    warnings: int = 0

    def add(self, status: str) -> None:
        """Count one check (INFO and SKIPPED are not outcomes)."""
        if status == "SUCCESS":
            self.passed += 1
        elif status == "FAILURE":
            self.failed += 1
        elif status == "WARNING":
            self.warnings += 1


@dataclass
class Report:
    """One mode (server or client) of one framework run."""

    mode: str
    framework: str
    scenarios: dict[str, Counts] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def totals(self) -> Counts:
        """Every scenario's counts added up."""
        out = Counts()
        for counts in self.scenarios.values():
            out.passed += counts.passed
            out.failed += counts.failed
            out.warnings += counts.warnings
        return out

    def as_json(self) -> dict[str, Any]:
        """The JSON report."""
        return {
            "mode": self.mode,
            "framework": self.framework,
            "scenarios": {k: asdict(v) for k, v in sorted(self.scenarios.items())},
            "totals": asdict(self.totals),
            "failures": self.failures,
        }


def scenario_of(folder: str, mode: str) -> str:
    """The scenario name of a result folder (``server-tools-list-2026-...Z`` -> ``tools-list``)."""
    name = _STAMP.sub("", folder)
    return name.removeprefix("server-") if mode == "server" else name


def build_report(results: Path, mode: str, framework: str) -> Report:
    """Fold every ``checks.json`` under ``results`` (the latest run of each scenario wins)."""
    report = Report(mode, framework)
    for checks_file in sorted(results.rglob("checks.json")):
        scenario = scenario_of(checks_file.parent.relative_to(results).as_posix(), mode)
        counts = report.scenarios[scenario] = Counts()
        report.failures = [f for f in report.failures if f["scenario"] != scenario]
        for check in json.loads(checks_file.read_text()):
            status = str(check.get("status", ""))
            counts.add(status)
            if status in ("FAILURE", "WARNING"):
                report.failures.append(
                    {
                        "scenario": scenario,
                        "check": str(check.get("id", "")),
                        "status": status,
                        "message": str(check.get("errorMessage") or check.get("description", "")),
                    }
                )
    return report


def render_markdown(report: Report) -> str:
    """The report as Markdown tables."""
    totals = report.totals
    lines = [
        f"# MCP conformance, {report.mode} mode ({report.framework})",
        "",
        f"Checks: {totals.passed} passed, {totals.failed} failed, {totals.warnings} warnings.",
        "",
        "| scenario | passed | failed | warnings |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, counts in sorted(report.scenarios.items()):
        lines.append(f"| {name} | {counts.passed} | {counts.failed} | {counts.warnings} |")
    if report.failures:
        lines += ["", "| scenario | check | status | message |", "| --- | --- | --- | --- |"]
        for item in report.failures:
            message = item["message"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {item['scenario']} | {item['check']} | {item['status']} | {message} |")
    return "\n".join(lines) + "\n"


def write_reports(report: Report, out: Path) -> None:
    """``report.json`` and ``report.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report.as_json(), indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(report))
