"""A converged Application is left alone by the next full resync passes (real API server).

This control plane runs no kube-controller-manager: nobody but the operator writes the
children, so after the first reconcile every event is the echo of one of its own writes
(the children's applies, its status patch, kopf's annotation patch after the handler).
With the shared control plane, the Deployment controller's status updates would reconcile
the Application again anyway and hide a pass that reconciles it for nothing.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client as k8s
from operator_support import (
    Api,
    RunningOperator,
    cluster_app,
    crd_document,
    eventually,
    reconciles,
    self_contained_app,
    total,
    wait_condition,
)
from tests.envtest.controlplane import ControlPlane
from tests.envtest.fixtures import require_envtest

from mas_operator.runner import OperatorOptions

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def quiet_plane() -> Iterator[ControlPlane]:
    """etcd and kube-apiserver only, with the CRD."""
    require_envtest()
    with ControlPlane(controller_manager=False, start_timeout=120) as plane:
        plane.apply_yaml(crd_document())
        yield plane


@pytest.fixture
def api(quiet_plane: ControlPlane) -> Iterator[Api]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = k8s.CoreV1Api(quiet_plane.api_client())
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield Api(quiet_plane.api_client(), name)


@pytest.fixture
def operator(quiet_plane: ControlPlane, api: Api) -> Iterator[RunningOperator]:
    options = OperatorOptions(
        namespaces=(api.ns,),
        kubeconfig=str(quiet_plane.kubeconfig_path),
        resync=0.5,
        lease_namespace=api.ns,
        identity=f"op-{uuid.uuid4().hex[:6]}",
        lease_duration=4.0,
        lease_renew=1.0,
    )
    op = RunningOperator(options).start()
    yield op
    op.stop()


def test_the_passes_after_convergence_reconcile_nothing(
    operator: RunningOperator, api: Api
) -> None:
    """Before, each Application was reconciled once more at the first pass after it
    converged: its settled digest named the versions it read, and its own writes made
    new ones."""
    metrics = operator.handle.metrics
    api.create(self_contained_app())
    wait_condition(api, "desk", "Wired", "True")
    eventually(lambda: reconciles(metrics) >= 1, what="the first reconcile to be counted")
    passes = total(metrics.resync_passes)
    eventually(lambda: total(metrics.resync_passes) >= passes + 4, what="four more passes")
    assert reconciles(metrics) == 1
    assert len(api.deployments()) == 2


def test_an_application_that_reads_a_secret_is_reconciled_each_pass(
    operator: RunningOperator, api: Api
) -> None:
    """The counterpart: a Secret is not watched, so only a reconcile sees it change."""
    metrics = operator.handle.metrics
    api.core.create_namespaced_secret(
        api.ns, {"metadata": {"name": "back-token"}, "stringData": {"token": "s3cret"}}
    )
    api.create(cluster_app())
    wait_condition(api, "desk", "Wired", "True")
    eventually(lambda: reconciles(metrics) >= 1, what="the first reconcile to be counted")
    first = reconciles(metrics)
    eventually(lambda: reconciles(metrics) >= first + 2, what="a reconcile at each pass")


def test_a_burst_of_edits_ends_in_one_or_two_reconciles(
    operator: RunningOperator, api: Api
) -> None:
    """100 edits of one Application, as fast as ten clients send them: the work queue
    reconciles the newest copy once the burst is over (and once more at most, when an
    edit came while that reconcile ran), not once per edit."""
    metrics = operator.handle.metrics
    doc = self_contained_app()
    api.create(doc)
    wait_condition(api, "desk", "Wired", "True")
    eventually(lambda: reconciles(metrics) >= 1, what="the first reconcile to be counted")
    passes = total(metrics.resync_passes)
    eventually(lambda: total(metrics.resync_passes) >= passes + 2, what="two more passes")
    before = reconciles(metrics)

    def edit(n: int) -> None:
        spec = copy.deepcopy(doc["spec"])  # a spec of its own: each edit changes it
        spec["agency"]["agents"]["front"]["spec"]["instructions"] = f"Edit {n}."
        api.patch_spec("desk", spec)

    with ThreadPoolExecutor(10) as pool:
        list(pool.map(edit, range(100)))
    latest = api.get("desk")
    assert latest["metadata"]["generation"] == 101
    wanted = latest["spec"]["agency"]["agents"]["front"]["spec"]["instructions"]
    eventually(
        lambda: (api.get("desk").get("status") or {}).get("observedGeneration") == 101,
        what="generation 101 observed",
    )
    passes = total(metrics.resync_passes)
    eventually(lambda: total(metrics.resync_passes) >= passes + 2, what="two more passes")
    assert 1 <= reconciles(metrics) - before <= 2
    document = api.core.read_namespaced_config_map("desk-front", api.ns).data
    assert wanted in document["application.yaml"]
