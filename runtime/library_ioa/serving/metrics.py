"""Metrics rendering shared by every listener: the Prometheus text of one or more registries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def render(registries: Iterable[CollectorRegistry]) -> bytes:
    """The text exposition of every registry, one after the other."""
    return b"".join(generate_latest(registry) for registry in registries)


def metrics_route(registries: Sequence[CollectorRegistry]) -> Route:
    """``GET /metrics``: the Prometheus text exposition of ``registries``."""

    async def metrics(_: Request) -> Response:
        return Response(render(registries), media_type=CONTENT_TYPE_LATEST)

    return Route("/metrics", metrics, methods=["GET"])
