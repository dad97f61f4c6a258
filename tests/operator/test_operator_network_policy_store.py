"""The egress to an agent's task store: a PostgreSQL database outside the pod is allowed.

Without it an agent on PostgreSQL, under a NetworkPolicy enforcer, answers every request
with "the task store is unavailable" (operator/mas_operator/networkpolicies.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from mas_operator.children import build_children
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)


def app(task_store: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "desk", "namespace": "team-a"},
        "spec": {
            "agency": {"entry": "echo", "agents": {"echo": {"spec": {}}}},
            "endpoints": {"echo": {"usage": "deploy", "a2a": {"task_store": task_store}}},
        },
    }


def egress(doc: dict[str, Any]) -> list[dict[str, Any]]:
    children = build_children(plan_application(doc))
    [policy] = [c for c in children if c["kind"] == "NetworkPolicy"]
    rules: list[dict[str, Any]] = policy["spec"]["egress"]
    return rules[1:-1]  # after DNS, before the API server


def test_a_postgresql_address_is_allowed_on_its_port() -> None:
    url = "postgresql+asyncpg://tasks@10.20.0.5:6543/desk"
    assert egress(app({"type": "sql", "url": url})) == [
        {
            "ports": [{"protocol": "TCP", "port": 6543}],
            "to": [{"ipBlock": {"cidr": "10.20.0.5/32"}}],
        }
    ]


def test_a_postgresql_host_name_is_allowed_by_port_5432_when_the_url_has_none() -> None:
    url = "postgresql+asyncpg://tasks@pg.db.svc.cluster.local/desk"
    assert egress(app({"type": "sql", "url": url})) == [
        {"ports": [{"protocol": "TCP", "port": 5432}]}
    ]


def test_a_url_from_a_secret_is_allowed_by_port_5432() -> None:
    ref = {"name": "desk-db", "key": "url"}
    assert egress(app({"type": "sql", "url_secret_key_ref": ref})) == [
        {"ports": [{"protocol": "TCP", "port": 5432}]}
    ]


@pytest.mark.parametrize(
    "store",
    [
        {"type": "memory"},
        {"type": "sql", "url": "sqlite+aiosqlite:////data/tasks.db"},
        {"type": "sql", "url": "postgresql+asyncpg://tasks@localhost:5432/desk"},
        {"type": "sql", "url": "postgresql+asyncpg://tasks@127.0.0.1/desk"},
    ],
    ids=["memory", "sqlite", "localhost", "loopback"],
)
def test_a_store_in_the_pod_gets_no_rule(store: dict[str, Any]) -> None:
    assert egress(app(store)) == []
