"""Connection limits of the gRPC listener: how many connections, and how long one may idle.

grpcio's C core serves each connection itself, so the bounds are channel arguments of the
server (:func:`grpc_connection_options`), none of them on by default:

- ``grpc.max_allowed_incoming_connections``: past ``max_connections`` open connections a
  new one is closed at once (the client sees UNAVAILABLE, "Socket closed") and costs no
  file descriptor beyond the accept; so a flood of connections on the gRPC port can no
  longer take the process's file descriptors from the HTTP port and its probes;
- ``grpc.server_handshake_timeout_ms``: a connection that has not opened HTTP/2 (sent its
  preface) within ``handshake_timeout`` seconds is closed (the default is 120 s);
- ``grpc.max_connection_idle_ms``: a connection with no call for ``idle_timeout`` seconds
  is closed with GOAWAY (a client reconnects on its next call);
- ``grpc.keepalive_time_ms`` / ``grpc.keepalive_timeout_ms``: a connection with calls
  running is pinged every ``keepalive_time`` seconds and closed when the ping is not
  answered within ``keepalive_timeout`` (a peer that vanished without a FIN).

The cap counts every connection, whoever opened it: grpcio offers no cap per client, so
one client can hold the gRPC port's connections (never the HTTP port's, nor its file
descriptors) until the handshake or idle timeout closes them.

Written against grpcio 1.85; ``tests/security/test_grpc_connections.py`` pins the
behaviour of each argument on real sockets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mas.infra.models import ConnectionLimits


@dataclass(frozen=True)
class GrpcLimits:
    """The bounds of one gRPC listener (module docstring)."""

    max_connections: int = 512
    handshake_timeout: float = 20.0
    idle_timeout: float = 60.0
    keepalive_time: float = 60.0
    keepalive_timeout: float = 20.0

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ValueError(f"GrpcLimits.max_connections {self.max_connections!r}: must be >= 1")
        for name in ("handshake_timeout", "idle_timeout", "keepalive_time", "keepalive_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"GrpcLimits.{name} {getattr(self, name)!r}: must be positive")

    @classmethod
    def from_options(cls, options: ConnectionLimits) -> GrpcLimits:
        """The limits an endpoint's ``a2a.connections`` states."""
        return cls(
            max_connections=options.grpc_max_open,
            handshake_timeout=options.head_timeout_seconds,
            idle_timeout=options.grpc_idle_timeout_seconds,
        )


DEFAULT_GRPC_LIMITS = GrpcLimits()


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def grpc_connection_options(limits: GrpcLimits = DEFAULT_GRPC_LIMITS) -> list[tuple[str, Any]]:
    """``grpc.aio.server`` options enforcing ``limits``."""
    return [
        ("grpc.max_allowed_incoming_connections", limits.max_connections),
        ("grpc.server_handshake_timeout_ms", _ms(limits.handshake_timeout)),
        ("grpc.max_connection_idle_ms", _ms(limits.idle_timeout)),
        ("grpc.keepalive_time_ms", _ms(limits.keepalive_time)),
        ("grpc.keepalive_timeout_ms", _ms(limits.keepalive_timeout)),
    ]
