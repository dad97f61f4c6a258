"""What the client needs of gRPC, loaded only when the transport in use is gRPC.

:func:`channel_factory` opens the SDK client's channel (TLS trusts ``--cacert`` for an
``https`` agent); :func:`status_name` reads the status code of a failed call, which
:meth:`~mas.ctl.client.connection.Connection.failure` turns into the user's one line.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from mas.ctl.client.credentials import Credentials


def channel_factory(url: str, credentials: Credentials) -> Callable[[str], grpc.aio.Channel]:
    """The channel to the target the card names, for the agent whose card came from ``url``."""

    def channel(target: str) -> grpc.aio.Channel:
        for scheme in ("grpc://", "grpcs://", "dns:///"):
            target = target.removeprefix(scheme)
        if url.startswith("https://"):
            roots = credentials.root_certificates()
            return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(roots))
        return grpc.aio.insecure_channel(target)

    return channel


def status_name(exc: BaseException) -> str | None:
    """The status code of a failed gRPC call (``UNAVAILABLE``...); ``None`` for any other
    exception."""
    return exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else None
