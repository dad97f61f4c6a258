"""The generated CRD on a real kube-apiserver: accepted, and its schema/CEL refuse bad documents."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from mas.infra.documents import read_yaml_file
from tests.conftest import DATA, EXAMPLES, REPO
from tests.envtest.controlplane import ControlPlane

GROUP, VERSION, PLURAL = "infra.maslab.io", "v1", "applications"
pytestmark = [pytest.mark.envtest, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def crd_applied(control_plane: ControlPlane) -> Iterator[client.CustomObjectsApi]:
    control_plane.apply_yaml(REPO / "crds" / "application.yaml")
    with control_plane.api_client() as api_client:
        yield client.CustomObjectsApi(api_client)


def create(api: client.CustomObjectsApi, namespace: str, doc: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(doc)
    body["apiVersion"] = f"{GROUP}/{VERSION}"
    result: dict[str, Any] = api.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )
    return result


def refusal(api: client.CustomObjectsApi, namespace: str, doc: dict[str, Any]) -> str:
    """The body of the API server's 422 for ``doc``."""
    with pytest.raises(client.ApiException) as caught:
        create(api, namespace, doc)
    assert caught.value.status == 422, caught.value.body
    return str(caught.value.body)


def test_example_is_admitted_unchanged(
    crd_applied: client.CustomObjectsApi, envtest_namespace: str
) -> None:
    doc = read_yaml_file(EXAMPLES / "agency.yaml")
    stored = create(crd_applied, envtest_namespace, doc)
    assert stored["spec"] == doc["spec"]  # nothing pruned, nothing defaulted


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("url-path-prefix.yaml", "the advertised url cannot include a path prefix"),
        ("entry-not-agent.yaml", "spec.agency.entry must be an agent of the agency"),
        ("deploy-external.yaml", "must be keyed by an agent of the agency"),
        ("legacy-expose-external.yaml", "must be keyed by an agent of the agency"),
        ("bad-agent-id.yaml", "every key must be an agent id: a DNS-1123 label"),
        ("bad-usage-value.yaml", 'Unsupported value: \\"publish\\"'),
    ],
)
def test_admission_refuses_single_object_rules(
    crd_applied: client.CustomObjectsApi, envtest_namespace: str, name: str, fragment: str
) -> None:
    body = refusal(crd_applied, envtest_namespace, read_yaml_file(DATA / "invalid" / name))
    assert fragment in body


def test_header_value_needs_exactly_one_source(
    crd_applied: client.CustomObjectsApi, envtest_namespace: str
) -> None:
    doc = read_yaml_file(EXAMPLES / "agency.yaml")
    doc["spec"]["endpoints"]["web-search"]["headers"]["X-Tenant"] = {}
    assert "set exactly one of value or secret_key_ref" in refusal(
        crd_applied, envtest_namespace, doc
    )


def test_header_names_are_tokens(
    crd_applied: client.CustomObjectsApi, envtest_namespace: str
) -> None:
    doc = read_yaml_file(EXAMPLES / "agency.yaml")
    doc["spec"]["endpoints"]["web-search"]["headers"]["X Tenant"] = {"value": "x"}
    body = refusal(crd_applied, envtest_namespace, doc)
    assert "every key must be an HTTP header name" in body


def test_whole_document_rules_are_left_to_reconcile(
    crd_applied: client.CustomObjectsApi, envtest_namespace: str
) -> None:
    # A missing delegation target is admitted: the operator reports it as Stalled.
    doc = read_yaml_file(DATA / "invalid" / "missing-delegation-target.yaml")
    assert create(crd_applied, envtest_namespace, doc)["metadata"]["name"] == "broken"
