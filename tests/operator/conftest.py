"""Fixtures of the operator tests: the real control plane, the CRD, an in-process operator.

The control plane comes from ``tests/envtest`` (etcd, kube-apiserver and
kube-controller-manager built by ``scripts/build-envtest``); without its binaries the tests
that need it are skipped with a how-to-build message, unless ``MAS_REQUIRE_ENVTEST=1``.
"""

from __future__ import annotations

import gc
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from envtest import fixtures as envtest_fixtures  # noqa: E402
from operator_support import RunningOperator, crd_document  # noqa: E402

control_plane = envtest_fixtures.control_plane
envtest_namespace = envtest_fixtures.envtest_namespace

from mas_operator.runner import OperatorOptions  # noqa: E402


def _collect_startup_garbage() -> None:
    """Collect what the control plane's start-up left for the garbage collector.

    Its readiness probes can drop an unclosed HTTP error response (an SSL socket) while the
    API server starts; collected inside a test, it would fail that test as an unraisable
    ResourceWarning. Collect it once here, where its origin is known, with the hooks quiet.
    """
    previous = sys.unraisablehook
    sys.unraisablehook = lambda _: None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
    finally:
        sys.unraisablehook = previous


@pytest.fixture(scope="session")
def crd_installed(control_plane: Any) -> dict[str, Any]:
    """The Application CRD applied to the control plane once per session."""
    _collect_startup_garbage()
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
