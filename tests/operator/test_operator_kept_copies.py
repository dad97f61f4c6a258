"""What the operator keeps of each watched object and of its own applies between events
(pure)."""

from __future__ import annotations

import copy
import json
import tracemalloc
from typing import Any

import kopf
import pytest
from kubernetes import client as k8s

from mas_operator.children import CHILD_KINDS
from mas_operator.handlers import OperatorContext, kept_copy
from mas_operator.indexes import pack, project, unpack
from mas_operator.kube import Cluster
from mas_operator.metrics import OperatorMetrics
from mas_operator.names import ANNOTATION_CONFORMANCE_RUN, ANNOTATION_DIFFBASE
from mas_operator.noops import digest, memory_of, unchanged
from mas_operator.runner import SharedMemo

pytestmark = pytest.mark.timeout(10)

KINDS = {kind.kind: kind for kind in CHILD_KINDS}


def decoded(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a watch hands it over: freshly decoded, sharing no string with another."""
    loaded: dict[str, Any] = json.loads(json.dumps(obj))
    return loaded


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "resourceVersion": "17",
            "labels": {"app.kubernetes.io/managed-by": "mas-operator", "maslab.io/agent": "a0"},
            "annotations": {"maslab.io/url": f"http://{name}.team-a:8000/"},
            "ownerReferences": [{"kind": "Application", "name": "desk", "uid": "app-uid"}],
            "managedFields": [{"manager": "mas-operator", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"ports": [{"port": 8000}]},
    }


def test_a_child_is_kept_packed_and_reads_back_as_its_projection() -> None:
    """The index keeps each child's projection as deflated compact JSON: it reads back as
    the projection, from kopf's read-only view too, and holds under 15% of the projection
    as dicts (compact JSON alone held 27%). Measured over 200 children, so that the
    interpreter's free lists do not count."""
    kind = KINDS["Service"]
    bodies = [decoded(service(f"desk-a{n}")) for n in range(200)]
    view = kopf.Body(bodies[0])  # what kopf hands an indexer
    assert unpack(pack(view, kind), kind) == project(bodies[0], kind)
    assert unpack(pack(view, kind), kind) is not unpack(pack(view, kind), kind)
    sizes = []
    for keep in (project, pack):
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            kept = [keep(body, kind) for body in bodies]
            sizes.append(tracemalloc.get_traced_memory()[0] - start)
            del kept
        finally:
            tracemalloc.stop()
    as_dicts, packed = sizes
    assert packed < as_dicts * 0.15, (packed, as_dicts)


def test_a_projection_keeps_what_a_reconcile_reads_and_nothing_else() -> None:
    slim = project(decoded(service("desk-a0")), KINDS["Service"])
    assert slim == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "desk-a0",
            "namespace": "team-a",
            "uid": "uid-desk-a0",
            "resourceVersion": "17",
            "labels": {"app.kubernetes.io/managed-by": "mas-operator", "maslab.io/agent": "a0"},
            "annotations": {"maslab.io/url": "http://desk-a0.team-a:8000/"},
            "ownerReferences": [{"kind": "Application", "name": "desk", "uid": "app-uid"}],
        },
    }


def application_with_status(agents: int) -> dict[str, Any]:
    names = [f"a{i}" for i in range(agents)]
    status = {
        name: {"url": f"http://desk-{name}.team-a.svc:8080", "ready": True, "replicas": 1}
        for name in names
    }
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {
            "name": "desk",
            "namespace": "team-a",
            "uid": "app-uid",
            "resourceVersion": "5",
            "generation": 1,
            "annotations": {ANNOTATION_DIFFBASE: '{"spec": {}}'},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "agency": {"entry": "a0", "agents": {n: {"spec": {"skills": ["s"]}} for n in names}},
            "endpoints": {n: {"usage": "deploy"} for n in names},
        },
        "status": {"agents": status, "phase": "Ready", "agents_ready": f"{agents}/{agents}"},
    }


def test_the_kept_copy_of_an_application_drops_what_no_reconcile_reads() -> None:
    body = application_with_status(1)
    body["metadata"]["generation"] = 2
    body["metadata"]["annotations"][ANNOTATION_CONFORMANCE_RUN] = "1"
    kept = kept_copy(decoded(body))
    assert kept["metadata"] == {
        "name": "desk",
        "namespace": "team-a",
        "uid": "app-uid",
        "resourceVersion": "5",
        "generation": 2,
        "annotations": {ANNOTATION_CONFORMANCE_RUN: "1"},
    }
    assert (kept["spec"], kept["status"]) == (body["spec"], body["status"])
    assert body["metadata"]["managedFields"]  # the object it was given is left as it was


def test_the_context_keeps_that_copy_without_the_body_the_watch_decoded() -> None:
    """The kept copy is deflated compact JSON: the watch's decoded body (dicts and strings
    kopf drops after its handlers) is not held by it, it holds under 9% of that body
    (compact JSON alone held 13%), and it reads back as the copy. Measured over 200
    Applications, so that the interpreter's free lists do not count."""
    ctx = OperatorContext(Cluster(k8s.ApiClient()), OperatorMetrics())
    bodies = []
    for n in range(200):
        body = application_with_status(5)
        body["metadata"]["uid"] = f"uid-{n}"
        bodies.append(json.dumps(body))
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        decoded_bodies = [json.loads(text) for text in bodies]
        decoded_size = tracemalloc.get_traced_memory()[0] - start
        for raw in decoded_bodies:
            ctx.remember(raw)
        del decoded_bodies, raw
        kept_size = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert kept_size < decoded_size * 0.09, (kept_size, decoded_size)
    body = kopf.Body(decoded(application_with_status(5)))  # what kopf hands a handler
    ctx.remember(body)
    assert ctx.app("app-uid") == kept_copy(application_with_status(5))
    assert ctx.app("no-such-uid") is None


def test_the_memory_of_an_apply_is_32_bytes_and_tells_every_change() -> None:
    manifest = service("a0")
    returned = dict(service("a0"), metadata=dict(service("a0")["metadata"], generation=1))
    memory = memory_of(digest(manifest), returned)
    assert isinstance(memory, bytes) and len(memory) == 32
    assert unchanged(decoded(returned), digest(decoded(manifest)), memory)
    edited = dict(manifest, spec={"ports": [{"port": 8001}]})
    assert not unchanged(returned, digest(edited), memory)  # we would apply something else
    meta = returned["metadata"]
    for changed in (
        dict(meta, generation=2),  # someone changed its spec
        dict(meta, labels={"maslab.io/agent": "a0"}),  # or its labels
        dict(meta, annotations={}),  # or its annotations
    ):
        assert not unchanged(dict(returned, metadata=changed), digest(manifest), memory)
    assert unchanged(dict(returned, status={"x": 1}), digest(manifest), memory)  # status only
    plain = dict(manifest, kind="ConfigMap")  # no generation: its resourceVersion is the stamp
    kept = memory_of(digest(plain), plain)
    assert unchanged(plain, digest(plain), kept)
    later = dict(plain, metadata=dict(plain["metadata"], resourceVersion="18"))
    assert not unchanged(later, digest(plain), kept)
    assert not unchanged(None, digest(plain), kept) and not unchanged(plain, digest(plain), None)


def test_every_watched_object_shares_the_one_memo() -> None:
    """kopf gives each object it watches a shallow copy of the operator's memo; ours is the
    same object for all of them (it holds only the context every handler shares), not a
    dict per child."""
    ctx = object()
    memo = SharedMemo(ctx=ctx)
    assert copy.copy(memo) is memo
    assert copy.copy(memo).ctx is ctx
    plain = kopf.Memo(ctx=ctx)
    assert copy.copy(plain) is not plain  # what kopf's own memo does
