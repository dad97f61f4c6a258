"""``A2AExposure``: the A2A ingress adapter of one agent (registry ``agent_expose``/``a2a``).

Not an ``AgentCommContract``: it receives, it never sends. On one advertised URL (no path
prefix) it serves

- JSON-RPC at the URL root (``/``),
- HTTP+JSON under ``/a2a/rest``,
- the AgentCard at ``/.well-known/agent-card.json``,
- ``/healthz`` and ``/readyz`` for probes, and ``/metrics`` when given registries,
- gRPC (``lf.a2a.v1.A2AService``) when ``grpc`` is on and the endpoint sets ``a2a.grpc_port``
  or ``a2a.grpc_url`` (built by :mod:`library_ioa.plugins.a2a.grpc_exposure`, the only
  module of this adapter that imports gRPC, loaded only then),

all built from the a2a-sdk's route factories, ``DefaultRequestHandler``, the task and
push-config stores of ``a2a.task_store`` (:mod:`library_ioa.plugins.a2a.server.stores.endpoint`:
in memory by default, or the SDK's database stores) and a push sender that delivers off the
event path (``server/push/delivery.py``);
with the endpoint's ``a2a.fast_path`` (on by default) a quick blocking send and a streaming
send of a new task skip the SDK's per-task machinery (``server/fast/handler.py``,
``server/fast/stream.py``, ``server/fast/jsonrpc.py`` and its hot lane,
``server/fast/grpc_handler.py``, the same answers); with it off every request takes the SDK's
own path (no fast JSON-RPC route, hot lane, fast gRPC servicer or fast stream). ``fast_send``
overrides the endpoint's choice (the differential tests and benchmarks serve both paths side
by side). Protocol 1.0 is served, and the 0.3 method names and transports too
(``message/send``, ``tasks/cancel``, REST ``/v1/...``, gRPC ``a2a.v1.A2AService``). A request
without an ``A2A-Version`` header is read as 0.3.

Push-notification URLs are screened by the endpoint's ``a2a.push`` policy
(:class:`~library_ioa.plugins.a2a.server.push.url_policy.PushUrlPolicy`: public addresses only
unless ``allow_private`` or ``allowed_hosts``); a ``push_url_validator`` given here replaces
it (``mas-ctl serve --public-push-urls-only`` passes the SDK's strict validator). Bodies pass
:class:`~library_ioa.plugins.a2a.server.transport.limits.RequestLimits`
(``a2a.max_body_bytes``), and with ``a2a.auth`` every transport but the card requires a
credential (``library_ioa/serving/auth.py``).
See ``docs/security.md``.

The bind host is distinct from the advertised URL: in a pod the URL is the Service DNS
name and the bind is ``0.0.0.0``. Usage::

    exposure = A2AExposure(agent_id="a", manifest=m, endpoint=e, mailbox=box)
    await exposure.start()          # raises ListenError when the port is taken
    ...
    await exposure.aclose()

Shutdown keeps this order (:meth:`A2AExposure.aclose`), so a turn accepted before it is
not lost, even one whose request has already ended (a non-blocking send: the turn runs on
in the background and the client polls any replica):

1. stop accepting: readiness goes false and the listeners close, in-flight requests
   getting the drain timeout (uvicorn and gRPC wait for requests only, not for turns);
2. wait for the turns this replica runs, at most the drain timeout
   (:meth:`~library_ioa.plugins.a2a.server.stores.task_stores.TaskStores.drain`); each
   one still running then is written FAILED by this replica, saying it was stopping,
   and its run row dropped, rather than left WORKING for a survivor's sweep after the
   lease;
3. close the request handler (the SDK's per-task machinery), the push sender, then the
   stores.

The turns themselves run in the agent's mailbox, which the host closes after this.
In a pod, ``terminationGracePeriodSeconds`` must exceed the preStop delay plus the drain
(``docs/operations.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import a2a.client  # noqa: F401  # first: see library_ioa.plugins.a2a.__init__
import httpx
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.types import AgentCard
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from library_ioa.plugins.a2a.agentcard import (
    REST_PATH,
    agent_card_from_manifest,
    extended_card,
    grpc_target,
)
from library_ioa.plugins.a2a.server.executor import (
    DEFAULT_MESSAGE_GRACE,
    MasLabAgentExecutor,
    TurnMailbox,
)
from library_ioa.plugins.a2a.server.fast.handler import FastSendHandler
from library_ioa.plugins.a2a.server.fast.hot_lane import hot_lane
from library_ioa.plugins.a2a.server.fast.jsonrpc import create_fast_jsonrpc_routes
from library_ioa.plugins.a2a.server.fast.stream import StreamLimits
from library_ioa.plugins.a2a.server.list_pages import ListLimits
from library_ioa.plugins.a2a.server.push.configs import CappedPushConfigStore
from library_ioa.plugins.a2a.server.push.delivery import QueuedPushSender
from library_ioa.plugins.a2a.server.push.url_policy import PushUrlPolicy
from library_ioa.plugins.a2a.server.stores.endpoint import (
    TaskStores,
    build_task_stores,
    default_replica_id,
)
from library_ioa.plugins.a2a.server.tracing import HttpTracing
from library_ioa.plugins.a2a.server.transport.corrections import HttpCorrections
from library_ioa.plugins.a2a.server.transport.limits import RequestLimits
from library_ioa.plugins.a2a.server.transport.stream_errors import EarlyStreamErrors
from library_ioa.serving.auth import (
    Authenticator,
    HttpAuth,
    resolve_credentials,
)
from library_ioa.serving.callers import HttpCallers, endpoint_check
from library_ioa.serving.http_guard import HttpLimits
from library_ioa.serving.listeners import HttpListener, ListenError
from library_ioa.serving.metrics import metrics_route
from mas.infra.addresses import parse_advertised_url
from mas.infra.models import AgentManifest, Endpoint
from mas.runtime.agent import Agent
from mas.telemetry import tracing
from mas.telemetry.httpclient import TracingTransport

if TYPE_CHECKING:
    from library_ioa.serving.grpc_listener import GrpcListener
    from mas.runtime.identity.callers import CallerCheck

logger = logging.getLogger(__name__)

__all__ = ["A2AExposure", "ListenError"]


def push_client(connections: int) -> httpx.AsyncClient:
    """The HTTP client of one push receiver: its own pool of ``connections``."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    transport: httpx.AsyncBaseTransport = httpx.AsyncHTTPTransport(limits=limits)
    if tracing.on():
        transport = TracingTransport("a2a.push", transport)
    return httpx.AsyncClient(timeout=10.0, transport=transport)


class A2AExposure:
    """The A2A listener of one agent, on that agent's session mailbox."""

    def __init__(
        self,
        *,
        agent_id: str,
        manifest: AgentManifest,
        endpoint: Endpoint,
        mailbox: TurnMailbox,
        url: str | None = None,
        bind_host: str | None = None,
        port: int | None = None,
        grpc: bool = False,
        grpc_bind_host: str | None = None,
        metrics_registries: Sequence[CollectorRegistry] | None = None,
        ready: Callable[[], bool] | None = None,
        compat_0_3: bool | None = None,
        message_grace: float = DEFAULT_MESSAGE_GRACE,
        drain_timeout: float = 10.0,
        push_url_validator: Callable[[str], Awaitable[bool]] | None = None,
        task_stores: TaskStores | None = None,
        fast_send: bool | None = None,
        caller_check: CallerCheck | None = None,
    ) -> None:
        self.agent_id = agent_id
        if fast_send is None:
            fast_send = endpoint.a2a.fast_path
        self.fast_path = fast_send
        if compat_0_3 is None:
            compat_0_3 = endpoint.a2a.compat_0_3
        self.card: AgentCard = agent_card_from_manifest(
            agent_id, manifest, endpoint, url=url, compat_0_3=compat_0_3
        )
        self.url = self.card.supported_interfaces[0].url
        advertised = parse_advertised_url(self.url)
        self.bind_host = bind_host or advertised.host
        self._port = advertised.port if port is None else port
        self._grpc_address = grpc_target(endpoint, self.url) if grpc else None
        self._grpc_bind_host = grpc_bind_host or self.bind_host
        self._ready = ready
        self._accepting = False
        self._drain_timeout = drain_timeout
        if push_url_validator is None:  # the endpoint's a2a.push policy (security.md)
            push_url_validator = PushUrlPolicy.from_options(endpoint.a2a.push)
        auth = endpoint.a2a.auth
        credentials = resolve_credentials(agent_id, auth) if auth else []
        authenticator = Authenticator(credentials) if credentials else None
        # oidc schemes of a2a.auth are verified by a caller check, even in a local run
        caller_check = endpoint_check(agent_id, endpoint, caller_check)
        push_sender: QueuedPushSender | None = None
        push = endpoint.a2a.capabilities.pushNotifications
        self.stores = task_stores or build_task_stores(agent_id, endpoint.a2a.task_store, push=push)
        push_store = self.stores.push_config_store
        runner = getattr(mailbox, "runner", None)
        if self.stores.history is not None and isinstance(runner, Agent):
            # With a sql task store the conversations live beside the tasks, so any replica
            # (or this one after a restart) continues them; with memory, in the agent's
            # memory within the endpoint's byte bounds (mas.runtime.memory_history).
            runner.keep_history_in(self.stores.history)
        if push and push_store is not None:
            options = endpoint.a2a.push
            push_store = CappedPushConfigStore(push_store, options.max_configs_per_task)
            push_sender = QueuedPushSender(  # off the event path (server/push/delivery.py)
                push_client,
                push_store,
                push_url_validator=push_url_validator,
                agent_id=agent_id,
                receiver_queue_size=options.receiver_queue_size,
                receiver_connections=options.receiver_connections,
            )
        self._push_sender = push_sender
        self.executor = MasLabAgentExecutor(mailbox, agent_id=agent_id, message_grace=message_grace)
        # A blocking send of a new task skips the SDK's per-task machinery when the turn
        # answers at once, a streaming one always (server/fast/handler.py, fast/stream.py);
        # without the fast path (a2a.fast_path: false) the mailbox is withheld and the
        # handler is the SDK's DefaultRequestHandler with the counting, nothing more.
        self.handler = FastSendHandler(
            self.executor,
            self.stores.task_store,
            self.card,
            push_config_store=push_store,
            push_sender=push_sender,
            request_context_builder=self.executor.request_context_builder(),
            extended_agent_card=extended_card(self.card, endpoint),
            push_url_validator=push_url_validator,
            event_stream=self.stores.event_stream,
            agent_id=agent_id,
            anonymous_push_create=endpoint.a2a.push.allow_anonymous_create,
            list_limits=ListLimits(
                max_bytes=endpoint.a2a.responses.max_bytes,
                history_length=endpoint.a2a.responses.list_history_length,
            ),
            max_subscriptions=endpoint.a2a.responses.max_subscriptions,
            mailbox=mailbox if fast_send else None,
            stream_limits=StreamLimits(
                max_events=endpoint.a2a.responses.stream_buffer_events,
                max_bytes=endpoint.a2a.responses.stream_buffer_bytes,
                agent_id=agent_id,
            ),
        )
        routes: list[BaseRoute] = [
            Route("/healthz", self._healthz, methods=["GET"]),
            Route("/readyz", self._readyz, methods=["GET"]),
        ]
        if metrics_registries is not None:
            routes.append(metrics_route(metrics_registries))
        routes += create_agent_card_routes(self.card)
        rpc_routes = (create_fast_jsonrpc_routes if fast_send else create_jsonrpc_routes)(
            self.handler,
            "/",
            enable_v0_3_compat=compat_0_3,
            shutdown_grace_period=drain_timeout,
        )
        routes += rpc_routes
        routes += create_rest_routes(
            self.handler,
            enable_v0_3_compat=compat_0_3,
            path_prefix=REST_PATH,
            shutdown_grace_period=drain_timeout,
        )
        self.app = Starlette(routes=routes)
        self.app.router.redirect_slashes = False  # /metrics must not redirect into /{tenant}/
        # Where the SDK's wire behaviour departs from the protocol, corrections.py mends it
        # (REST content type, JSON-RPC content-type error, card caching headers).
        app: Any = EarlyStreamErrors(self.app, REST_PATH) if compat_0_3 else self.app
        limited = RequestLimits(
            app, max_body_bytes=endpoint.a2a.max_body_bytes, compat_0_3=compat_0_3
        )
        corrected: Any = HttpCorrections(limited, rpc_path="/", rest_prefix=REST_PATH)
        # The hot JSON-RPC sends skip the layers above when they would pass
        # (server/fast/hot_lane.py); the SDK's routes (fast path off) have no fast endpoint, so no
        # hot lane either. Outside them: no body is read before authentication. With
        # identities checked the caller check does it, a2a.auth included
        # (serving/callers.py), and the hot lane goes in front of it and runs it itself (its
        # gate): a hot request crosses one layer fewer. With a2a.auth alone, HttpAuth is
        # outermost.
        if caller_check is not None:
            gate = HttpCallers(corrected, caller_check, authenticator)
            corrected = hot_lane(
                gate,
                rpc_routes,
                rpc_path="/",
                max_body_bytes=endpoint.a2a.max_body_bytes,
                gate=gate,
            )
        else:
            corrected = hot_lane(
                corrected, rpc_routes, rpc_path="/", max_body_bytes=endpoint.a2a.max_body_bytes
            )
            if authenticator is not None:
                corrected = HttpAuth(corrected, authenticator)
        if tracing.on():  # the request's span, around everything (server/tracing.py)
            corrected = HttpTracing(corrected)
        connections = endpoint.a2a.connections  # docs/security.md, Connection limits
        self._http = HttpListener(
            corrected,
            self.bind_host,
            self._port,
            graceful_timeout=drain_timeout + 1,
            limits=HttpLimits.from_options(connections),
        )
        self._grpc: GrpcListener | None = None
        if self._grpc_address is not None:
            # Imported here, the one place gRPC is served: without a gRPC port an agent never
            # loads gRPC (sdk_extras.py).
            from library_ioa.plugins.a2a.grpc_exposure import build_grpc_listener

            self._grpc = build_grpc_listener(
                self.handler,
                endpoint,
                address=self._grpc_address,
                bind_host=self._grpc_bind_host,
                authenticator=authenticator,
                caller_check=caller_check,
                fast_send=fast_send,
                compat_0_3=compat_0_3,
            )

    @property
    def port(self) -> int:
        """The bound HTTP port."""
        return self._http.port

    @property
    def grpc_port(self) -> int | None:
        """The bound gRPC port, when gRPC is served."""
        return self._grpc.port if self._grpc is not None else None

    @property
    def grpc_address(self) -> str | None:
        """The advertised gRPC address, when gRPC is served."""
        return self._grpc_address

    async def _healthz(self, _: Request) -> Response:
        return JSONResponse({"status": "ok", "agent": self.agent_id})

    async def _readyz(self, _: Request) -> Response:
        ready = self._accepting and (self._ready is None or self._ready())
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "agent": self.agent_id},
            status_code=200 if ready else 503,
        )

    async def start(self) -> None:
        """Open the task store, then bind every listener; an ``OSError`` when one cannot."""
        await self.stores.start(default_replica_id(self._port))
        try:
            await self._http.start()
        except OSError:
            await self.stores.aclose()
            raise
        if self._grpc is not None:
            try:
                await self._grpc.start()
            except ListenError:
                await self._http.aclose()
                await self.stores.aclose()
                raise
        self._accepting = True
        logger.info(
            "agent %s serves A2A at %s (bound %s:%d)%s",
            self.agent_id,
            self.url,
            self.bind_host,
            self.port,
            f", gRPC at {self._grpc_address}" if self._grpc is not None else "",
        )

    def stop_accepting(self) -> None:
        """Readiness goes false and the HTTP listener stops taking new connections."""
        self._accepting = False
        self._http.stop_accepting()

    async def aclose(self) -> None:
        """Stop the listeners (in-flight requests get the drain timeout), wait for the turns
        this replica runs (the drain timeout; the rest end FAILED), then close the handler
        and the stores (the order in this module's docstring)."""
        self._accepting = False
        await self._http.aclose()
        if self._grpc is not None:
            await self._grpc.aclose()
        running = self.stores.runs.running if self.stores.runs is not None else frozenset()
        if running:
            logger.info(
                "agent %s stopping: waiting at most %gs for %d running turn(s)",
                self.agent_id,
                self._drain_timeout,
                len(running),
            )
        await self.stores.drain(self._drain_timeout)
        await self.handler.aclose()
        if self._push_sender is not None:
            await self._push_sender.aclose()
        await self.stores.aclose()
