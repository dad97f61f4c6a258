"""pytest fixtures of the node tier: one real node for the session, two for a module.

``node_cluster`` skips with what is missing and how to get it (root, containerd, the node
binaries of ``scripts/build-node``, the image of ``scripts/build-image``) unless
``MAS_REQUIRE_NODE=1``, in which case it fails, as ``MAS_REQUIRE_ENVTEST`` does for envtest.

``two_nodes`` (module scope) is a cluster of two nodes for the module that uses it. One
machine runs one node tier at a time (one set of bridges, one lock): its module sorts before
the one-node tests (``test_node_2nodes.py``), so it is stopped before ``node_cluster`` starts;
asked for while ``node_cluster`` runs, it fails and says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .cluster import ENFORCER, NodeCluster, node_available, node_binaries_dir
from .support import helm_binary

__all__ = ["node_alive", "node_cluster", "require_enforcer", "require_node", "two_nodes"]

REQUIRE_ENV = "MAS_REQUIRE_NODE"


def require_node() -> None:
    """Skip (or, with MAS_REQUIRE_NODE=1, fail) when this machine cannot run the node tier."""
    ok, why = node_available()
    if ok and helm_binary() is None:
        ok, why = False, "helm is missing: build it with scripts/build-helm (or set MAS_HELM_DIR)"
    _skip_or_fail(ok, why)


def require_enforcer() -> None:
    """The NetworkPolicy enforcer (kube-router from scripts/build-node) is there, else skip/fail."""
    path = node_binaries_dir() / ENFORCER
    _skip_or_fail(path.exists(), f"{path} is missing: build it with scripts/build-node")


def _skip_or_fail(ok: bool, why: str) -> None:
    if ok:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[NodeCluster]:
    """A running :class:`~tests.node.cluster.NodeCluster` (control plane plus node)."""
    require_node()
    with NodeCluster() as node:
        yield node


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[NodeCluster]:
    """A running :class:`~tests.node.cluster.NodeCluster` of two nodes, for one module."""
    require_node()
    with NodeCluster(nodes=2) as nodes:
        yield nodes


@pytest.fixture(autouse=True)
def node_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test during which one of the node's processes died, with its log tail.

    A dead kubelet looks like pods stuck Pending; a dead kube-proxy like Services that stop
    answering: the test that saw it is told which process died instead.
    """
    yield
    used = [f for f in ("node_cluster", "two_nodes") if f in request.fixturenames]
    if not used:
        return
    node: NodeCluster = request.getfixturevalue(used[0])
    dead = node.exited()
    if dead:
        pytest.fail("a node process died during this test:\n" + "\n".join(dead), pytrace=False)
