"""``mas-ctl serve``: the dedicated, blocking listeners (doors) of one deployed agent.

::

    mas-ctl serve -f app.yaml --agent ID [--no-control] [--listen HOST]
                  [--metrics-port N] [--drain-timeout S] [--infra-ref/--override/--bind]

- The agent's endpoint must have ``usage: deploy`` or ``use-and-deploy``; every door of the
  agent is served: its own endpoint and each endpoint naming it in ``agent`` (an MCP door,
  streamable HTTP at ``<url>/mcp``, beside its A2A endpoint).
- Binds the listen URL of the Application endpoint (bind host: ``--listen``, else the URL's
  host; ``--listen 0.0.0.0`` in a pod), with JSON-RPC, HTTP+JSON, the AgentCard and gRPC
  (``a2a.grpc_port`` / ``grpc_url``): serve is the only path that starts the gRPC listener.
- Hosts in-process the private workers the agent reaches through local routes; remote
  peers go through their ``agent_comm`` plugin (A2AAgentComm for ``a2a``).
- Advertises a control endpoint in the control directory unless ``--no-control``.
- ``/metrics`` (runtime and A2A metrics) on ``--metrics-port`` (a separate listener, off
  the A2A doors; in a cluster its own Service port, admitted only from the Application's
  ``metrics_namespace``), else on the A2A port.
- Push-notification URLs follow the endpoint's ``a2a.push`` policy (``docs/security.md``);
  ``--public-push-urls-only`` overrides it with the SDK's strict public-only validator.
- Loads only the a2a-sdk extras the document uses: gRPC for a gRPC port (or an A2A peer),
  SQLAlchemy for a ``sql`` task store (:mod:`library_ioa.plugins.a2a.sdk_extras`).
- Prints one line when ready. SIGTERM or SIGINT: stop accepting, drain the in-flight turns
  for at most ``--drain-timeout`` seconds, exit 0. A turn still running at the deadline ends
  ``canceled`` (its stream gets that final event and a clean end, no traceback) and the
  exit code is ``EXIT_DRAIN_CUT_SHORT`` (3): the drain was cut short.

Errors (unknown agent, not deployed, port in use, bad document) are one line on stderr and
a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from a2a.utils.push_url_validator import validate_push_notification_url
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from library_ioa.plugins.a2a.sdk_extras import extras_used, load_sdk
from library_ioa.serving.listeners import (
    HttpListener,
    ListenError,
    event_loop_factory,
    raise_open_file_limit,
)
from mas.ctl.documents import add_document_options, load_wired
from mas.ctl.session.exposure import ExposureError, Listeners, bind_listeners
from mas.ctl.session.host import RuntimeHost
from mas.infra.addresses import parse_advertised_url
from mas.infra.wiring import Wired
from mas.runtime.identity.cluster import (
    caller_check,
    cluster_denial_events,
    cluster_verifier,
    console_principal,
)
from mas.runtime.metrics import REGISTRY

if TYPE_CHECKING:
    from mas.ctl.session.control import ControlServer

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_DRAIN_CUT_SHORT = 3  # SIGTERM: turns or streams were still open at --drain-timeout


class ServeError(Exception):
    """A refusal to serve: ``code`` is the exit code, the message is the one line to print."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "serve", help="serve one deployed agent over A2A (blocking)"
    )
    add_document_options(parser)
    parser.add_argument("--agent", required=True, metavar="ID", help="the agent to serve")
    parser.add_argument(
        "--no-control", action="store_true", help="do not advertise a control endpoint"
    )
    parser.add_argument(
        "--listen",
        metavar="HOST",
        default=None,
        help="bind host (default: the host of the endpoint url; 0.0.0.0 in a pod)",
    )
    parser.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        metavar="N",
        help="serve /metrics on this separate port (default: on the A2A port)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="on SIGTERM, wait at most S seconds for in-flight turns (default 10)",
    )
    parser.add_argument(
        "--public-push-urls-only",
        action="store_true",
        help="refuse push-notification URLs on non-public addresses, overriding the "
        "endpoint's a2a.push (allow_private, allowed_hosts)",
    )
    parser.set_defaults(handler=handle)


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port; accepted: 0 to 65535")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; accepted: 0 to 3600 seconds")
    return value


def check_servable(wired: Wired, agent: str) -> None:
    """Refuse an agent that is not in the agency or whose endpoint is not deployed."""
    agents = wired.app.spec.agency.agents
    if agent not in agents:
        raise ServeError(
            f"--agent {agent!r} is not an agent of the agency; agents: {', '.join(agents)}",
            EXIT_USAGE,
        )
    if any(item.agent == agent for item in wired.routes.listeners):
        return  # its own deployed endpoint, or a door naming it (agent:)
    endpoint = wired.app.spec.endpoints.get(agent)
    if endpoint is None:
        raise ServeError(
            f"spec.endpoints.{agent}: is missing; mas-ctl serve needs an endpoint with usage: "
            "deploy or use-and-deploy"
        )
    if not endpoint.deployed:
        raise ServeError(
            f"spec.endpoints.{agent}.usage: is {endpoint.effective_usage!r}; mas-ctl serve needs "
            "usage: deploy or use-and-deploy"
        )


def _metrics_app(registries: list[CollectorRegistry]) -> Starlette:
    from library_ioa.serving.metrics import metrics_route  # loaded by the exposure by now

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[metrics_route(registries), Route("/healthz", healthz)])


def ready_line(agent: str, listeners: Listeners, metrics_url: str, control: str | None) -> str:
    """The one line printed when the agent accepts requests (every door of it)."""
    parts: list[str] = []
    for bound in listeners.of(agent):
        exposure = bound.exposure
        if bound.protocol != "a2a":
            parts.append(f"{bound.protocol.upper()} {exposure.url}/mcp")
            continue
        parts.append(f"A2A {exposure.url} (JSON-RPC), {exposure.url}/a2a/rest (HTTP+JSON)")
        if exposure.grpc_address:
            parts.append(f"grpc {exposure.grpc_address}")
        parts.append(f"card {exposure.url}/.well-known/agent-card.json")
    parts[0] = f"serving {agent}: {parts[0]}"
    parts.append(f"metrics {metrics_url}")
    if control:
        parts.append(f"control {control}")
    return ", ".join(parts)


async def _wait_for_signal() -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    return received[0]


async def serve(wired: Wired, args: argparse.Namespace) -> int:
    """Run the listener until SIGTERM/SIGINT, then drain and stop."""
    agent: str = args.agent
    door = wired.routes.listener(agent)
    bind_host = args.listen or parse_advertised_url((door.url if door else None) or "").host
    raise_open_file_limit()  # the listeners' connection caps need the descriptors
    # In a pod the operator deployed, every door checks its callers' identities
    # (mas.runtime.identity.cluster); a local run keeps a2a.auth alone.
    verifier = cluster_verifier(os.environ)
    console = console_principal(os.environ)  # the install's console, when agents admit it
    # the first refusal of each caller, as a Warning Event on the Application (when asked)
    denials = cluster_denial_events(os.environ, wired.app, agent) if verifier else None
    check = (
        caller_check(wired.app, wired.routes, agent, verifier, console, denials=denials)
        if verifier
        else None
    )
    host = RuntimeHost.build(wired, [agent])
    metrics: HttpListener | None = None
    listeners: Listeners | None = None
    control: ControlServer | None = None
    try:
        registries = [REGISTRY]
        listeners = await bind_listeners(
            wired,
            host,
            agents=[agent],
            bind_host=bind_host,
            grpc=True,
            metrics_registries=None if args.metrics_port is not None else registries,
            drain_timeout=args.drain_timeout,
            caller_check=check,
            push_url_validator=(
                validate_push_notification_url if args.public_push_urls_only else None
            ),
        )
        exposure = listeners.get(agent).exposure
        metrics_url = f"{exposure.url}/metrics"
        if args.metrics_port is not None:
            metrics = HttpListener(_metrics_app(registries), bind_host, args.metrics_port)
            try:
                await metrics.start()
            except ListenError as exc:
                metrics = None
                raise ExposureError(f"--metrics-port: {exc}") from None
            shown = f"[{bind_host}]" if ":" in bind_host else bind_host
            metrics_url = f"http://{shown}:{metrics.port}/metrics"
        if not args.no_control:
            control = await _start_control(host, agent)
        # Everything loaded so far lives as long as the process: keep it out of the
        # collector's full passes, which otherwise stall every request (docs/performance.md).
        gc.freeze()
        print(
            ready_line(agent, listeners, metrics_url, control.address if control else None),
            flush=True,
        )
        signum = await _wait_for_signal()
        logger.info(
            "%s received: draining for at most %ss", signal.Signals(signum).name, args.drain_timeout
        )
        listeners.stop_accepting()
        if await host.drain(args.drain_timeout):
            return EXIT_OK
        # Cut short: each running turn ends canceled while the listeners are still up, so
        # its stream gets that final event and a clean end before they close.
        await host.cancel_turns()
        print(
            f"warning: turns still running after --drain-timeout {args.drain_timeout:g}s "
            f"were canceled (exit {EXIT_DRAIN_CUT_SHORT})",
            file=sys.stderr,
        )
        return EXIT_DRAIN_CUT_SHORT
    finally:
        if control is not None:
            await control.aclose()
        if listeners is not None:
            await listeners.aclose()
        if metrics is not None:
            await metrics.aclose()
        if denials is not None:
            await denials.aclose()
        await host.aclose()


async def _start_control(host: RuntimeHost, agent: str) -> ControlServer:
    """The control endpoint of the served agent, advertised in the control directory."""
    from mas.ctl.session.control import ControlServer  # not loaded under --no-control

    server = ControlServer({agent: host.mailbox(agent)})
    await server.start()
    return server


def handle(args: argparse.Namespace) -> int:
    """Check, then serve until a signal."""
    wired = load_wired(args)
    try:
        check_servable(wired, args.agent)
        # Before anything imports the SDK: only the extras this document uses are loaded.
        load_sdk(extras_used(wired, [args.agent]))
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            return runner.run(serve(wired, args))
    except ServeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except ExposureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
