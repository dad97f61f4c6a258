"""The chart's conformance test hook: rendered, read-only, and its command run for real.

The hook's command runs here as the chart's conformance ServiceAccount (a token standing in
for the in-cluster credentials) against the real API server, probing AgentCards that
``mas-ctl serve`` publishes on 127.0.0.1.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from operator_support import (
    GROUP,
    PLURAL,
    VERSION,
    Api,
    helm_template,
    serve_agent,
)

pytestmark = pytest.mark.timeout(300)  # up to four cold mas-ctl and mas-operator processes

APP = {
    "apiVersion": "infra.maslab.io/v1",
    "kind": "Application",
    "metadata": {"name": "desk"},
    "spec": {
        "agency": {
            "entry": "front",
            "agents": {"front": {"spec": {"delegates_to": ["back"]}}, "back": {}},
        },
        "endpoints": {  # urls as a cluster would have them; serve_agent moves them to loopback
            "front": {"url": "http://desk-front:8080", "usage": "deploy"},
            "back": {
                "url": "http://desk-back:8080",
                "usage": "use-and-deploy",
                "a2a": {"grpc_port": 9090},
            },
        },
    },
}


def hook_objects(*args: str, namespace: str = "mas-system") -> list[dict[str, Any]]:
    return helm_template("--set", "conformance.test.enabled=true", *args, namespace=namespace)


def test_the_conformance_test_hook_is_optional() -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in helm_template()}
    assert not [name for _, name in kinds if "conformance" in name]


def test_the_hook_probes_the_watched_namespaces_with_a_read_only_identity() -> None:
    objects = hook_objects("--set", "watchNamespaces={team-a,team-b}")
    job = next(o for o in objects if o["kind"] == "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "test"
    pod = job["spec"]["template"]["spec"]
    assert (job["spec"]["backoffLimit"], pod["restartPolicy"]) == (0, "Never")
    [container] = pod["containers"]
    assert container["command"] == ["mas-operator"]
    assert container["args"][:3] == ["conformance", "--namespace=team-a", "--namespace=team-b"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    operator = next(o for o in objects if o["kind"] == "Deployment")
    selector = operator["spec"]["selector"]["matchLabels"]
    assert not selector.items() <= job["spec"]["template"]["metadata"]["labels"].items()
    account = pod["serviceAccountName"]
    roles = [
        o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole") and "conformance" in o["metadata"]["name"]
    ]
    assert [(r["kind"], r["metadata"]["namespace"]) for r in roles] == [
        ("Role", "team-a"),
        ("Role", "team-b"),
    ]  # a scoped install: no ClusterRole
    assert [r["rules"] for r in roles] == 2 * [
        [{"apiGroups": ["infra.maslab.io"], "resources": ["applications"], "verbs": ["list"]}]
    ]
    bindings = [
        (o["kind"], o["metadata"].get("namespace"), o["subjects"][0]["name"])
        for o in objects
        if o["kind"].endswith("Binding") and o["roleRef"]["name"] == roles[0]["metadata"]["name"]
    ]
    assert bindings == [("RoleBinding", "team-a", account), ("RoleBinding", "team-b", account)]
    everywhere = hook_objects()
    job = next(o for o in everywhere if o["kind"] == "Job")
    assert "--all-namespaces" in job["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.fixture
def conformance_account(
    control_plane: Any, crd_installed: Any, envtest_namespace: str
) -> Iterator[tuple[dict[str, Any], Path]]:
    """The hook's RBAC applied for real; yields the hook Job and a kubeconfig as its account."""
    release = f"mc-{uuid.uuid4().hex[:6]}"
    objects = hook_objects(
        "--set", f"watchNamespaces={{{envtest_namespace}}}",
        "--set", f"fullnameOverride={release}",
        namespace=envtest_namespace,
    )  # fmt: skip
    hook = next(o for o in objects if o["kind"] == "Job")
    rbac_objects = [o for o in objects if "conformance" in o["metadata"]["name"] and o is not hook]
    control_plane.apply_yaml(rbac_objects, namespace=envtest_namespace)
    account = hook["spec"]["template"]["spec"]["serviceAccountName"]
    token = (
        k8s.CoreV1Api(control_plane.api_client())
        .create_namespaced_service_account_token(
            account,
            envtest_namespace,
            k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[])),
        )
        .status.token
    )
    try:
        yield hook, control_plane.user_kubeconfig(token, name="conformance-test")
    finally:
        rbac = k8s.RbacAuthorizationV1Api(control_plane.api_client())
        for obj in rbac_objects:
            if obj["kind"] == "ClusterRole":
                rbac.delete_cluster_role(obj["metadata"]["name"])


def run_hook(hook: dict[str, Any], kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    """The hook's container command, with the account's kubeconfig for in-cluster credentials."""
    [container] = hook["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["mas-operator"]
    argv = [sys.executable, "-m", "mas_operator.cli", *container["args"]]
    return subprocess.run(
        [*argv, f"--kubeconfig={kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.envtest
def test_the_hook_command_probes_every_published_card_as_its_account(
    control_plane: Any,
    conformance_account: tuple[dict[str, Any], Path],
    envtest_namespace: str,
    tmp_path: Path,
) -> None:
    hook, kubeconfig = conformance_account
    api = Api(control_plane.api_client(), envtest_namespace)
    api.create(APP)
    document = tmp_path / "desk.yaml"
    document.write_text(yaml.safe_dump(APP))
    with (
        serve_agent(document, "front", tmp_path) as front,
        serve_agent(document, "back", tmp_path, dead_grpc=True) as back,
    ):
        status = {
            "agents": {
                "front": {"ready": True, "card_url": f"{front}/.well-known/agent-card.json"},
                "back": {"ready": True, "card_url": f"{back}/.well-known/agent-card.json"},
            }
        }
        api.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, api.ns, PLURAL, "desk", {"status": status}
        )
        broken = run_hook(hook, kubeconfig)
        api.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, api.ns, PLURAL, "desk", {"status": {"agents": {"back": None}}}
        )
        fixed = run_hook(hook, kubeconfig)
    assert broken.returncode == 1, broken.stderr
    rows = {line.split()[2]: line.split(maxsplit=4) for line in broken.stdout.splitlines()[1:3]}
    assert broken.stdout.splitlines()[0].split() == [
        "NAMESPACE", "APPLICATION", "AGENT", "CONFORMANT", "DETAIL",
    ]  # fmt: skip
    assert rows["front"][:4] == [envtest_namespace, "desk", "front", "True"]
    assert rows["back"][:4] == [envtest_namespace, "desk", "back", "False"]
    assert "GRPC send-message: " in rows["back"][4]
    assert broken.stdout.splitlines()[-1] == "NOT conformant: 1 of 2 published AgentCards"
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.splitlines()[-1] == "conformant: 1 published AgentCard"


@pytest.mark.envtest
def test_the_hook_command_says_when_its_account_may_not_list(
    control_plane: Any, crd_installed: Any, envtest_namespace: str, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(control_plane.api_client())
    core.create_namespaced_service_account(
        envtest_namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="nobody"))
    )
    token = core.create_namespaced_service_account_token(
        "nobody",
        envtest_namespace,
        k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[])),
    ).status.token
    kubeconfig = control_plane.user_kubeconfig(token, name="nobody")
    hook = {"spec": {"template": {"spec": {"containers": [
        {"command": ["mas-operator"], "args": ["conformance", f"--namespace={envtest_namespace}"]}
    ]}}}}  # fmt: skip
    done = run_hook(hook, kubeconfig)
    assert done.returncode == 2
    assert done.stderr.startswith("error: listing Applications failed: ")
    assert "forbidden" in done.stderr and "Traceback" not in done.stderr


def test_published_cards_are_every_card_url_in_status_in_order() -> None:
    from mas_operator.conformance.command import PublishedCard, published_cards

    def app(namespace: str, name: str, agents: dict[str, Any] | None) -> dict[str, Any]:
        status = {"status": {"agents": agents}} if agents is not None else {}
        return {"metadata": {"namespace": namespace, "name": name}, **status}

    apps = [
        app("b", "x", {"a": {"card_url": "u1"}}),
        app("a", "y", {"z": {"card_url": "u2"}, "m": {"ready": False}, "c": {"card_url": "u3"}}),
        app("a", "new", None),  # not reconciled yet
    ]
    assert published_cards(apps) == [
        PublishedCard("a", "y", "c", "u3"),
        PublishedCard("a", "y", "z", "u2"),
        PublishedCard("b", "x", "a", "u1"),
    ]
