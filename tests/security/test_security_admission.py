"""The CRD on a real kube-apiserver refuses bad security settings at admission (schema and CEL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from security_support import document
from tests.conftest import REPO
from tests.envtest.controlplane import ControlPlane

GROUP, VERSION, PLURAL = "infra.maslab.io", "v1", "applications"
pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def custom(control_plane: ControlPlane) -> Iterator[client.CustomObjectsApi]:
    control_plane.apply_yaml(REPO / "crds" / "application.yaml")
    with control_plane.api_client() as api_client:
        yield client.CustomObjectsApi(api_client)


def create(api: client.CustomObjectsApi, namespace: str, doc: dict[str, Any]) -> Any:
    return api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, doc)


@pytest.mark.parametrize(
    ("a2a", "fragment"),
    [
        (
            {"auth": {"schemes": [{"type": "bearer"}]}},
            "set exactly one of secret_key_ref or value_env",
        ),
        (
            {"auth": {"schemes": [{"type": "bearer", "name": "X", "value_env": "E"}]}},
            "name is only for type api_key",
        ),
        ({"auth": {"schemes": [{"type": "oauth", "value_env": "E"}]}}, "Unsupported value"),
        ({"auth": {"schemes": [{"type": "oidc"}]}}, "or oidc alone (type oidc)"),
        (
            {
                "auth": {
                    "schemes": [
                        {
                            "type": "oidc",
                            "oidc": {"issuer": "http://idp.example", "audiences": ["a"]},
                        }
                    ]
                }
            },
            "should match",
        ),
        ({"allow": ["oidc:someone"]}, "should match"),
        ({"max_body_bytes": 12}, "should be greater than or equal to 1024"),
        (
            {
                "task_store": {
                    "type": "sql",
                    "url": "sqlite+aiosqlite:///t.db",
                    "history_max_bytes": 2**21,
                }
            },
            "history_max_session_bytes bound the memory store; they need type memory",
        ),
    ],
)
def test_bad_security_settings_are_refused_at_admission(
    custom: client.CustomObjectsApi, envtest_namespace: str, a2a: dict[str, Any], fragment: str
) -> None:
    doc = document(a2a)
    doc["metadata"]["name"] = f"bad-{uuid.uuid4().hex[:8]}"
    with pytest.raises(client.ApiException) as caught:
        create(custom, envtest_namespace, doc)
    assert caught.value.status == 422, caught.value.body
    assert fragment in str(caught.value.body)


def test_good_security_settings_are_admitted_unchanged(
    custom: client.CustomObjectsApi, envtest_namespace: str
) -> None:
    a2a = {
        "max_body_bytes": 4096,
        "push": {
            "allow_private": False,
            "allowed_hosts": ["hooks.internal"],
            "allow_anonymous_create": True,
        },
        "task_store": {"history_max_bytes": 2**21, "history_max_session_bytes": 2**17},
        "auth": {
            "schemes": [
                {"type": "bearer", "secret_key_ref": {"name": "s", "key": "k"}},
                {"type": "api_key", "name": "X-Key", "value_env": "KEY"},
                {
                    "type": "oidc",
                    "oidc": {
                        "issuer": "https://login.example.com/realms/staff",
                        "audiences": ["mas"],
                        "principal_claim": "email",
                        "required_groups": ["mas-users"],
                    },
                },
            ]
        },
        "allow": ["oidc:user:alice@example.com", "oidc:group:staff"],
    }
    stored = create(custom, envtest_namespace, document(a2a))
    assert stored["spec"]["endpoints"]["a"]["a2a"] == a2a
