"""Leader election on a ``coordination.k8s.io/v1`` Lease, so two replicas run safely.

kopf has no lease-based election, so the operator takes the Lease *before* it starts
handling: a standby replica waits, renewing nothing, until the holder stops renewing for
``duration`` seconds (or releases the Lease on a clean shutdown), then takes over. Every
write carries the Lease's resourceVersion, so two candidates can never both win a round;
the loser sees a 409 Conflict and stays standby.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseSettings:
    """Where the Lease lives and how long a holder keeps it without renewing."""

    name: str
    namespace: str
    identity: str
    duration: float = 15.0
    renew_every: float = 5.0
    retry_every: float = 2.0


def _now() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    """Acquire, renew and release one Lease (blocking calls: run them in a thread)."""

    def __init__(self, api: k8s.ApiClient, settings: LeaseSettings) -> None:
        self._api = k8s.CoordinationV1Api(api)
        self.settings = settings

    def _spec(self, transitions: int, acquired: datetime | None = None) -> k8s.V1LeaseSpec:
        now = _now()
        return k8s.V1LeaseSpec(
            holder_identity=self.settings.identity,
            lease_duration_seconds=max(1, round(self.settings.duration)),
            acquire_time=acquired or now,
            renew_time=now,
            lease_transitions=transitions,
        )

    def _expired(self, spec: k8s.V1LeaseSpec) -> bool:
        if not spec.holder_identity:
            return True
        renewed = spec.renew_time or spec.acquire_time
        if renewed is None:
            return True
        duration = spec.lease_duration_seconds or self.settings.duration
        return bool(_now() > renewed + timedelta(seconds=duration))

    def try_acquire(self) -> bool:
        """Take the Lease if it is free, expired or already ours; ``False`` otherwise."""
        s = self.settings
        try:
            lease = self._api.read_namespaced_lease(s.name, s.namespace)
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
            body = k8s.V1Lease(
                metadata=k8s.V1ObjectMeta(name=s.name, namespace=s.namespace), spec=self._spec(0)
            )
            try:
                self._api.create_namespaced_lease(s.namespace, body)
            except k8s.ApiException as create_exc:
                if create_exc.status == 409:
                    return False
                raise
            logger.info("acquired Lease %s/%s as %s", s.namespace, s.name, s.identity)
            return True
        spec = lease.spec or k8s.V1LeaseSpec()
        if spec.holder_identity == s.identity:
            return self.renew()
        if not self._expired(spec):
            return False
        lease.spec = self._spec((spec.lease_transitions or 0) + 1)
        try:
            self._api.replace_namespaced_lease(s.name, s.namespace, lease)
        except k8s.ApiException as exc:
            if exc.status == 409:
                return False
            raise
        logger.info(
            "took over Lease %s/%s from %s as %s",
            s.namespace,
            s.name,
            spec.holder_identity or "(nobody)",
            s.identity,
        )
        return True

    def renew(self) -> bool:
        """Renew our Lease; ``False`` when somebody else holds it now."""
        s = self.settings
        lease = self._api.read_namespaced_lease(s.name, s.namespace)
        spec = lease.spec or k8s.V1LeaseSpec()
        if spec.holder_identity != s.identity:
            return False
        spec.renew_time = _now()
        try:
            self._api.replace_namespaced_lease(s.name, s.namespace, lease)
        except k8s.ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def release(self) -> bool:
        """Give the Lease up (a clean shutdown), so a standby takes over at once.

        ``False`` when it was not ours to give up.
        """
        s = self.settings
        lease = self._api.read_namespaced_lease(s.name, s.namespace)
        if lease.spec is None or lease.spec.holder_identity != s.identity:
            return False
        lease.spec.holder_identity = None
        lease.spec.renew_time = None
        self._api.replace_namespaced_lease(s.name, s.namespace, lease)
        logger.info("released Lease %s/%s", s.namespace, s.name)
        return True
