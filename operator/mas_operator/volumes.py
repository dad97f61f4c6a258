"""``build_task_store_claim``: the PersistentVolumeClaim of an agent whose tasks live in SQLite.

An endpoint with ``a2a.task_store: {type: sql, url: sqlite+aiosqlite:////<dir>/<file>}``
gets a ``ReadWriteOnce`` claim (``<agent child name>-tasks``, 1Gi) mounted at ``<dir>``, so
the file outlives the container and the pod. Such a Deployment is recreated, not rolled
(one SQLite writer), and runs one replica
(:func:`~mas_operator.sqlite_files.sqlite_problems` refuses more). The claim
is a child of the Application like the others: deleting the Application deletes the tasks.
A URL from a Secret (``url_secret_key_ref``) is not known to the operator: no claim.
"""

from __future__ import annotations

from typing import Any

from mas_operator.names import child_labels
from mas_operator.plan import AgentPlan, Plan
from mas_operator.sqlite_files import sqlite_directory

TASKS_VOLUME = "tasks"
TASKS_STORAGE = "1Gi"


def task_store_claim_name(agent: AgentPlan) -> str:
    return f"{agent.name}-tasks"


def build_task_store_claim(plan: Plan, agent: AgentPlan) -> dict[str, Any] | None:
    """The claim of ``agent``'s SQLite task file, or None when it keeps no SQLite file."""
    if sqlite_directory(plan.app.spec.endpoints[agent.agent]) is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": task_store_claim_name(agent),
            "namespace": plan.namespace,
            "labels": child_labels(plan.name, agent.agent),
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": TASKS_STORAGE}},
        },
    }


def task_store_volume(plan: Plan, agent: AgentPlan) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The pod volume and the container mount of the claim, or None."""
    directory = sqlite_directory(plan.app.spec.endpoints[agent.agent])
    if directory is None:
        return None
    volume = {
        "name": TASKS_VOLUME,
        "persistentVolumeClaim": {"claimName": task_store_claim_name(agent)},
    }
    return volume, {"name": TASKS_VOLUME, "mountPath": directory}
