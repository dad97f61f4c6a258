"""The ``mas-operator`` entry point.

``mas-operator run``: run the operator (see :mod:`mas_operator.runner`).
``mas-operator render -f app.yaml [-n NS]``: print the manifests the operator would apply,
from the same builders, for review and for GitOps without the operator. Two things only the
operator knows are left out: ``ownerReferences`` (the Application's uid) and the
``maslab.io/secrets-hash`` pod annotation (the referenced Secrets' resourceVersions). Each
url the in-cluster URL model maps or cannot fix is a ``warning:`` line on stderr, the text
of the operator's Warning Event.
``mas-operator conformance (-n NS ... | -A)``: probe every published AgentCard (see
:mod:`mas_operator.conformance.command`); the chart's Helm test runs it.

Exit codes: 0 success; 1 the document is invalid (every problem on stderr, field path
first), or an AgentCard is not conformant, or ``run`` stopped (the Lease was lost, or an
operator that watches listed namespaces found no Application CRD); 2 usage errors,
unreadable or non-YAML files (and documents past a limit of :mod:`mas.infra.guarded_yaml`),
and an API server that cannot be asked; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import signal
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

import urllib3
from kubernetes import client as k8s
from kubernetes.config import ConfigException

from mas.infra import identity
from mas.infra.documents import read_yaml_file
from mas.infra.errors import ApplicationInvalid, DocumentError
from mas.telemetry import tracing
from mas.telemetry.logs import LOG_FORMATS, LogFormatError, resolve_format, setup_logging
from mas_operator.children import build_children
from mas_operator.conformance.command import check_published_cards
from mas_operator.handlers import COLD_EVERY
from mas_operator.kube import api_message
from mas_operator.manifests import dump_manifests
from mas_operator.plan import ApiServer, plan_application
from mas_operator.runner import (
    OperatorHandle,
    OperatorOptions,
    load_configuration,
    run_operator,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: a number of seconds above 0")
    return value


def _passes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of passes") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: 0 (never) or more passes")
    return value


def _liveness(text: str) -> str:
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a liveness URL; accepted: http://HOST:PORT[/PATH], "
            "e.g. http://0.0.0.0:8080/healthz"
        )
    return text


def _probe_seconds(text: str) -> float:
    value = _positive(text)
    if value > 3600:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: a number of seconds in (0, 3600]")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count; accepted: 1 to 64")
    return int(text)


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port; accepted: 0 to 65535")
    return int(text)


def _subject(text: str) -> str:
    if identity.parse_subject(text) is None:
        raise argparse.ArgumentTypeError(
            f"{text[:200]!r} is not a ServiceAccount subject; accepted: "
            "system:serviceaccount:NAMESPACE:NAME"
        )
    return text


def _add_console_principal(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--console-principal",
        type=_subject,
        metavar="SUBJECT",
        help="the ServiceAccount subject of this install's web console "
        "(system:serviceaccount:NS:NAME): every agent admits its calls (the chart sets it "
        "with console.enabled and console.admittedByAgents)",
    )


def _add_console_namespaces(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--console-namespace",
        action="append",
        dest="console_namespaces",
        default=[],
        metavar="NS",
        help="with --console-principal: only the agents of this namespace admit the console "
        "(repeatable; default: every namespace; the chart passes console.namespaces)",
    )


def _cidr(text: str) -> str:
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text[:200]!r} is not an address range; accepted: a CIDR such as 10.0.0.1/32"
        ) from None


def _remote_port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not a port; accepted: 1 to 65535")
    return int(text)


def _add_api_server(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-server-cidr",
        action="append",
        dest="api_server_cidrs",
        type=_cidr,
        default=[],
        metavar="CIDR",
        help="an address of the API server as pods reach it (the kubernetes Service's "
        "endpoints; repeatable): the agents' NetworkPolicies let them out to it, where their "
        "caller check reads the cluster issuer's keys (default: any address; the chart "
        "passes what it finds at install)",
    )
    parser.add_argument(
        "--api-server-port",
        action="append",
        dest="api_server_ports",
        type=_remote_port,
        default=[],
        metavar="PORT",
        help="a port of those endpoints (repeatable; default: 443 and 6443)",
    )


def _add_denial_events(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-denial-events",
        action="store_false",
        dest="denial_events",
        help="no agent posts its denial Events, whatever spec.runtime.denial_events says, "
        "and none gets the Role that allows it (the chart passes it with "
        "agents.denialEvents: false)",
    )


def _api_server(args: argparse.Namespace) -> ApiServer:
    ports = tuple(dict.fromkeys(args.api_server_ports)) or ApiServer().ports
    return ApiServer(cidrs=tuple(dict.fromkeys(args.api_server_cidrs)), ports=ports)


def _add_namespace_scope(parser: argparse.ArgumentParser, one: str, every: str) -> None:
    """``-n NS`` (repeatable) or ``-A``: exactly one of them."""
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "-n", "--namespace", action="append", dest="namespaces", default=[], metavar="NS", help=one
    )
    scope.add_argument("-A", "--all-namespaces", action="store_true", help=every)


def build_parser() -> argparse.ArgumentParser:
    """Both subcommands."""
    parser = argparse.ArgumentParser(
        prog="mas-operator", description="Reconcile infra.maslab.io/v1 Application resources."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="text (default) or json: one object per line (default: $MAS_LOG_FORMAT)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = sub.add_parser("run", help="run the operator")
    _add_namespace_scope(run, "watch this namespace (repeatable)", "watch every namespace")
    run.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, "
        "~/.kube/config, else the in-cluster ServiceAccount)",
    )
    run.add_argument(
        "--liveness",
        metavar="URL",
        type=_liveness,
        help="serve a liveness endpoint, e.g. http://0.0.0.0:8080/healthz",
    )
    run.add_argument(
        "--metrics-port", type=_port, metavar="N", help="serve Prometheus metrics on this port"
    )
    run.add_argument(
        "--metrics-address",
        default="0.0.0.0",
        metavar="ADDR",
        help="address of the metrics listener (default 0.0.0.0)",
    )
    run.add_argument(
        "--resync",
        type=_positive,
        default=30.0,
        metavar="SECONDS",
        help="reconcile every Application at least this often (default 30)",
    )
    run.add_argument(
        "--cold-every",
        type=_passes,
        default=COLD_EVERY,
        metavar="N",
        help=(
            f"every Nth full pass reads every Application's children from the API server, "
            f"settled or not (0: never; default {COLD_EVERY})"
        ),
    )
    run.add_argument(
        "--no-leader-election",
        action="store_true",
        help="do not take the coordination.k8s.io Lease (one replica only)",
    )
    run.add_argument("--lease-name", default="mas-operator", help="the Lease's name")
    run.add_argument(
        "--lease-namespace",
        metavar="NS",
        help="the Lease's namespace (default: $POD_NAMESPACE, the first watched "
        "namespace, or default)",
    )
    run.add_argument("--identity", help="holder identity (default: $POD_NAME or host name)")
    _add_console_principal(run)
    _add_console_namespaces(run)
    _add_api_server(run)
    _add_denial_events(run)
    run.set_defaults(handler=_run)
    render = sub.add_parser("render", help="print the manifests the operator would apply")
    render.add_argument("-f", "--file", required=True, help="the Application YAML file")
    render.add_argument(
        "-n", "--namespace", help="namespace (default: metadata.namespace or default)"
    )
    _add_console_principal(render)
    _add_api_server(render)
    _add_denial_events(render)
    render.set_defaults(handler=_render)
    check = sub.add_parser(
        "conformance",
        help="probe every published AgentCard (exit 1 when one is not conformant)",
        description="List the Applications, then run `mas-ctl conformance` on every "
        "status.agents.<id>.card_url; print one row per agent.",
    )
    _add_namespace_scope(
        check, "probe the Applications of this namespace (repeatable)", "every namespace"
    )
    check.add_argument("--kubeconfig", help="kubeconfig file (default as for run)")
    check.add_argument(
        "--timeout",
        type=_probe_seconds,
        default=10.0,
        metavar="S",
        help="deadline of each probe call (default 10)",
    )
    check.add_argument(
        "--deadline",
        type=_positive,
        default=300.0,
        metavar="S",
        help="deadline of each agent's whole probe (default 300)",
    )
    check.add_argument(
        "--parallel", type=_count, default=4, metavar="N", help="agents probed at once (default 4)"
    )
    check.set_defaults(handler=_conformance)
    return parser


def _render(args: argparse.Namespace) -> int:
    document = read_yaml_file(args.file)
    plan = plan_application(
        document,
        args.namespace,
        args.console_principal,
        _api_server(args),
        denial_events=args.denial_events,
    )
    sys.stdout.write(dump_manifests(build_children(plan)))
    for note in plan.notes:  # what the operator posts as Warning Events
        print(f"warning: {note}", file=sys.stderr)
    return EXIT_OK


def _conformance(args: argparse.Namespace) -> int:
    api = k8s.ApiClient(load_configuration(args.kubeconfig))
    try:
        return check_published_cards(
            api,
            tuple(args.namespaces),
            timeout=args.timeout,
            deadline=args.deadline,
            parallel=args.parallel,
        )
    except k8s.ApiException as exc:
        print(f"error: listing Applications failed: {api_message(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except urllib3.exceptions.HTTPError as exc:
        print(f"error: cannot reach the API server: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        api.close()  # type: ignore[no-untyped-call]


def _run(args: argparse.Namespace) -> int:
    if args.console_namespaces and not args.console_principal:
        print("error: --console-namespace needs --console-principal", file=sys.stderr)
        return EXIT_USAGE
    options = OperatorOptions(
        namespaces=tuple(args.namespaces),
        all_namespaces=args.all_namespaces,
        kubeconfig=args.kubeconfig,
        liveness=args.liveness,
        metrics_port=args.metrics_port,
        metrics_address=args.metrics_address,
        resync=args.resync,
        cold_every=args.cold_every,
        leader_election=not args.no_leader_election,
        lease_name=args.lease_name,
        lease_namespace=args.lease_namespace,
        identity=args.identity,
        console_principal=args.console_principal,
        console_namespaces=tuple(args.console_namespaces),
        api_server=_api_server(args),
        denial_events=args.denial_events,
    )
    handle = OperatorHandle()

    async def main() -> bool:
        loop = asyncio.get_running_loop()
        handle.stop_event = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, handle.stop_event.set)
        return await run_operator(options, handle)

    kept = asyncio.run(main())
    return EXIT_OK if kept else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code."""
    args = build_parser().parse_args(argv)
    try:
        log_format = resolve_format(args.log_format)
        tracing.configure("mas-operator")  # on only when the OTEL_* variables ask
    except (LogFormatError, tracing.TracingConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    setup_logging(logging.INFO - 10 * min(args.verbose, 1), log_format)
    if not args.verbose:
        # kopf logs an INFO line for every handler it runs on every watch event ("Handler
        # 'watch-services' succeeded."): one per child created, nothing a person acts on.
        # Its warnings and errors (and the Events they post) stay; -v shows the lines.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    try:
        code: int = args.handler(args)
        return code
    except ApplicationInvalid as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_FAILED
    except DocumentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigException as exc:
        print(
            "error: no cluster credentials (tried --kubeconfig, $KUBECONFIG, ~/.kube/config, "
            f"then the in-cluster ServiceAccount): {exc}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except OSError as exc:
        print(f"error: cannot listen: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run() -> None:
    """Console-script wrapper."""
    sys.exit(main())


if __name__ == "__main__":
    run()
