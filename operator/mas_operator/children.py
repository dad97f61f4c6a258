"""Every child manifest of an Application, from the plan: the one list both the operator
and ``mas-operator render`` use.

In apply order: first the Application's Role and RoleBinding that let its agents post
denial Events (:mod:`mas_operator.eventroles`; unless they are off), so that its pods hold
the right from their start; then per deployed agent: ConfigMap, Service, its ServiceAccount
(unless ``spec.runtime.service_account`` names one for every pod), the PersistentVolumeClaim
of a SQLite task store, Deployment, the PodDisruptionBudget of a replicated agent
(:mod:`mas_operator.disruptionbudgets`), then NetworkPolicy when
``spec.runtime.network_policy.enabled`` (the default).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mas_operator.configmaps import build_configmap, config_hash
from mas_operator.deployments import build_deployment
from mas_operator.disruptionbudgets import build_disruption_budget
from mas_operator.eventroles import build_event_role, build_event_role_binding
from mas_operator.networkpolicies import build_network_policy
from mas_operator.plan import AgentPlan, Plan
from mas_operator.serviceaccounts import build_service_account
from mas_operator.services import build_service
from mas_operator.volumes import build_task_store_claim


@dataclass(frozen=True)
class ChildKind:
    """A kind of child object: its API coordinates, for the client."""

    api_version: str
    kind: str
    plural: str


CHILD_KINDS = (
    ChildKind("v1", "ConfigMap", "configmaps"),
    ChildKind("v1", "Service", "services"),
    ChildKind("v1", "ServiceAccount", "serviceaccounts"),
    ChildKind("rbac.authorization.k8s.io/v1", "Role", "roles"),
    ChildKind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings"),
    ChildKind("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    ChildKind("apps/v1", "Deployment", "deployments"),
    ChildKind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    ChildKind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
)


def referenced_secrets(plan: Plan, agent: AgentPlan) -> list[str]:
    """The Secrets the pods of ``agent`` read: its secret env vars and ``spec.runtime.env``."""
    names = {ref.name for ref in agent.secrets}
    names |= {e.secret_key_ref.name for e in plan.app.spec.runtime.env if e.secret_key_ref}
    return sorted(names)


def secrets_hash(plan: Plan, agent: AgentPlan, versions: Mapping[str, str]) -> str:
    """A digest of the resourceVersions of the Secrets ``agent`` references.

    ``versions`` maps a Secret name to its resourceVersion (``"missing"`` when absent), so
    editing a referenced Secret rolls the pods that read it.
    """
    names = referenced_secrets(plan, agent)
    text = ";".join(f"{name}={versions.get(name, 'missing')}" for name in names)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_agent_children(
    plan: Plan, agent: AgentPlan, secret_versions: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The children of one deployed agent, in apply order."""
    configmap = build_configmap(plan, agent)
    digest = config_hash(configmap["data"])
    secrets = None if secret_versions is None else secrets_hash(plan, agent, secret_versions)
    children = [configmap, build_service(plan, agent)]
    account = build_service_account(plan, agent)
    if account is not None:
        children.append(account)
    claim = build_task_store_claim(plan, agent)
    if claim is not None:
        children.append(claim)
    children.append(build_deployment(plan, agent, digest, secrets))
    budget = build_disruption_budget(plan, agent)
    if budget is not None:
        children.append(budget)
    if plan.app.spec.runtime.network_policy.enabled:
        children.append(build_network_policy(plan, agent))
    return children


def build_children(
    plan: Plan, secret_versions: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every child of the Application: its events Role and RoleBinding, then agent by agent
    in endpoint order."""
    out = [m for m in (build_event_role(plan), build_event_role_binding(plan)) if m is not None]
    for agent in plan.agents:
        out += build_agent_children(plan, agent, secret_versions)
    return out


def secret_names(plan: Plan) -> list[str]:
    """The Secrets any runtime of the plan reads."""
    return sorted({name for agent in plan.agents for name in referenced_secrets(plan, agent)})
