"""Fixtures of the security tests: task-leak guard and distinctive secret values."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from security_support import BEARER_REF, Secrets

from mas.infra.secrets import secret_env_name


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch) -> Secrets:
    """Distinctive credentials, exported the way the operator exports Secret keys."""
    made = Secrets(
        token=f"tok-{secrets.token_hex(12)}",
        api_key=f"key-{secrets.token_hex(12)}",
    )
    monkeypatch.setenv(secret_env_name(BEARER_REF), made.token)
    monkeypatch.setenv("SEC_TEST_API_KEY", made.api_key)
    return made


@pytest.fixture
def operator_api(control_plane: Any, envtest_namespace: str) -> Any:
    """Clients of the real kube-apiserver, in the test's namespace (CRD installed)."""
    from tests.operator.operator_support import Api, crd_document

    control_plane.apply_yaml(crd_document())
    return Api(control_plane.api_client(), envtest_namespace)


@pytest.fixture
def running_operator(
    control_plane: Any, operator_api: Any, envtest_namespace: str
) -> Iterator[Any]:
    """``mas-operator run`` (in a thread) watching the test's namespace."""
    from tests.operator.operator_support import RunningOperator

    from mas_operator.runner import OperatorOptions

    options = OperatorOptions(
        namespaces=(envtest_namespace,),
        kubeconfig=str(control_plane.kubeconfig_path),
        resync=5.0,
        lease_namespace=envtest_namespace,
        identity=f"sec-{secrets.token_hex(3)}",
        lease_duration=4.0,
        lease_renew=1.0,
    )
    operator = RunningOperator(options).start()
    yield operator
    if operator.alive:
        operator.stop()
