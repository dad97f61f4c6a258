"""An APP/AGENT target resolved on the real API server (envtest): every refusal, in one line.

The Application is the shipped example, applied as ``kubectl apply`` does; its status is the
operator's own (its plan and status record for each deployed agent); the agents' pods are
made from the operator's own Deployment template. With no kubelet here, what a pod would
report is written through pods/status, as the operator tests do; reaching a pod through the
port-forward runs on the node tier (tests/node/test_node_cluster_target.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from tests.conftest import EXAMPLES, REPO
from tests.ports import free_port

from mas.ctl.cluster import open_cluster_target
from mas.ctl.cluster_targets import ClusterAccessError, ClusterTargetError
from mas_operator.conditions import AgentObserved
from mas_operator.deployments import build_deployment
from mas_operator.plan import plan_application
from mas_operator.serviceaccounts import build_service_account

pytestmark = pytest.mark.envtest

GROUP, VERSION, PLURAL = "infra.maslab.io", "v1", "applications"
NEEDED = "(mas-ctl needs: get applications, list pods, create pods/portforward)"
STAMP = "2026-12-04T00:00:00Z"
DEADLINE = 60.0


@pytest.fixture(scope="session")
def crd(control_plane: Any) -> None:
    control_plane.apply_yaml(REPO / "crds" / "application.yaml")


class Desk:
    """The example Application in one namespace, with what the operator and kubelet would say."""

    def __init__(self, control_plane: Any, namespace: str) -> None:
        self.cp = control_plane
        self.ns = namespace
        api = control_plane.api_client()
        self.core = k8s.CoreV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)
        self.rbac = k8s.RbacAuthorizationV1Api(api)
        self.doc: dict[str, Any] = yaml.safe_load((EXAMPLES / "agency.yaml").read_text())
        self.plan = plan_application(self.doc, namespace)
        self.kubeconfig = str(control_plane.kubeconfig_path)

    def apply(self) -> None:
        self.cp.apply_yaml(self.doc, namespace=self.ns, field_manager="kubectl")

    def write_status(self, **replicas: int) -> None:
        """status.agents as the operator writes it (``replicas`` overrides an agent's count)."""
        agents = {}
        for agent in self.plan.agents:
            count = replicas.get(agent.agent, 1)
            observed = AgentObserved(count, 0, False, agent.url, agent.card_url)
            agents[agent.agent] = observed.as_status()
        name = self.plan.name
        body = {"status": {"agents": agents}}
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.ns, PLURAL, name, body
        )

    def add_pod(self, agent: str, status: dict[str, Any]) -> str:
        """A pod of ``agent`` from the operator's Deployment template, with ``status``."""
        [plan] = [a for a in self.plan.agents if a.agent == agent]
        template = build_deployment(self.plan, plan, "hash")["spec"]["template"]
        account = build_service_account(self.plan, plan)  # as the operator applies it first
        if account is not None:
            with contextlib.suppress(k8s.ApiException):  # 409: another pod of the agent's
                self.core.create_namespaced_service_account(self.ns, account)
        name = f"{plan.name}-0"
        body = {"apiVersion": "v1", "kind": "Pod", **template}
        body["metadata"] = {**template["metadata"], "name": name}
        deadline = time.monotonic() + DEADLINE
        while True:  # the namespace's default ServiceAccount comes a moment after it
            try:
                self.core.create_namespaced_pod(self.ns, body)
                break
            except k8s.ApiException as exc:
                if "serviceaccount" not in str(exc.body) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.core.patch_namespaced_pod_status(name, self.ns, {"status": status})
        return name

    def grant(self, user: str, rules: list[dict[str, Any]]) -> None:
        """A Role with ``rules`` bound to ``user`` in the namespace."""
        role = f"role-{len(rules)}"
        self.rbac.create_namespaced_role(self.ns, {"metadata": {"name": role}, "rules": rules})
        self.rbac.create_namespaced_role_binding(
            self.ns,
            {
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
                ],
            },
        )


READY = {
    "phase": "Running",
    "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": STAMP},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": STAMP},
    ],
}


@pytest.fixture
def desk(control_plane: Any, crd: None, envtest_namespace: str) -> Desk:
    desk = Desk(control_plane, envtest_namespace)
    desk.apply()
    desk.write_status()
    return desk


async def refusal(
    target: str, namespace: str | None, kubeconfig: str | None, context: str | None = None
) -> ClusterTargetError:
    with pytest.raises(ClusterTargetError) as caught:
        async with open_cluster_target(target, namespace, context, kubeconfig):
            pytest.fail(f"{target} was reached")
    return caught.value


async def test_an_unknown_application_lists_the_ones_in_the_namespace(desk: Desk) -> None:
    error = await refusal("research-dsk/concierge", desk.ns, desk.kubeconfig)
    assert str(error) == (
        f"no Application 'research-dsk' in namespace '{desk.ns}'; Applications there: research-desk"
    )


async def test_an_unknown_agent_lists_the_agents_deployed_and_in_process(desk: Desk) -> None:
    error = await refusal("research-desk/conceirge", desk.ns, desk.kubeconfig)
    assert str(error) == (
        f"no agent 'conceirge' in Application 'research-desk' in namespace '{desk.ns}'; "
        "its agents: concierge (deployed), researcher (deployed), summarizer "
        "(in-process, inside concierge, researcher)"
    )


async def test_an_in_process_agent_names_the_deployed_agents_hosting_it(desk: Desk) -> None:
    error = await refusal("research-desk/summarizer", desk.ns, desk.kubeconfig)
    assert str(error) == (
        "'summarizer' is not deployed: it runs in-process inside the pods of concierge, "
        "researcher; ask one of those (e.g. research-desk/concierge), which delegates to it"
    )


async def test_a_pod_that_cannot_pull_its_image_is_named_with_the_reason(desk: Desk) -> None:
    waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "maslab:0"'}
    pod = desk.add_pod(
        "researcher",
        {
            "phase": "Pending",
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": STAMP}],
            "containerStatuses": [
                {
                    "name": "runtime",
                    "image": "maslab:0",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": waiting},
                }
            ],
        },
    )
    error = await refusal("research-desk/researcher", desk.ns, desk.kubeconfig)
    assert str(error) == (
        f"research-desk/researcher in namespace '{desk.ns}' is not Ready: pod {pod}: "
        'ImagePullBackOff: Back-off pulling image "maslab:0"'
    )


async def test_an_unschedulable_pod_says_pending_and_why(desk: Desk) -> None:
    message = "0/1 nodes are available: 1 Insufficient memory."
    pod = desk.add_pod(
        "concierge",
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": STAMP,
                }
            ],
        },
    )
    error = await refusal("research-desk/concierge", desk.ns, desk.kubeconfig)
    assert str(error) == (
        f"research-desk/concierge in namespace '{desk.ns}' is not Ready: pod {pod}: "
        f"Pending (Unschedulable: {message})"
    )


async def test_an_agent_scaled_to_zero_says_so(desk: Desk) -> None:
    desk.write_status(researcher=0)
    error = await refusal("research-desk/researcher", desk.ns, desk.kubeconfig)
    assert str(error) == (
        f"research-desk/researcher in namespace '{desk.ns}' is not Ready: its Deployment "
        "research-desk-researcher is scaled to 0 (no pods)"
    )


async def test_a_user_without_rights_is_told_which_are_needed(desk: Desk) -> None:
    error = await refusal(
        "research-desk/concierge", desk.ns, str(desk.cp.user_kubeconfig(name="nobody"))
    )
    assert isinstance(error, ClusterAccessError)
    assert str(error) == (
        f"forbidden: this user may not get applications in namespace '{desk.ns}' {NEEDED}"
    )


async def test_a_user_who_may_not_port_forward_is_told_before_any_listener(desk: Desk) -> None:
    desk.add_pod("concierge", READY)
    desk.grant(
        desk.cp.user_name,
        [
            {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        ],
    )
    error = await refusal("research-desk/concierge", desk.ns, str(desk.cp.user_kubeconfig()))
    assert str(error) == (
        f"forbidden: this user may not create pods/portforward in namespace '{desk.ns}' {NEEDED}"
    )


async def test_a_ready_pod_is_forwarded_and_the_card_urls_rewritten(
    desk: Desk, caplog: pytest.LogCaptureFixture
) -> None:
    pod = desk.add_pod("concierge", READY)
    service = f"research-desk-concierge.{desk.ns}.svc"
    async with open_cluster_target("research-desk/concierge", desk.ns, None, desk.kubeconfig) as t:
        assert (t.app, t.agent, t.namespace, t.pod) == ("research-desk", "concierge", desk.ns, pod)
        assert t.base_url.startswith("http://127.0.0.1:")
        assert t.rewrite(f"http://{service}:8401") == t.base_url
        grpc = t.rewrite(f"{service}:8411")
        assert grpc.startswith("127.0.0.1:") and grpc != t.base_url.removeprefix("http://")
        # No kubelet here: the API server cannot reach the pod, and the connection says so.
        with caplog.at_level(logging.WARNING, logger="mas.ctl.forwarding"):
            host, port = t.base_url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            async with asyncio.timeout(DEADLINE):
                assert await reader.read() == b""
            writer.close()
    assert caplog.messages == [
        f"cannot forward a connection to pod {desk.ns}/{pod} port 8401: the API server at "
        f"{desk.cp.server_url} answered 400 to create pods/portforward for pod {pod} in "
        f"namespace '{desk.ns}': pod {pod} does not have a host assigned"
    ]


async def test_the_namespace_comes_from_the_kube_context(desk: Desk, tmp_path: Path) -> None:
    config = yaml.safe_load(Path(desk.kubeconfig).read_text())
    context = dict(config["contexts"][0])
    context = {"name": "desk", "context": {**context["context"], "namespace": desk.ns}}
    config["contexts"].append(context)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    error = await refusal("research-desk/summarizer", None, str(path), "desk")
    assert "inside the pods of concierge, researcher" in str(error)
    error = await refusal("research-desk/summarizer", None, str(path), "nowhere")
    assert str(error) == (
        f"--kube-context 'nowhere' is not in kubeconfig {path}; its contexts: envtest, desk"
    )
    error = await refusal("research-desk/summarizer", None, str(path))  # envtest: default
    assert str(error) == (
        "no Application 'research-desk' in namespace 'default'; Applications there: (none)"
    )


async def test_an_api_server_that_does_not_answer_is_named(
    control_plane: Any, tmp_path: Path
) -> None:
    config = yaml.safe_load(Path(control_plane.kubeconfig_path).read_text())
    server = f"https://127.0.0.1:{free_port()}"
    config["clusters"][0]["cluster"]["server"] = server
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    error = await refusal("research-desk/concierge", "team-a", str(path))
    assert isinstance(error, ClusterAccessError)
    assert str(error).startswith(f"cannot reach the API server at {server}: ")
    assert "Connection refused" in str(error)


@pytest.fixture
def no_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    yield tmp_path


async def test_no_kubeconfig_says_where_one_is_looked_for(
    no_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = await refusal("research-desk/concierge", None, None)
    assert str(error) == (
        "no kubeconfig: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config"
    )
    missing = no_kubeconfig / "absent"
    error = await refusal("research-desk/concierge", None, str(missing))
    assert str(error) == f"kubeconfig {missing}: no such file"
    monkeypatch.setenv("KUBECONFIG", f"{missing}:{missing}-too")
    error = await refusal("research-desk/concierge", None, None)
    assert str(error) == f"KUBECONFIG={missing}:{missing}-too: none of its files exists"


async def test_kubeconfig_merges_the_files_that_exist(
    desk: Desk, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{desk.kubeconfig}")
    error = await refusal("research-desk/summarizer", desk.ns, None)
    assert "runs in-process inside the pods of concierge, researcher" in str(error)


async def test_in_a_pod_without_a_service_account_token_says_so(
    no_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists():
        pytest.skip("this machine is a pod with a service account token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    error = await refusal("research-desk/concierge", None, None)
    assert str(error) == (
        "no kubeconfig, and this pod's service account cannot be used (Service token file "
        "does not exist.): pass --kubeconfig FILE or set KUBECONFIG"
    )


def mas_ctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mas.ctl.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_mas_ctl_says_why_in_one_line_and_exits_1(desk: Desk) -> None:
    kubeconfig = ["--kubeconfig", desk.kubeconfig]
    unknown = await asyncio.to_thread(
        mas_ctl, "ask", "research-dsk/concierge", "-n", desk.ns, *kubeconfig, "-m", "hi"
    )
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr == (
        f"error: no Application 'research-dsk' in namespace '{desk.ns}'; "
        "Applications there: research-desk\n"
    )
    desk.write_status(researcher=0)
    scaled = await asyncio.to_thread(
        mas_ctl, "card", "research-desk/researcher", "-n", desk.ns, *kubeconfig
    )
    assert (scaled.returncode, scaled.stdout) == (1, "")
    assert scaled.stderr == (
        f"error: research-desk/researcher in namespace '{desk.ns}' is not Ready: its "
        "Deployment research-desk-researcher is scaled to 0 (no pods)\n"
    )
