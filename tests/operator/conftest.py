"""Fixtures of the operator tests: the CRD on the real control plane, in-process operators.

``control_plane`` and ``envtest_namespace`` come from the suite-wide ``tests/conftest.py``
(etcd, kube-apiserver and kube-controller-manager built by ``scripts/build-envtest``);
without the binaries the tests that need them are skipped with a how-to-build message,
unless ``MAS_REQUIRE_ENVTEST=1``. ``proxy`` puts the fault proxy (``fault_proxy.py``) in
front of that API server, and ``start_proxied`` starts operators that reach it through the proxy.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_proxy import FaultProxy, proxied_kubeconfig
from operator_support import RunningOperator, crd_document

from mas_operator.runner import OperatorOptions


@pytest.fixture(scope="session")
def crd_installed(control_plane: Any) -> dict[str, Any]:
    """The committed CRD (generated from the models) applied once per session."""
    crd = crd_document()
    control_plane.apply_yaml(crd)
    return crd


@pytest.fixture
def start_operator(
    control_plane: Any, crd_installed: Any, envtest_namespace: str
) -> Iterator[Callable[..., RunningOperator]]:
    """Start operators watching the test's namespace; all are stopped at the end."""
    started: list[RunningOperator] = []

    def start(wait_leading: bool = True, **overrides: Any) -> RunningOperator:
        options = {
            "namespaces": (envtest_namespace,),
            "kubeconfig": str(control_plane.kubeconfig_path),
            "resync": 5.0,
            "lease_namespace": envtest_namespace,
            "identity": f"op-{uuid.uuid4().hex[:6]}",
            "lease_duration": 4.0,
            "lease_renew": 1.0,
            **overrides,
        }
        op = RunningOperator(OperatorOptions(**options))
        started.append(op)
        return op.start(wait_leading)

    yield start
    for op in reversed(started):
        if op.alive:
            op.stop()


@pytest.fixture
def proxy(control_plane: Any) -> Iterator[FaultProxy]:
    """The fault proxy in front of the real API server, stopped at the end."""
    pki = control_plane.pki
    started = FaultProxy(
        control_plane.server_url, control_plane.ca_path, pki["tls_crt"], pki["tls_key"]
    ).start()
    yield started
    started.stop()


@pytest.fixture
def start_proxied(
    proxy: FaultProxy,
    start_operator: Callable[..., RunningOperator],
    control_plane: Any,
    tmp_path: Path,
) -> Callable[..., RunningOperator]:
    """Start operators (as ``start_operator``) whose every API request, kopf's and the
    reconciler's, goes through the proxy."""
    kubeconfig = proxied_kubeconfig(control_plane, proxy, tmp_path / "proxied.kubeconfig")

    def start(**overrides: Any) -> RunningOperator:
        return start_operator(kubeconfig=str(kubeconfig), **overrides)

    return start
