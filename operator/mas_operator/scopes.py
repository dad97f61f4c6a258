"""What an operator that watches listed namespaces does about the rest of the cluster.

Run with ``--namespace`` (a scoped install), the operator watches only those namespaces,
with kopf's cluster-wide scanning off (:func:`exact_namespaces`): it lists no namespaces
and watches no CRDs, so it needs no cluster-wide permission at all, and resolves the
Application CRD once at its start: without it, it stops with one error line
(:func:`crd_served`), so install the CRD first. An Application in any other
namespace is left alone: no child, no status, no Event (the operator has no rights there).
It is named **once** per Application (by uid) in a warning log line, and counted in the
gauge ``mas_operator_unwatched_applications``, by :func:`report_unwatched`: on the leader,
every ``resync`` seconds, a metadata-only, paged LIST of Applications across the cluster.
That LIST needs the read-only ClusterRole the chart grants with ``scope.reportUnwatched``;
without it the operator says once that it cannot see the rest of the cluster and stops
looking.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence

import urllib3
from kubernetes.client import ApiException

from mas.infra.models import API_GROUP, API_VERSION, PLURAL
from mas_operator.kube import Cluster, api_message
from mas_operator.metrics import OperatorMetrics

logger = logging.getLogger(__name__)

_PATTERN_CHARS = frozenset("*?[]!")


def exact_namespaces(namespaces: Iterable[str]) -> bool:
    """Whether every watched namespace is a plain name (no kopf glob or negation), so
    kopf need not list namespaces to find them."""
    names = list(namespaces)
    return bool(names) and not any(_PATTERN_CHARS & set(name) for name in names)


async def crd_served(cluster: Cluster) -> bool:
    """Whether the Application CRD is served; when it is not, say so (an error line).

    A scoped operator resolves the CRD once, at its start, and never sees it appear later:
    without it, it stops (exit 1) so that its pod restarts until the CRD is installed,
    rather than run doing nothing. An API server that cannot be asked counts as serving
    it (kopf then reports and retries as usual)."""
    try:
        served = await asyncio.to_thread(cluster.serves, API_GROUP, API_VERSION, PLURAL)
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        logger.warning("could not check that the Application CRD is installed: %s", exc)
        return True
    if not served:
        logger.error(
            "the API server does not serve %s.%s/%s: install the CRD first "
            "(kubectl apply -f crds/application.yaml); an operator that watches listed "
            "namespaces looks for it only at its start, so this one stops",
            PLURAL,
            API_GROUP,
            API_VERSION,
        )
    return served


class UnwatchedReporter:
    """Names each Application outside the watched namespaces once (see the module)."""

    def __init__(
        self, cluster: Cluster, namespaces: Sequence[str], metrics: OperatorMetrics
    ) -> None:
        self.cluster = cluster
        self.namespaces = frozenset(namespaces)
        self.metrics = metrics
        self.named: set[str] = set()  # uids already named in the log
        self.blind = False  # the LIST was refused: nothing more to look at

    def check(self) -> None:
        """One pass (blocking: run it in a thread)."""
        try:
            found = self.cluster.list_application_names()
        except ApiException as exc:
            if exc.status not in (401, 403):
                raise
            self.blind = True
            logger.info(
                "this operator watches only %s and may not list Applications elsewhere (%s): "
                "an Application in another namespace is left alone without notice",
                ", ".join(sorted(self.namespaces)),
                api_message(exc),
            )
            return
        outside = [(ns, name, uid) for ns, name, uid in found if ns not in self.namespaces]
        self.metrics.unwatched.set(len(outside))
        for namespace, name, uid in outside:
            if uid in self.named:
                continue
            self.named.add(uid)
            logger.warning(
                "Application %s/%s is left alone: this operator watches only %s "
                "(an operator that watches %s, or all namespaces, reconciles it)",
                namespace,
                name,
                ", ".join(sorted(self.namespaces)),
                namespace,
            )
        self.named &= {uid for _, _, uid in outside}  # a deleted one is named again if back


async def report_unwatched(
    reporter: UnwatchedReporter, every: float, closing: Callable[[], bool]
) -> None:
    """Run :meth:`UnwatchedReporter.check` every ``every`` seconds until ``closing()``
    or the LIST is refused; a failure other than a refusal is retried next time."""
    while not closing() and not reporter.blind:
        try:
            await asyncio.to_thread(reporter.check)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            logger.debug("listing Applications outside the watched namespaces failed: %s", exc)
        await asyncio.sleep(every)
