"""The ``mas-operator`` entry point.

``mas-operator run``: run the operator (see :mod:`mas_operator.runner`).
``mas-operator render -f app.yaml [-n NS]``: print the manifests the operator would apply,
from the same builders, for review and for GitOps without the operator. Two things only the
operator knows are left out: ``ownerReferences`` (the Application's uid) and the
``maslab.io/secrets-hash`` pod annotation (the referenced Secrets' resourceVersions).

Exit codes: 0 success; 1 the document is invalid (every problem on stderr, field path
first); 2 usage errors and unreadable or non-YAML files; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

from kubernetes.config import ConfigException

from mas.infra.documents import read_yaml_file
from mas.infra.errors import ApplicationInvalid, DocumentError
from mas_operator.children import build_children
from mas_operator.manifests import dump_manifests
from mas_operator.plan import plan_application
from mas_operator.runner import OperatorHandle, OperatorOptions, run_operator

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: a number of seconds above 0")
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


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port; accepted: 0 to 65535")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    """Both subcommands."""
    parser = argparse.ArgumentParser(
        prog="mas-operator", description="Reconcile infra.maslab.io/v1 Application resources."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = sub.add_parser("run", help="run the operator")
    scope = run.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        dest="namespaces",
        default=[],
        metavar="NS",
        help="watch this namespace (repeatable)",
    )
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
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
    run.set_defaults(handler=_run)
    render = sub.add_parser("render", help="print the manifests the operator would apply")
    render.add_argument("-f", "--file", required=True, help="the Application YAML file")
    render.add_argument(
        "-n", "--namespace", help="namespace (default: metadata.namespace or default)"
    )
    render.set_defaults(handler=_render)
    return parser


def _render(args: argparse.Namespace) -> int:
    plan = plan_application(read_yaml_file(args.file), args.namespace)
    sys.stdout.write(dump_manifests(build_children(plan)))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    options = OperatorOptions(
        namespaces=tuple(args.namespaces),
        all_namespaces=args.all_namespaces,
        kubeconfig=args.kubeconfig,
        liveness=args.liveness,
        metrics_port=args.metrics_port,
        metrics_address=args.metrics_address,
        resync=args.resync,
        leader_election=not args.no_leader_election,
        lease_name=args.lease_name,
        lease_namespace=args.lease_namespace,
        identity=args.identity,
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
    logging.basicConfig(
        level=logging.INFO - 10 * min(args.verbose, 1),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
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
