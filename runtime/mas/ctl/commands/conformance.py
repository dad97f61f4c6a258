"""``mas-ctl conformance``: check that what an agent's AgentCard advertises works.

Exit codes: 0 every check passed (skips allowed); 1 a check failed (the table says which), an
unreachable or invalid card included; 2 a usage error (a URL that cannot name a card, a bad
timeout). ``-o json`` prints exactly :class:`mas.infra.conformance.ConformanceResult`.

``--result-file PATH`` also writes the result as compact JSON that fits a container's
termination message (:meth:`~mas.infra.conformance.ConformanceResult.compact_json`): the
operator's conformance Jobs pass ``/dev/termination-log``, so the result reaches the pod's
status without logs or credentials.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from mas.ctl.conformance import ProbeUsageError, probe
from mas.ctl.conformance.probe import DEFAULT_PUSH_URL, PUBLIC_PUSH_URL
from mas.infra.conformance import ConformanceResult

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in (0, 3600]")
    return value


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "conformance",
        help="probe an agent's advertised A2A interfaces (exit 1 listing the failed checks)",
        description=(
            "Fetch the AgentCard at URL and, on every advertised interface (JSON-RPC, "
            "HTTP+JSON, gRPC), check SendMessage, streaming (when declared), GetTask, "
            "CancelTask, the error for an unknown task, push-notification config (when "
            "declared) and the A2A-Version header."
        ),
    )
    parser.add_argument(
        "--url", required=True, help="the agent's base URL, or the URL of its AgentCard"
    )
    parser.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="output format"
    )
    parser.add_argument(
        "--timeout", type=_seconds, default=10.0, metavar="S", help="deadline of each call"
    )
    parser.add_argument(
        "--push-url",
        default=DEFAULT_PUSH_URL,
        help="the webhook URL set (and deleted again) by the push-config check; never called "
        f"(default {DEFAULT_PUSH_URL}, then {PUBLIC_PUSH_URL} if the server refuses it)",
    )
    parser.add_argument(
        "--result-file",
        type=Path,
        metavar="PATH",
        help="also write the result as compact JSON of at most 4096 bytes (a container's "
        "termination message, e.g. /dev/termination-log)",
    )
    parser.set_defaults(handler=handle)


def render_table(result: ConformanceResult) -> str:
    """The per-check table and a verdict line."""
    rows = [("INTERFACE", "CHECK", "STATUS", "DETAIL")]
    rows += [(c.interface, c.check, c.status.upper(), c.detail) for c in result.checks]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        for row in rows
    ]
    failed = len(result.failures())
    verdict = (
        f"conformant: {result.summary()}"
        if result.passed
        else f"NOT conformant: {failed} of {len(result.checks)} checks failed"
    )
    return "\n".join([*(line.rstrip() for line in lines), "", verdict])


def handle(args: argparse.Namespace) -> int:
    """Run the probe and print its result."""
    try:
        result = asyncio.run(probe(args.url, timeout=args.timeout, push_url=args.push_url))
    except ProbeUsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.result_file is not None:
        try:
            args.result_file.write_text(result.compact_json(), encoding="utf-8")
        except ValueError as exc:  # a URL too long for any termination message
            print(f"error: --result-file: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except OSError as exc:
            print(f"error: cannot write --result-file {args.result_file}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.output == "json":
        print(result.model_dump_json(indent=2))
    else:
        print(render_table(result))
    card = [c for c in result.checks if c.check == "agent-card" and c.status == "fail"]
    if card:
        print(f"error: {card[0].detail}", file=sys.stderr)
    return EXIT_OK if result.passed else EXIT_FAILED
