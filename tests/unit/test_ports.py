"""The suite's listener ports come from below the outgoing connections' and NodePort ranges."""

from __future__ import annotations

import socket

import pytest

from tests import ports

pytestmark = pytest.mark.integration  # binds real sockets


def test_a_port_is_free_and_below_the_outgoing_range() -> None:
    low = min(ports.outgoing_range()[0], ports.NODE_PORTS)
    picked = {ports.free_port() for _ in range(20)}
    assert all(ports.LOWEST <= port < low for port in picked), picked
    assert len(picked) > 1  # at random, not the same port for every test
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", picked.pop()))


def test_a_port_held_by_a_listener_is_never_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setattr(ports, "outgoing_range", lambda: (port + 1000, 60999))
        monkeypatch.setattr(ports, "NODE_PORTS", port + 1000)
        monkeypatch.setattr(ports, "LOWEST", port)  # only the held port and 999 others
        picked = [ports.free_port() for _ in range(200)]
        assert all(port < other < port + 1000 for other in picked), picked


def test_without_room_below_the_range_the_os_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    low, high = ports.outgoing_range()  # where the OS really picks from
    monkeypatch.setattr(ports, "outgoing_range", lambda: (ports.LOWEST + 10, 60999))
    assert all(low <= ports.free_port() <= high for _ in range(5))


def test_ports_asked_for_one_after_another_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "LOWEST", 20000)
    monkeypatch.setattr(ports, "NODE_PORTS", 21000)  # 1,000 ports: repeats likely at random
    picked = ports.free_ports(60)
    assert len(set(picked)) == 60, picked
