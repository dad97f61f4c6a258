"""The conformance step of a reconcile: the API I/O around
:mod:`mas_operator.conformance.jobs` and :mod:`mas_operator.conformance.verdicts`.

When ``spec.conformance.enabled``: create the conformance Job of each deployed agent whose
rollout is complete (a Job is created once and never updated; its name changes with what it
probes), delete the Application's conformance Jobs that no longer match, and read each
agent's verdict from its Job and pod. When it is not enabled: delete them all and report
nothing (and, once the status shows no verdict, stop looking for Jobs: an Application that
never asks for conformance costs no extra request). Blocking I/O, run in the reconcile's
worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kubernetes.client import ApiException

from mas_operator.children import ChildKind
from mas_operator.conformance.jobs import conformance_selector, desired_jobs
from mas_operator.conformance.verdicts import (
    CONFORMANT,
    PROBE_FAILED,
    PROBE_PENDING,
    AgentConformance,
    ConformanceObserved,
    pending,
    read_probe,
)
from mas_operator.kube import Cluster, api_message
from mas_operator.manifests import owned
from mas_operator.names import ANNOTATION_CONFORMANCE_RUN
from mas_operator.plan import Plan

logger = logging.getLogger(__name__)

JOB_KIND = ChildKind("batch/v1", "Job", "jobs")
POD_KIND = ChildKind("v1", "Pod", "pods")


class AgentObserved(Protocol):
    """What the step reads of a deployed agent (:class:`mas_operator.conditions.AgentObserved`
    has it): whether its rollout is complete. A protocol, so that conditions, which reads the
    verdicts, is not imported back."""

    @property
    def ready(self) -> bool: ...


def conformance_run(body: Mapping[str, Any]) -> str | None:
    """The Application's ``maslab.io/conformance-run`` annotation (a re-run on demand)."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    run = annotations.get(ANNOTATION_CONFORMANCE_RUN)
    return None if run is None else str(run)


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


def _reported(body: Mapping[str, Any]) -> bool:
    """Whether the status still shows conformance (then its Jobs may still exist)."""
    status = body.get("status") or {}
    if any(c.get("type") == CONFORMANT for c in status.get("conditions") or []):
        return True
    return any((a or {}).get("conformant") for a in (status.get("agents") or {}).values())


def reads_jobs(body: Mapping[str, Any], plan: Plan) -> bool:
    """Whether a reconcile of ``body`` looks for conformance Jobs (asked for, or reported)."""
    return plan.app.spec.conformance.enabled or _reported(body)


def _create(cluster: Cluster, body: Mapping[str, Any], job: Mapping[str, Any]) -> AgentConformance:
    name = job["metadata"]["name"]
    try:
        cluster.create(JOB_KIND, owned(job, body))
    except ApiException as exc:
        what = f"creating the conformance Job {name} failed: {api_message(exc)}"
        if exc.status in (400, 422):
            return AgentConformance("False", PROBE_FAILED, what)
        return AgentConformance("Unknown", PROBE_PENDING, f"{what}; retrying")
    return pending(agent_ready=True)


def sync_conformance(
    cluster: Cluster,
    body: Mapping[str, Any],
    plan: Plan,
    children: Sequence[Mapping[str, Any]],
    agents: Mapping[str, AgentObserved],
) -> ConformanceObserved:
    """Create, delete and read the conformance Jobs of one Application."""
    meta = body["metadata"]
    namespace, uid = meta["namespace"], str(meta["uid"])
    enabled = plan.app.spec.conformance.enabled
    if not reads_jobs(body, plan):
        return ConformanceObserved(enabled=False)  # not asked for now or lately: no Job to find
    selector = conformance_selector(plan.name)
    existing = [
        j for j in cluster.list_children(JOB_KIND, namespace, selector) if _owned_by(j, uid)
    ]
    wanted: dict[str, dict[str, Any]] = {}
    if enabled:
        wanted = desired_jobs(plan, children, conformance_run(body))
    names = {job["metadata"]["name"] for job in wanted.values()}
    present = {}
    for job in existing:
        name = job["metadata"]["name"]
        if name in names:
            present[name] = job
        else:  # an older run, a removed agent, or conformance switched off
            cluster.delete(JOB_KIND, namespace, name)
    if not enabled:
        return ConformanceObserved(enabled=False)
    pods: list[dict[str, Any]] | None = None
    verdicts: dict[str, AgentConformance] = {}
    for agent, job in wanted.items():
        found = present.get(job["metadata"]["name"])
        seen = agents.get(agent)
        ready = seen is not None and seen.ready
        if found is None:
            verdicts[agent] = _create(cluster, body, job) if ready else pending(agent_ready=False)
            continue
        if pods is None:
            pods = cluster.list_children(POD_KIND, namespace, selector)
        verdicts[agent] = read_probe(agent, found, pods)
    return ConformanceObserved(enabled=True, agents=verdicts)


def warn_when_not_conformant(
    cluster: Cluster, body: Mapping[str, Any], status: Mapping[str, Any]
) -> None:
    """Post a Warning Event when the Application's ``Conformant`` turns ``False``."""

    def conformant(conditions: Any) -> Mapping[str, Any] | None:
        return next((c for c in conditions or [] if c.get("type") == CONFORMANT), None)

    new = conformant(status.get("conditions"))
    if new is None or new["status"] != "False":
        return
    old = conformant((body.get("status") or {}).get("conditions"))
    if old is None or old.get("status") != "False":
        cluster.post_event(body, "Warning", new["reason"], new["message"])
        meta = body["metadata"]
        logger.warning(
            "Application %s/%s is not conformant: %s",
            meta["namespace"],
            meta["name"],
            new["message"],
        )
