"""The conformance Job builder against golden YAML, and what the Job must and must not be."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_operator_builders import check_golden, cluster_app

from mas_operator.children import build_children
from mas_operator.conformance.jobs import desired_jobs
from mas_operator.deployments import container_security_context, pod_security_context
from mas_operator.manifests import dump_manifests
from mas_operator.names import selector_labels
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)

VERSIONS = {"llm": "11", "researcher-token": "12"}


def conformance_app(**conformance: Any) -> dict[str, Any]:
    app = cluster_app()
    app["spec"]["conformance"] = {"enabled": True, **conformance}
    return app


def jobs(app: dict[str, Any], run: str | None = None) -> dict[str, dict[str, Any]]:
    plan = plan_application(app)
    return desired_jobs(plan, build_children(plan, VERSIONS), run)


def names(app: dict[str, Any], run: str | None = None) -> dict[str, str]:
    return {agent: job["metadata"]["name"] for agent, job in jobs(app, run).items()}


def test_conformance_jobs_match_golden() -> None:
    manifests = jobs(conformance_app(timeout_seconds=5), run="2026-12-02T18:00:00Z")
    check_golden("desk-conformance-jobs.yaml", dump_manifests(manifests.values()))


def test_one_job_per_deployed_agent_probing_its_service_into_the_termination_log() -> None:
    built = jobs(conformance_app(timeout_seconds=5))
    assert sorted(built) == ["concierge", "researcher"]
    job = built["researcher"]
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == 300
    assert "ttlSecondsAfterFinished" not in job["spec"]
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    # it runs as the probed agent, which admits its own ServiceAccount, and sends its token
    assert pod["serviceAccountName"] == "desk-researcher"
    [container] = pod["containers"]
    assert container["env"] == [
        {"name": "MAS_A2A_TOKEN_FILE", "value": "/var/run/secrets/maslab.io/a2a/token"}
    ]
    assert {
        "name": "a2a-token",
        "mountPath": "/var/run/secrets/maslab.io/a2a",
        "readOnly": True,
    } in container["volumeMounts"]
    assert container["name"] == "researcher"
    assert container["image"] == "registry.example/maslab:1.0.0"
    assert container["command"] == [
        "mas-ctl", "conformance",
        "--url", "http://desk-researcher.team-a.svc:8080/.well-known/agent-card.json",
        "-o", "json", "--timeout", "5", "--result-file", "/dev/termination-log",
    ]  # fmt: skip
    assert container["terminationMessagePolicy"] == "File"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert pod["securityContext"] == pod_security_context()
    assert container["securityContext"] == container_security_context()


def test_probe_pods_are_never_selected_as_the_agents_own_pods() -> None:
    for agent, job in jobs(conformance_app()).items():
        labels = job["spec"]["template"]["metadata"]["labels"]
        selector = selector_labels("desk", agent)  # the Service's and Deployment's selector
        assert not selector.items() <= labels.items()
        assert labels["maslab.io/conformance-agent"] == agent
        assert job["metadata"]["labels"] == labels


def test_the_name_changes_with_what_is_probed_and_only_then() -> None:
    base = names(conformance_app())
    assert base == names(conformance_app())  # deterministic
    assert all(name.startswith(f"desk-{agent}-conformance-") for agent, name in base.items())
    assert all(len(name) <= 63 for name in base.values())
    rerun = names(conformance_app(), run="again")
    assert rerun["concierge"] != base["concierge"] and rerun["researcher"] != base["researcher"]
    slower = names(conformance_app(timeout_seconds=30))
    assert slower["researcher"] != base["researcher"]
    edited = conformance_app()
    edited["spec"]["agency"]["agents"]["researcher"]["spec"]["instructions"] = "Be brief."
    changed = names(edited)
    assert changed["researcher"] != base["researcher"]  # its config hash changed
    image = conformance_app()
    image["spec"]["runtime"]["image"] = "registry.example/maslab:1.0.1"
    assert names(image)["concierge"] != base["concierge"]
    plan = plan_application(conformance_app())
    rotated = desired_jobs(plan, build_children(plan, {**VERSIONS, "researcher-token": "13"}), None)
    # only the concierge reads the researcher's token: only its pods (and Job) change
    assert rotated["concierge"]["metadata"]["name"] != base["concierge"]
    assert rotated["researcher"]["metadata"]["name"] == base["researcher"]


def _admits(policy: dict[str, Any], pod: dict[str, Any], port: str) -> bool:
    """Whether ``policy``'s ingress rules let a pod labelled as ``pod`` reach named ``port``."""
    labels = pod["metadata"]["labels"]
    for rule in policy["spec"]["ingress"]:
        if not any(p["port"] == port for p in rule.get("ports") or [{"port": port}]):
            continue
        peers = rule.get("from")
        if peers is None:
            return True
        for peer in peers:
            wanted = (peer.get("podSelector") or {}).get("matchLabels")
            in_namespace = "namespaceSelector" not in peer and wanted is not None
            if in_namespace and wanted.items() <= labels.items():
                return True
    return False


def test_agent_network_policies_admit_the_probe_on_every_a2a_port() -> None:
    app = conformance_app()
    plan = plan_application(app)
    children = build_children(plan, VERSIONS)
    policies = {c["metadata"]["name"]: c for c in children if c["kind"] == "NetworkPolicy"}
    for agent, job in desired_jobs(plan, children, None).items():
        probe_pod = job["spec"]["template"]
        policy = policies[f"desk-{agent}"]
        assert _admits(policy, probe_pod, "a2a-http"), agent
        if plan.agent(agent).grpc_port is not None:
            assert _admits(policy, probe_pod, "a2a-grpc"), agent
        assert not _admits(policy, probe_pod, "metrics")  # only what the probe needs


def test_conformance_is_off_by_default_and_its_settings_are_validated() -> None:
    from mas.infra.errors import ApplicationInvalid

    assert plan_application(cluster_app()).app.spec.conformance.enabled is False
    bad = copy.deepcopy(conformance_app(timeout_seconds=0, deadline_seconds=5))
    bad["spec"]["conformance"]["retries"] = 3
    with pytest.raises(ApplicationInvalid) as caught:
        plan_application(bad)
    text = str(caught.value)
    assert "spec.conformance.timeout_seconds" in text and "greater than 0" in text
    assert "spec.conformance.deadline_seconds" in text and "30" in text
    assert "spec.conformance.retries" in text
