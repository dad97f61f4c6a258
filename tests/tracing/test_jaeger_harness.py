"""The Jaeger harness starts again on other ports when one it chose is taken before its bind.

Seen in a loaded CI run: the query port, free when chosen, was taken by the time Jaeger bound
it, Jaeger exited "address already in use" and both trace tests errored at setup.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.tracing import jaeger as harness
from tests.tracing.jaeger import Jaeger, require_jaeger

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def taken() -> Iterator[int]:
    """A port bound for the whole test and not listening, as an outgoing connection's is.

    Nothing accepts on it, so the harness cannot mistake it for Jaeger's own listener.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def test_a_port_taken_before_the_bind_is_replaced(
    taken: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = require_jaeger()
    real = harness.free_ports
    handed: list[list[int]] = []

    def first_one_taken(count: int) -> list[int]:
        ports = real(count)
        if not handed:
            ports[1] = taken  # the query port, as in the CI run
        handed.append(ports)
        return ports

    monkeypatch.setattr(harness, "free_ports", first_one_taken)
    jaeger = Jaeger.start(binary, tmp_path)
    try:
        assert len(handed) == 2, handed
        assert str(taken) not in jaeger.query_url
        assert jaeger.traces("nobody") == []
    finally:
        jaeger.stop()


def test_a_port_taken_on_every_attempt_fails_with_what_jaeger_said(
    taken: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = require_jaeger()
    real = harness.free_ports

    def always_taken(count: int) -> list[int]:
        ports = real(count)
        ports[0] = taken
        return ports

    monkeypatch.setattr(harness, "free_ports", always_taken)
    with pytest.raises(harness.PortTaken, match="address already in use"):
        Jaeger.start(binary, tmp_path)
