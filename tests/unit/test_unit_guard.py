"""The unit tier's guard (tests/unit/conftest.py) refuses sockets and subprocesses."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest


def test_a_socket_bind_or_connect_is_refused_and_recorded(unit_guard: list[str]) -> None:
    with socket.socket() as sock:
        with pytest.raises(AssertionError, match="binds a socket: mark it integration"):
            sock.bind(("127.0.0.1", 0))
        with pytest.raises(AssertionError, match="connects a socket"):
            sock.connect(("127.0.0.1", 9))
    assert unit_guard == ["binds a socket", "connects a socket"]
    unit_guard.clear()  # refused on purpose: the test passes


async def test_a_subprocess_is_refused_however_it_is_started(unit_guard: list[str]) -> None:
    with pytest.raises(AssertionError, match="starts a subprocess"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    with pytest.raises(AssertionError, match="starts a subprocess"):
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    assert unit_guard == ["starts a subprocess"] * 2
    unit_guard.clear()


@pytest.mark.integration
def test_an_integration_test_may_bind(unit_guard: list[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
    assert unit_guard == []
