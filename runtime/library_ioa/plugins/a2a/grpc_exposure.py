"""The gRPC listener of an ``A2AExposure``: its servicers, interceptors and limits.

``A2AExposure`` imports this module only when it serves gRPC (``grpc`` on and the endpoint
sets ``a2a.grpc_port`` or ``a2a.grpc_url``), so an agent without a gRPC port never loads
gRPC or the SDK's gRPC handlers (``library_ioa.plugins.a2a.sdk_extras``).

Servicers: the A2A 1.0 service (the fast path's ``FastGrpcHandler`` or the SDK's
``GrpcHandler``), and with ``compat_0_3`` the 0.3 service. Interceptors, outermost first:
tracing (when on), the caller check (when the agent checks identities, ``a2a.auth``
included) or auth (with ``a2a.auth``), the A2A version check, the decode check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.server.request_handlers.grpc_handler import GrpcHandler
from a2a.types import a2a_pb2_grpc

from library_ioa.plugins.a2a.server.fast.grpc_handler import FastGrpcHandler
from library_ioa.plugins.a2a.server.grpc_tracing import GrpcTracing
from library_ioa.plugins.a2a.server.transport.grpc_corrections import GrpcVersionCheck
from library_ioa.plugins.a2a.server.transport.grpc_decode import GrpcDecodeCheck
from library_ioa.plugins.a2a.server.transport.limits import grpc_options
from library_ioa.serving.auth import Authenticator
from library_ioa.serving.grpc_auth import GrpcAuth, GrpcPrincipals
from library_ioa.serving.grpc_callers import CallerPrincipals, GrpcCallers
from library_ioa.serving.grpc_guard import GrpcLimits
from library_ioa.serving.grpc_listener import GrpcListener
from mas.infra.addresses import parse_grpc_address
from mas.infra.models import Endpoint
from mas.telemetry import tracing

if TYPE_CHECKING:
    from mas.runtime.identity.callers import CallerCheck


def build_grpc_listener(
    handler: Any,
    endpoint: Endpoint,
    *,
    address: str,
    bind_host: str,
    authenticator: Authenticator | None,
    fast_send: bool,
    caller_check: CallerCheck | None = None,
    compat_0_3: bool,
) -> GrpcListener:
    """The (not yet started) gRPC listener of ``handler`` at ``address``'s port."""
    principals: Any = GrpcPrincipals(authenticator) if authenticator is not None else None
    if caller_check is not None:
        principals = CallerPrincipals()
    servicers: list[tuple[Any, Any]] = [
        (
            # A plain SendMessage skips the SDK's conversions (server/fast/grpc_handler.py).
            (FastGrpcHandler if fast_send else GrpcHandler)(handler, principals),
            a2a_pb2_grpc.add_A2AServiceServicer_to_server,
        )
    ]
    if compat_0_3:
        servicers.append(
            (
                CompatGrpcHandler(handler, principals),
                a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server,
            )
        )
    interceptors: list[Any] = [GrpcVersionCheck(), GrpcDecodeCheck()]
    if caller_check is not None:  # a2a.auth included (serving/grpc_callers.py)
        interceptors.insert(0, GrpcCallers(caller_check, authenticator))
    elif authenticator is not None:
        interceptors.insert(0, GrpcAuth(authenticator))
    if tracing.on():
        interceptors.insert(0, GrpcTracing())
    return GrpcListener(
        bind_host,
        parse_grpc_address(address).port,
        servicers,
        interceptors=interceptors,
        options=grpc_options(endpoint.a2a.max_body_bytes),
        limits=GrpcLimits.from_options(endpoint.a2a.connections),
    )
