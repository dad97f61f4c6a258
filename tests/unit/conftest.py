"""The unit tier opens no sockets and starts no processes.

A test here that binds or connects a socket, or starts a subprocess (``subprocess`` and
``asyncio.create_subprocess_*`` both go through ``subprocess.Popen``), is marked
``integration``, which ``make test-unit`` leaves out. In any other test of this folder the
guard below makes such a call raise and, in case library code swallows the error, fails the
test at teardown. (gRPC's C core opens its sockets below Python's ``socket`` module: the
guard does not see those.)
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest

HOW = "mark it integration (tests/unit/conftest.py)"


@pytest.fixture(autouse=True)
def unit_guard(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[str]]:
    """What the test tried and was refused; the test fails when it is not empty at the end."""
    refused: list[str] = []
    if request.node.get_closest_marker("integration") is None:

        def refuse(what: str) -> Callable[..., NoReturn]:
            def refused_call(*args: Any, **kwargs: Any) -> NoReturn:
                refused.append(what)
                raise AssertionError(f"a unit test {what}: {HOW}")

            return refused_call

        monkeypatch.setattr(socket.socket, "bind", refuse("binds a socket"))
        monkeypatch.setattr(socket.socket, "connect", refuse("connects a socket"))
        monkeypatch.setattr(socket.socket, "connect_ex", refuse("connects a socket"))
        monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse("starts a subprocess"))
    yield refused
    if refused:
        pytest.fail(f"a unit test {', '.join(sorted(set(refused)))}: {HOW}", pytrace=False)
