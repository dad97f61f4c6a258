"""SQLite task files in a pod: where the file is, and the rules a document must keep.

An endpoint with ``a2a.task_store: {type: sql, url: sqlite+aiosqlite:////<dir>/<file>}``
keeps its tasks in a file the operator mounts a volume for (:mod:`mas_operator.volumes`).
:func:`sqlite_problems` is part of the plan's validation (:mod:`mas_operator.plan`): an
absolute path in a directory of its own, and one replica (one SQLite writer).
"""

from __future__ import annotations

import posixpath

from mas.infra.errors import Problem
from mas.infra.models import Application, Endpoint

SQLITE_PREFIX = "sqlite+aiosqlite:///"


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
