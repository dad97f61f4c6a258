"""``GrpcSend``: a peer's blocking ``SendMessage`` on the generated gRPC stub.

:class:`~library_ioa.plugins.a2a.agent_comm.A2AAgentComm` sends each delegation as one
blocking ``SendMessage``. Through the SDK's ``BaseClient`` that call crosses its interceptor
loop, a ``trace_function`` span around the transport's ``send_message`` and another around
``_call_grpc`` (each asking OpenTelemetry for a tracer, which reads the environment, even
when nothing records), and a copy of the answered task into a ``StreamResponse`` (what
that costs a delegating agent: docs/performance.md, "Where the time goes"). This module
makes the same call on the generated ``A2AServiceStub`` over the same channel, doing what
the SDK's client does for the comm's configuration (no streaming, no polling, no push
config, no output modes, no client interceptors), no more:

- the request's ``tenant``, when it has none, is the interface's (``TenantTransportDecorator``);
- the call metadata is the SDK's: ``a2a-version: 1.0``, then the endpoint's headers with
  lowercase names (``ClientCallContext.service_parameters``), then the caller's current
  token as ``maslab-identity`` when the comm has one; no deadline (the comm's own timeout
  bounds the call);
- a failed call is mapped by the SDK client's own mapping (reached through
  :func:`~library_ioa.plugins.a2a.server.sdk_internals.map_grpc_error`): DEADLINE_EXCEEDED is
  ``A2AClientTimeoutError``, a status naming an A2A error (``a2a-protocol.org``) is that
  error (``TaskNotFoundError``...), anything else ``A2AClientError`` with the status chained;
- an answer with neither a task nor a message is the SDK's ``ValueError``.

Tracing is the channel's: when it is on, its interceptors
(:func:`mas.telemetry.grpcclient.traced_interceptors`) give the call its CLIENT span and put
``traceparent`` in the metadata, so the peer continues the trace; the SDK's two internal
spans around the transport are no longer made.

Only for an interface of the current protocol version (1.0): a 0.3 interface needs the SDK's
``CompatGrpcTransport``, and the comm keeps the SDK's client for it.

The SDK's private error mapping is reached through ``server/sdk_internals.py``, which
says the SDK version it was written against; ``tests/a2a/test_a2a_grpc_send.py`` pins what
is relied on: the same answers and errors as the SDK's client for the same calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import grpc
from a2a.types import AgentCard, AgentInterface, SendMessageRequest, SendMessageResponse
from a2a.types.a2a_pb2_grpc import A2AServiceStub
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, VERSION_HEADER, TransportProtocol

from library_ioa.plugins.a2a.server.sdk_internals import map_grpc_error
from mas.infra.identity import IDENTITY_HEADER

__all__ = ["GrpcSend", "current_interface"]


def current_interface(card: AgentCard, target: str) -> AgentInterface | None:
    """The card's 1.0 gRPC interface at ``target``, which the SDK calls with its current
    ``GrpcTransport`` (``ClientFactory`` picks a 1.0 interface first); ``None`` without one
    (a 0.3, later or unversioned interface is left to the SDK's client)."""
    return next(
        (
            i
            for i in card.supported_interfaces
            if i.protocol_binding == TransportProtocol.GRPC.value
            and i.url == target
            and i.protocol_version == PROTOCOL_VERSION_CURRENT
        ),
        None,
    )


class GrpcSend:
    """Blocking ``SendMessage`` calls to one peer on a gRPC channel (module docstring)."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        tenant: str = "",
        headers: Mapping[str, str],
        identity: Callable[[], str | None] | None = None,
    ) -> None:
        self._stub = A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        self._tenant = tenant
        self._metadata: tuple[tuple[str, str], ...] = (
            (VERSION_HEADER.lower(), PROTOCOL_VERSION_CURRENT),
            *((str(k).lower(), str(v)) for k, v in headers.items()),
        )
        self._identity = identity

    def _call_metadata(self) -> tuple[tuple[str, str], ...]:
        token = self._identity() if self._identity is not None else None
        return (*self._metadata, (IDENTITY_HEADER, token)) if token else self._metadata

    async def send(self, request: SendMessageRequest) -> SendMessageResponse:
        """The peer's answer to ``request``: a task or a message (errors: module docstring)."""
        if self._tenant and not request.tenant:
            request.tenant = self._tenant
        try:
            response: SendMessageResponse = await self._stub.SendMessage(
                request, metadata=self._call_metadata()
            )
        except grpc.aio.AioRpcError as exc:
            map_grpc_error(exc)
        if not (response.HasField("task") or response.HasField("message")):
            raise ValueError("Response has neither task nor message")
        return response
