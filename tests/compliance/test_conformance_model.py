"""The probe result model the operator reads: pure data, strict, with a one-line summary."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from mas.infra.conformance import ConformanceCheck, ConformanceResult

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)


def check(status: str, name: str = "send-message", interface: str = "GRPC") -> ConformanceCheck:
    return ConformanceCheck.model_validate(
        {"interface": interface, "check": name, "status": status, "detail": f"{name} {status}"}
    )


def test_passed_needs_a_check_and_no_failure() -> None:
    assert not ConformanceResult(url="http://a", checked_at=NOW).passed
    assert ConformanceResult(url="http://a", checked_at=NOW, checks=[check("skip")]).passed
    assert ConformanceResult(url="http://a", checked_at=NOW, checks=[check("pass")]).passed
    mixed = ConformanceResult(url="http://a", checked_at=NOW, checks=[check("pass"), check("fail")])
    assert not mixed.passed


def test_summary_counts_then_names_the_first_failures() -> None:
    checks = [check("pass"), check("skip")] + [check("fail", f"c{i}") for i in range(7)]
    result = ConformanceResult(url="http://a", checked_at=NOW, checks=checks)
    assert result.summary(limit=2) == (
        "1 passed, 7 failed, 1 skipped: GRPC c0: c0 fail; GRPC c1: c1 fail; and 5 more"
    )


def test_json_round_trip_is_exact() -> None:
    result = ConformanceResult(url="http://a", checked_at=NOW, checks=[check("fail")])
    again = ConformanceResult.model_validate_json(result.model_dump_json())
    assert again == result
    assert sorted(result.model_dump()) == ["checked_at", "checks", "url"]


def test_a_bad_status_names_the_field_value_and_choices() -> None:
    with pytest.raises(ValidationError) as bad:
        check("ok")
    text = str(bad.value)
    assert "status" in text
    assert "'ok'" in text
    assert "'pass', 'fail' or 'skip'" in text


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="verdict"):
        ConformanceResult.model_validate(
            {"url": "http://a", "checked_at": NOW.isoformat(), "checks": [], "verdict": "ok"}
        )


def big_result(failures: int, passes: int = 20, detail: int = 400) -> ConformanceResult:
    checks = [
        ConformanceCheck(interface="JSONRPC", check=f"p{i}", status="pass", detail="x" * detail)
        for i in range(passes)
    ] + [
        ConformanceCheck(interface="GRPC", check=f"f{i}", status="fail", detail="é" * detail)
        for i in range(failures)
    ]
    return ConformanceResult(url="http://agent.team-a.svc:8080", checked_at=NOW, checks=checks)


def test_compact_json_is_the_whole_result_when_it_fits() -> None:
    result = big_result(1, passes=2, detail=10)
    text = result.compact_json()
    assert "\n" not in text
    assert ConformanceResult.model_validate_json(text) == result


@pytest.mark.parametrize("failures", [0, 1, 5, 30])
def test_compact_json_fits_a_termination_message_and_keeps_the_verdict(failures: int) -> None:
    result = big_result(failures)
    assert len(result.model_dump_json().encode()) > 4096
    text = result.compact_json()
    assert len(text.encode()) <= 4096
    back = ConformanceResult.model_validate_json(text)
    assert back.passed == result.passed
    assert back.url == result.url and back.checked_at == result.checked_at
    if failures:
        assert back.failures()[0].check == "f0"
    else:
        assert len(back.checks) == len(result.checks)  # only the details went


def test_compact_json_shortens_failure_details_before_dropping_checks() -> None:
    back = ConformanceResult.model_validate_json(big_result(3).compact_json())
    assert len(back.checks) == 23
    assert all(c.detail == "" for c in back.checks if c.status == "pass")
    assert all(c.detail.endswith("...") for c in back.failures())


def test_compact_json_refuses_a_budget_below_the_url() -> None:
    with pytest.raises(ValueError, match="cannot fit in 40 bytes"):
        big_result(1).compact_json(limit=40)
