"""Prometheus metrics of one operator instance (its own registry, so two can share a process).

- ``mas_operator_reconciles_total{outcome}``: ready, progressing, stalled, error
- ``mas_operator_reconcile_duration_seconds``: histogram of one reconcile
- ``mas_operator_applications{phase}``: Applications by phase, as last reconciled
- ``mas_operator_children_applied_total{kind}``: server-side applies of child objects
- ``mas_operator_retries_total{reason}``: failed reconciles scheduled for a retry with
  backoff, by cause: conflict (409), throttled (429), server_error (5xx), unreachable
  (connection error or timeout), refused (another answer, e.g. a quota's 403)
- ``mas_operator_leader``: 1 while this instance holds the Lease
- ``mas_operator_unwatched_applications``: Applications outside the watched namespaces,
  left alone (a scoped operator, :mod:`mas_operator.scopes`)
- ``mas_operator_resync_passes_total``: full resync passes; ``mas_operator_resync_settled_total``:
  Applications a pass left alone because nothing they depend on changed;
  ``mas_operator_cold_passes_total``: the full passes that reconciled every Application
  from the API server's children, settled or not
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mas_operator.conditions import PHASE_PROGRESSING, PHASE_READY, PHASE_STALLED

PHASES = (PHASE_READY, PHASE_PROGRESSING, PHASE_STALLED)


class _PhaseCollector(Collector):
    def __init__(self, phases: dict[str, str], lock: threading.Lock) -> None:
        self._phases = phases
        self._lock = lock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "mas_operator_applications",
            "Applications by phase, as last reconciled",
            labels=["phase"],
        )
        with self._lock:
            values = list(self._phases.values())
        for phase in PHASES:
            family.add_metric([phase], values.count(phase))
        yield family


@dataclass
class OperatorMetrics:
    """The metrics of one operator instance."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self._phases: dict[str, str] = {}
        self._lock = threading.Lock()
        self.reconciles = Counter(
            "mas_operator_reconciles",
            "Reconciles by outcome",
            ["outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "mas_operator_reconcile_duration_seconds",
            "Duration of one reconcile",
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.children_applied = Counter(
            "mas_operator_children_applied",
            "Server-side applies of child objects",
            ["kind"],
            registry=self.registry,
        )
        self.retries = Counter(
            "mas_operator_retries",
            "Failed reconciles scheduled for a retry with backoff, by cause",
            ["reason"],
            registry=self.registry,
        )
        self.resync_passes = Counter(
            "mas_operator_resync_passes", "Full resync passes", registry=self.registry
        )
        self.resync_settled = Counter(
            "mas_operator_resync_settled",
            "Applications a full resync pass left alone: nothing they depend on changed",
            registry=self.registry,
        )
        self.cold_passes = Counter(
            "mas_operator_cold_passes",
            "Full passes that read every Application's children from the API server",
            registry=self.registry,
        )
        self.leader = Gauge(
            "mas_operator_leader",
            "1 while this instance holds the leader Lease",
            registry=self.registry,
        )
        self.unwatched = Gauge(
            "mas_operator_unwatched_applications",
            "Applications outside the watched namespaces, left alone",
            registry=self.registry,
        )
        self.registry.register(_PhaseCollector(self._phases, self._lock))

    def set_phase(self, uid: str, phase: str | None) -> None:
        """Record (or, with ``None``, forget) the phase of one Application."""
        with self._lock:
            if phase is None:
                self._phases.pop(uid, None)
            else:
                self._phases[uid] = phase
