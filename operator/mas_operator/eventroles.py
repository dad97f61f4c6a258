"""``build_event_role`` and ``build_event_role_binding``: the one API right of an agent.

An agent posts the first refusal of each caller as a Warning Event on its Application
(:mod:`mas.runtime.identity.denial_events`). For that, and nothing else, each deployed
agent's own ServiceAccount is bound to a Role of its own (same name as the account) whose
single rule is ``create`` on core ``events`` in the Application's namespace. Rules:

- ``create`` only: an agent posts one Event per caller and never reads, patches or deletes
  one; the operator may grant no more than it holds (RBAC escalation prevention), and it
  holds ``events`` ``create`` for its own Events;
- the agent uses it with its API-audience token (``api-token``), which never leaves the pod;
  the token it sends to peers is for ``maslab.io/a2a``, which the API server refuses;
- none when ``spec.runtime.denial_events`` is off, when the install turned them off
  (``mas-operator run --no-denial-events``, chart value ``agents.denialEvents``), or when
  ``spec.runtime.service_account`` names an account the operator did not create (it grants
  nothing to someone else's account; the agent then posts no Events). :func:`denial_events_on`
  is the one test of all three, used by the Deployment builder too (it sets
  ``MAS_A2A_DENIAL_EVENTS`` when on).
"""

from __future__ import annotations

from typing import Any

from mas_operator.names import child_labels
from mas_operator.plan import AgentPlan, Plan
from mas_operator.serviceaccounts import pod_service_account

RBAC_API = "rbac.authorization.k8s.io"
RULES = [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]


def denial_events_on(plan: Plan) -> bool:
    """Whether the agents of ``plan`` post denial Events (and get the Role that allows it)."""
    runtime = plan.app.spec.runtime
    return plan.denial_events and runtime.denial_events and not runtime.service_account


def build_event_role(plan: Plan, agent: AgentPlan) -> dict[str, Any] | None:
    """The Role that lets ``agent`` create Events in its namespace, or None."""
    if not denial_events_on(plan):
        return None
    return {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "Role",
        "metadata": {
            "name": pod_service_account(plan, agent),
            "namespace": plan.namespace,
            "labels": child_labels(plan.name, agent.agent),
        },
        "rules": RULES,
    }


def build_event_role_binding(plan: Plan, agent: AgentPlan) -> dict[str, Any] | None:
    """The RoleBinding of ``agent``'s ServiceAccount to its Role, or None."""
    if not denial_events_on(plan):
        return None
    name = pod_service_account(plan, agent)
    return {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": name,
            "namespace": plan.namespace,
            "labels": child_labels(plan.name, agent.agent),
        },
        "roleRef": {"apiGroup": RBAC_API, "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": plan.namespace}],
    }
