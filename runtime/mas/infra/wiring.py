"""One call from a document to a checked model and its routes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from mas.infra.errors import ApplicationInvalid, Problem, WiringError
from mas.infra.models import Application
from mas.infra.routes import Routes, build_routes
from mas.infra.salvage import salvage, trusted
from mas.infra.validation import KnownPlugins, check_application


@dataclass(frozen=True)
class Wired:
    """A valid Application and its resolved wiring."""

    app: Application
    routes: Routes


def wire(
    data: Mapping[str, Any] | Application,
    known: KnownPlugins | None = None,
    *,
    require_urls: bool = True,
) -> Wired:
    """Parse, check and wire ``data``; every problem at once.

    Raises :class:`WiringError` when the only problems are missing delegation targets, and
    :class:`ApplicationInvalid` (with ``missing`` filled in too) when there are others.
    Schema errors do not hide the other rules: those of the part that parses are reported
    with them (:mod:`mas.infra.salvage`).
    """
    if isinstance(data, Application):
        app = data
    else:
        try:
            app = Application.model_validate(data)
        except ValidationError as exc:
            raise _invalid(data, exc, known, require_urls) from None
    problems = list(check_application(app, known, require_urls=require_urls))
    try:
        routes = build_routes(app)
    except WiringError as exc:
        if not problems:
            raise
        raise ApplicationInvalid(sorted(set(problems) | set(exc.problems)), exc.missing) from None
    if problems:
        raise ApplicationInvalid(problems)
    return Wired(app, routes)


def _invalid(
    data: Mapping[str, Any], error: ValidationError, known: KnownPlugins | None, require_urls: bool
) -> ApplicationInvalid:
    """The schema's problems of ``data`` and the other rules the part that parses breaks."""
    salvaged = salvage(data, error)
    problems: set[Problem] = set(salvaged.problems)
    if salvaged.app is not None:
        found = list(check_application(salvaged.app, known, require_urls=require_urls))
        try:
            build_routes(salvaged.app)
        except WiringError as exc:
            found += exc.problems
        problems.update(trusted(found, salvaged.removed))
    return ApplicationInvalid(sorted(problems))
