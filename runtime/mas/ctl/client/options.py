"""The options every client command shares: TARGET, where it is, how to connect, credentials."""

from __future__ import annotations

import argparse

from mas.ctl.client.connection import add_transport_option
from mas.ctl.client.credentials import Credentials, resolve_credentials


def add_client_options(parser: argparse.ArgumentParser, *, optional_target: bool = False) -> None:
    """TARGET, ``-n/--kube-context/--kubeconfig``, ``--transport`` and the credentials."""
    parser.add_argument(
        "target",
        metavar="TARGET",
        nargs="?" if optional_target else None,
        default=None,
        help="the agent: its URL (http(s)://host:port[/path]) or APP/AGENT in a cluster",
    )
    where = parser.add_argument_group("APP/AGENT targets")
    where.add_argument("-n", "--namespace", default=None, help="the Application's namespace")
    where.add_argument(
        "--kube-context", default=None, metavar="NAME", help="the kubeconfig context to use"
    )
    where.add_argument("--kubeconfig", default=None, metavar="PATH", help="the kubeconfig file")
    how = parser.add_argument_group("connection")
    add_transport_option(how)  # type: ignore[arg-type]
    how.add_argument(
        "-H",
        "--header",
        dest="headers",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="send this header on every call (repeatable; gRPC: call metadata)",
    )
    how.add_argument(
        "--token-file",
        default=None,
        metavar="PATH",
        help="send 'Authorization: Bearer <the file's content>' (default: $MAS_CTL_TOKEN_FILE, "
        "$MAS_CTL_TOKEN)",
    )
    how.add_argument(
        "--cacert",
        default=None,
        metavar="PATH",
        help="trust this PEM CA bundle for https and gRPC over TLS (default: $MAS_CTL_CACERT)",
    )


def credentials_of(args: argparse.Namespace) -> Credentials:
    """The credentials the options and the environment give."""
    return resolve_credentials(args.headers, args.token_file, args.cacert)
