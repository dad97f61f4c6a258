"""``build_configmap``: the runtime configuration one agent pod reads.

The ConfigMap holds the Application document (spec only, in-cluster urls: the agent's own
as it advertises it, every other deployed agent's as its Service) exactly as
``mas-ctl serve -f`` reads it, the agent id, the agents hosted in-process and the routes.
Secret-backed values stay ``secret_key_ref`` references: they are never resolved here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import yaml

from mas.infra.incluster import pod_document
from mas_operator.names import CONFIG_FILE, child_labels
from mas_operator.plan import AgentPlan, Plan


def _dump(value: Any) -> str:
    # Keys sorted: the API server hands objects back with their keys sorted, and the text
    # (and so the config hash) must not depend on where the document came from.
    return yaml.safe_dump(value, sort_keys=True, default_flow_style=False)


def config_data(plan: Plan, agent: AgentPlan) -> dict[str, str]:
    """The ``data`` of the agent's ConfigMap."""
    routes = [
        {
            "source": r.source,
            "target": r.target,
            "kind": r.kind,
            "protocol": r.protocol,
            **({"url": r.url} if r.url else {}),
        }
        for r in agent.routes
    ]
    return {
        CONFIG_FILE: _dump(pod_document(plan.document, plan.services, agent.agent)),
        "agent": agent.agent,
        "hosted": "\n".join(agent.hosted) + "\n",
        "routes.yaml": _dump(routes),
    }


def config_hash(data: Mapping[str, str]) -> str:
    """A short, stable digest of a ConfigMap's data (pods roll when it changes)."""
    canonical = json.dumps(dict(data), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def build_configmap(plan: Plan, agent: AgentPlan) -> dict[str, Any]:
    """The ConfigMap manifest of one deployed agent."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": agent.name,
            "namespace": plan.namespace,
            "labels": child_labels(plan.name, agent.agent),
        },
        "data": config_data(plan, agent),
    }
