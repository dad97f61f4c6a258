"""``build_task_store_claim``: the PersistentVolumeClaim of an agent whose tasks live in SQLite.

An endpoint with ``a2a.task_store: {type: sql, url: sqlite+aiosqlite:////<dir>/<file>}``
gets a ``ReadWriteOnce`` claim (``<agent child name>-tasks``, 1Gi) mounted at ``<dir>``, so
the file outlives the container and the pod. Such a Deployment is recreated, not rolled
(one SQLite writer), and runs one replica (:func:`sqlite_problems` refuses more). The claim
is a child of the Application like the others: deleting the Application deletes the tasks.
A URL from a Secret (``url_secret_key_ref``) is not known to the operator: no claim.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from mas.infra.errors import Problem
from mas.infra.models import Application, Endpoint
from mas_operator.names import child_labels

if TYPE_CHECKING:  # plan.py imports this module's sqlite_problems
    from mas_operator.plan import AgentPlan, Plan

SQLITE_PREFIX = "sqlite+aiosqlite:///"
TASKS_VOLUME = "tasks"
TASKS_STORAGE = "1Gi"


def sqlite_directory(endpoint: Endpoint) -> str | None:
    """The directory of the endpoint's SQLite task file, when it has one in its ``url``."""
    store = endpoint.a2a.task_store
    if store.type != "sql" or store.url is None or not store.url.startswith(SQLITE_PREFIX):
        return None
    path = store.url[len(SQLITE_PREFIX) :].split("?", 1)[0]
    return posixpath.dirname(path) or None


def sqlite_problems(app: Application) -> list[Problem]:
    """In a pod the SQLite file needs an absolute path and its agent a single replica."""
    problems = []
    runtime = app.spec.runtime
    for agent, endpoint in app.spec.endpoints.items():
        if not endpoint.deployed:
            continue
        store = endpoint.a2a.task_store
        if store.type != "sql" or store.url is None or not store.url.startswith(SQLITE_PREFIX):
            continue
        where = f"spec.endpoints.{agent}.a2a.task_store.url"
        directory = sqlite_directory(endpoint)
        if directory is None or not directory.startswith("/") or directory == "/":
            problems.append(
                Problem(
                    where,
                    f"{store.url!r} needs an absolute path in a directory of its own; "
                    "accepted: sqlite+aiosqlite:////var/lib/maslab/tasks.db (the operator "
                    "mounts a volume at that directory)",
                )
            )
        if runtime.autoscaling or runtime.replicas > 1:
            problems.append(
                Problem(
                    where,
                    "a SQLite task store has one writer; accepted: spec.runtime.replicas 1 "
                    "without autoscaling, or a postgresql+asyncpg:// task store for replicas",
                )
            )
    return problems


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
