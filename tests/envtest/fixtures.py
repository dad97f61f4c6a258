"""pytest fixtures for the envtest control plane.

Import them into a conftest.py to use them::

    from envtest.fixtures import control_plane, envtest_namespace  # noqa: F401

``control_plane`` is session-scoped: one etcd + kube-apiserver +
kube-controller-manager for the whole run. When the binaries are missing the
tests that use it are skipped with the how-to-build message, unless
``MAS_REQUIRE_ENVTEST=1``, in which case they fail (use that in CI).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from .controlplane import ControlPlane, binaries_available

__all__ = ["control_plane", "envtest_namespace", "require_envtest"]

REQUIRE_ENV = "MAS_REQUIRE_ENVTEST"


def require_envtest() -> None:
    """Skip (or, with MAS_REQUIRE_ENVTEST=1, fail) when the binaries are missing."""
    ok, why = binaries_available()
    if ok:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {why}", pytrace=False)
    pytest.skip(why)


# One control plane per process even if several conftest.py files import the
# fixture (each import is its own session fixture definition to pytest).
_shared: ControlPlane | None = None
_users = 0


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """A running :class:`~envtest.controlplane.ControlPlane` for the session."""
    global _shared, _users
    require_envtest()
    if _shared is None:
        _shared = ControlPlane().start()
    _users += 1
    try:
        yield _shared
    finally:
        _users -= 1
        if _users == 0 and _shared is not None:
            _shared.stop()
            _shared = None


@pytest.fixture
def envtest_namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace for one test, deleted (not waited for) afterwards."""
    from kubernetes import client

    core = client.CoreV1Api(control_plane.api_client())
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except client.ApiException as e:
            if e.status != 404:
                raise
