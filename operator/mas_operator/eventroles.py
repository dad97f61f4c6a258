"""``build_event_role`` and ``build_event_role_binding``: the one API right of the agents.

An agent posts the first refusal of each caller as a Warning Event on its Application
(:mod:`mas.runtime.identity.denial_events`). For that, and nothing else, the Application
gets one Role whose single rule is ``create`` on core ``events`` in its namespace, and one
RoleBinding of that Role to the ServiceAccount of each of its deployed agents. Rules:

- one of each per Application, not per agent: the rule is the same for every agent, and
  two children per agent cost the operator memory at scale (docs/performance.md);
- named :func:`event_role_name` (``<application>.events``): a child named after an agent
  is ``<application>-<agent>`` as a DNS label, which never holds a dot, so no agent (one
  called ``events`` included) can take the name;
- ``create`` only: an agent posts one Event per caller and never reads, patches or deletes
  one; the operator may grant no more than it holds (RBAC escalation prevention), and it
  holds ``events`` ``create`` for its own Events;
- an agent uses it with its API-audience token (``api-token``), which never leaves the pod;
  the token it sends to peers is for ``maslab.io/a2a``, which the API server refuses;
- none when ``spec.runtime.denial_events`` is off, when the install turned them off
  (``mas-operator run --no-denial-events``, chart value ``agents.denialEvents``), when
  ``spec.runtime.service_account`` names an account the operator did not create (it grants
  nothing to someone else's account; the agents then post no Events), or when no agent is
  deployed: a Role and RoleBinding no longer wanted are pruned. :func:`denial_events_on`
  is the one test of the three settings, used by the Deployment builder too (it sets
  ``MAS_A2A_DENIAL_EVENTS`` when on).
"""

from __future__ import annotations

from typing import Any

from mas_operator.names import application_labels, dns_label
from mas_operator.plan import Plan
from mas_operator.serviceaccounts import pod_service_account

RBAC_API = "rbac.authorization.k8s.io"
RULES = [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]


def denial_events_on(plan: Plan) -> bool:
    """Whether the agents of ``plan`` post denial Events (and are bound to the Role)."""
    runtime = plan.app.spec.runtime
    return plan.denial_events and runtime.denial_events and not runtime.service_account


def event_role_name(application: str) -> str:
    """The name of the Role and the RoleBinding of ``application``'s agents."""
    return f"{dns_label(application)}.events"


def _bound(plan: Plan) -> bool:
    return denial_events_on(plan) and bool(plan.agents)


def build_event_role(plan: Plan) -> dict[str, Any] | None:
    """The Role that lets the agents of ``plan`` create Events in its namespace, or None."""
    if not _bound(plan):
        return None
    return {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "Role",
        "metadata": {
            "name": event_role_name(plan.name),
            "namespace": plan.namespace,
            "labels": application_labels(plan.name),
        },
        "rules": RULES,
    }


def build_event_role_binding(plan: Plan) -> dict[str, Any] | None:
    """The RoleBinding of every deployed agent's ServiceAccount to the Role, or None."""
    if not _bound(plan):
        return None
    name = event_role_name(plan.name)
    return {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": name,
            "namespace": plan.namespace,
            "labels": application_labels(plan.name),
        },
        "roleRef": {"apiGroup": RBAC_API, "kind": "Role", "name": name},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": pod_service_account(plan, agent),
                "namespace": plan.namespace,
            }
            for agent in plan.agents
        ],
    }
