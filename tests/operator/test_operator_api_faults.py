"""The API server answering 409, 429 and 5xx: the operator retries with backoff and converges.

The operator under test reaches the real kube-apiserver through a fault-injecting reverse
proxy (``fault_proxy.py``): same TLS, same wire protocol, watches streamed through; the
rules below make it answer chosen writes itself with the API server's ``Status`` bodies.
The proxy records when each request arrived, so the tests compare the gaps between retries
with each other (never with a wall-clock budget).
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

import httpx
import pytest
from fault_proxy import FaultProxy, Seen
from operator_support import (
    OWNED_KINDS,
    Api,
    RunningOperator,
    cluster_app,
    eventually,
    owned_children,
)

from mas_operator.backoff import Backoff

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(90)]

# the Application's events Role and RoleBinding are applied first, then each agent's
CHILD_PATH = (
    r"/namespaces/[^/]+/(roles|rolebindings|configmaps|services|deployments|networkpolicies)/"
)
FRONT_DEPLOYMENT = r"/namespaces/[^/]+/deployments/desk-front$"
DESK_STATUS = r"/applications/desk/status$"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def expected(app: str = "desk") -> dict[str, list[str]]:
    agents = {kind: [f"{app}-back", f"{app}-front"] for kind in OWNED_KINDS}
    return agents | {"Role": [f"{app}.events"], "RoleBinding": [f"{app}.events"]}


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def retries(op: RunningOperator, reason: str) -> float:
    value = op.handle.metrics.registry.get_sample_value(
        "mas_operator_retries_total", {"reason": reason}
    )
    return value or 0.0


def gaps(attempts: list[Seen]) -> list[float]:
    return [b.at - a.at for a, b in pairwise(attempts)]


def conditions_when(api: Api, name: str, type_: str, reason: str) -> dict[str, Any]:
    """Every condition of ``name`` (one read) once ``type_`` has ``reason``."""

    def check() -> dict[str, Any] | None:
        status = api.get(name).get("status") or {}
        found = {c["type"]: c for c in status.get("conditions") or []}
        return found if found.get(type_, {}).get("reason") == reason else None

    return eventually(check, what=f"{type_} with reason {reason} on {name}")


def assert_alive(op: RunningOperator) -> None:
    """Still the same running operator: no crash, no restart, still leading."""
    assert op.alive and op.error is None and op.handle.leading


def test_server_errors_on_an_apply_are_retried_with_growing_gaps(
    start_proxied: Any, proxy: FaultProxy, api: Api
) -> None:
    op = start_proxied(backoff=Backoff(initial=0.5, cap=30.0))
    proxy.fail(["PATCH"], FRONT_DEPLOYMENT, 500, 503, 500, 503)
    uid = api.create(cluster_app())["metadata"]["uid"]

    failing = conditions_when(api, "desk", "Ready", "ApplyFailed")
    ready, reconciling = failing["Ready"], failing["Reconciling"]
    assert ready["status"] == "False"
    assert re.match(
        r"applying Deployment desk-front failed: (Internal error occurred: injected by the "
        r"test's fault proxy|the server is currently unable to handle the request)$",
        ready["message"],
    ), ready["message"]
    assert (reconciling["status"], reconciling["reason"]) == ("True", "ApplyFailed")
    assert re.match(
        r"retrying in \d+\.\d s: applying Deployment desk-front failed: ", reconciling["message"]
    )

    eventually(lambda: owned_children(api, uid) == expected(), what="every child, once")
    conditions_when(api, "desk", "Reconciling", "RolloutInProgress")
    attempts = proxy.seen("PATCH", FRONT_DEPLOYMENT)[:5]
    assert [a.status for a in attempts][:4] == [500, 503, 500, 503]
    assert 200 <= attempts[4].status < 300
    waits = gaps(attempts)
    assert all(later > earlier for earlier, later in pairwise(waits)), waits
    assert waits[-1] > 2 * waits[0], waits
    assert retries(op, "server_error") == 4
    assert_alive(op)


def test_conflicts_on_the_status_and_on_an_apply_are_retried(
    start_proxied: Any, proxy: FaultProxy, api: Api
) -> None:
    op = start_proxied(backoff=Backoff(initial=0.2, cap=5.0))
    proxy.fail(["PATCH"], DESK_STATUS, 409, 409)
    doc = cluster_app()
    uid = api.create(doc)["metadata"]["uid"]
    conditions_when(api, "desk", "Reconciling", "RolloutInProgress")
    # the proxy records a forwarded request once the API server has answered it
    writes = eventually(
        lambda: len(found := proxy.seen("PATCH", DESK_STATUS)) >= 3 and found,
        what="the third status write",
    )
    assert [s.status for s in writes][:3] == [409, 409, 200]
    assert retries(op, "conflict") == 2

    before = len(proxy.seen("PATCH", FRONT_DEPLOYMENT))
    proxy.fail(["PATCH"], FRONT_DEPLOYMENT, 409, 409)
    doc["spec"]["agency"]["agents"]["front"]["spec"]["instructions"] = "Be brief."
    api.patch_spec("desk", doc["spec"])
    eventually(
        lambda: (
            (c := api.condition("desk", "Reconciling"))
            and (c["observedGeneration"], c["reason"]) == (2, "RolloutInProgress")
        ),
        what="generation 2 applied",
    )
    assert [s.status for s in proxy.seen("PATCH", FRONT_DEPLOYMENT)[before:]][:3] == [
        409,
        409,
        200,
    ]
    config = api.core.read_namespaced_config_map("desk-front", api.ns).data
    assert "Be brief." in config["application.yaml"]
    assert owned_children(api, uid) == expected()
    assert retries(op, "conflict") == 4
    assert_alive(op)


def test_a_throttled_apply_waits_for_retry_after(
    start_proxied: Any, proxy: FaultProxy, api: Api
) -> None:
    op = start_proxied(backoff=Backoff(initial=0.2, cap=5.0))
    proxy.fail(["PATCH"], FRONT_DEPLOYMENT, 429, retry_after=3)
    uid = api.create(cluster_app())["metadata"]["uid"]
    reconciling = conditions_when(api, "desk", "Reconciling", "ApplyFailed")["Reconciling"]
    assert reconciling["message"] == (
        "retrying in 3.0 s: applying Deployment desk-front failed: "
        "Too many requests, please try again later."
    )
    eventually(lambda: owned_children(api, uid) == expected(), what="every child, once")
    attempts = proxy.seen("PATCH", FRONT_DEPLOYMENT)[:2]
    assert attempts[0].status == 429 and 200 <= attempts[1].status < 300
    # the backoff alone would have retried after 0.2 s; the server asked for 3
    assert attempts[1].at - attempts[0].at >= 3.0
    assert retries(op, "throttled") == 1
    assert_alive(op)


def test_a_long_outage_of_every_write_then_recovery_converges(
    start_proxied: Any, proxy: FaultProxy, api: Api
) -> None:
    op = start_proxied(
        backoff=Backoff(initial=0.25, cap=2.0),
        lease_duration=30.0,  # the Lease outlives the outage (its renewals fail too)
        metrics_port=0,
        metrics_address="127.0.0.1",
    )
    proxy.fail(WRITES, r".", 503, forever=True)
    apps = ["desk-0", "desk-1"]
    uids = {app: api.create(cluster_app(app))["metadata"]["uid"] for app in apps}

    def failed_applies(app: str) -> list[Seen]:
        return [s for s in proxy.seen("PATCH", CHILD_PATH + app + r"[-.]") if s.injected]

    eventually(
        lambda: all(len(failed_applies(app)) >= 6 for app in apps),
        60,
        what="six failed attempts per Application",
    )
    assert_alive(op)
    assert api.deployments() == []
    proxy.clear()

    for app in apps:
        eventually(
            lambda a=app: owned_children(api, uids[a]) == expected(a), what=f"{app}'s children"
        )
    eventually(lambda: api.mark_pods_ready() == 4, what="four pods to stand in for")
    for app in apps:
        conditions_when(api, app, "Ready", "AllAgentsReady")
    names = sorted(d.metadata.name for d in api.deployments())
    assert names == sorted(f"{app}-{agent}" for app in apps for agent in ("back", "front"))
    managed = api.core.list_namespaced_config_map(
        api.ns, label_selector="app.kubernetes.io/managed-by=mas-operator"
    ).items
    assert len(managed) == 4

    # every failed attempt stopped at its first apply and was counted once
    injected = sum(len(failed_applies(app)) for app in apps)
    text = httpx.get(f"http://127.0.0.1:{op.handle.metrics_port}/metrics", timeout=5).text
    assert f'mas_operator_retries_total{{reason="server_error"}} {float(injected)}' in text

    # the work queue's loop survived the outage: drift is still repaired
    api.core.delete_namespaced_service("desk-0-back", api.ns)
    eventually(
        lambda: api.core.read_namespaced_service("desk-0-back", api.ns),
        what="the deleted Service to come back",
    )
    assert_alive(op)
