"""One call from a document to a checked model and its routes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mas.infra.errors import ApplicationInvalid, WiringError
from mas.infra.models import Application
from mas.infra.routes import Routes, build_routes
from mas.infra.validation import KnownPlugins, check_application, parse_application


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
    """
    app = data if isinstance(data, Application) else parse_application(data)
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
