"""What the operator remembers of its own status writes (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from mas_operator.status_writes import KEEP_OLDER, after_write, known_status

pytestmark = pytest.mark.timeout(10)


def app(version: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "desk", "resourceVersion": version}}
    if status is not None:
        body["status"] = status
    return body


def test_a_copy_from_before_our_write_gets_the_status_that_write_left() -> None:
    last = after_write(app("1"), app("2", {"phase": "Ready"}), None)
    assert known_status(app("1"), last)["status"] == {"phase": "Ready"}


def test_any_other_copy_keeps_its_own_status() -> None:
    last = after_write(app("1"), app("2", {"phase": "Ready"}), None)
    # the echo of the write, and a later write by anyone (a person's edit of the status)
    assert known_status(app("2", {"phase": "Ready"}), last)["status"] == {"phase": "Ready"}
    assert known_status(app("7", {"phase": "Edited"}), last)["status"] == {"phase": "Edited"}
    assert "status" not in known_status(app("1"), None)


def test_versions_before_an_earlier_write_stay_older() -> None:
    first = after_write(app("1"), app("2", {"phase": "Pending"}), None)
    second = after_write(app("1"), app("5", {"phase": "Ready"}), first)  # a queued copy
    for version in ("1", "2"):
        assert known_status(app(version), second)["status"] == {"phase": "Ready"}
    assert second.older == ("1", "2")
    third = after_write(app("6"), app("9", {"phase": "Degraded"}), second)  # kopf's patch: 6
    assert third.older == ("1", "2", "5", "6")
    assert known_status(app("6"), third)["status"] == {"phase": "Degraded"}


def test_the_memory_of_older_versions_is_bounded() -> None:
    last = None
    for n in range(0, 4 * KEEP_OLDER, 2):
        last = after_write(app(str(n)), app(str(n + 1), {"n": n}), last)
    assert last is not None and len(last.older) == KEEP_OLDER
    assert last.older[-1] == str(4 * KEEP_OLDER - 2)
