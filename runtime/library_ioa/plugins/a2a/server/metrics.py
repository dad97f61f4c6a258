"""Prometheus metrics of the A2A ingress: requests by method, transport and outcome.

Registered on the runtime's registry (:data:`mas.runtime.metrics.REGISTRY`), beside the
turn, queue-depth, latency and delegation metrics, so one ``/metrics`` shows them all.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from mas.runtime.metrics import REGISTRY

A2A_REGISTRY = REGISTRY

A2A_REQUESTS = Counter(
    "maslab_a2a_requests",
    "A2A requests handled, by agent, method (the protocol 1.0 name), transport (JSONRPC, "
    "HTTP+JSON or GRPC) and outcome (ok, or the A2A error type).",
    ("agent", "method", "transport", "outcome"),
    registry=A2A_REGISTRY,
)

A2A_REQUEST_SECONDS = Histogram(
    "maslab_a2a_request_seconds",
    "Time to answer an A2A request (for streams: until the stream ends), by agent and method.",
    ("agent", "method"),
    registry=A2A_REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
