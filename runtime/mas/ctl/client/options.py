"""The options every client command shares: TARGET, where it is, how to connect, credentials."""

from __future__ import annotations

import argparse

from mas.ctl.client.connection import add_transport_option
from mas.ctl.client.credentials import Credentials, resolve_credentials
from mas.ctl.client.output import one_line


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
        "--token-command",
        default=None,
        metavar="CMD",
        help="send 'Authorization: Bearer <what CMD prints>', running CMD again when that "
        "token expires (e.g. an OIDC provider's login tool)",
    )
    how.add_argument(
        "--cacert",
        default=None,
        metavar="PATH",
        help="trust this PEM CA bundle for https and gRPC over TLS (default: $MAS_CTL_CACERT)",
    )


def add_context_option(parser: argparse.ArgumentParser) -> None:
    """``--context ID``: the A2A context (conversation) to continue."""
    parser.add_argument(
        "--context",
        dest="context_id",
        default=None,
        metavar="ID",
        type=_context_id,
        help="continue this conversation (the A2A contextId; default: a new one)",
    )


def _context_id(text: str) -> str:
    if not text.strip() or len(text) > 200 or not text.isprintable():
        raise argparse.ArgumentTypeError(
            f"{one_line(text, 60)!r} is not a context id; accepted: 1 to 200 printable characters"
        )
    return text


def credentials_of(args: argparse.Namespace) -> Credentials:
    """The credentials the options and the environment give."""
    return resolve_credentials(
        args.headers, args.token_file, args.cacert, token_command=args.token_command
    )


def remote_form(args: argparse.Namespace, command: str) -> str | None:
    """For ``chat`` and ``tui``, which host an agency (``-f FILE``) or talk to an agent
    (TARGET): ``None`` when the form is clear, else the one-line error."""
    local = args.file is not None
    if local and args.target is not None:
        return (
            f"mas-ctl {command}: give -f FILE (host the agency) or TARGET (a served agent), "
            "not both"
        )
    if not local and args.target is None:
        return (
            f"mas-ctl {command}: give -f FILE to host an Application, or TARGET (an agent's URL "
            "or APP/AGENT) to talk to a served agent"
        )
    if not local and args.session is not None:
        return (
            f"mas-ctl {command} TARGET: --session is for -f FILE; continue a conversation "
            "with --context ID"
        )
    return None
