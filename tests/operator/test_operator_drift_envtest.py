"""Children changed or deleted behind the operator's back come back, with no edit of the
Application: while its watches are connected, and after they were cut and re-listed.

The re-list is real: the operator reaches the API server through the fault proxy
(``fault_proxy.py``), which closes the watch streams of some child kinds, holds their
reconnections while the test changes the children straight on the API server, then
answers them ``410 Gone`` as the API server does when a resource version is too old, and
kopf lists those kinds again. A child deleted meanwhile was never seen deleted: kopf's
index still holds it, which the first test pins, and the cold pass repairs.
"""

from __future__ import annotations

from typing import Any

import pytest
from fault_proxy import FaultProxy
from kubernetes.client import ApiException
from operator_support import (
    OWNED_KINDS,
    Api,
    eventually,
    full_passes,
    owned_children,
    self_contained_app,
    total,
    wait_condition,
)

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

# the watches the re-list tests cut: every child kind the Application has
PLURALS = (
    "services",
    "configmaps",
    "serviceaccounts",
    "roles",
    "rolebindings",
    "deployments",
    "networkpolicies",
)
CUT = rf"/namespaces/[^/]+/({'|'.join(PLURALS)})$"


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def gone(read: Any) -> bool:
    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


def converged(api: Api) -> str:
    uid = str(api.create(self_contained_app())["metadata"]["uid"])
    wait_condition(api, "desk", "Wired", "True")
    want = {kind: ["desk-back", "desk-front"] for kind in OWNED_KINDS}
    want |= {"Role": ["desk.events"], "RoleBinding": ["desk.events"]}  # the Application's
    eventually(lambda: owned_children(api, uid) == want, what="every child")
    return uid


def config(api: Api) -> str:
    data = api.core.read_namespaced_config_map("desk-front", api.ns).data or {}
    return str(data.get("application.yaml"))


def policy_types(api: Api, name: str) -> list[str]:
    policy = api.net.read_namespaced_network_policy(name, api.ns)
    return list(policy.spec.policy_types or [])


def deleted_while_cut(api: Api) -> dict[str, Any]:
    """How to read each child the re-list tests delete (each raises 404 while it is gone)."""
    return {
        "Service desk-back": lambda: api.core.read_namespaced_service("desk-back", api.ns),
        "Deployment desk-front": lambda: api.apps.read_namespaced_deployment("desk-front", api.ns),
        "NetworkPolicy desk-back": lambda: api.net.read_namespaced_network_policy(
            "desk-back", api.ns
        ),
    }


def test_children_changed_or_deleted_while_watched_are_repaired(
    start_operator: Any, api: Api
) -> None:
    start_operator(resync=600.0)  # no full pass: the child watches repair it
    converged(api)
    document = config(api)
    api.core.delete_namespaced_service("desk-back", api.ns)
    api.core.delete_namespaced_config_map("desk-back", api.ns)
    api.core.patch_namespaced_config_map("desk-front", api.ns, {"data": {"agent": "mallory"}})
    api.core.patch_namespaced_service(
        "desk-front", api.ns, {"metadata": {"labels": {"app.kubernetes.io/name": "other"}}}
    )
    api.apps.patch_namespaced_deployment("desk-back", api.ns, {"spec": {"replicas": 4}})
    api.net.delete_namespaced_network_policy("desk-front", api.ns)
    api.net.patch_namespaced_network_policy(
        "desk-back", api.ns, {"spec": {"policyTypes": ["Ingress"]}}
    )

    eventually(lambda: api.core.read_namespaced_service("desk-back", api.ns), what="Service")
    eventually(lambda: api.net.read_namespaced_network_policy("desk-front", api.ns), what="policy")
    eventually(
        lambda: policy_types(api, "desk-back") == ["Ingress", "Egress"],
        what="desk-back's policy types back",
    )
    eventually(lambda: api.core.read_namespaced_config_map("desk-back", api.ns), what="map")
    eventually(lambda: config(api) == document, what="desk-front's document back")
    eventually(
        lambda: (
            (api.core.read_namespaced_service("desk-front", api.ns).metadata.labels or {}).get(
                "app.kubernetes.io/name"
            )
            == "mas-agent"
        ),
        what="desk-front's label back",
    )
    eventually(
        lambda: api.apps.read_namespaced_deployment("desk-back", api.ns).spec.replicas == 1,
        what="desk-back's replicas back",
    )


def at_rest(op: Any, api: Api) -> None:
    """Wait until the operator has nothing left to apply: the controller manager has
    annotated each Deployment with its revision (a change of its metadata, which the
    operator applies over once, test_operator_steady_state_envtest.py), then two full
    passes in a row apply no child. Cut before that, a reconcile still due would apply a
    Deployment the test deleted and create it again, whatever kopf's index holds."""
    eventually(
        lambda: all(
            "deployment.kubernetes.io/revision" in (d.metadata.annotations or {})
            for d in api.deployments()
        ),
        what="the Deployments' revision annotations",
    )
    applied = op.handle.metrics.children_applied

    def quiet() -> bool:
        before = total(applied)
        full_passes(op, 2)  # a whole pass that began after `before` is over
        return total(applied) == before

    eventually(quiet, what="two full passes that apply no child")


def cut_and_relist(op: Any, proxy: FaultProxy, api: Api) -> None:
    """Once the operator is at rest, cut the watches of every child kind; meanwhile delete
    a Service, a Deployment and a NetworkPolicy and change a ConfigMap and a NetworkPolicy
    on the API server; then make the watches list again."""
    at_rest(op, api)
    proxy.cut_watches(CUT)
    # every cut watch waits before anything is deleted: one still running would see the
    # deletion, and the operator would repair it at once
    eventually(
        lambda: proxy.held_watches() >= len(PLURALS),
        what=f"the {len(PLURALS)} watches to reconnect and wait",
    )
    api.core.delete_namespaced_service("desk-back", api.ns)
    api.apps.delete_namespaced_deployment("desk-front", api.ns)
    api.net.delete_namespaced_network_policy("desk-back", api.ns)
    for what, read in deleted_while_cut(api).items():
        eventually(lambda read=read: gone(read), what=f"{what} gone")
    api.core.patch_namespaced_config_map("desk-front", api.ns, {"data": {"agent": "mallory"}})
    api.net.patch_namespaced_network_policy(
        "desk-front", api.ns, {"spec": {"policyTypes": ["Ingress"]}}
    )
    lists = {kind: len(proxy.seen("GET", rf"/namespaces/[^/]+/{kind}$")) for kind in PLURALS}
    proxy.resume_watches()
    for kind, before in lists.items():
        relisted = rf"/namespaces/[^/]+/{kind}$"
        eventually(
            lambda relisted=relisted, before=before: any(
                not s.injected for s in proxy.seen("GET", relisted)[before:]
            ),
            what=f"the {kind} listed again",
        )


def test_a_child_deleted_while_a_watch_relists_stays_in_kopfs_index(
    start_proxied: Any, proxy: FaultProxy, api: Api
) -> None:
    """What the cold pass is for: with it off, full passes and the child events that
    reconcile the Application read the index, which still holds the deleted children;
    the changed ones, listed again, are repaired."""
    op = start_proxied(resync=0.5, cold_every=0)
    converged(api)
    document = config(api)
    cut_and_relist(op, proxy, api)
    eventually(lambda: config(api) == document, what="desk-front's document back")
    eventually(
        lambda: policy_types(api, "desk-front") == ["Ingress", "Egress"],
        what="desk-front's policy types back",
    )
    api.apps.patch_namespaced_deployment("desk-back", api.ns, {"spec": {"replicas": 2}})
    eventually(
        lambda: api.apps.read_namespaced_deployment("desk-back", api.ns).spec.replicas == 1,
        what="a reconcile that repairs desk-back's Deployment",
    )
    full_passes(op, 3)
    # Not the Deployment: the controller manager annotates it after our apply (its
    # revision), so a warm reconcile may apply it again anyway, whatever the index holds.
    pinned = {w: read for w, read in deleted_while_cut(api).items() if "Deployment" not in w}
    assert {what: gone(read) for what, read in pinned.items()} == dict.fromkeys(pinned, True)


def test_a_child_deleted_while_a_watch_relists_comes_back(
    start_proxied: Any, proxy: FaultProxy, api: Api
) -> None:
    op = start_proxied(resync=0.5, cold_every=2)
    converged(api)
    document = config(api)
    cut_and_relist(op, proxy, api)
    for what, read in deleted_while_cut(api).items():
        eventually(read, what=f"{what} back")
    eventually(lambda: config(api) == document, what="desk-front's document back")
    eventually(
        lambda: policy_types(api, "desk-front") == ["Ingress", "Egress"],
        what="desk-front's policy types back",
    )
    assert total(op.handle.metrics.cold_passes) >= 1
    assert api.get("desk")["metadata"]["generation"] == 1  # no edit brought it back
