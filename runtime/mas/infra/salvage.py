"""The valid part of a document that breaks its schema, so its other rules are checked too.

A schema error used to stop validation before the whole-document rules ran, so a user who
fixed a bad ``usage`` then met a path-prefix url and a deploy of a non-agent in a second
round. :func:`salvage` removes the fields the schema refused (repeatedly, since removing one
can reveal another, e.g. a required field) and parses what is left, so
:func:`~mas.infra.wiring.wire` can report the schema errors and every rule the rest breaks,
together.

What is left is not the document the user wrote: a removed field reads as its default.
:func:`trusted` keeps only the rule problems that cannot come from that: none at or under a
removed field, and, in an endpoint whose ``protocol``, ``usage`` or ``expose`` was removed
(every endpoint rule reads them), only the problems of the url's own form. When the
``apiVersion``, ``kind``, ``metadata`` or ``spec`` itself is refused nothing is salvaged.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from mas.infra.errors import Problem
from mas.infra.models import Application
from mas.infra.validation import problems_from_pydantic

__all__ = ["Salvaged", "salvage", "trusted"]

MAX_ROUNDS = 16
# The endpoint fields every endpoint rule depends on.
_ENDPOINT_KEYS = frozenset({"protocol", "usage", "expose"})
# Where a removal stops being a part of the document and becomes the document.
_MIN_DEPTH = 2


@dataclass(frozen=True)
class Salvaged:
    """The schema's problems and, when the rest parses, the model of the rest."""

    problems: list[Problem]
    app: Application | None
    removed: frozenset[tuple[str | int, ...]]


def _locations(error: ValidationError) -> list[tuple[str | int, ...]]:
    """Where each schema error is, as a path into the data (a refused key: the key's path)."""
    found = []
    for item in error.errors(include_url=False):
        loc = tuple(
            p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-"))
        )
        if loc and loc[-1] == "[key]":
            loc = loc[:-1]  # ('agents', 'Bad_Id', '[key]'): the entry 'Bad_Id' itself
        if item["type"] == "missing":
            loc = loc[:-1]  # a required field is missing: the object that lacks it
        found.append(loc)
    return found


def _holds(node: Any, part: str | int) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _remove(data: Any, loc: tuple[str | int, ...]) -> bool:
    """Delete ``loc`` from ``data``; whether there was something there."""
    parent = data
    for part in loc[:-1]:
        if not _holds(parent, part):
            return False
        parent = parent[part]
    if not _holds(parent, loc[-1]):
        return False
    del parent[loc[-1]]
    return True


def salvage(data: Mapping[str, Any], first: ValidationError) -> Salvaged:
    """The problems of ``first`` (the schema's errors on ``data``) and the model of the rest."""
    problems = problems_from_pydantic(first)
    rest: Any = copy.deepcopy(dict(data))
    removed: set[tuple[str | int, ...]] = set()
    error = first
    for _ in range(MAX_ROUNDS):
        # Deepest first, and the later list items before the earlier ones, so each removal
        # leaves the other paths where they were.
        locations = sorted(set(_locations(error)), key=lambda loc: (len(loc), loc), reverse=True)
        if any(len(loc) < _MIN_DEPTH for loc in locations):
            break
        if not any(_remove(rest, loc) for loc in locations):
            break
        removed.update(locations)
        try:
            app = Application.model_validate(rest)
        except ValidationError as again:
            error = again
            continue
        return Salvaged(problems, app, frozenset(removed))
    return Salvaged(problems, None, frozenset(removed))


def _dotted(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def trusted(problems: Iterable[Problem], removed: Iterable[tuple[str | int, ...]]) -> list[Problem]:
    """The rule problems of a salvaged model that do not come from a removed field."""
    removed_paths = [_dotted(loc) for loc in removed]
    blind_endpoints = {
        _dotted(loc[:3])
        for loc in removed
        if len(loc) >= 3
        and loc[:2] == ("spec", "endpoints")
        and (len(loc) == 3 or loc[3] in _ENDPOINT_KEYS)
    }
    kept = []
    for problem in problems:
        path = problem.path
        if any(path == p or path.startswith((p + ".", p + "[")) for p in removed_paths):
            continue
        endpoint = next((e for e in blind_endpoints if path.startswith(e + ".")), None)
        if endpoint is not None and not (
            path == endpoint + ".url" and not problem.message.startswith("is required")
        ):
            continue
        kept.append(problem)
    return kept
