"""``build_conformance_job``: the Job that probes one deployed agent's AgentCard.

One Job per deployed agent, one pod, one container named after the agent, running
``mas-ctl conformance`` against the agent's in-cluster Service. The result reaches the API as
the container's termination message (``--result-file /dev/termination-log``, compact JSON
that fits Kubernetes' 4096 bytes), so the pod needs no credentials and no log access. One pod
per agent rather than one container per agent in one pod: the kubelet splits 12 KiB of
termination messages evenly among a pod's containers, and one pod of N probes would have to
fit on one node.

A Job's pod template is immutable, so the operator never updates one: the name carries a
digest of everything the Job probes (its template, the agent's config and Secrets hash, the
``maslab.io/conformance-run`` annotation), a change makes a new Job, and the reconcile deletes
the Application's conformance Jobs that no longer match. Pods meet the ``restricted`` Pod
Security Standard like the agent pods; ``backoffLimit: 0`` (exit 1 means "not conformant",
not "retry") and no ``ttlSecondsAfterFinished``, so the result stays readable until the next
run replaces the Job.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from mas.infra import identity
from mas_operator.deployments import container_security_context, pod_security_context
from mas_operator.names import (
    ANNOTATION_CONFIG_HASH,
    ANNOTATION_CONFORMANCE_RUN,
    ANNOTATION_SECRETS_HASH,
    CARD_PATH,
    LABEL_AGENT,
    LABEL_APPLICATION,
    LABEL_PROBED_AGENT,
    MANAGED_BY,
    application_selector,
    dns_label,
)
from mas_operator.plan import AgentPlan, Plan
from mas_operator.serviceaccounts import pod_service_account, token_volume

TERMINATION_LOG = "/dev/termination-log"
COMPONENT = "conformance"
PROBE_RESOURCES = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}


def service_card_url(plan: Plan, agent: AgentPlan) -> str:
    """The AgentCard URL of ``agent`` through its Service, as pods of the namespace reach it."""
    return f"http://{agent.name}.{plan.namespace}.svc:{agent.http_port}{CARD_PATH}"


def conformance_labels(application: str, agent: str) -> dict[str, str]:
    """The labels of a conformance Job and its pod (none that an agent's Service selects)."""
    return {
        "app.kubernetes.io/name": "mas-conformance",
        "app.kubernetes.io/instance": dns_label(application),
        "app.kubernetes.io/component": COMPONENT,
        "app.kubernetes.io/part-of": "maslab",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_APPLICATION: dns_label(application),
        LABEL_PROBED_AGENT: agent,
    }


def conformance_selector(application: str) -> str:
    """The label selector of every conformance Job (and pod) of ``application``."""
    return f"{application_selector(application)},{LABEL_PROBED_AGENT}"


def probe_command(plan: Plan, agent: AgentPlan) -> list[str]:
    """The probe container's command."""
    timeout = plan.app.spec.conformance.timeout_seconds
    return [
        "mas-ctl",
        "conformance",
        "--url",
        service_card_url(plan, agent),
        "-o",
        "json",
        "--timeout",
        f"{timeout:g}",
        "--result-file",
        TERMINATION_LOG,
    ]


def build_conformance_job(
    plan: Plan, agent: AgentPlan, pod_digest: str, run: str | None = None
) -> dict[str, Any]:
    """The conformance Job of one deployed agent.

    ``pod_digest`` identifies what the agent's pods run (its Deployment's config and Secrets
    hashes), ``run`` is the Application's ``maslab.io/conformance-run`` annotation; with the
    Job's own spec they make the digest in its name.
    """
    conformance = plan.app.spec.conformance
    runtime = plan.app.spec.runtime
    labels = conformance_labels(plan.name, agent.agent)
    token, token_mount = token_volume()
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "activeDeadlineSeconds": conformance.deadline_seconds,
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "restartPolicy": "Never",
                # as the probed agent, which admits its own ServiceAccount (docs/security.md)
                "serviceAccountName": pod_service_account(plan, agent),
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "securityContext": pod_security_context(),
                "containers": [
                    {
                        "name": agent.agent,
                        "image": runtime.image,
                        "imagePullPolicy": runtime.image_pull_policy,
                        "command": probe_command(plan, agent),
                        "terminationMessagePath": TERMINATION_LOG,
                        "terminationMessagePolicy": "File",
                        "resources": PROBE_RESOURCES,
                        "securityContext": container_security_context(),
                        "env": [{"name": identity.TOKEN_FILE_ENV, "value": identity.TOKEN_PATH}],
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, token_mount],
                    }
                ],
                "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}, token],
            },
        },
    }
    fingerprint = json.dumps(
        {"spec": spec, "pods": pod_digest, "run": run}, sort_keys=True, separators=(",", ":")
    )
    digest = hashlib.sha256(fingerprint.encode()).hexdigest()[:10]
    annotations = {ANNOTATION_CONFORMANCE_RUN: run} if run is not None else {}
    metadata: dict[str, Any] = {
        "name": dns_label(f"{agent.name}-{COMPONENT}-{digest}"),
        "namespace": plan.namespace,
        "labels": labels,
    }
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def pod_digest(deployment: Mapping[str, Any]) -> str:
    """What an agent's pods run, from its Deployment: the config and Secrets hashes."""
    template = (deployment.get("spec") or {}).get("template") or {}
    notes = (template.get("metadata") or {}).get("annotations") or {}
    return f"{notes.get(ANNOTATION_CONFIG_HASH, '')}/{notes.get(ANNOTATION_SECRETS_HASH, '')}"


def desired_jobs(
    plan: Plan, children: Sequence[Mapping[str, Any]], run: str | None
) -> dict[str, dict[str, Any]]:
    """The conformance Job of every deployed agent, keyed by agent id (pure)."""
    deployments = {
        (c["metadata"].get("labels") or {}).get(LABEL_AGENT): c
        for c in children
        if c.get("kind") == "Deployment"
    }
    return {
        agent.agent: build_conformance_job(
            plan, agent, pod_digest(deployments.get(agent.agent) or {}), run
        )
        for agent in plan.agents
    }
