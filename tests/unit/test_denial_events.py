"""``DenialEvents``' own rules: one Event per caller, the bounds, never raising on the request
path. The posting to a real API server is in tests/a2a/test_a2a_denial_events_envtest.py."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from mas.runtime.identity.denial_events import DenialEvents, Subject, event_body

pytestmark = pytest.mark.timeout(10)

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


class Posted:
    def __init__(self, fail: bool = False) -> None:
        self.bodies: list[Mapping[str, Any]] = []
        self.fail = fail
        self.done = asyncio.Event()

    async def __call__(self, body: Mapping[str, Any]) -> None:
        self.bodies.append(body)
        self.done.set()
        if self.fail:
            raise RuntimeError("403 Forbidden")


def test_the_event_names_the_application_agent_caller_and_reason() -> None:
    body = event_body(
        Subject("team-a", "desk", "u-1"),
        "researcher",
        "system:serviceaccount:team-a:stranger",
        reason="not_admitted",
        message="caller ... is not admitted" + "x" * 2000,
        now=NOW,
    )
    assert body["involvedObject"] == {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "name": "desk",
        "namespace": "team-a",
        "uid": "u-1",
    }
    assert (body["type"], body["reason"], body["count"]) == ("Warning", "CallerDenied", 1)
    assert body["message"].startswith(
        "agent 'researcher' refused caller system:serviceaccount:team-a:stranger (not_admitted)"
    )
    assert len(body["message"]) == 1024
    assert body["firstTimestamp"] == "2026-01-02T03:04:05Z"


async def test_one_event_per_caller_none_for_keys_unavailable_and_a_bounded_memory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    posted = Posted()
    events = DenialEvents(posted, Subject("ns", "desk"), "a", max_callers=2, now=lambda: NOW)
    try:
        events.note("unknown", 503, "keys_unavailable", "not the caller's fault")
        for caller in ("one", "one", "two", "one", "three", "four"):
            events.note(caller, 403, "not_admitted", "refused")
        while events.posted < 2:
            await posted.done.wait()
            posted.done.clear()
    finally:
        await events.aclose()
    callers = [b["message"].split("refused caller ")[1].split(" ")[0] for b in posted.bodies]
    assert callers == ["one", "two"]
    assert [r.getMessage() for r in caplog.records if "distinct callers" in r.getMessage()] == [
        "agent a refused more than 2 distinct callers: no Event for further callers "
        "(see maslab_a2a_auth_denied_total)"
    ]


async def test_a_failing_post_is_logged_once_and_never_reaches_the_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mas.runtime.identity.denial_events")
    posted = Posted(fail=True)
    events = DenialEvents(posted, Subject("ns", "desk"), "a", now=lambda: NOW)
    try:
        for caller in ("one", "two", "three"):
            events.note(caller, 403, "not_admitted", "refused")  # returns, never raises
        while len(posted.bodies) < 3:
            await posted.done.wait()
            posted.done.clear()
    finally:
        await events.aclose()
    records = [r for r in caplog.records if "not posted" in r.getMessage()]
    assert [r.levelno for r in records][:1] == [logging.WARNING]
    assert {r.levelno for r in records[1:]} <= {logging.DEBUG}
    assert events.posted == 0


def test_noting_outside_an_event_loop_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    events = DenialEvents(Posted(), Subject("ns", "desk"), "a", now=lambda: NOW)
    events.note("one", 403, "not_admitted", "refused")
    assert "could not be queued" in caplog.text
