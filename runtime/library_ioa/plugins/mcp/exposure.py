"""``MCPExposure``: an agent served as an MCP server (registry ``agent_expose``/``mcp``).

An endpoint with ``protocol: mcp`` and ``usage: deploy`` (its own url: one port, one door,
under the one-card-per-port rule) serves, on the official SDK's ``MCPServer`` (``mcp`` 2.3):

- streamable HTTP at ``<url>/mcp`` (the 2026-07-28 protocol, and the initialize handshake of
  older clients), with the tools of :mod:`library_ioa.plugins.mcp.agent_tools`: ``ask``
  and one per skill, each a turn on the agent's session mailbox;
- ``/healthz`` and ``/readyz`` for probes, and ``/metrics`` when given registries.

Built by :func:`mas.ctl.session.exposure.bind_listeners` with the same arguments as the A2A
exposure; the A2A-only ones (``grpc``, ``push_url_validator``) do not apply and are ignored.
With the agent's ``a2a.auth`` (every door of an agent enforces its one auth, whichever
endpoint row declares it) every request but the probes and ``/metrics`` must present one of
its credentials, exactly as on the A2A door (the same
:class:`~library_ioa.serving.auth.HttpAuth`): without one, HTTP 401 with the
``WWW-Authenticate`` challenge and a JSON-RPC error (-32600) before the MCP server reads
the request. The scheme that matched is the principal; the ``session`` a tool call names
is that principal's own (:func:`~library_ioa.serving.principals.owned_session`),
as a ``contextId`` is on the A2A door.

The bind host is distinct from the advertised URL, as for A2A. On a loopback bind host the
SDK's DNS-rebinding protection is on (only loopback ``Host`` and ``Origin`` headers).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from library_ioa.plugins.mcp.agent_tools import add_agent_tools
from library_ioa.serving.auth import Authenticator, HttpAuth, resolve_credentials
from library_ioa.serving.callers import HttpCallers, endpoint_check
from library_ioa.serving.http_guard import HttpLimits
from library_ioa.serving.listeners import HttpListener
from library_ioa.serving.metrics import render
from mas.infra.addresses import normalize_url, parse_advertised_url
from mas.infra.models import AgentManifest, Endpoint

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})

if TYPE_CHECKING:
    from mas.runtime.identity.callers import CallerCheck


class MCPExposure:
    """The MCP door of one agent, on that agent's session mailbox."""

    def __init__(
        self,
        *,
        agent_id: str,
        manifest: AgentManifest,
        endpoint: Endpoint,
        mailbox: Any,
        bind_host: str | None = None,
        port: int | None = None,
        metrics_registries: Sequence[CollectorRegistry] | None = None,
        drain_timeout: float = 10.0,
        grpc: bool = False,
        caller_check: CallerCheck | None = None,
        **_a2a_only: Any,
    ) -> None:
        if endpoint.url is None:
            raise ValueError(f"agent {agent_id!r}: an MCP door needs its endpoint url")
        self.agent_id = agent_id
        self.url = normalize_url(endpoint.url)
        advertised = parse_advertised_url(self.url)
        self.bind_host = bind_host or advertised.host
        self._accepting = False
        auth = endpoint.a2a.auth
        credentials = resolve_credentials(agent_id, auth) if auth else []
        authenticator = Authenticator(credentials) if credentials else None
        # oidc schemes of a2a.auth are verified by a caller check, even in a local run
        caller_check = endpoint_check(agent_id, endpoint, caller_check)
        self.server = MCPServer(
            manifest.metadata.name or agent_id,
            description=manifest.spec.description or manifest.metadata.description,
            version=manifest.metadata.version,
            log_level="WARNING",
        )
        add_agent_tools(self.server, agent_id, manifest, mailbox)
        self._add_probes(metrics_registries)
        app: Any = self.server.streamable_http_app(
            streamable_http_path=MCP_PATH, host=self.bind_host
        )
        if caller_check is not None:  # outermost; a2a.auth included (serving/callers.py)
            app = HttpCallers(
                app, caller_check, authenticator, rpc_path=MCP_PATH, public_paths=PROBE_PATHS
            )
        elif authenticator is not None:  # outermost: nothing is read before authentication
            app = HttpAuth(
                app,
                authenticator,
                rpc_path=MCP_PATH,
                public_paths=PROBE_PATHS,
                hint="present a credential of the agent's a2a.auth (as on its A2A door)",
            )
        self._http = HttpListener(  # the same connection limits as an A2A door
            app,
            self.bind_host,
            advertised.port if port is None else port,
            graceful_timeout=drain_timeout + 1,
            limits=HttpLimits.from_options(endpoint.a2a.connections),
        )
        self._stop = asyncio.Event()
        self._manager: asyncio.Task[None] | None = None

    @property
    def endpoint_url(self) -> str:
        """Where MCP clients connect: ``<url>/mcp``."""
        return self.url + MCP_PATH

    @property
    def port(self) -> int:
        """The bound HTTP port."""
        return self._http.port

    @property
    def grpc_address(self) -> str | None:
        """Never: MCP has no gRPC transport here."""
        return None

    def _add_probes(self, registries: Sequence[CollectorRegistry] | None) -> None:
        async def healthz(_: Request) -> Response:
            return JSONResponse({"status": "ok", "agent": self.agent_id})

        async def readyz(_: Request) -> Response:
            ready = self._accepting
            return JSONResponse(
                {"status": "ready" if ready else "not ready", "agent": self.agent_id},
                status_code=200 if ready else 503,
            )

        async def metrics(_: Request) -> Response:
            return Response(render(registries or ()), media_type=CONTENT_TYPE_LATEST)

        self.server.custom_route("/healthz", methods=["GET"])(healthz)
        self.server.custom_route("/readyz", methods=["GET"])(readyz)
        if registries is not None:
            self.server.custom_route("/metrics", methods=["GET"])(metrics)

    async def _run_manager(self, started: asyncio.Event) -> None:
        # The streamable HTTP session manager lives in a task of its own, so its task
        # group is entered and left in one task whoever calls start() and aclose().
        async with self.server.session_manager.run():
            started.set()
            await self._stop.wait()

    async def start(self) -> None:
        """Start the session manager, then bind the listener; ``OSError`` when it cannot."""
        started = asyncio.Event()
        self._manager = asyncio.create_task(self._run_manager(started))
        await started.wait()
        try:
            await self._http.start()
        except OSError:
            await self._stop_manager()
            raise
        self._accepting = True
        logger.info(
            "agent %s serves MCP at %s (bound %s:%d)",
            self.agent_id,
            self.endpoint_url,
            self.bind_host,
            self.port,
        )

    def stop_accepting(self) -> None:
        """Readiness goes false and the listener stops taking new connections."""
        self._accepting = False
        self._http.stop_accepting()

    async def _stop_manager(self) -> None:
        self._stop.set()
        if self._manager is not None:
            await self._manager
            self._manager = None

    async def aclose(self) -> None:
        """Stop the listener (in-flight requests get the drain timeout), then the manager."""
        self._accepting = False
        await self._http.aclose()
        await self._stop_manager()
