"""What the reference pages share: Markdown escaping and the print-or-check command line."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence


def cell(text: str) -> str:
    """``text`` safe inside one Markdown table cell: one line, no column breaks, no tags.

    Code spans (`...`) keep their text: only their ``|`` is escaped, as tables need.
    """
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(
        part.replace("|", "\\|") if index % 2 else _plain(part) for index, part in enumerate(parts)
    )


def _plain(text: str) -> str:
    for raw, safe in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;")):
        text = text.replace(raw, safe)
    return text


def code(text: str) -> str:
    """``text`` as an inline code span, safe inside a table cell."""
    flat = " ".join(text.split()).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def anchor(text: str) -> str:
    """The id GitHub gives a heading ``text``: lowercase, punctuation dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


class SourceError(ValueError):
    """A page's source (a chart, a docstring) cannot be read as the page needs it."""


def run(render: Callable[[], str], regenerate: str, argv: Sequence[str] | None, prog: str) -> int:
    """Print ``render()``, or with ``--check FILE`` exit 1 when ``FILE`` differs from it.

    A :class:`SourceError` is one line on stderr and exit code 2.
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
            f"error: {args.check} differs from its source; run `{regenerate}` and commit it",
            file=sys.stderr,
        )
        return 1
    print(f"{args.check}: up to date")
    return 0
