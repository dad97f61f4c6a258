"""``GrpcVersionCheck``: the A2A version check of gRPC calls (the HTTP side is in ``corrections``).

Its own module so that gRPC is imported only by a process that serves it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import grpc
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import A2A_ERROR_REASONS, VersionNotSupportedError
from a2a.utils.grpc_status import status_to_grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

from library_ioa.plugins.a2a.server.transport.corrections import (
    A2A_0_3_SERVICE,
    A2A_1_0_SERVICE,
    SUPPORTED_VERSIONS,
    serves_0_3,
    shown_version,
)


class GrpcVersionCheck(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuse a gRPC call whose ``a2a-version`` metadata names a version its service does not
    serve.

    On ``service`` (the A2A 1.0 service) the versions of ``supported`` are served
    (``Major.Minor``, a patch part ignored); on ``compat_service`` (the 0.3 compatibility
    service, when it is mounted) the versions :func:`serves_0_3` accepts. Other services
    (health, ...) are left alone.

        The SDK's gRPC handlers never read the version, so a 99.0 client is served as 1.0, and
        a 1.0 or 9.9 client of the 0.3 service as 0.3. A call without the metadata is let
        through (the SDK's own 1.0 clients always send it; a 0.3 client sends none). The
        refusal is the SDK's own error shape: UNIMPLEMENTED with a ``google.rpc.ErrorInfo``
        (domain ``a2a-protocol.org``, reason of VersionNotSupportedError) in
        ``grpc-status-details-bin``, so the SDK's client raises VersionNotSupportedError.
    """

    def __init__(
        self,
        supported: Iterable[str] = SUPPORTED_VERSIONS,
        service: str = A2A_1_0_SERVICE,
        compat_service: str | None = A2A_0_3_SERVICE,
    ) -> None:
        self.supported = tuple(supported)
        self.prefix = f"/{service}/"
        self.compat_prefix = f"/{compat_service}/" if compat_service else None

    def accepts(self, version: str) -> bool:
        """Whether ``version`` (``Major.Minor``, a patch part ignored) is served."""
        parts = version.strip().split(".")
        return len(parts) >= 2 and ".".join(parts[:2]) in self.supported

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        method = str(handler_call_details.method or "")
        compat = self.compat_prefix is not None and method.startswith(self.compat_prefix)
        if not compat and not method.startswith(self.prefix):
            return handler  # another service (health, ...)
        version = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key.lower() == VERSION_HEADER.lower():
                version = value if isinstance(value, str) else value.decode("latin-1")
        if handler is None or not version:
            return handler
        if compat:
            if serves_0_3(version):
                return handler
            return self._refusal(
                handler,
                f"A2A-Version {shown_version(version)!r} is not supported by the 0.3 service "
                f"{method.split('/')[1]}; send a2a-version 0.3 (or none), or call "
                f"{self.prefix.strip('/')} for {', '.join(self.supported)}",
            )
        if self.accepts(version):
            return handler
        return self._refusal(
            handler,
            f"A2A-Version {shown_version(version)!r} is not supported; supported: "
            f"{', '.join(self.supported)}",
        )

    @staticmethod
    def _refusal(handler: Any, message: str) -> Any:
        error = VersionNotSupportedError(message)
        status = status_pb2.Status(
            code=grpc.StatusCode.UNIMPLEMENTED.value[0], message=error.message
        )
        detail = any_pb2.Any()
        detail.Pack(
            error_details_pb2.ErrorInfo(
                reason=A2A_ERROR_REASONS.get(VersionNotSupportedError, "VERSION_NOT_SUPPORTED"),
                domain="a2a-protocol.org",
            )
        )
        status.details.append(detail)
        rich = status_to_grpc(status)

        async def abort(context: Any) -> None:
            context.set_trailing_metadata(tuple(rich.trailing_metadata))
            await context.abort(rich.code, rich.details)

        async def unary(request: Any, context: Any) -> Any:
            await abort(context)

        async def streaming(request: Any, context: Any) -> Any:
            await abort(context)
            yield  # pragma: no cover - abort raises

        kw = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(streaming, **kw)
        return grpc.unary_unary_rpc_method_handler(unary, **kw)
