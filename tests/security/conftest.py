"""Fixtures of the security tests: task-leak guard and distinctive secret values."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
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


def _library_singleton(task: asyncio.Task[object]) -> bool:
    """sse-starlette keeps one shutdown watcher per event loop; it is not ours to stop."""
    return getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher"


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves an asyncio task running after its fixtures are torn down."""
    before = set(asyncio.all_tasks())
    yield
    current = asyncio.current_task()
    leaked: list[asyncio.Task[Any]] = []
    for _ in range(20):
        leaked = [
            t
            for t in asyncio.all_tasks() - before
            if t is not current and not t.done() and not _library_singleton(t)
        ]
        if not leaked:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"leaked asyncio tasks: {[t.get_name() for t in leaked]}")


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
