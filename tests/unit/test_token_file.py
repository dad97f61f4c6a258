"""TokenFile: the projected token re-read when the kubelet rotates it, nothing when absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mas.runtime.identity.token_file import TokenFile

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def rotate(volume: Path, token: str, generation: int) -> None:
    """As the kubelet's atomic writer does: a new data directory, then a symlink swap."""
    data = volume / f"..data-{generation}"
    data.mkdir()
    (data / "token").write_text(token)
    link = volume / "..data.tmp"
    link.symlink_to(data.name)
    link.replace(volume / "..data")
    if not (volume / "token").is_symlink():
        (volume / "token").symlink_to("..data/token")


def test_a_rotated_token_is_read_at_the_next_check(tmp_path: Path) -> None:
    clock = Clock()
    rotate(tmp_path, "first\n", 1)
    tokens = TokenFile(tmp_path / "token", check_interval=5, clock=clock)
    assert tokens.current() == "first"
    rotate(tmp_path, "second", 2)
    clock.now += 1
    assert tokens.current() == "first"  # not checked again within the interval
    clock.now += 5
    assert tokens.current() == "second"


def test_the_same_file_is_not_read_again(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("kept")
    clock = Clock()
    tokens = TokenFile(path, check_interval=0, clock=clock)
    assert tokens.current() == "kept"
    os.chmod(path, 0)  # unreadable now: a read would fail, a stat does not
    try:
        clock.now += 1
        assert tokens.current() == "kept"
    finally:
        os.chmod(path, 0o600)


def test_no_file_means_no_token(tmp_path: Path) -> None:
    clock = Clock()
    tokens = TokenFile(tmp_path / "absent", check_interval=0, clock=clock)
    assert tokens.current() is None
    (tmp_path / "absent").write_text("late")
    clock.now += 1
    assert tokens.current() == "late"
    (tmp_path / "absent").unlink()
    clock.now += 1
    assert tokens.current() is None
    (tmp_path / "absent").write_text("   \n")
    clock.now += 1
    assert tokens.current() is None  # an empty file is no token
