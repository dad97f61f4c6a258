"""Each deployed agent's own ServiceAccount and projected A2A token, in the pure builders."""

from __future__ import annotations

from typing import Any

import pytest
from operator_support import cluster_app

from mas.infra import identity
from mas.infra.models import Application, Endpoint
from mas_operator.children import build_children
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)


def by_kind(children: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [c for c in children if c["kind"] == kind]


def _pods(children: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]
        for d in by_kind(children, "Deployment")
    }


def test_every_deployed_agent_gets_its_own_account_without_an_api_token() -> None:
    children = build_children(plan_application(cluster_app()))
    accounts = by_kind(children, "ServiceAccount")
    deployments = by_kind(children, "Deployment")
    assert sorted(a["metadata"]["name"] for a in accounts) == sorted(
        d["metadata"]["name"] for d in deployments
    )
    for account in accounts:
        assert account["automountServiceAccountToken"] is False
        assert account["metadata"]["namespace"] == "default"
        assert account["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "mas-operator"
    for name, pod in _pods(children).items():
        assert pod["serviceAccountName"] == name
        assert pod["automountServiceAccountToken"] is False
    # an account exists before the Deployment whose pods run as it is applied
    kinds = [(c["kind"], c["metadata"]["name"]) for c in children]
    for account in accounts:
        name = account["metadata"]["name"]
        assert kinds.index(("ServiceAccount", name)) < kinds.index(("Deployment", name))


def test_pods_mount_our_audiences_token_and_what_reading_the_issuers_keys_needs() -> None:
    for pod in _pods(build_children(plan_application(cluster_app()))).values():
        [volume] = [v for v in pod["volumes"] if "projected" in v]
        assert volume["projected"]["sources"] == [
            {
                "serviceAccountToken": {
                    "audience": "maslab.io/a2a",
                    "expirationSeconds": 600,
                    "path": "token",
                }
            },
            {"serviceAccountToken": {"expirationSeconds": 600, "path": "api-token"}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
        ]
        [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
        assert mount == {
            "name": volume["name"],
            "mountPath": "/var/run/secrets/maslab.io/a2a",
            "readOnly": True,
        }
        assert f"{mount['mountPath']}/token" == identity.TOKEN_PATH
        assert f"{mount['mountPath']}/api-token" == identity.API_TOKEN_PATH
        assert pod["automountServiceAccountToken"] is False
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["MAS_A2A_IDENTITY"] == "kubernetes"


def test_a_named_service_account_runs_every_pod_and_none_is_created() -> None:
    app = cluster_app()
    app["spec"]["runtime"] = {"service_account": "shared"}
    children = build_children(plan_application(app))
    assert by_kind(children, "ServiceAccount") == []
    assert {pod["serviceAccountName"] for pod in _pods(children).values()} == {"shared"}


def test_subjects_round_trip_and_other_text_is_not_a_service_account() -> None:
    assert identity.subject("team-a", "desk-researcher") == (
        "system:serviceaccount:team-a:desk-researcher"
    )
    assert identity.parse_subject("system:serviceaccount:team-a:desk-researcher") == (
        "team-a",
        "desk-researcher",
    )
    for text in (
        "alice",
        "system:serviceaccount:",
        "system:serviceaccount:ns",
        "system:serviceaccount:a:b:c",
    ):
        assert identity.parse_subject(text) is None


def test_only_endpoints_this_application_deploys_carry_the_identity() -> None:
    app = Application.model_validate(cluster_app())
    app.spec.endpoints["outside"] = Endpoint(url="https://agents.example", usage="use")
    assert identity.carries_identity(app, "front")  # usage deploy
    assert identity.carries_identity(app, "back")  # usage use-and-deploy
    assert not identity.carries_identity(app, "outside")
    assert not identity.carries_identity(app, "helper")  # no endpoint: in process
