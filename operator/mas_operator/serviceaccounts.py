"""``build_service_account`` and the projected A2A token volume of one deployed agent.

Each deployed agent gets a ServiceAccount of its own
(:func:`mas.infra.identity.service_account_name`) with
``automountServiceAccountToken: false``, bound to one Role only: the Application's, which
may create Events and nothing else (:mod:`mas_operator.eventroles`; none when denial Events
are off). Its pods mount one volume of projected credentials: a token for the audience
:data:`mas.infra.identity.AUDIENCE` at :data:`mas.infra.identity.TOKEN_PATH`, which the
kubelet rotates before it expires and agents send to their in-cluster peers; and, to check
their callers' tokens, an API-audience token (which lets the account read the issuer's
discovery document and JWKS, as every ServiceAccount may, and post those Events)
and the cluster's CA (docs/security.md). When ``spec.runtime.service_account`` names an
account, every pod runs as that one instead and no ServiceAccount is created.
"""

from __future__ import annotations

from typing import Any

from mas.infra import identity
from mas_operator.names import child_labels
from mas_operator.plan import AgentPlan, Plan

TOKEN_VOLUME = "a2a-token"


def pod_service_account(plan: Plan, agent: AgentPlan) -> str:
    """The ServiceAccount the pods of ``agent`` run as."""
    return identity.service_account_name(
        plan.name, agent.agent, plan.app.spec.runtime.service_account
    )


def build_service_account(plan: Plan, agent: AgentPlan) -> dict[str, Any] | None:
    """The ServiceAccount of ``agent``, or None when the Application names its own."""
    if plan.app.spec.runtime.service_account:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": pod_service_account(plan, agent),
            "namespace": plan.namespace,
            "labels": child_labels(plan.name, agent.agent),
        },
        "automountServiceAccountToken": False,
    }


def token_volume() -> tuple[dict[str, Any], dict[str, Any]]:
    """The projected token volume and its read-only mount."""
    volume = {
        "name": TOKEN_VOLUME,
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": identity.AUDIENCE,
                        "expirationSeconds": identity.TOKEN_EXPIRY_SECONDS,
                        "path": identity.TOKEN_FILE,
                    }
                },
                # for reading the issuer's keys through the API server (its own audience)
                {
                    "serviceAccountToken": {
                        "expirationSeconds": identity.TOKEN_EXPIRY_SECONDS,
                        "path": identity.API_TOKEN_FILE,
                    }
                },
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": identity.CA_FILE}],
                    }
                },
            ]
        },
    }
    mount = {"name": TOKEN_VOLUME, "mountPath": identity.TOKEN_DIR, "readOnly": True}
    return volume, mount
