"""``mas-ctl plugins``: every plugin of the registry, by category, and whether it loads.

::

    mas-ctl plugins [--check]

One row per plugin (built-ins and the ``mas.plugins`` entry points): category, name, the
distribution that provides it, its ``module:attribute`` and a status. Without ``--check``
nothing is imported and the status is ``not loaded``; with ``--check`` every plugin is
imported and the status is ``ok`` or ``failed: <why>``. Exit 0 when every plugin loads (or
nothing was checked), 1 when one failed to load, naming each on stderr. A malformed entry
point name (not ``<category>.<name>``) is an error of the listing itself: exit 1, one line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mas.runtime.errors import PluginLoadError
from mas.runtime.registry import PluginInfo, default_registry

EXIT_OK, EXIT_FAILED = 0, 1
HEADER = ("CATEGORY", "NAME", "DISTRIBUTION", "TARGET", "STATUS")


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "plugins", help="list every plugin by category (--check: load each, exit 1 on a failure)"
    )
    parser.add_argument(
        "--check", action="store_true", help="import every plugin and report each failure"
    )
    parser.set_defaults(handler=handle)


def _rows(plugins: list[PluginInfo], statuses: list[str]) -> list[tuple[str, ...]]:
    return [
        (p.category, p.name, p.distribution, p.target, status)
        for p, status in zip(plugins, statuses, strict=True)
    ]


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    """Aligned columns; the last one (the status) is left as long as it is."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER) - 1)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)), row[-1]])
        for row in rows
    ]


def handle(args: argparse.Namespace) -> int:
    """Print the table; with ``--check``, load every plugin first."""
    registry = default_registry()
    plugins = registry.describe()
    statuses: list[str] = []
    failures: list[str] = []
    for plugin in plugins:
        if not args.check:
            statuses.append("not loaded")
            continue
        try:
            registry.get(plugin.category, plugin.name)
        except PluginLoadError as exc:
            statuses.append(f"failed: {exc.__cause__ or exc}")
            failures.append(str(exc))
        else:
            statuses.append("ok")
    for line in _table([HEADER, *_rows(plugins, statuses)]):
        print(line.rstrip())
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    return EXIT_FAILED if failures else EXIT_OK
