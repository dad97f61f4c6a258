"""Our MCP conformance report: the framework's checks.json folders folded per scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from compliance.mcp.report import build_report, render_markdown, scenario_of, write_reports

pytestmark = pytest.mark.timeout(30)


def _checks(root: Path, folder: str, *checks: dict[str, str]) -> None:
    (root / folder).mkdir(parents=True)
    (root / folder / "checks.json").write_text(json.dumps(list(checks)))


def test_scenario_names_drop_the_mode_prefix_and_the_timestamp() -> None:
    assert scenario_of("server-tools-list-2026-12-03T10-05-11-266Z", "server") == "tools-list"
    assert scenario_of("auth/basic-cimd-2026-12-03T10-05-11-266Z", "client") == "auth/basic-cimd"
    assert scenario_of("tools_call-2026-12-03T10-05-51-652Z", "client") == "tools_call"


def test_checks_are_counted_per_scenario_and_failures_listed(tmp_path: Path) -> None:
    _checks(
        tmp_path,
        "server-ping-2026-12-03T10-05-07-560Z",
        {"id": "incoming-request", "status": "INFO", "description": "traffic"},
        {"id": "ping", "status": "SUCCESS"},
    )
    _checks(
        tmp_path,
        "server-logging-set-level-2026-12-03T10-05-07-560Z",
        {"id": "logging-set-level", "status": "FAILURE", "errorMessage": "Method not found"},
        {"id": "retry-field", "status": "WARNING", "description": "no retry field"},
    )
    report = build_report(tmp_path, "server", "fw@1")
    counts = {k: (v.passed, v.failed, v.warnings) for k, v in report.scenarios.items()}
    assert counts == {"ping": (1, 0, 0), "logging-set-level": (0, 1, 1)}
    assert (report.totals.passed, report.totals.failed, report.totals.warnings) == (1, 1, 1)
    assert report.failures == [
        {
            "scenario": "logging-set-level",
            "check": "logging-set-level",
            "status": "FAILURE",
            "message": "Method not found",
        },
        {
            "scenario": "logging-set-level",
            "check": "retry-field",
            "status": "WARNING",
            "message": "no retry field",
        },
    ]
    markdown = render_markdown(report)
    assert "| logging-set-level | 0 | 1 | 1 |" in markdown
    assert "Checks: 1 passed, 1 failed, 1 warnings." in markdown
    write_reports(report, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "report.json").read_text())["totals"] == {
        "passed": 1,
        "failed": 1,
        "warnings": 1,
    }


def test_the_latest_run_of_a_scenario_wins_and_suites_nest(tmp_path: Path) -> None:
    _checks(tmp_path, "ping-2026-12-03T10-00-00-000Z", {"id": "ping", "status": "FAILURE"})
    _checks(tmp_path, "ping-2026-12-03T11-00-00-000Z", {"id": "ping", "status": "SUCCESS"})
    _checks(tmp_path, "auth/basic-cimd-2026-12-03T11-00-00-000Z", {"id": "a", "status": "FAILURE"})
    report = build_report(tmp_path, "client", "fw@1")
    assert (report.scenarios["ping"].passed, report.scenarios["ping"].failed) == (1, 0)
    assert report.scenarios["auth/basic-cimd"].failed == 1
    assert [f["scenario"] for f in report.failures] == ["auth/basic-cimd"]
