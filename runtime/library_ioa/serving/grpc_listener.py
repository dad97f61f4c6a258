"""``GrpcListener``: a ``grpc.aio`` server bound like ``listeners.HttpListener``.

Its own module so that gRPC is imported only by a process that serves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from library_ioa.serving.grpc_guard import (
    DEFAULT_GRPC_LIMITS,
    GrpcLimits,
    grpc_connection_options,
)
from library_ioa.serving.listeners import ListenError, bind_socket


class GrpcListener:
    """A ``grpc.aio`` server with the servicers added by ``register(server)``, enforcing
    ``limits``; ``options`` are further channel arguments (the message size)."""

    def __init__(
        self,
        host: str,
        port: int,
        servicers: list[tuple[Any, Any]],
        interceptors: Sequence[Any] = (),
        options: Sequence[tuple[str, Any]] = (),
        *,
        limits: GrpcLimits = DEFAULT_GRPC_LIMITS,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.limits = limits
        self._servicers = servicers
        self._interceptors = list(interceptors)
        self._options = [*grpc_connection_options(limits), *options]
        self._server: grpc.aio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        """Bind and start."""
        if self.requested_port:
            # A clear error before grpc's C core logs its own lines about a taken port.
            bind_socket(self.host, self.requested_port).close()
        server = grpc.aio.server(
            options=[("grpc.so_reuseport", 0), *self._options],
            interceptors=self._interceptors or None,
        )
        for servicer, add in self._servicers:
            add(servicer, server)
        host = f"[{self.host}]" if ":" in self.host else self.host
        try:
            port = server.add_insecure_port(f"{host}:{self.requested_port}")
        except RuntimeError as exc:
            raise ListenError(
                f"cannot listen on {host}:{self.requested_port} (gRPC): {exc}"
            ) from None
        if port == 0:
            raise ListenError(
                f"cannot listen on {host}:{self.requested_port} (gRPC): address in use or invalid"
            )
        self.port = port
        await server.start()
        self._server = server

    async def aclose(self, grace: float = 5.0) -> None:
        """Stop, letting in-flight calls finish within ``grace`` seconds."""
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
