"""The conformance probe against real a2a-sdk servers: one that conforms, one per broken check."""

from __future__ import annotations

import asyncio

import pytest
from compliance_servers import SLOW_SECONDS, sdk_agent

from mas.ctl.conformance import ProbeUsageError, probe
from mas.infra.conformance import CHECKS, ConformanceResult

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
PER_INTERFACE = CHECKS[1:]


def statuses(result: ConformanceResult) -> dict[tuple[str, str], str]:
    return {(c.interface, c.check): c.status for c in result.checks}


def detail(result: ConformanceResult, interface: str, check: str) -> str:
    return next(c.detail for c in result.checks if (c.interface, c.check) == (interface, check))


async def test_a_conforming_agent_passes_every_check_on_every_interface(conforming) -> None:
    result = await probe(conforming.url, timeout=5)
    assert result.passed, result.summary()
    expected = {("card", "agent-card")} | {(b, c) for b in BINDINGS for c in PER_INTERFACE}
    assert set(statuses(result)) == expected
    assert set(statuses(result).values()) == {"pass"}
    assert detail(result, "GRPC", "version-header") == "A2A-Version 1.0 served, 99.0 refused"
    assert detail(result, "JSONRPC", "unknown-task-error") == "TaskNotFoundError"


async def test_the_card_url_itself_is_accepted(conforming) -> None:
    result = await probe(f"{conforming.url}/.well-known/agent-card.json", timeout=5)
    assert result.passed, result.summary()


async def test_a_card_advertising_grpc_without_a_listener_fails_the_grpc_checks() -> None:
    async with sdk_agent("no-grpc-listener") as agent:
        result = await probe(agent.url, timeout=3)
    got = statuses(result)
    assert not result.passed
    assert got[("GRPC", "send-message")] == "fail"
    assert "UNAVAILABLE" in detail(result, "GRPC", "send-message")
    assert all(got[("JSONRPC", c)] == "pass" for c in PER_INTERFACE)
    assert all(got[("HTTP+JSON", c)] == "pass" for c in PER_INTERFACE)


async def test_a_server_refusing_declared_streaming_fails_the_streaming_check() -> None:
    async with sdk_agent("streaming-refused") as agent:
        result = await probe(agent.url, timeout=5)
    got = statuses(result)
    assert {b: got[(b, "streaming")] for b in BINDINGS} == dict.fromkeys(BINDINGS, "fail")
    assert "UnsupportedOperationError" in detail(result, "JSONRPC", "streaming")
    assert [c for c in result.failures() if c.check != "streaming"] == []


async def test_a_wrong_answer_for_an_unknown_task_fails_that_check() -> None:
    async with sdk_agent("get-task-wrong") as agent:
        result = await probe(agent.url, timeout=5)
    failed = {(c.interface, c.check) for c in result.failures()}
    assert failed == {(b, "unknown-task-error") for b in BINDINGS}
    assert detail(result, "HTTP+JSON", "unknown-task-error") == (
        "expected TaskNotFoundError, got task some-other-task"
    )


async def test_a_failing_push_config_endpoint_fails_the_push_check() -> None:
    async with sdk_agent("push-config-fails") as agent:
        result = await probe(agent.url, timeout=5)
    failed = {(c.interface, c.check) for c in result.failures()}
    assert failed == {(b, "push-config") for b in BINDINGS}
    assert detail(result, "GRPC", "push-config").startswith("create: ")


async def test_a_grpc_side_that_ignores_the_version_header_fails_it() -> None:
    async with sdk_agent("no-version-check") as agent:
        result = await probe(agent.url, timeout=5)
    failed = {(c.interface, c.check) for c in result.failures()}
    assert failed == {("GRPC", "version-header")}
    assert "TaskNotFoundError" in detail(result, "GRPC", "version-header")


async def test_a_server_slower_than_the_deadline_fails_within_it() -> None:
    async with sdk_agent("slow-send", push=False) as agent:
        result = await probe(agent.url, timeout=0.5)
        await asyncio.sleep(SLOW_SECONDS)  # let the server finish the turns we abandoned
    got = statuses(result)
    assert {got[(b, "send-message")] for b in BINDINGS} == {"fail"}
    assert {got[(b, "streaming")] for b in BINDINGS} == {"fail"}
    assert {got[(b, "unknown-task-error")] for b in BINDINGS} == {"pass"}
    assert "deadline" in detail(result, "GRPC", "send-message").lower()


async def test_an_agent_that_only_answers_with_messages_skips_the_task_checks() -> None:
    async with sdk_agent("message-only") as agent:
        result = await probe(agent.url, timeout=5)
    got = statuses(result)
    assert result.passed, result.summary()
    for check in ("get-task", "cancel-task", "push-config"):
        assert {got[(b, check)] for b in BINDINGS} == {"skip"}
    assert detail(result, "JSONRPC", "send-message") == "answered with a Message"
    assert detail(result, "GRPC", "get-task") == "SendMessage made no task to read back"


async def test_undeclared_capabilities_are_skipped_not_failed() -> None:
    async with sdk_agent(streaming=False, push=False) as agent:
        result = await probe(agent.url, timeout=5)
    got = statuses(result)
    assert result.passed, result.summary()
    assert {got[(b, "streaming")] for b in BINDINGS} == {"skip"}
    assert {got[(b, "push-config")] for b in BINDINGS} == {"skip"}
    assert detail(result, "GRPC", "push-config") == "the card does not declare pushNotifications"


async def test_an_unreachable_card_is_one_failed_check(conforming) -> None:
    result = await probe(f"{conforming.url}/nowhere/card.json", timeout=5)
    assert not result.passed
    assert [(c.interface, c.check, c.status) for c in result.checks] == [
        ("card", "agent-card", "fail")
    ]
    assert "404" in result.checks[0].detail


@pytest.mark.parametrize("url", ["ftp://agent:1", "agent:8080", "http://", "http://h:99999/"])
async def test_a_url_that_cannot_name_a_card_is_a_usage_error(url: str) -> None:
    with pytest.raises(ProbeUsageError, match="--url"):
        await probe(url, timeout=1)
