"""Our TCK report: the TCK's results folded per level and transport, JUnit failures included."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.timeout(30)

REPORT = Path(__file__).resolve().parents[2] / "compliance" / "a2a" / "report.py"

COMPATIBILITY = {
    "summary": {"sut_url": "http://127.0.0.1:1", "overall_compatibility": "50.0%"},
    "per_requirement": {
        "CORE-SEND-001": {"level": "MUST", "transports": {"grpc": "PASS", "jsonrpc": "PASS"}},
        "HTTP_JSON-SVC-001": {"level": "MUST", "transports": {"http_json": "PASS"}},
        "CARD-CACHE-001": {
            "level": "SHOULD",
            "transports": {"agent_card": "FAIL"},
            "errors": ["Agent Card response should include a Cache-Control header"],
        },
        "PUSH-GET-001": {"level": "MUST", "transports": {"grpc": "SKIPPED"}},
        "CARD-STRUCT-001": {
            "level": "MUST",
            "status": "FAIL",
            "transports": {"agent_card": "PASS"},
            "errors": ["$: 'url' does not match any of the regexes"],
        },
    },
}
JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="t" name="test_response_content_type">
    <failure message="AssertionError: HTTP_JSON-SVC-001 [Content-Type is application/json] failed on
http_json: Expected Content-Type application/json, got: 'application/a2a+json'">trace</failure>
  </testcase>
  <testcase classname="t" name="test_ok"/>
</testsuite></testsuites>
"""


def load_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tck_report_under_test", REPORT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations there
    spec.loader.exec_module(module)
    return module


def test_a_junit_failure_overrides_the_tcks_pass(tmp_path: Path) -> None:
    report_mod = load_report()
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT.replace("on\nhttp_json", "on http_json"))
    report = report_mod.build_report(
        COMPATIBILITY, sut="serve", tck_commit="abc123def4567", tck_branch="1.0-dev", junit=junit
    )
    must = report.levels["MUST"]
    assert (must["http_json"].passed, must["http_json"].failed) == (0, 1)
    assert (must["grpc"].passed, must["grpc"].skipped) == (1, 1)
    assert [(f["requirement"], f["transport"]) for f in report.failures] == [
        ("CARD-CACHE-001", "agent_card"),
        ("CARD-STRUCT-001", "agent_card"),
        ("HTTP_JSON-SVC-001", "http_json"),
    ]
    assert report.levels["MUST"]["agent_card"].failed == 1
    assert report.failures[2]["error"] == (
        "Expected Content-Type application/json, got: 'application/a2a+json'"
    )


def test_both_reports_are_written(tmp_path: Path) -> None:
    report_mod = load_report()
    report = report_mod.build_report(
        COMPATIBILITY, sut="baseline", tck_commit="abc123def4567", tck_branch="1.0-dev"
    )
    js, md = report_mod.write_reports(report, tmp_path)
    data = json.loads(js.read_text())
    assert data["levels"]["MUST"]["grpc"] == {
        "passed": 1,
        "failed": 0,
        "skipped": 1,
        "rate": "100.0%",
    }
    text = md.read_text()
    assert "TCK `1.0-dev` at `abc123def456`" in text
    assert "| MUST | 100.0% (0 pass / 0 fail / 0 skip)" not in text
    assert "- `CARD-CACHE-001` (SHOULD, agent_card): Agent Card response should include" in text
