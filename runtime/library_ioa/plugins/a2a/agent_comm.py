"""``A2AAgentComm``: the outbound peer send over A2A (registry ``agent_comm``/``a2a``).

An :class:`~mas.runtime.boundary.agentcomm.AgentCommContract` on the official a2a-sdk
client. ``url``, ``headers`` and ``timeout`` come from the Application endpoint of the peer
(header values already resolved: Secret-backed ones are read by the host from the
environment).

One client per peer, kept for the life of the comm (HTTP keep-alive, one gRPC channel): the
peer's AgentCard is resolved once; when it advertises a gRPC interface whose channel comes
up within ``GRPC_CONNECT_WAIT`` seconds, sends go over gRPC (the endpoint's headers become
call metadata), else over JSON-RPC or HTTP+JSON (a NetworkPolicy that admits only the HTTP
port costs that wait once). A send over a 1.0 gRPC interface calls the generated stub on
that channel (:class:`~library_ioa.plugins.a2a.grpc_send.GrpcSend`: the SDK client's call
and error mapping without its per-call layers); following a task, and every other binding,
is the SDK's client.

``identity`` (set by the host only for a peer this Application deploys:
:func:`mas.infra.identity.carries_identity`) gives the caller's current token, read anew
for each request; it is sent in the ``maslab-identity`` header (gRPC: metadata) on every
binding, beside the endpoint's own headers. Without it, or when it gives ``None``, nothing
is added.

One ``send``: send one message with
``contextId`` = the session id and the metadata ``mas.caller_call_id``,
``mas.correlation_id`` and ``mas.delegation_depth``, wait for the peer's turn to end (a
blocking send), all within ``timeout`` seconds. A peer may answer the send with its task
still submitted or working; the comm then follows the task until it ends or asks for input:
with ``SubscribeToTask`` when the peer's card declares streaming (on a second client of the
same connection, built for streaming: the send itself stays blocking), else, and after a
subscription that ends early, by polling ``GetTask`` every ``FOLLOW_POLL_FIRST`` seconds,
doubling up to ``FOLLOW_POLL_MAX``. A task that never ends costs the send's timeout
(:class:`PeerTimeout`), and cancelling the send stops the follow.

A peer that asked for input gets the session's next message on that same task, which
resumes it. The answer is read by :mod:`library_ioa.plugins.a2a.answers` (which part of
a task holds the reply, whatever framework the peer is built on); a ``"timestamp"`` with
no UTC offset is read as UTC (:mod:`library_ioa.plugins.a2a.peer_bodies`), with a warning
once per peer. Failures, each naming the peer URL:

- connection refused, DNS failure, closed connection: :class:`PeerUnavailable`;
- no answer within the timeout: :class:`PeerTimeout`;
- an answer that is not A2A (bad card, bad JSON, a body the SDK cannot parse, a field of
  the wrong type, a required field missing, an error reply): :class:`PeerProtocolError`,
  naming the call and what was wrong. No exception of the SDK or of protobuf escapes
  ``send``: whatever a peer answers, the caller gets a :class:`CommError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

import grpc
import httpx
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    A2AClientTimeoutError,
    Client,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
)
from a2a.types import (
    AgentCard,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from a2a.utils.errors import A2AError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf import json_format

from library_ioa.plugins.a2a.answers import (
    FINAL_STATUS,
    check_task,
    reply_of_message,
    reply_of_task,
)
from library_ioa.plugins.a2a.grpc_send import GrpcSend, current_interface
from library_ioa.plugins.a2a.parts import data_part, dict_to_struct
from library_ioa.plugins.a2a.peer_bodies import LenientTimestamps
from mas.infra.identity import IDENTITY_HEADER
from mas.runtime.boundary.agentcomm import AgentCommContract, CommReply, OutboundMessage
from mas.runtime.errors import CommError, PeerProtocolError, PeerTimeout, PeerUnavailable
from mas.runtime.turns import CALLER_CALL_ID, CORRELATION_ID, DELEGATION_DEPTH
from mas.telemetry.grpcclient import traced_interceptors
from mas.telemetry.httpclient import traced_transport

logger = logging.getLogger(__name__)

_UNREACHABLE = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, OSError)
# What the SDK raises for an answer it cannot read: protobuf's parser (not a ValueError),
# pydantic for a 0.3 peer (a ValueError), and plain Python errors on a field of the wrong
# type or shape.
_MALFORMED = (json_format.Error, ValueError, TypeError, KeyError, AttributeError, IndexError)
GRPC_CONNECT_WAIT = 1.0  # seconds for an advertised gRPC channel to come up before HTTP
FOLLOW_POLL_FIRST = 0.05  # seconds before the first GetTask of a task left working
FOLLOW_POLL_MAX = 1.0  # the longest wait between two GetTask of a followed task


def grpc_interface(card: AgentCard) -> str | None:
    """The gRPC target the card advertises (the current protocol version first), if any."""
    targets = [
        (i.protocol_version != PROTOCOL_VERSION_CURRENT, i.url)
        for i in card.supported_interfaces
        if i.protocol_binding == TransportProtocol.GRPC.value and i.url
    ]
    return min(targets)[1] if targets else None


def _reason(exc: BaseException) -> str:
    """What was wrong, in one line: the parser's words (they name the field)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, json_format.ParseError) and text.startswith("Failed to load JSON"):
        # The SDK hands protobuf's parser a JSON-RPC result that is a string as JSON text.
        text = f"its result is a string, not an object ({text})"
    return text if len(text) <= 300 else text[:297] + "..."


def _refusal(exc: BaseException) -> str | None:
    """``exc`` as a peer's refusal of the caller (HTTP 401/403, gRPC UNAUTHENTICATED or
    PERMISSION_DENIED) with the peer's own message (which says what it admits), else None."""
    if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in (401, 403):
        message = ""
        with contextlib.suppress(Exception):  # a body that is not our JSON: the status only
            error = exc.response.json().get("error") or {}
            message = str(error.get("message") or "")
        text = f"HTTP {exc.response.status_code}: {message}".rstrip(": ")
    elif _grpc_code(exc) in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        code = _grpc_code(exc)
        assert isinstance(exc, grpc.aio.AioRpcError) and code is not None
        text = f"gRPC {code.name}: {exc.details() or ''}".rstrip(": ")
    else:
        return None
    return _reason(Exception(text))


def _causes(exc: BaseException) -> list[BaseException]:
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 20:
        chain.append(chain[-1].__cause__)
    return chain


def _grpc_code(exc: BaseException) -> grpc.StatusCode | None:
    return exc.code() if isinstance(exc, grpc.aio.AioRpcError) else None


class IdentityAuth(httpx.Auth):
    """Adds the caller's current token to every HTTP request (the card fetch included)."""

    def __init__(self, identity: Callable[[], str | None]) -> None:
        self._identity = identity

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._identity()
        if token:
            request.headers[IDENTITY_HEADER] = token
        yield request


class A2AAgentComm(AgentCommContract):
    """Sends delegations to one A2A peer."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        identity: Callable[[], str | None] | None = None,
    ) -> None:
        if not url or "://" not in url:
            raise ValueError(f"url: {url!r} is not an A2A base URL; accepted: scheme://host[:port]")
        if timeout <= 0:
            raise ValueError(f"timeout: {timeout!r} must be a positive number of seconds")
        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        self._headers = {str(k): str(v) for k, v in (headers or {}).items()}
        self.identity = identity
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None
        self._follower: Client | None = None  # streaming, for SubscribeToTask (card: streaming)
        self._grpc_send: GrpcSend | None = None  # the stub's send (1.0 gRPC interface)
        self._binding: str | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._asking: dict[str, str] = {}  # session id -> the peer task waiting for input
        self._naive_times_warned = False

    @property
    def protocol_binding(self) -> str | None:
        """The binding sends use (``GRPC``, ``JSONRPC``, ``HTTP+JSON``); ``None`` before one."""
        return self._binding

    async def _connect(self) -> Client:
        client = self._client
        if client is not None:  # connected: concurrent sends never queue on the lock
            return client
        async with self._lock:
            if self._closed:
                raise PeerUnavailable(f"peer {self.url}: the A2A client is closed")
            if self._client is None:
                if self._http is None:
                    inner = traced_transport("a2a.peer") or httpx.AsyncHTTPTransport()
                    self._http = httpx.AsyncClient(
                        headers=self._headers,
                        auth=IdentityAuth(self.identity) if self.identity is not None else None,
                        timeout=httpx.Timeout(self.timeout + 1.0),
                        transport=LenientTimestamps(inner, self._read_naive_times),
                    )
                with self._reading("its AgentCard"):
                    card = await A2ACardResolver(self._http, self.url).get_agent_card()
                self._client = await self._open(card)
            return self._client

    def _read_naive_times(self, count: int) -> None:
        if not self._naive_times_warned:
            self._naive_times_warned = True
            logger.warning(
                "peer %s sends timestamps without a UTC offset (%d in one answer); they are "
                "read as UTC (said once per peer)",
                self.url,
                count,
            )

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        """An answer to ``what`` that the SDK cannot read becomes a PeerProtocolError."""
        try:
            yield
        except (CommError, A2AError):
            raise
        except _MALFORMED as exc:
            logger.debug("peer %s: %s could not be read: %r", self.url, what, exc)
            raise PeerProtocolError(
                f"peer {self.url} answered {what} with something that is not A2A: {_reason(exc)}"
            ) from None

    async def _open(self, card: AgentCard) -> Client:
        """A client on the peer's gRPC interface when it comes up in time, else on HTTP."""
        target = grpc_interface(card)
        if target is not None:
            channel = self._channel(target)
            try:
                async with asyncio.timeout(GRPC_CONNECT_WAIT):
                    await channel.channel_ready()
            except TimeoutError:
                await channel.close()
                logger.info("peer %s: gRPC %s did not come up; using HTTP", self.url, target)
            else:
                self._binding = TransportProtocol.GRPC.value
                grpc_config = ClientConfig(
                    streaming=False,
                    httpx_client=self._http,
                    supported_protocol_bindings=[self._binding],
                    grpc_channel_factory=lambda _: channel,
                )
                interface = current_interface(card, target)
                if interface is not None:
                    self._grpc_send = GrpcSend(
                        channel,
                        tenant=interface.tenant,
                        headers=self._headers,
                        identity=self.identity,
                    )
                self._follower = self._streaming_client(grpc_config, card)
                return ClientFactory(grpc_config).create(card)
        config = ClientConfig(
            streaming=False,
            httpx_client=self._http,
            supported_protocol_bindings=[
                TransportProtocol.JSONRPC.value,
                TransportProtocol.HTTP_JSON.value,
            ],
        )
        client = ClientFactory(config).create(card)
        self._follower = self._streaming_client(config, card)
        self._binding = next(
            i.protocol_binding
            for i in card.supported_interfaces
            if i.protocol_binding in config.supported_protocol_bindings
        )
        return client

    @staticmethod
    def _streaming_client(config: ClientConfig, card: AgentCard) -> Client | None:
        """A client of the same connection that may subscribe, when the peer streams."""
        if not card.capabilities.streaming:
            return None
        return ClientFactory(dataclasses.replace(config, streaming=True)).create(card)

    def _channel(self, target: str) -> grpc.aio.Channel:
        interceptors = traced_interceptors("a2a.peer", target)  # none when tracing is off
        if self.url.startswith("https://"):
            return grpc.aio.secure_channel(
                target, grpc.ssl_channel_credentials(), interceptors=interceptors
            )
        return grpc.aio.insecure_channel(target, interceptors=interceptors)

    def _context(self) -> ClientCallContext | None:
        """Per-call parameters: the endpoint's headers and the caller's token as gRPC metadata
        (HTTP has them already)."""
        if self._binding != TransportProtocol.GRPC.value:
            return None
        parameters = dict(self._headers)
        token = self.identity() if self.identity is not None else None
        if token:
            parameters[IDENTITY_HEADER] = token
        return ClientCallContext(service_parameters=parameters) if parameters else None

    def _request(self, message: OutboundMessage) -> SendMessageRequest:
        parts = [Part(text=message.text)]
        if message.data is not None:
            parts.append(data_part(message.data))
        metadata: dict[str, Any] = {
            **message.metadata,
            CALLER_CALL_ID: message.call_id,
            CORRELATION_ID: message.correlation_id,
            DELEGATION_DEPTH: message.depth,
        }
        return SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER,
                message_id=str(uuid.uuid4()),
                context_id=message.session_id,
                parts=parts,
                metadata=dict_to_struct(metadata),
            )
        )

    async def send(self, message: OutboundMessage) -> CommReply:
        """Deliver ``message`` to the peer and wait for its reply (within the timeout).

        When the peer's last answer in this session asked for input, the message goes on
        that task, which resumes it (a task the peer no longer knows is not retried on).
        """
        try:
            async with asyncio.timeout(self.timeout):
                client = await self._connect()
                request = self._request(message)
                waiting = self._asking.pop(message.session_id, None)
                if waiting is not None:
                    request.message.task_id = waiting
                try:
                    reply = await self._exchange(client, request)
                except TaskNotFoundError:
                    if waiting is None:
                        raise
                    request.message.ClearField("task_id")
                    reply = await self._exchange(client, request)
                if reply.status == "input_required" and reply.task_id:
                    self._asking[message.session_id] = reply.task_id
                return reply
        except TimeoutError:
            raise PeerTimeout(f"peer {self.url} did not answer within {self.timeout:g}s") from None
        except CommError:
            raise
        except A2AClientTimeoutError:
            raise PeerTimeout(f"peer {self.url} did not answer within {self.timeout:g}s") from None
        except Exception as exc:  # whatever a peer answers, the caller gets a CommError
            logger.debug("peer %s: the send failed: %r", self.url, exc)
            raise self._classify(exc) from None

    def _classify(self, exc: BaseException) -> CommError:
        chain = _causes(exc)
        unreachable = next((e for e in chain if isinstance(e, _UNREACHABLE)), None)
        if unreachable is not None:
            reason = str(unreachable) or type(unreachable).__name__
            return PeerUnavailable(f"peer {self.url} is unavailable: {reason}")
        if any(_grpc_code(e) == grpc.StatusCode.UNAVAILABLE for e in chain):
            return PeerUnavailable(f"peer {self.url} is unavailable: gRPC UNAVAILABLE")
        if any(isinstance(e, httpx.TimeoutException) for e in chain):
            return PeerTimeout(f"peer {self.url} did not answer within {self.timeout:g}s")
        refusal = next((r for r in map(_refusal, chain) if r is not None), None)
        if refusal is not None:
            return PeerProtocolError(f"peer {self.url} refused this caller ({refusal})")
        if isinstance(exc, A2AError) and not isinstance(exc, A2AClientError):
            return PeerProtocolError(
                f"peer {self.url} answered with an A2A error ({type(exc).__name__}): {exc}"
            )
        return PeerProtocolError(
            f"peer {self.url} answered with something that is not A2A: {_reason(exc)}"
        )

    async def _exchange(self, client: Client, request: SendMessageRequest) -> CommReply:
        result: StreamResponse | SendMessageResponse | None = None
        with self._reading("SendMessage"):
            if self._grpc_send is not None:
                result = await self._grpc_send.send(request)
            else:
                async for response in client.send_message(request, context=self._context()):
                    result = response
        where = f"peer {self.url} answered SendMessage"
        if result is None:
            raise PeerProtocolError(f"{where} with nothing")
        if result.HasField("message"):
            return reply_of_message(result.message, where)
        if not result.HasField("task"):
            raise PeerProtocolError(f"{where} with neither a task nor a message")
        task = check_task(result.task, where)
        if task.status.state not in FINAL_STATUS:
            task = await self._follow(client, task)
        return reply_of_task(task, f"peer {self.url} answered")

    async def _follow(self, client: Client, task: Task) -> Task:
        """Wait on a task the peer left working until it ends or asks for input (still within
        the send's timeout): subscribed when the peer streams, polled otherwise."""
        context = self._context()
        delay = FOLLOW_POLL_FIRST
        where = f"peer {self.url} answered GetTask"
        try:
            if self._follower is not None:
                task = await self._subscribe(self._follower, client, task, context)
            while task.status.state not in FINAL_STATUS:
                await asyncio.sleep(delay)
                delay = min(2 * delay, FOLLOW_POLL_MAX)
                with self._reading("GetTask"):
                    read = await client.get_task(GetTaskRequest(id=task.id), context=context)
                task = check_task(read, where)
        except TaskNotFoundError:  # not the send's: a resend would start the work again
            raise PeerProtocolError(
                f"peer {self.url} no longer knows task {task.id}, which it left working"
            ) from None
        return task

    async def _subscribe(
        self, follower: Client, client: Client, task: Task, context: ClientCallContext | None
    ) -> Task:
        """The task once its subscription saw it end (or the stream closed), read whole."""
        request = SubscribeToTaskRequest(id=task.id)
        try:
            with self._reading("SubscribeToTask"):
                async for event in follower.subscribe(request, context=context):
                    state = None
                    if event.HasField("status_update"):
                        state = event.status_update.status.state
                    elif event.HasField("task"):
                        state = event.task.status.state
                    if state in FINAL_STATUS:
                        break
        except UnsupportedOperationError:  # it ended before the subscription: read it
            pass
        except PeerProtocolError as exc:  # a broken stream: the task itself is the answer
            logger.info("peer %s: following task %s: %s; reading it", self.url, task.id, exc)
        with self._reading("GetTask"):
            read = await client.get_task(GetTaskRequest(id=task.id), context=context)
        return check_task(read, f"peer {self.url} answered GetTask")

    async def aclose(self) -> None:
        """Close the connection pool; ``send`` afterwards raises ``PeerUnavailable``."""
        async with self._lock:
            self._closed = True
            client, self._client = self._client, None
            follower, self._follower = self._follower, None
            http, self._http = self._http, None
            self._grpc_send = None
        for made in (follower, client):  # a gRPC channel they share closes twice: a no-op
            if made is not None:
                await made.close()
        if http is not None:
            await http.aclose()  # shared with the client, which does not close it
