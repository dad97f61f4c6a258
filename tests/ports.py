"""Ports for the tests' own listeners, outside the range the kernel gives outgoing connections.

A port the OS picks with ``bind(0)`` comes from ``net.ipv4.ip_local_port_range``, the same
range every outgoing connection on the machine takes its local port from. Between the test
choosing such a port and its server binding it, any connection (an API server's client, a
kubelet, another test's HTTP client) could take it, and the server failed with "address
already in use" (CI met it twice). A port below that range is never handed out that way, so
only another listener could take it, and every test's listener picks at random.
"""

from __future__ import annotations

import random
import socket
from collections import deque
from pathlib import Path

LOWEST = 10000  # above the well-known and registered ports the suite's own tools use
NODE_PORTS = 30000  # Kubernetes' NodePort range starts here: kube-proxy may catch it
_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_RANDOM = random.SystemRandom()  # not the seeded ``random`` hypothesis controls in a test
# The latest ports handed out in this process: a test asking for two gets two different ones
# although neither is bound yet.
_HANDED: deque[int] = deque(maxlen=1000)


def outgoing_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux's default without it)."""
    try:
        low, high = (int(part) for part in _RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` just now, below the outgoing range (and below the
    NodePort range) when there is room."""
    low = min(outgoing_range()[0], NODE_PORTS)
    if low - LOWEST >= 1000:
        for _ in range(100):
            port = _RANDOM.randrange(LOWEST, low)
            if port in _HANDED:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((host, port))  # no SO_REUSEADDR: a port in TIME_WAIT is skipped
                except OSError:
                    continue
            _HANDED.append(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` different ports free on ``host`` just now."""
    return [free_port(host) for _ in range(count)]
