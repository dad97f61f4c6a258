"""The children of every Application as the operator's watches see them: kopf indexes.

A reconcile used to LIST each child kind of its Application (5 requests per Application on
every resync pass: at 1,000 Applications and a 30 s resync, about 170 LISTs/s). The operator
already watches those kinds (their events mark the owner dirty); :func:`register` adds one
kopf index per kind over the same watch, keyed by the owning Application's uid, and a
reconcile reads its children from them (:meth:`ChildIndex.children_of`) with no request.

Rules the reconcile relies on:

- kopf runs no handler of any resource until every index has seen the initial listing of
  its kind, so the first reconcile after a start already sees every child that exists
  (a reconcile that ran on an empty index would miss the children it must delete);
- an index entry is replaced by every event of its object and dropped when it is deleted,
  before the event handlers run: a child event that marks its owner dirty is already in the
  index when the reconcile it causes reads it;
- a value is a small projection of the object (:func:`project`): what the reconcile reads
  (identity, labels, annotations, owner references, and a Deployment's replicas and
  status), never a ConfigMap's data nor a pod template, kept as compact JSON deflated
  with a preset dictionary of the keys and values every child repeats (:func:`pack`:
  a fraction of the same as dicts) and decoded only when a reconcile reads its owner's
  children (:meth:`ChildIndex.children_of`); the owner uid that keys a child is
  interned, one string per Application, not one per child;
- what kopf's watch misses the index misses too: an object deleted while a watch is being
  re-listed (after a ``410 Gone``) stays in its index until it reappears. A reconcile then
  skips applying it while its recorded stamp matches; the next cold pass (the work queue's,
  :mod:`mas_operator.workqueue`), which reads the children from the API server instead,
  applies it again (``tests/operator/test_operator_drift_envtest.py`` pins both).
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from mas_operator.children import CHILD_KINDS, ChildKind
from mas_operator.names import (
    ANNOTATION_CARD_URL,
    ANNOTATION_CONFIG_HASH,
    ANNOTATION_GENERATION,
    ANNOTATION_METRICS_URL,
    ANNOTATION_SECRETS_HASH,
    ANNOTATION_URL,
    CARD_PATH,
    MANAGED_BY,
    child_labels,
)

_APPLICATION = "Application"
_META_KEYS = ("name", "namespace", "uid", "resourceVersion", "generation", "labels", "annotations")


def index_id(kind: ChildKind) -> str:
    """The kopf handler id of ``kind``'s index (also the kwarg kopf passes it under)."""
    return f"owned_{kind.plural}"


def project(body: Mapping[str, Any], kind: ChildKind) -> dict[str, Any]:
    """The part of a child object a reconcile reads (a new dict; ``body`` is not kept)."""
    meta = body.get("metadata") or {}
    metadata = _plain({key: meta[key] for key in _META_KEYS if meta.get(key) is not None})
    refs = [
        _plain({"kind": ref.get("kind"), "name": ref.get("name"), "uid": ref.get("uid")})
        for ref in meta.get("ownerReferences") or []
    ]
    if refs:
        metadata["ownerReferences"] = refs
    slim: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata}
    if kind.kind == "Deployment":
        spec = body.get("spec") or {}
        if "replicas" in spec:
            slim["spec"] = {"replicas": spec["replicas"]}
        slim["status"] = _plain(body.get("status") or {})
    return slim


def _dictionary() -> bytes:
    """What deflate may refer back to in every packed child: a projection's keys and the
    label and annotation keys and values each child of ours carries (the names of an
    Application and its agents differ; these do not)."""
    template = {
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "updatedReplicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
        },
        "metadata": {
            "name": "",
            "namespace": "",
            "uid": "",
            "resourceVersion": "",
            "generation": 1,
            "labels": child_labels("", ""),
            "annotations": {
                ANNOTATION_CONFIG_HASH: "",
                ANNOTATION_SECRETS_HASH: "",
                ANNOTATION_GENERATION: "1",
                ANNOTATION_URL: "http://.svc:8080",
                ANNOTATION_CARD_URL: f"http://.svc:8080{CARD_PATH}",
                ANNOTATION_METRICS_URL: "http://.svc:9464/metrics",
            },
            "ownerReferences": [{"kind": _APPLICATION, "name": "", "uid": ""}],
        },
        "spec": {"replicas": 1},
    }
    return json.dumps(template, separators=(",", ":")).encode()


_DICTIONARY = _dictionary()
_RAW = -15  # raw deflate: no zlib header or checksum (the bytes never leave the process)


def pack(body: Mapping[str, Any], kind: ChildKind) -> bytes:
    """The projection of a child (:func:`project`) as the index keeps it: compact JSON,
    without the ``apiVersion`` and ``kind`` its index already tells, deflated with
    :data:`_DICTIONARY` (:func:`unpack`)."""
    slim = project(body, kind)
    del slim["apiVersion"], slim["kind"]
    deflate = zlib.compressobj(zlib.Z_BEST_SPEED, zlib.DEFLATED, _RAW, zdict=_DICTIONARY)
    text = json.dumps(slim, separators=(",", ":")).encode()
    return deflate.compress(text) + deflate.flush()


def unpack(packed: bytes, kind: ChildKind) -> dict[str, Any]:
    """The projection :func:`pack` kept (a new dict each call)."""
    inflate = zlib.decompressobj(_RAW, zdict=_DICTIONARY)
    slim: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind}
    slim.update(json.loads(inflate.decompress(packed) + inflate.flush()))
    return slim


def _plain(value: Any) -> Any:
    """A deep copy made of plain dicts and lists (kopf hands out read-only views)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def owners(body: Mapping[str, Any]) -> list[str]:
    """The uids of the Applications that own ``body`` (interned: the index keys every child
    of one Application by the same string)."""
    refs = (body.get("metadata") or {}).get("ownerReferences") or []
    return [sys.intern(str(ref.get("uid"))) for ref in refs if ref.get("kind") == _APPLICATION]


@dataclass(frozen=True)
class ChildIndex:
    """The kopf indexes of every child kind, read by owner uid (on the operator's loop)."""

    indexes: Mapping[str, kopf.Index[str, bytes]]  # by kind: packed projections

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> ChildIndex | None:
        """The indexes kopf passed a handler, or ``None`` when they are not registered."""
        found = {kind.kind: kwargs.get(index_id(kind)) for kind in CHILD_KINDS}
        if any(index is None for index in found.values()):
            return None
        return cls({kind: index for kind, index in found.items() if index is not None})

    def children_of(self, uid: str) -> dict[str, list[dict[str, Any]]]:
        """Every child of the Application ``uid`` by kind, as the watches last saw them.

        The lists and the objects in them are new (:func:`unpack`).
        """
        out: dict[str, list[dict[str, Any]]] = {}
        for kind in CHILD_KINDS:
            store = self.indexes[kind.kind].get(uid)
            out[kind.kind] = [unpack(v, kind) for v in store] if store is not None else []
        return out


def register(registry: kopf.OperatorRegistry) -> None:
    """Register one index per child kind into ``registry``."""
    for kind in CHILD_KINDS:
        group, _, version = kind.api_version.rpartition("/")

        def owned(body: kopf.Body, _kind: ChildKind = kind, **_: Any) -> dict[str, bytes] | None:
            uids = owners(body)
            if not uids:
                return None
            packed = pack(body, _kind)
            return {uid: packed for uid in uids}

        kopf.index(
            group=group,
            version=version,
            plural=kind.plural,
            id=index_id(kind),
            registry=registry,
            labels={"app.kubernetes.io/managed-by": MANAGED_BY},
        )(owned)
