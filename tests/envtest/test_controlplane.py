"""Proof that the envtest control plane is a real one.

Tests marked ``envtest`` need the binaries (``scripts/build-envtest``); they
skip without them unless MAS_REQUIRE_ENVTEST=1. The tests at the bottom check
that skip/fail logic itself and run everywhere.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from .controlplane import ControlPlane, ControlPlaneError, binaries_available, generate_pki
from .fixtures import require_envtest

# Generous per-test limits: the first test also pays for starting the
# session's control plane (about 10-20 s here, up to the 120 s start timeout).
START = 150

TEST_GROUP = "test.maslab.io"
WIDGET_CRD = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{TEST_GROUP}
spec:
  group: {TEST_GROUP}
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {{}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [minReplicas, maxReplicas]
              properties:
                minReplicas: {{type: integer, minimum: 0}}
                maxReplicas: {{type: integer, minimum: 0}}
                colour: {{type: string}}
              x-kubernetes-validations:
                - rule: "self.minReplicas <= self.maxReplicas"
                  message: "minReplicas must not exceed maxReplicas"
"""


def wait_for(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.25) -> float:
    """Poll ``check`` until true; return seconds taken; fail after ``timeout``."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - t0


def gone(read: Callable[[], object]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            read()
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    return check


@pytest.fixture(scope="module")
def widgets(control_plane: ControlPlane) -> str:
    """The test CRD, applied once; returns its plural."""
    control_plane.apply_yaml(WIDGET_CRD, field_manager="envtest-tests")
    return "widgets"


def widget(name: str, lo: int, hi: int, **spec: object) -> dict:
    return {
        "apiVersion": f"{TEST_GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"minReplicas": lo, "maxReplicas": hi, **spec},
    }


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_api_server_answers_version(control_plane: ControlPlane) -> None:
    info = client.VersionApi(control_plane.api_client()).get_code()
    assert info.major == "1"
    assert info.git_version.startswith("v1.")
    assert control_plane.server_url.startswith("https://127.0.0.1:")
    # Every API group a real apiserver serves, including the aggregated ones.
    groups = {g.name for g in client.ApisApi(control_plane.api_client()).get_api_versions().groups}
    assert {
        "apps",
        "rbac.authorization.k8s.io",
        "apiextensions.k8s.io",
        "coordination.k8s.io",
    } <= groups


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_namespace_and_configmap_round_trip(control_plane: ControlPlane) -> None:
    core = client.CoreV1Api(control_plane.api_client())
    ns = f"rt-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"k": "v"})
    )
    got = core.read_namespaced_config_map("cm", ns)
    assert got.data == {"k": "v"}
    assert got.metadata.uid and got.metadata.resource_version
    got.data["k2"] = "v2"
    updated = core.replace_namespaced_config_map("cm", ns, got)
    assert int(updated.metadata.resource_version) > int(got.metadata.resource_version)
    assert core.read_namespaced_config_map("cm", ns).data == {"k": "v", "k2": "v2"}
    # Optimistic concurrency is enforced by the real storage layer.
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("cm", ns, got)
    assert err.value.status == 409

    # The namespace controller (in kube-controller-manager) empties and
    # finalizes a deleted namespace.
    core.delete_namespace(ns)
    took = wait_for(f"namespace {ns} to be finalized", gone(lambda: core.read_namespace(ns)), 60)
    print(f"namespace finalized in {took:.1f}s")


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_crd_and_custom_object(
    control_plane: ControlPlane, widgets: str, envtest_namespace: str
) -> None:
    objs = client.CustomObjectsApi(control_plane.api_client())
    created = objs.create_namespaced_custom_object(
        TEST_GROUP, "v1", envtest_namespace, widgets, widget("w1", 1, 3, colour="blue")
    )
    assert created["metadata"]["uid"]
    got = objs.get_namespaced_custom_object(TEST_GROUP, "v1", envtest_namespace, widgets, "w1")
    assert got["spec"] == {"minReplicas": 1, "maxReplicas": 3, "colour": "blue"}
    listed = objs.list_namespaced_custom_object(TEST_GROUP, "v1", envtest_namespace, widgets)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w1"]
    # The status subresource exists and is separate from the main resource.
    got["status"] = {"ready": True}
    objs.replace_namespaced_custom_object_status(
        TEST_GROUP, "v1", envtest_namespace, widgets, "w1", got
    )


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_cel_validation_rejects_bad_object(
    control_plane: ControlPlane, widgets: str, envtest_namespace: str
) -> None:
    objs = client.CustomObjectsApi(control_plane.api_client())
    with pytest.raises(ApiException) as err:
        objs.create_namespaced_custom_object(
            TEST_GROUP, "v1", envtest_namespace, widgets, widget("bad", 5, 2)
        )
    assert err.value.status == 422
    assert "minReplicas must not exceed maxReplicas" in err.value.body
    # ... while OpenAPI schema validation also runs (minimum: 0).
    with pytest.raises(ApiException) as err:
        objs.create_namespaced_custom_object(
            TEST_GROUP, "v1", envtest_namespace, widgets, widget("neg", -1, 2)
        )
    assert err.value.status == 422
    # A good object still goes in, and CEL also guards updates.
    objs.create_namespaced_custom_object(
        TEST_GROUP, "v1", envtest_namespace, widgets, widget("ok", 1, 2)
    )
    with pytest.raises(ApiException) as err:
        objs.patch_namespaced_custom_object(
            TEST_GROUP, "v1", envtest_namespace, widgets, "ok", {"spec": {"minReplicas": 9}}
        )
    assert err.value.status == 422


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_server_side_apply_field_managers(
    control_plane: ControlPlane, envtest_namespace: str
) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ssa", "namespace": envtest_namespace},
        "data": {"owned-by-a": "1"},
    }
    [out] = control_plane.apply_yaml(cm, field_manager="manager-a")
    managers = {(m["manager"], m["operation"]) for m in out["metadata"]["managedFields"]}
    assert ("manager-a", "Apply") in managers

    # A second manager adds its own field: both fields stay.
    [out] = control_plane.apply_yaml({**cm, "data": {"owned-by-b": "2"}}, field_manager="manager-b")
    assert out["data"] == {"owned-by-a": "1", "owned-by-b": "2"}

    # Manager b claiming a's field conflicts unless forced.
    from kubernetes.dynamic.exceptions import ConflictError

    with pytest.raises(ConflictError) as err:
        control_plane.apply_yaml(
            {**cm, "data": {"owned-by-a": "changed"}},
            field_manager="manager-b",
            force_conflicts=False,
        )
    assert "manager-a" in str(err.value.body)
    [out] = control_plane.apply_yaml(
        {**cm, "data": {"owned-by-a": "changed", "owned-by-b": "2"}}, field_manager="manager-b"
    )
    assert out["data"]["owned-by-a"] == "changed"

    # Manager a dropping a field it no longer owns leaves it; b owns it now.
    [out] = control_plane.apply_yaml({**cm, "data": {}}, field_manager="manager-a")
    assert out["data"] == {"owned-by-a": "changed", "owned-by-b": "2"}


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_garbage_collector_deletes_dependents(
    control_plane: ControlPlane, envtest_namespace: str
) -> None:
    core = client.CoreV1Api(control_plane.api_client())
    ns = envtest_namespace
    owner = core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    ref = client.V1OwnerReference(
        api_version="v1",
        kind="ConfigMap",
        name="owner",
        uid=owner.metadata.uid,
        block_owner_deletion=True,
    )
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="child", owner_references=[ref]))
    )
    core.delete_namespaced_config_map("owner", ns)  # background propagation
    took = wait_for(
        "the child ConfigMap to be garbage-collected",
        gone(lambda: core.read_namespaced_config_map("child", ns)),
        60,
    )
    print(f"dependent garbage-collected in {took:.1f}s")


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_garbage_collector_with_custom_owner(
    control_plane: ControlPlane, widgets: str, envtest_namespace: str
) -> None:
    """A custom object owns a ConfigMap, like an operator's resource owns its children."""
    core = client.CoreV1Api(control_plane.api_client())
    objs = client.CustomObjectsApi(control_plane.api_client())
    ns = envtest_namespace
    w = objs.create_namespaced_custom_object(TEST_GROUP, "v1", ns, widgets, widget("owner", 1, 1))
    ref = client.V1OwnerReference(
        api_version=f"{TEST_GROUP}/v1", kind="Widget", name="owner", uid=w["metadata"]["uid"]
    )
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="child", owner_references=[ref]))
    )
    # Foreground deletion: the owner stays (with a finalizer) until its
    # dependents are gone, which only the garbage collector does.
    objs.delete_namespaced_custom_object(
        TEST_GROUP, "v1", ns, widgets, "owner", propagation_policy="Foreground"
    )
    # The garbage collector picks up a new CRD from discovery (every 30 s).
    took = wait_for(
        "the Widget's ConfigMap to be garbage-collected",
        gone(lambda: core.read_namespaced_config_map("child", ns)),
        100,
    )
    wait_for(
        "the Widget to be deleted",
        gone(lambda: objs.get_namespaced_custom_object(TEST_GROUP, "v1", ns, widgets, "owner")),
        30,
    )
    print(f"custom owner's dependent garbage-collected in {took:.1f}s")


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_rbac_forbids_then_allows_non_admin(
    control_plane: ControlPlane, envtest_namespace: str
) -> None:
    ns = envtest_namespace
    user = client.CoreV1Api(control_plane.user_api_client())
    with pytest.raises(ApiException) as err:
        user.list_namespaced_secret(ns)
    assert err.value.status == 403
    assert control_plane.user_name in err.value.body

    rbac = client.RbacAuthorizationV1Api(control_plane.api_client())
    rbac.create_namespaced_role(
        ns,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="secret-reader"),
            rules=[
                client.V1PolicyRule(api_groups=[""], resources=["secrets"], verbs=["get", "list"])
            ],
        ),
    )
    rbac.create_namespaced_role_binding(
        ns,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="secret-reader"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="secret-reader"
            ),
            subjects=[
                client.RbacV1Subject(
                    kind="User", name=control_plane.user_name, api_group="rbac.authorization.k8s.io"
                )
            ],
        ),
    )

    def allowed() -> bool:
        try:
            user.list_namespaced_secret(ns)
            return True
        except ApiException as e:
            if e.status == 403:
                return False
            raise

    wait_for("the RoleBinding to take effect", allowed, 30)
    # Only in that namespace, and only those verbs.
    with pytest.raises(ApiException) as err:
        user.list_namespaced_secret("default")
    assert err.value.status == 403
    with pytest.raises(ApiException) as err:
        user.create_namespaced_secret(ns, client.V1Secret(metadata=client.V1ObjectMeta(name="s")))
    assert err.value.status == 403

    # The same user through a kubeconfig file, as a CLI or operator would use it.
    from kubernetes import config

    kubeconfig = control_plane.user_kubeconfig(control_plane.user_token, name="reader")
    via_file = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    assert via_file.list_namespaced_secret(ns).items == []


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_start_failure_reports_log_tail() -> None:
    require_envtest()
    bad = ControlPlane(extra_apiserver_args=["--no-such-flag=1"], start_timeout=60)
    with pytest.raises(ControlPlaneError) as err:
        bad.start()
    msg = str(err.value)
    assert "kube-apiserver exited" in msg
    assert "unknown flag: --no-such-flag" in msg
    assert bad.work_dir is not None and not bad.work_dir.exists()  # cleaned up


@pytest.mark.envtest
@pytest.mark.timeout(START)
def test_start_retries_after_port_clash(monkeypatch) -> None:
    """A port taken between picking and binding makes start() retry, not fail."""
    import socket

    from . import controlplane as cpmod

    require_envtest()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    clash = taken.getsockname()[1]
    calls = []
    real = cpmod.free_port

    def free_port(host: str = "127.0.0.1") -> int:
        calls.append(1)
        return clash if len(calls) == 3 else real(host)  # 3rd pick: the apiserver's

    monkeypatch.setattr(cpmod, "free_port", free_port)
    try:
        with ControlPlane(controller_manager=False, start_timeout=60) as cp:
            assert not cp.server_url.endswith(f":{clash}")
            assert client.VersionApi(cp.api_client()).get_code().major == "1"
    finally:
        taken.close()
    assert len(calls) > 3


# -- run everywhere: the skip/fail logic -------------------------------------


def test_missing_binaries_skip_with_build_hint(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MAS_ENVTEST_DIR", str(tmp_path))
    monkeypatch.delenv("MAS_REQUIRE_ENVTEST", raising=False)
    ok, why = binaries_available()
    assert not ok
    assert "scripts/build-envtest" in why and str(tmp_path) in why
    with pytest.raises(pytest.skip.Exception, match="build-envtest"):
        require_envtest()
    with pytest.raises(ControlPlaneError, match="build-envtest"):
        ControlPlane().start()


def test_missing_binaries_fail_when_required(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MAS_ENVTEST_DIR", str(tmp_path))
    monkeypatch.setenv("MAS_REQUIRE_ENVTEST", "1")
    with pytest.raises(pytest.fail.Exception, match="MAS_REQUIRE_ENVTEST=1"):
        require_envtest()


@pytest.mark.parametrize("backend", ["cryptography", "openssl"])
def test_pki_verifies(backend: str, tmp_path, monkeypatch) -> None:
    """Both certificate back ends make a chain that openssl accepts."""
    import shutil
    import subprocess
    import sys

    if not shutil.which("openssl"):
        pytest.skip("no openssl command to check the certificates with")
    if backend == "cryptography":
        pytest.importorskip("cryptography")
    else:
        monkeypatch.setitem(sys.modules, "cryptography", None)  # import fails: use openssl
    paths = generate_pki(tmp_path)
    for name in ("tls_crt", "proxy_crt"):
        r = subprocess.run(
            ["openssl", "verify", "-CAfile", str(paths["ca_crt"]), str(paths[name])],
            capture_output=True,
            text=True,
            check=False,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    text = subprocess.run(
        ["openssl", "x509", "-noout", "-text", "-in", str(paths["tls_crt"])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "IP Address:127.0.0.1" in text and "DNS:kubernetes.default.svc" in text
    assert oct(paths["sa_key"].stat().st_mode & 0o777) == "0o600"
