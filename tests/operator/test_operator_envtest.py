"""The operator against a real kube-apiserver, etcd and kube-controller-manager.

No kubelet runs here, so pods never start: where a test needs ready replicas it marks the
pods Ready through the pods/status subresource, standing in for the kubelet (the
ReplicaSet and Deployment controllers then compute readiness as in a real cluster).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client as k8s
from operator_support import (
    GROUP,
    OWNED_KINDS,
    PLURAL,
    VERSION,
    Api,
    cluster_app,
    eventually,
    full_passes,
    owned_children,
    printer_columns,
    reconciles,
    wait_condition,
)

from mas.infra import identity
from mas_operator.leases import LeaderElector

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLE = REPO / "examples" / "agency.yaml"


def example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


APP = "research-desk"
DEPLOYED = ("concierge", "researcher")


def test_example_converges_with_owned_children_and_status(start_operator: Any, api: Api) -> None:
    start_operator()
    uid = api.create(example())["metadata"]["uid"]
    names = [f"{APP}-{agent}" for agent in DEPLOYED]
    kinds = ("ConfigMap", "Service", "ServiceAccount", "Deployment", "NetworkPolicy")
    want = {kind: names for kind in kinds}
    want |= {"Role": [f"{APP}.events"], "RoleBinding": [f"{APP}.events"]}  # the Application's
    eventually(
        lambda: owned_children(api, uid) == want,
        what="every child, owned by the Application",
    )
    for dep in api.deployments():
        ref = dep.metadata.owner_references[0]
        assert (ref.kind, ref.name, ref.controller, ref.block_owner_deletion) == (
            "Application",
            APP,
            True,
            True,
        )
        assert dep.metadata.labels["app.kubernetes.io/managed-by"] == "mas-operator"
        assert "mas-operator" in {f.manager for f in dep.metadata.managed_fields}
    service = api.core.read_namespaced_service(f"{APP}-concierge", api.ns)
    assert [(p.name, p.port) for p in service.spec.ports] == [
        ("a2a-http", 8401),
        ("a2a-grpc", 8411),
        ("mcp-http", 8404),  # the concierge's MCP door
        ("metrics", 9464),  # the runtime's /metrics, which the console reads
    ]
    reconciling = wait_condition(api, APP, "Reconciling", "True")
    assert reconciling["reason"] == "RolloutInProgress"
    assert api.condition(APP, "Wired")["status"] == "True"
    assert printer_columns(api, APP)["Ready"] == "False"

    eventually(lambda: api.mark_pods_ready() == 2, what="two pods to stand in for")
    ready = wait_condition(api, APP, "Ready", "True")
    assert ready["reason"] == "AllAgentsReady"
    assert ready["observedGeneration"] == 1
    status = api.get(APP)["status"]
    assert status["observedGeneration"] == 1
    assert status["agents"]["concierge"] == {
        "ready": True,
        "replicas": 1,
        "ready_replicas": 1,
        "url": f"http://{APP}-concierge.{api.ns}.svc:8401",  # the loopback url, mapped
        "card_url": f"http://{APP}-concierge.{api.ns}.svc:8401/.well-known/agent-card.json",
        "metrics_url": f"http://{APP}-concierge.{api.ns}.svc:9464/metrics",
    }
    assert set(status) == {
        "observedGeneration",
        "phase",
        "agents_ready",
        "edges_ready",
        "conditions",
        "agents",
        "routes",
    }
    columns = printer_columns(api, APP)
    assert (columns["Ready"], columns["Phase"], columns["Agents"]) == ("True", "Ready", "2/2")
    annotations = api.get(APP)["metadata"].get("annotations") or {}
    assert not [k for k in annotations if "kopf.zalando.org" in k]
    assert api.get(APP)["metadata"].get("finalizers") is None


def test_default_urls_and_secret_env_reach_the_pods(start_operator: Any, api: Api) -> None:
    start_operator()
    api.create(cluster_app())
    eventually(lambda: len(api.deployments()) == 2, what="two Deployments")
    status = eventually(lambda: api.get("desk").get("status"), what="a status")
    url = f"http://desk-back.{api.ns}.svc:8080"
    assert status["agents"]["back"]["url"] == url
    service = api.core.read_namespaced_service("desk-back", api.ns)
    assert (
        service.metadata.annotations["maslab.io/card-url"] == url + "/.well-known/agent-card.json"
    )
    config = api.core.read_namespaced_config_map("desk-front", api.ns).data
    document = yaml.safe_load(config["application.yaml"])
    assert document["spec"]["endpoints"]["back"]["url"] == url
    assert document["spec"]["endpoints"]["back"]["headers"]["Authorization"] == {
        "secret_key_ref": {"name": "back-token", "key": "token"}
    }
    front = api.apps.read_namespaced_deployment("desk-front", api.ns)
    env = {e.name: e for e in front.spec.template.spec.containers[0].env}
    refs = [e.value_from.secret_key_ref for e in env.values() if e.value_from]
    assert [(r.name, r.key) for r in refs] == [("back-token", "token")]


def test_missing_delegation_target_stalls_and_creates_nothing(
    start_operator: Any, api: Api
) -> None:
    op = start_operator(resync=1.0)
    doc = cluster_app()
    doc["spec"]["agency"]["agents"]["front"]["spec"]["delegates_to"] = ["back", "ghost"]
    doc["spec"]["agency"]["agents"]["back"]["spec"] = {"delegates_to": ["phantom"]}
    uid = api.create(doc)["metadata"]["uid"]
    stalled = wait_condition(api, "desk", "Stalled", "True")
    assert stalled["reason"] == "MissingDelegationTarget"
    for target, delegator in (("ghost", "front"), ("phantom", "back")):
        assert f"delegation target {target!r} of agent {delegator!r}" in stalled["message"]
    assert "no children were created" in stalled["message"]
    ready = api.condition("desk", "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "MissingDelegationTarget")
    assert api.condition("desk", "Wired")["status"] == "False"
    assert api.condition("desk", "Reconciling")["status"] == "False"
    assert printer_columns(api, "desk")["Phase"] == "Stalled"
    events = eventually(
        lambda: [
            e
            for e in api.core.list_namespaced_event(api.ns).items
            if e.involved_object.uid == uid and e.reason == "MissingDelegationTarget"
        ],
        what="the Warning Event",
    )
    assert events[0].type == "Warning"
    assert "'ghost' of agent 'front'" in events[0].message
    full_passes(op)  # a resync that applied anything would have done so by now
    assert owned_children(api, uid) == {
        "ConfigMap": [],
        "Service": [],
        "ServiceAccount": [],
        "Role": [],
        "RoleBinding": [],
        "Deployment": [],
        "NetworkPolicy": [],
    }


def test_bad_update_keeps_running_children_then_a_valid_one_converges(
    start_operator: Any, api: Api
) -> None:
    op = start_operator(resync=1.0)
    api.create(cluster_app())
    eventually(lambda: api.mark_pods_ready() == 2, what="two pods to stand in for")
    wait_condition(api, "desk", "Ready", "True")
    before = {d.metadata.name: (d.metadata.generation, d.spec.to_dict()) for d in api.deployments()}
    configs = {
        c.metadata.name: c.data
        for c in api.core.list_namespaced_config_map(
            api.ns, label_selector="app.kubernetes.io/managed-by=mas-operator"
        ).items
    }

    bad = cluster_app()
    bad["spec"]["agency"]["agents"]["front"]["spec"]["delegates_to"] = ["back", "ghost"]
    api.patch_spec("desk", bad["spec"])
    stalled = wait_condition(api, "desk", "Stalled", "True", generation=2)
    assert "the running children (generation 1) are kept unchanged" in stalled["message"]
    ready = api.condition("desk", "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "MissingDelegationTarget")
    full_passes(op)
    assert {
        d.metadata.name: (d.metadata.generation, d.spec.to_dict()) for d in api.deployments()
    } == before
    assert {
        c.metadata.name: c.data
        for c in api.core.list_namespaced_config_map(
            api.ns, label_selector="app.kubernetes.io/managed-by=mas-operator"
        ).items
    } == configs
    assert api.get("desk")["status"]["agents"]["front"]["ready"] is True

    good = cluster_app()
    good["spec"]["agency"]["agents"]["front"]["spec"]["instructions"] = "Be brief."
    api.patch_spec("desk", good["spec"])
    wait_condition(api, "desk", "Stalled", "False", generation=3)
    front = api.apps.read_namespaced_deployment("desk-front", api.ns)
    hash_key = "maslab.io/config-hash"
    old_hash = before["desk-front"][1]["template"]["metadata"]["annotations"][hash_key]
    assert front.spec.template.metadata.annotations[hash_key] != old_hash
    assert (
        "Be brief."
        in api.core.read_namespaced_config_map("desk-front", api.ns).data["application.yaml"]
    )


def test_drift_is_repaired(start_operator: Any, api: Api) -> None:
    start_operator(resync=60.0)  # the child watches repair it, not the resync
    api.create(cluster_app())
    eventually(lambda: len(api.deployments()) == 2, what="two Deployments")
    api.core.delete_namespaced_service("desk-back", api.ns)
    api.core.patch_namespaced_config_map("desk-front", api.ns, {"data": {"agent": "mallory"}})
    api.apps.patch_namespaced_deployment(
        "desk-front",
        api.ns,
        {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "runtime", "image": "evil.example/other:1"}]}
                }
            }
        },
    )
    eventually(
        lambda: api.core.read_namespaced_service("desk-back", api.ns),
        what="the deleted Service to come back",
    )
    eventually(
        lambda: api.core.read_namespaced_config_map("desk-front", api.ns).data["agent"] == "front",
        what="the edited ConfigMap to be restored",
    )
    eventually(
        lambda: (
            api.apps.read_namespaced_deployment("desk-front", api.ns)
            .spec.template.spec.containers[0]
            .image
            == "ghcr.io/maslab/maslab:0.1.0"
        ),
        what="the edited Deployment to be restored",
    )


def test_secret_change_rolls_the_pods_that_read_it(start_operator: Any, api: Api) -> None:
    start_operator()
    secret = k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(name="back-token"), string_data={"token": "one"}
    )
    api.core.create_namespaced_secret(api.ns, secret)
    api.create(cluster_app())
    key = "maslab.io/secrets-hash"

    def hashes() -> dict[str, str]:
        return {
            d.metadata.name: d.spec.template.metadata.annotations[key] for d in api.deployments()
        }

    first = eventually(lambda: len(hashes()) == 2 and hashes(), what="two Deployments")
    api.core.patch_namespaced_secret("back-token", api.ns, {"stringData": {"token": "two"}})
    eventually(lambda: hashes()["desk-front"] != first["desk-front"], what="the front pods to roll")
    assert hashes()["desk-back"] == first["desk-back"]
    config = api.core.read_namespaced_config_map("desk-front", api.ns).data
    assert "one" not in str(config) and "two" not in str(config)


def test_autoscaling_leaves_replicas_to_the_autoscaler(start_operator: Any, api: Api) -> None:
    op = start_operator(resync=1.0)
    doc = cluster_app()
    doc["spec"]["runtime"] = {"autoscaling": True}
    api.create(doc)
    eventually(lambda: len(api.deployments()) == 2, what="two Deployments")
    done = reconciles(op.handle.metrics)
    api.apps.patch_namespaced_deployment_scale("desk-front", api.ns, {"spec": {"replicas": 3}})
    # The scale is a change of a child by someone else: it marks the Application dirty.
    eventually(lambda: reconciles(op.handle.metrics) > done, what="a reconcile after the scale")
    full_passes(op)
    assert api.apps.read_namespaced_deployment("desk-front", api.ns).spec.replicas == 3


def test_network_policies_switch_off(start_operator: Any, api: Api) -> None:
    start_operator()
    api.create(cluster_app())
    eventually(
        lambda: len(api.net.list_namespaced_network_policy(api.ns).items) == 2,
        what="two NetworkPolicies",
    )
    doc = cluster_app()
    doc["spec"]["runtime"] = {"network_policy": {"enabled": False}}
    api.patch_spec("desk", doc["spec"])
    eventually(
        lambda: api.net.list_namespaced_network_policy(api.ns).items == [],
        what="the NetworkPolicies to be deleted",
    )
    assert len(api.deployments()) == 2


def test_deleting_the_application_garbage_collects_children(start_operator: Any, api: Api) -> None:
    start_operator()
    uid = api.create(cluster_app())["metadata"]["uid"]
    eventually(lambda: len(api.deployments()) == 2, what="two Deployments")
    api.custom.delete_namespaced_custom_object(GROUP, VERSION, api.ns, PLURAL, "desk")
    empty: dict[str, list[str]] = {kind: [] for kind in OWNED_KINDS}
    # the garbage collector learns a new CRD at its 30 s discovery resync
    eventually(
        lambda: owned_children(api, uid) == empty,
        60,
        interval=0.5,
        what="every child to be garbage-collected",
    )


def test_restart_mid_way_converges_without_duplicates(start_operator: Any, api: Api) -> None:
    first = start_operator()
    apps = [cluster_app(f"desk-{i}") for i in range(3)]
    for doc in apps:
        api.create(doc)
    eventually(lambda: len(api.deployments()) >= 1, what="the first Deployment")
    first.stop()  # mid-way: some Applications done, some not
    second = start_operator()
    eventually(lambda: len(api.deployments()) == 6, what="six Deployments")
    eventually(lambda: api.mark_pods_ready() == 6, what="six pods to stand in for")
    for doc in apps:
        wait_condition(api, doc["metadata"]["name"], "Ready", "True")
    names = sorted(d.metadata.name for d in api.deployments())
    assert names == sorted(f"desk-{i}-{a}" for i in range(3) for a in ("back", "front"))
    assert (
        len(
            api.core.list_namespaced_config_map(
                api.ns, label_selector="app.kubernetes.io/managed-by=mas-operator"
            ).items
        )
        == 6
    )
    assert second.handle.leading


def test_standby_waits_for_the_lease_then_takes_over(
    start_operator: Any, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[tuple[str, bool]] = []  # (identity, won) of each answered try for the Lease
    try_acquire = LeaderElector.try_acquire

    def counted(self: LeaderElector) -> bool:
        won = try_acquire(self)
        tries.append((self.settings.identity, won))
        return won

    monkeypatch.setattr(LeaderElector, "try_acquire", counted)
    leader = start_operator()
    standby = start_operator(wait_leading=False)
    coordination = k8s.CoordinationV1Api(api.client)
    lease = eventually(
        lambda: coordination.read_namespaced_lease("mas-operator", api.ns), what="the Lease"
    )
    assert lease.spec.holder_identity == leader.options.identity

    def standby_tries() -> list[bool]:
        return [won for who, won in list(tries) if who == standby.options.identity]

    # Its first try and two retries: a whole lease term (4 s) of the leader renewing.
    eventually(lambda: len(standby_tries()) >= 3, what="three tries of the standby")
    assert not any(standby_tries())
    assert not standby.handle.leading
    leader.stop()
    eventually(lambda: standby.handle.leading, what="the standby to take over")
    lease = coordination.read_namespaced_lease("mas-operator", api.ns)
    assert lease.spec.holder_identity == standby.options.identity
    api.create(cluster_app())
    eventually(lambda: len(api.deployments()) == 2, what="the new leader to reconcile")


def test_a_stale_lease_is_taken_over_after_it_expires(start_operator: Any, api: Api) -> None:
    coordination = k8s.CoordinationV1Api(api.client)
    stale = k8s.V1Lease(
        metadata=k8s.V1ObjectMeta(name="mas-operator"),
        spec=k8s.V1LeaseSpec(
            holder_identity="crashed-replica",
            lease_duration_seconds=2,
            renew_time=datetime.now(UTC),
            acquire_time=datetime.now(UTC),
        ),
    )
    coordination.create_namespaced_lease(api.ns, stale)
    op = start_operator(wait_leading=False)
    assert not op.handle.leading
    eventually(lambda: op.handle.leading, 20, what="the takeover after expiry")
    lease = coordination.read_namespaced_lease("mas-operator", api.ns)
    assert (lease.spec.holder_identity, lease.spec.lease_transitions) == (op.options.identity, 1)


def test_metrics_and_liveness_are_served(start_operator: Any, api: Api) -> None:
    op = start_operator(
        metrics_port=0, metrics_address="127.0.0.1", liveness="http://127.0.0.1:0/healthz"
    )
    api.create(cluster_app())
    bad = cluster_app("bad")
    bad["spec"]["agency"]["agents"]["front"]["spec"]["delegates_to"] = ["ghost"]
    api.create(bad)
    wait_condition(api, "bad", "Stalled", "True")
    eventually(lambda: len(api.deployments()) == 2, what="two Deployments")

    def scrape() -> str:
        url = f"http://127.0.0.1:{op.handle.metrics_port}/metrics"
        return httpx.get(url, timeout=5).text

    text = eventually(
        lambda: 'mas_operator_applications{phase="Stalled"} 1.0' in scrape() and scrape(),
        what="the phase gauge",
    )
    assert 'mas_operator_reconciles_total{outcome="stalled"}' in text
    assert 'mas_operator_children_applied_total{kind="Deployment"}' in text
    assert "mas_operator_reconcile_duration_seconds_count" in text
    assert "mas_operator_leader 1.0" in text
    live = httpx.get(f"http://127.0.0.1:{op.handle.liveness_port}/healthz", timeout=5)
    assert live.status_code == 200
    assert live.json() == {"status": "ok", "leader": True}


def _subset(want: Any, have: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            k in have and _subset(v, have[k]) for k, v in want.items()
        )
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(want) == len(have)
            and all(_subset(w, h) for w, h in zip(want, have, strict=True))
        )
    return bool(want == have)


def test_render_output_is_what_the_operator_applied(start_operator: Any, api: Api) -> None:
    start_operator()
    api.create(example())
    eventually(
        lambda: len(api.net.list_namespaced_network_policy(api.ns).items) == 2, what="every child"
    )
    rendered = subprocess.run(
        [sys.executable, "-m", "mas_operator.cli", "render", "-f", str(EXAMPLE), "-n", api.ns],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    dyn = api.client
    for doc in yaml.safe_load_all(rendered):
        meta = doc["metadata"]
        path = {
            "ConfigMap": f"/api/v1/namespaces/{api.ns}/configmaps",
            "Service": f"/api/v1/namespaces/{api.ns}/services",
            "ServiceAccount": f"/api/v1/namespaces/{api.ns}/serviceaccounts",
            "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{api.ns}/roles",
            "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{api.ns}/rolebindings",
            "Deployment": f"/apis/apps/v1/namespaces/{api.ns}/deployments",
            "NetworkPolicy": f"/apis/networking.k8s.io/v1/namespaces/{api.ns}/networkpolicies",
        }[doc["kind"]] + f"/{meta['name']}"
        response = dyn.call_api(
            *dyn.param_serialize(method="GET", resource_path=path, auth_settings=["BearerToken"])
        )
        response.read()
        live = json.loads(response.data)
        # the operator adds only the owner reference, the Secrets' hash annotation and the
        # Application's uid (which a file has not) to its pods' environment
        for container in (((live.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "containers", []
        ):
            container["env"] = [
                e for e in container.get("env", []) if e["name"] != identity.APPLICATION_UID_ENV
            ]
        assert _subset(doc.get("spec", doc.get("data")), live.get("spec", live.get("data"))), (
            doc["kind"],
            meta["name"],
        )
        assert _subset(meta["labels"], live["metadata"]["labels"])


def test_a_leader_that_loses_its_lease_stops(start_operator: Any, api: Api) -> None:
    op = start_operator()
    coordination = k8s.CoordinationV1Api(api.client)
    lease = coordination.read_namespaced_lease("mas-operator", api.ns)
    lease.spec.holder_identity = "usurper"
    lease.spec.renew_time = datetime.now(UTC)
    coordination.replace_namespaced_lease("mas-operator", api.ns, lease)
    eventually(lambda: not op.alive, 20, what="the operator to stop")
    assert op.result is False  # run_operator says the Lease was lost
    assert coordination.read_namespaced_lease("mas-operator", api.ns).spec.holder_identity == (
        "usurper"
    )


def test_schema_and_cel_refuse_bad_documents_at_admission(start_operator: Any, api: Api) -> None:
    start_operator()
    bad_usage = cluster_app("bad-usage")
    bad_usage["spec"]["endpoints"]["back"]["usage"] = "sometimes"
    bad_entry = cluster_app("bad-entry")
    bad_entry["spec"]["agency"]["entry"] = "nobody"
    for doc, fragment in (
        (bad_usage, 'Unsupported value: \\"sometimes\\"'),
        (bad_entry, "spec.agency.entry must be an agent of the agency"),
    ):
        with pytest.raises(k8s.ApiException) as caught:
            api.create(doc)
        assert caught.value.status == 422
        assert fragment in str(caught.value.body)
    assert api.deployments() == []


def test_an_api_refusal_is_reported_in_status_and_retried(start_operator: Any, api: Api) -> None:
    quota = k8s.V1ResourceQuota(
        metadata=k8s.V1ObjectMeta(name="no-services"),
        spec=k8s.V1ResourceQuotaSpec(hard={"services": "0"}),
    )
    api.core.create_namespaced_resource_quota(api.ns, quota)
    eventually(
        lambda: api.core.read_namespaced_resource_quota("no-services", api.ns).status.hard,
        what="the quota to be enforced",
    )
    start_operator()
    api.create(cluster_app())
    ready = eventually(
        lambda: (c := api.condition("desk", "Ready")) and c["reason"] == "ApplyFailed" and c,
        what="reason ApplyFailed",
    )
    assert re.match(r"applying Service desk-(front|back) failed: ", ready["message"])
    assert "exceeded quota: no-services" in ready["message"]
    assert api.condition("desk", "Reconciling")["status"] == "True"
    api.core.delete_namespaced_resource_quota("no-services", api.ns)
    eventually(
        lambda: len(api.core.list_namespaced_service(api.ns).items) == 2,
        30,
        what="the Services after the retry",
    )


def test_pods_are_admitted_under_the_restricted_pod_security_standard(
    start_operator: Any, api: Api
) -> None:
    labels = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    api.core.patch_namespace(api.ns, {"metadata": {"labels": labels}})
    start_operator()
    api.create(cluster_app())
    # the ReplicaSet controller's pod creations pass PodSecurity admission, or none exist
    pods = eventually(
        lambda: len(items := api.core.list_namespaced_pod(api.ns).items) == 2 and items,
        what="two pods admitted",
    )
    for pod in pods:
        assert pod.spec.automount_service_account_token is False
        assert pod.spec.security_context.run_as_non_root is True


def test_a_leader_that_cannot_renew_for_a_lease_term_stops(start_operator: Any, api: Api) -> None:
    op = start_operator()  # lease_duration 4 s, renewed every 1 s
    k8s.CoordinationV1Api(api.client).delete_namespaced_lease("mas-operator", api.ns)
    eventually(lambda: not op.alive, 20, what="the operator to stop")
    assert op.result is False
