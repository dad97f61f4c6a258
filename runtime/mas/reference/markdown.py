"""What the reference pages share: Markdown escaping and heading anchors."""

from __future__ import annotations

import re


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
