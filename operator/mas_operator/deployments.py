"""``build_deployment``: the Deployment that runs ``mas-ctl serve`` for one agent.

Pods meet the ``restricted`` Pod Security Standard: non-root, read-only root filesystem
(``/tmp`` is an ``emptyDir``), no privilege escalation, every capability dropped, the
RuntimeDefault seccomp profile, and no automounted API token: the pods run as the agent's
own ServiceAccount (bound only to the Application's events Role,
:mod:`mas_operator.eventroles`) and mount only its projected credentials
(:mod:`mas_operator.serviceaccounts`): the A2A token, which the API server refuses, and what
reading the issuer's keys needs. ``MAS_A2A_IDENTITY=kubernetes`` makes every door check its
callers; ``MAS_A2A_CONSOLE`` (when the operator runs with ``--console-principal``) adds the
install's console to the callers it admits. Secret-backed values arrive only as
``valueFrom.secretKeyRef`` env vars named by :func:`mas.infra.secrets.secret_env_name`.
Tolerations of a lost node, and the spread of a replicated agent, come from
:mod:`mas_operator.scheduling`; the scanner findings it skips, from
:mod:`mas_operator.scanner_skips`.
"""

from __future__ import annotations

from typing import Any

from mas.infra import identity
from mas.infra.secrets import secret_env_name
from mas_operator.eventroles import denial_events_on
from mas_operator.names import (
    ANNOTATION_CONFIG_HASH,
    ANNOTATION_GENERATION,
    ANNOTATION_SECRETS_HASH,
    CONFIG_DIR,
    CONFIG_FILE,
    METRICS_PORT,
    PORT_GRPC,
    PORT_HTTP,
    PORT_MCP,
    PORT_METRICS,
    RUNTIME_UID,
    child_labels,
    selector_labels,
)
from mas_operator.plan import AgentPlan, Plan
from mas_operator.scanner_skips import skip_annotations
from mas_operator.scheduling import (
    host_anti_affinity,
    node_loss_tolerations,
    spread_out,
    topology_spread,
)
from mas_operator.serviceaccounts import pod_service_account, token_volume
from mas_operator.telemetry import telemetry_env
from mas_operator.volumes import task_store_volume

CONTAINER = "runtime"


def _seccomp() -> dict[str, str]:
    return {"type": "RuntimeDefault"}


def pod_security_context() -> dict[str, Any]:
    """The ``restricted`` pod-level security context every pod of the operator gets."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUNTIME_UID,
        "runAsGroup": RUNTIME_UID,
        "fsGroup": RUNTIME_UID,
        "seccompProfile": _seccomp(),
    }


def container_security_context() -> dict[str, Any]:
    """The ``restricted`` container-level security context (read-only root filesystem)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": _seccomp(),
    }


def serve_command(agent: AgentPlan) -> list[str]:
    """The runtime container's command."""
    return [
        "mas-ctl",
        "serve",
        "-f",
        f"{CONFIG_DIR}/{CONFIG_FILE}",
        "--agent",
        agent.agent,
        "--listen",
        "0.0.0.0",
        "--metrics-port",
        str(METRICS_PORT),
        "--no-control",
    ]


def container_env(plan: Plan, agent: AgentPlan) -> list[dict[str, Any]]:
    """Telemetry env, user env (literal or Secret-backed), then one per referenced Secret key."""
    env: list[dict[str, Any]] = [
        {"name": "MAS_AGENT", "value": agent.agent},
        # every door checks its callers against the cluster's issuer (docs/security.md)
        {"name": identity.IDENTITY_ENV, "value": identity.IDENTITY_KUBERNETES},
    ]
    if plan.console:  # the install's console is admitted too (docs/security.md)
        env.append({"name": identity.CONSOLE_ENV, "value": plan.console})
    if denial_events_on(plan):  # the first refusal of each caller is an Event (eventroles)
        env.append({"name": identity.DENIAL_EVENTS_ENV, "value": identity.DENIAL_EVENTS_ON})
        if plan.uid:
            env.append({"name": identity.APPLICATION_UID_ENV, "value": plan.uid})
    env += telemetry_env(plan, agent)  # traces and JSON logs, when the Application asks
    for item in plan.app.spec.runtime.env:
        if item.secret_key_ref is not None:
            ref = item.secret_key_ref
            env.append(
                {
                    "name": item.name,
                    "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
                }
            )
        else:
            env.append({"name": item.name, "value": item.value or ""})
    for ref in agent.secrets:
        env.append(
            {
                "name": secret_env_name(ref),
                "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
            }
        )
    return env


def container_ports(agent: AgentPlan) -> list[dict[str, Any]]:
    """The A2A HTTP port, gRPC when set, and metrics."""
    ports = [{"name": PORT_HTTP, "containerPort": agent.http_port, "protocol": "TCP"}]
    if agent.grpc_port is not None:
        ports.append({"name": PORT_GRPC, "containerPort": agent.grpc_port, "protocol": "TCP"})
    if agent.mcp_port is not None:
        ports.append({"name": PORT_MCP, "containerPort": agent.mcp_port, "protocol": "TCP"})
    ports.append({"name": PORT_METRICS, "containerPort": METRICS_PORT, "protocol": "TCP"})
    return ports


def _probe(path: str, period: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": PORT_HTTP},
        "periodSeconds": period,
        "timeoutSeconds": 2,
        "failureThreshold": 3,
    }


# A runtime that starts slowly (a busy node, many pods starting at once) is not killed by
# the liveness probe: that probe, and readiness, begin only once /healthz has answered once,
# within STARTUP_SECONDS of the container's start.
STARTUP_PERIOD_SECONDS, STARTUP_SECONDS = 2, 300


def startup_probe() -> dict[str, Any]:
    return {
        **_probe("/healthz", STARTUP_PERIOD_SECONDS),
        "failureThreshold": STARTUP_SECONDS // STARTUP_PERIOD_SECONDS,
    }


# Seconds a terminating pod keeps serving before SIGTERM: the Service's endpoints (kube-proxy's
# rules, other nodes' caches) drop the pod meanwhile, so no new connection reaches a closed port.
PRE_STOP_SECONDS = 5


# The kubelet's SIGKILL comes this long after the pod's deletion. The stop of a pod in the
# worst case (docs/operations.md, "The stop of a pod, in order"): the preStop sleep, the
# mailbox drain (`mas-ctl serve --drain-timeout`, 10 s), uvicorn's graceful close (drain + 1 s,
# plus 2 s to give up) and the wait for the run book's turns (the drain again): 5 + 10 + 13
# + 10 = 38 s, above Kubernetes' default of 30 s.
TERMINATION_GRACE_SECONDS = 45


def pre_stop() -> dict[str, Any]:
    """The drain delay as a preStop hook (``sleep`` is in the image)."""
    return {"preStop": {"exec": {"command": ["sleep", str(PRE_STOP_SECONDS)]}}}


def build_deployment(
    plan: Plan, agent: AgentPlan, config_hash: str, secrets_hash: str | None = None
) -> dict[str, Any]:
    """The Deployment of one deployed agent.

    ``replicas`` is omitted when the user asks for autoscaling, so the operator never fights
    an autoscaler. ``secrets_hash`` (the referenced Secrets' resourceVersions) is known only
    to the operator; ``mas-operator render`` leaves it out.
    """
    runtime = plan.app.spec.runtime
    annotations = {ANNOTATION_CONFIG_HASH: config_hash}
    if secrets_hash is not None:
        annotations[ANNOTATION_SECRETS_HASH] = secrets_hash
    token, token_mount = token_volume()
    pod_spec: dict[str, Any] = {
        "serviceAccountName": pod_service_account(plan, agent),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "securityContext": pod_security_context(),
        "containers": [
            {
                "name": CONTAINER,
                "image": runtime.image,
                "imagePullPolicy": runtime.image_pull_policy,
                "command": serve_command(agent),
                "ports": container_ports(agent),
                "env": container_env(plan, agent),
                "readinessProbe": _probe("/readyz", 5),
                "livenessProbe": _probe("/healthz", 10),
                "startupProbe": startup_probe(),
                "lifecycle": pre_stop(),
                "resources": runtime.resources.model_dump(),
                "securityContext": container_security_context(),
                "volumeMounts": [
                    {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                    {"name": "tmp", "mountPath": "/tmp"},
                    token_mount,
                ],
            }
        ],
        "volumes": [
            {"name": "config", "configMap": {"name": agent.name}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
            token,
        ],
    }
    pod_spec["tolerations"] = node_loss_tolerations(runtime)
    if spread_out(runtime):
        pod_spec["topologySpreadConstraints"] = topology_spread(plan.name, agent.agent)
        pod_spec["affinity"] = host_anti_affinity(plan.name, agent.agent)
    spec: dict[str, Any] = {}
    if not runtime.autoscaling:
        spec["replicas"] = runtime.replicas
    tasks = task_store_volume(plan, agent)
    if tasks is not None:  # a SQLite task file on its claim: one writer, so no rolling
        pod_spec["volumes"].append(tasks[0])
        pod_spec["containers"][0]["volumeMounts"].append(tasks[1])
        spec["strategy"] = {"type": "Recreate"}
    spec["selector"] = {"matchLabels": selector_labels(plan.name, agent.agent)}
    spec["template"] = {
        "metadata": {"labels": child_labels(plan.name, agent.agent), "annotations": annotations},
        "spec": pod_spec,
    }
    metadata: dict[str, Any] = {
        "name": agent.name,
        "namespace": plan.namespace,
        "labels": child_labels(plan.name, agent.agent),
    }
    metadata["annotations"] = skip_annotations(runtime)
    if plan.generation is not None:
        metadata["annotations"][ANNOTATION_GENERATION] = str(plan.generation)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}
