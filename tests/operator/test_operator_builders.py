"""The pure builders against golden YAML, and the rules every child must keep."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from mas.infra.errors import ApplicationInvalid, WiringError
from mas.infra.models import SecretKeyRef
from mas.infra.secrets import secret_env_name
from mas_operator.children import build_children, secrets_hash
from mas_operator.deployments import PRE_STOP_SECONDS, TERMINATION_GRACE_SECONDS
from mas_operator.manifests import dump_manifests
from mas_operator.names import child_name, dns_label
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
EXAMPLE = HERE.parent.parent / "examples" / "agency.yaml"
UPDATE = os.environ.get("MAS_UPDATE_GOLDEN") == "1"


def cluster_app() -> dict[str, Any]:
    """An Application written for a cluster: urls left to the Service names, Secrets used."""
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "desk", "namespace": "team-a", "generation": 3},
        "spec": {
            "agency": {
                "entry": "concierge",
                "agents": {
                    "concierge": {"spec": {"delegates_to": ["researcher", "summarizer"]}},
                    "summarizer": {
                        "spec": {
                            "model": {
                                "type": "openai",
                                "params": {
                                    "base_url": "https://api.openai.com/v1",
                                    "model": "gpt-4o-mini",
                                    "api_key_env": "OPENAI_API_KEY",
                                },
                            }
                        }
                    },
                    "researcher": {"spec": {"delegates_to": ["web-search"]}},
                },
            },
            "endpoints": {
                "concierge": {"usage": "deploy", "a2a": {"grpc_port": 9000}},
                "researcher": {
                    "usage": "use-and-deploy",
                    "headers": {
                        "Authorization": {
                            "secret_key_ref": {"name": "researcher-token", "key": "token"}
                        }
                    },
                },
                "web-search": {
                    "url": "http://10.0.0.50:8403",
                    "usage": "use",
                    "headers": {"X-Tenant": {"value": "desk"}},
                },
            },
            "runtime": {
                "image": "registry.example/maslab:1.0.0",
                "autoscaling": True,
                "env": [
                    {"name": "LOG_LEVEL", "value": "debug"},
                    {
                        "name": "OPENAI_API_KEY",
                        "secret_key_ref": {"name": "llm", "key": "api-key"},
                    },
                ],
                "network_policy": {"metrics_namespace": "monitoring"},
            },
        },
    }


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} is missing; run with MAS_UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text(), f"{name} drifted; review, then MAS_UPDATE_GOLDEN=1"


def by_kind(children: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [c for c in children if c["kind"] == kind]


def test_example_children_match_golden() -> None:
    plan = plan_application(yaml.safe_load(EXAMPLE.read_text()), "demo")
    check_golden("research-desk.yaml", dump_manifests(build_children(plan)))


def test_cluster_app_children_match_golden() -> None:
    plan = plan_application(cluster_app())
    versions = {"llm": "11", "researcher-token": "12"}
    check_golden("desk-cluster.yaml", dump_manifests(build_children(plan, versions)))


def test_default_url_is_the_service_dns_name_and_peers_route_to_it() -> None:
    plan = plan_application(cluster_app())
    researcher = plan.agent("researcher")
    assert researcher.url == "http://desk-researcher.team-a.svc:8080"
    assert researcher.card_url == researcher.url + "/.well-known/agent-card.json"
    # the runtime's metrics through the same Service, on its own port
    assert researcher.metrics_url == "http://desk-researcher.team-a.svc:9464/metrics"
    concierge = plan.agent("concierge")
    remote = [r for r in concierge.routes if r.kind == "remote"]
    assert [(r.target, r.url) for r in remote] == [("researcher", researcher.url)]
    configmap = by_kind(build_children(plan), "ConfigMap")[0]
    config = yaml.safe_load(configmap["data"]["application.yaml"])
    assert config["spec"]["endpoints"]["researcher"]["url"] == researcher.url
    assert set(config) == {"apiVersion", "kind", "metadata", "spec"}


def test_pods_meet_the_restricted_pod_security_standard() -> None:
    for dep in by_kind(build_children(plan_application(cluster_app())), "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["runAsNonRoot"] is True
        assert all("hostPath" not in v for v in pod["volumes"])


def test_secrets_reach_pods_only_by_secret_key_ref() -> None:
    children = build_children(plan_application(cluster_app()))
    text = dump_manifests(children)
    envs = {
        dep["metadata"]["name"]: {
            e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        for dep in by_kind(children, "Deployment")
    }
    token = SecretKeyRef(name="researcher-token", key="token")
    concierge = envs["desk-concierge"]
    # only the concierge calls the researcher, with the Secret-backed header
    assert concierge[secret_env_name(token)]["valueFrom"] == {
        "secretKeyRef": {"name": "researcher-token", "key": "token"}
    }
    assert secret_env_name(token) not in envs["desk-researcher"]
    # the model key: spec.runtime.env, named by the model's api_key_env
    for env in envs.values():
        assert env["OPENAI_API_KEY"] == {
            "name": "OPENAI_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "llm", "key": "api-key"}},
        }
    for cm in by_kind(children, "ConfigMap"):
        assert "secret_key_ref" in cm["data"]["application.yaml"]
    assert "value: desk" in text  # literal headers stay literal


def test_secret_versions_change_only_the_pods_that_read_them() -> None:
    plan = plan_application(cluster_app())
    concierge, researcher = plan.agent("concierge"), plan.agent("researcher")
    before = {"llm": "1", "researcher-token": "1"}
    after = {"llm": "1", "researcher-token": "2"}
    assert secrets_hash(plan, concierge, before) != secrets_hash(plan, concierge, after)
    assert secrets_hash(plan, researcher, before) == secrets_hash(plan, researcher, after)
    rotated = {"llm": "2", "researcher-token": "1"}  # spec.runtime.env: every pod reads it
    assert secrets_hash(plan, researcher, before) != secrets_hash(plan, researcher, rotated)


def test_config_hash_follows_the_configuration() -> None:
    app = cluster_app()
    first = by_kind(build_children(plan_application(app)), "Deployment")[0]
    app["spec"]["agency"]["agents"]["concierge"]["spec"]["instructions"] = "Be brief."
    second = by_kind(build_children(plan_application(app)), "Deployment")[0]
    key = "maslab.io/config-hash"
    assert (
        first["spec"]["template"]["metadata"]["annotations"][key]
        != second["spec"]["template"]["metadata"]["annotations"][key]
    )


def test_autoscaling_leaves_replicas_out() -> None:
    app = cluster_app()
    deps = by_kind(build_children(plan_application(app)), "Deployment")
    assert all("replicas" not in d["spec"] for d in deps)
    app["spec"]["runtime"]["autoscaling"] = False
    app["spec"]["runtime"]["replicas"] = 2
    deps = by_kind(build_children(plan_application(app)), "Deployment")
    assert [d["spec"]["replicas"] for d in deps] == [2, 2]


def test_network_policies_follow_the_delegation_graph() -> None:
    children = build_children(plan_application(cluster_app()))
    policies = {p["metadata"]["name"]: p["spec"] for p in by_kind(children, "NetworkPolicy")}
    concierge = policies["desk-concierge"]
    targets = [rule.get("to") for rule in concierge["egress"]]
    assert [
        {
            "podSelector": {
                "matchLabels": {"maslab.io/application": "desk", "maslab.io/agent": "researcher"}
            }
        }
    ] in targets
    ports = [rule["ports"] for rule in concierge["egress"]]
    assert [{"protocol": "TCP", "port": 443}] in ports  # the summarizer's model endpoint
    researcher = policies["desk-researcher"]
    assert {
        "to": [{"ipBlock": {"cidr": "10.0.0.50/32"}}],
        "ports": [{"protocol": "TCP", "port": 8403}],
    } in researcher["egress"]
    assert len(researcher["egress"]) == 3  # DNS, web-search and the API server only
    assert researcher["egress"][-1] == {  # its caller check's keys (no addresses: any, by port)
        "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]
    }
    metrics = [r for r in researcher["ingress"] if "from" in r]
    assert metrics == [
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                    }
                }
            ],
            "ports": [{"protocol": "TCP", "port": 9464}],
        }
    ]


def test_network_policies_can_be_switched_off() -> None:
    app = cluster_app()
    app["spec"]["runtime"]["network_policy"] = {"enabled": False}
    assert by_kind(build_children(plan_application(app)), "NetworkPolicy") == []


def test_missing_delegation_target_names_target_and_delegator() -> None:
    app = cluster_app()
    app["spec"]["agency"]["agents"]["researcher"]["spec"]["delegates_to"] = ["ghost", "web-search"]
    with pytest.raises(WiringError) as caught:
        plan_application(app)
    assert [(m.source, m.target) for m in caught.value.missing] == [("researcher", "ghost")]
    assert "'ghost' of agent 'researcher'" in str(caught.value)


def test_metrics_port_collision_is_refused_naming_the_field() -> None:
    app = copy.deepcopy(cluster_app())
    app["spec"]["endpoints"]["concierge"]["url"] = "http://concierge:9464"
    with pytest.raises(ApplicationInvalid) as caught:
        plan_application(app)
    assert [p.path for p in caught.value.problems] == ["spec.endpoints.concierge.url"]
    assert "9464" in str(caught.value)


def test_long_names_become_distinct_dns_labels() -> None:
    long = "a" * 60
    first, second = child_name(long, "agent-one"), child_name(long, "agent-two")
    assert len(first) <= 63 and len(second) <= 63 and first != second
    assert dns_label("My.App") == "my-app"


def test_card_collisions_are_refused_before_anything_is_built() -> None:
    app = cluster_app()
    app["spec"]["endpoints"]["concierge"]["url"] = "http://shared:8080"
    app["spec"]["endpoints"]["researcher"]["url"] = "http://shared:8080"
    with pytest.raises(ApplicationInvalid) as caught:
        plan_application(app)
    paths = sorted(p.path for p in caught.value.problems)
    assert paths == ["spec.endpoints.concierge.url", "spec.endpoints.researcher.url"]
    assert "a single port cannot host multiple independent AgentCards" in str(caught.value)


def test_each_configmap_document_is_servable_as_it_stands() -> None:
    """What ``mas-ctl serve`` loads (urls required, no cluster defaults) wires as is."""
    from mas.infra.wiring import wire

    plan = plan_application(cluster_app())
    for cm in by_kind(build_children(plan), "ConfigMap"):
        document = yaml.safe_load(cm["data"]["application.yaml"])
        wired = wire(document, require_urls=True)
        agent = cm["data"]["agent"]
        assert wired.routes.listener(agent) is not None
        assert list(wired.routes.runtimes[agent]) == cm["data"]["hosted"].split()


def test_the_grace_period_outlasts_the_slowest_stop_of_a_pod() -> None:
    # preStop, the mailbox drain, uvicorn's graceful close (drain + 1 s, + 2 s to give up)
    # and the run book's turns (the drain again), at `mas-ctl serve`'s default drain of 10 s
    drain = 10
    slowest = PRE_STOP_SECONDS + drain + (drain + 3) + drain
    for deployment in by_kind(build_children(plan_application(cluster_app())), "Deployment"):
        grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace == TERMINATION_GRACE_SECONDS > slowest
