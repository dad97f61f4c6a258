"""Generate ``docs/reference/helm-values.md``: every value of each chart under ``charts/``.

``python -m mas.reference.helm_values`` prints the page; ``--check FILE`` exits 1 when
``FILE`` differs from a fresh one (``make reference`` regenerates it). Run it from the
repository root: it reads ``charts/*/Chart.yaml`` and ``charts/*/values.yaml`` there.

Each key of ``values.yaml`` becomes a row: its path (``conformance.test.timeoutSeconds``),
its type and default as YAML parses them, and its description, which is the comment block
right above the key (no blank line between) followed by the comment at the end of its line.
So a value is documented by commenting it in ``values.yaml``, and only there.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mas.infra.generated_files import SourceError, run
from mas.reference.markdown import anchor, cell, code

REGENERATE = "make reference"

_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_.-]+):(?P<rest>.*)$")
# A comment at the end of a line: a '#' after a space, outside quotes.
_TRAILING = re.compile(r"""^(?:[^#'"]|'[^']*'|"[^"]*")*?\s#\s?(?P<comment>.*)$""")


class ChartError(SourceError):
    """A chart's files cannot be read or parsed as the page needs them."""


@dataclass
class Value:
    """One key of a values file."""

    path: str
    comment: str
    value: Any


def _comment(line: str) -> str:
    return line.strip().removeprefix("#").strip()


def values_of(text: str) -> Iterator[Value]:
    """Every key of the values file ``text`` with its comment, in file order.

    Only block mappings are walked: the items of a list (``- name: x``), the lines of a
    block scalar (``key: |``) and a flow mapping are part of their key's default, not rows
    of their own.
    """
    data = yaml.safe_load(text) or {}
    stack: list[tuple[int, str]] = []
    block: list[str] = []
    inside: int | None = None  # the indent of the key whose list or block scalar this is
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            block = []
            continue
        indent = len(line) - len(line.lstrip())
        if stripped == "-" or stripped.startswith("- "):
            if inside is None:
                inside = stack[-1][0] if stack else -1
            block = []
            continue
        if inside is not None and indent > inside:
            continue
        inside = None
        if stripped.startswith("#"):
            block.append(_comment(line))
            continue
        match = _KEY.match(line)
        if match is None:
            block = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        keys = [key for _, key in stack]
        trailing = _TRAILING.match(match["rest"])
        words = [*block, trailing["comment"].strip()] if trailing else block
        block = []
        node: Any = data
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                raise ChartError(f"{'.'.join(keys)}: not a key of the parsed values")
            node = node[key]
        yield Value(".".join(keys), " ".join(w for w in words if w), node)
        if match["rest"].strip()[:1] in ("|", ">"):
            inside = indent


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return "null"


def _default(value: Any) -> str:
    if isinstance(value, dict) and value:
        return "—"
    if value == "":
        return '`""`'
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    return code(text.removesuffix("\n").removesuffix("\n...").strip())


def _chart(directory: Path) -> list[str]:
    try:
        chart = yaml.safe_load((directory / "Chart.yaml").read_text(encoding="utf-8"))
        text = (directory / "values.yaml").read_text(encoding="utf-8")
    except (OSError, yaml.YAMLError) as exc:
        raise ChartError(f"{directory}: {exc}") from exc
    name = str(chart.get("name", directory.name))
    out = [
        f"## {name}",
        "",
        cell(str(chart.get("description", ""))),
        "",
        f"Chart version {code(str(chart.get('version')))}, "
        f"app version {code(str(chart.get('appVersion')))}; "
        f"set a value with `helm install ... --set PATH=VALUE` or a values file.",
        "",
        "| value | type | default | description |",
        "|---|---|---|---|",
    ]
    for item in values_of(text):
        row = [code(item.path), _type(item.value), _default(item.value), cell(item.comment)]
        out.append("| " + " | ".join(part or "—" for part in row) + " |")
    return out


HEADER = """\
<!-- Generated by `python -m mas.reference.helm_values` from charts/*/values.yaml.
     Do not edit by hand: comment the value in values.yaml and run `make reference`;
     CI fails when this file drifts. -->

# Helm values reference

Every value of the charts in `charts/`, with the comment `values.yaml` gives it. A map's
own row describes the map; its keys follow it. Installing the operator with the chart is
in [operator.md](../operator.md).
"""


def render(root: Path = Path(".")) -> str:
    """The page, exactly as committed, for the charts under ``root``."""
    charts = sorted(path.parent for path in (root / "charts").glob("*/values.yaml"))
    if not charts:
        raise ChartError(
            f"no charts/*/values.yaml under {root.resolve()}: run from the repository root"
        )
    out = [HEADER, "Charts: " + ", ".join(f"[{c.name}](#{anchor(c.name)})" for c in charts)]
    for directory in charts:
        out += ["", *_chart(directory)]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the page, or check a committed copy."""
    return run(render, REGENERATE, argv, "python -m mas.reference.helm_values")


if __name__ == "__main__":
    sys.exit(main())
