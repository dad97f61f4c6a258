"""The command line of a generated, committed file: print it, or check the committed copy.

The CRD (:mod:`mas.infra.crd`) and the reference pages (:mod:`mas.reference`) are generated
from their sources and committed; CI checks that the committed copy matches a fresh one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence


class SourceError(ValueError):
    """A file's source (a chart, a docstring) cannot be read as the file needs it."""


def run(
    render: Callable[[], str],
    regenerate: str,
    argv: Sequence[str] | None,
    prog: str,
    source: str = "its source",
) -> int:
    """Print ``render()``, or with ``--check FILE`` exit 1 when ``FILE`` differs from it.

    The refusal names ``source`` (what the file is generated from) and the ``regenerate``
    command. A :class:`SourceError` or an unreadable ``FILE`` is one line on stderr and
    exit code 2.
    """
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--check", metavar="FILE", help="exit 1 if FILE differs from a fresh one")
    args = parser.parse_args(argv)
    try:
        text = render()
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.check, encoding="utf-8") as handle:
            committed = handle.read()
    except OSError as exc:
        print(f"error: cannot read {args.check}: {exc.strerror}", file=sys.stderr)
        return 2
    if committed != text:
        print(
            f"error: {args.check} differs from {source}; run `{regenerate}` and commit it",
            file=sys.stderr,
        )
        return 1
    print(f"{args.check}: up to date")
    return 0
