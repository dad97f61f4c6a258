"""``mas-ctl console``: the web console (docs/console.md).

::

    mas-ctl console -f app.yaml [--port 8500] [--host 127.0.0.1]
    mas-ctl console --cluster [-n NAMESPACE]... [--kube-context NAME] [--kubeconfig PATH]

With ``--cluster`` it calls agents as its own ServiceAccount: the projected token at
``$MAS_A2A_TOKEN_FILE`` (default ``/var/run/secrets/maslab.io/a2a/token``, where the chart
mounts it) goes in the ``maslab-identity`` header of every call, re-read when rotated.
Bound to a loopback address (the default) it asks for no login; any other address needs
``--trusted-proxy-header NAME`` and ``--trusted-proxy-range CIDR`` (an authenticating proxy
in front, the oauth2-proxy pattern). Prints ``console: http://HOST:PORT/`` once it listens.
Exit codes: 0 stopped; 1 the document is invalid or the cluster cannot be read; 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import TYPE_CHECKING, Any

from mas.ctl.documents import add_document_options, load_wired

if TYPE_CHECKING:
    from mas.runtime.identity.token_file import TokenFile


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "console", help="the web console: Applications, the agency graph, chat with agents"
    )
    add_document_options(parser, required=False)
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="watch the Applications of a cluster through its API server instead of -f FILE",
    )
    cluster = parser.add_argument_group("--cluster")
    cluster.add_argument(
        "-n",
        "--namespace",
        dest="namespaces",
        action="append",
        default=[],
        metavar="NAMESPACE",
        help="watch this namespace (repeatable; default: every namespace)",
    )
    cluster.add_argument("--kube-context", default=None, metavar="NAME")
    cluster.add_argument("--kubeconfig", default=None, metavar="PATH")
    cluster.add_argument(
        "--in-cluster", action="store_true", help="use the pod's ServiceAccount (in a cluster)"
    )
    serving = parser.add_argument_group("serving")
    serving.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    serving.add_argument("--port", type=_port, default=8500, help="port (default 8500)")
    serving.add_argument(
        "--trusted-proxy-header",
        default=None,
        metavar="NAME",
        help="off loopback: the user header the authenticating proxy sets (X-Forwarded-User)",
    )
    serving.add_argument(
        "--trusted-proxy-range",
        action="append",
        default=[],
        metavar="CIDR",
        help="off loopback: the proxy's addresses (repeatable)",
    )
    serving.add_argument(
        "--trace-url",
        default="",
        metavar="TEMPLATE",
        help="a task's trace link, e.g. http://jaeger:16686/trace/{trace_id} ({task_id}, "
        "{context_id} too)",
    )
    serving.add_argument(
        "--check-interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="-f FILE: how often the agents' cards are fetched (default 2)",
    )
    parser.set_defaults(handler=handle)


def _identity(args: argparse.Namespace) -> TokenFile | None:
    """With ``--cluster``, the console's own A2A token (``$MAS_A2A_TOKEN_FILE``, else the
    path the chart projects it to; a file that is not there sends nothing); with ``-f``, none."""
    if not args.cluster:
        return None
    import os

    from mas.infra.identity import TOKEN_FILE_ENV, TOKEN_PATH
    from mas.runtime.identity.token_file import TokenFile

    return TokenFile(os.environ.get(TOKEN_FILE_ENV) or TOKEN_PATH)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port; accepted: 0 to 65535")
    return port


def handle(args: argparse.Namespace) -> int:
    from mas.console.security import AccessError, check_bind

    if bool(args.file) == bool(args.cluster):
        print(
            "error: mas-ctl console: give -f FILE (a laptop) or --cluster, one of them",
            file=sys.stderr,
        )
        return 2
    if not 0.1 <= args.check_interval <= 3600:
        print(
            f"error: --check-interval {args.check_interval}: accepted 0.1 to 3600 seconds",
            file=sys.stderr,
        )
        return 2
    try:
        access = check_bind(args.host, args.trusted_proxy_header, args.trusted_proxy_range)
    except AccessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from mas.console.agents import AgentCalls
    from mas.ctl.client.credentials import resolve_credentials
    from mas.ctl.client.errors import OptionError

    try:  # the console calls agents with $MAS_CTL_TOKEN / $MAS_CTL_TOKEN_FILE, as mas-ctl does
        calls = AgentCalls(resolve_credentials([], None, None), _identity(args))
    except OptionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.file:
        from mas.console.document_source import DocumentSource

        source: Any = DocumentSource(load_wired(args), interval=args.check_interval)
    else:
        from mas.console.cluster_source import ClusterError, ClusterSource

        try:
            source = ClusterSource.connect(
                args.namespaces, args.kube_context, args.kubeconfig, in_cluster=args.in_cluster
            )
        except ClusterError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return asyncio.run(_serve(source, access, calls, args))


async def _serve(source: Any, access: Any, calls: Any, args: argparse.Namespace) -> int:
    import uvicorn

    from mas.console.app import ConsoleOptions, build_app

    app = build_app(source, ConsoleOptions(trace_template=args.trace_url, access=access), calls)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        sock.close()
        return 1
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:
                print(f"console: http://{host}:{port}/", flush=True)

    server = Announcing(config)
    await server.serve(sockets=[sock])
    return 0 if server.started else 1
