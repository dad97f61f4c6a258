"""Which writes of a reconcile would change nothing, so that a steady state makes none.

- A child is not applied again when the object that exists is still what our last apply of
  it returned (its :func:`stamp`: the ``generation`` and the labels and annotations of an
  object with a generation, whose status a controller updates, else the
  ``resourceVersion``) and the manifest we would apply is the one we applied then (its
  :func:`digest`).
  The memory of those applies lives in the operator (an :data:`Applied` per child, per
  Application: 32 bytes, the first 16 of each digest); an operator that restarts applies
  everything once. A child someone else changed, deleted or that the controller manager
  updated is applied as before.
- The status is not patched when merging the patch into the status read with the
  Application would leave it as it is (:func:`merge_patch`, RFC 7386).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

ChildKey = tuple[str, str]  # (kind, name)


DIGEST_BYTES = 16  # of a SHA-256: a collision among one Application's children is out of reach

# What our last apply of one child sent (the manifest's digest) and got back (the returned
# object's stamp), concatenated: 32 bytes, one object per child (about 65 B, where
# a dataclass of two hex strings took about 330 B: ~5 MB at 1,000 Applications).
Applied = bytes


def digest(manifest: Mapping[str, Any]) -> bytes:
    """A stable digest of a manifest (key order does not matter)."""
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).digest()[:DIGEST_BYTES]


def stamp(obj: Mapping[str, Any]) -> bytes:
    """What changes when anyone changes the object's spec or metadata (not its status)."""
    meta = obj.get("metadata") or {}
    generation = meta.get("generation")
    if generation is None:
        return digest({"resourceVersion": meta.get("resourceVersion")})
    marks = {"labels": meta.get("labels"), "annotations": meta.get("annotations")}
    return digest({"generation": generation, **marks})


def memory_of(manifest_digest: bytes, obj: Mapping[str, Any]) -> Applied:
    """The memory of applying the manifest of ``manifest_digest`` that returned ``obj``."""
    return manifest_digest + stamp(obj)


def unchanged(
    existing: Mapping[str, Any] | None, wanted_digest: bytes, last: Applied | None
) -> bool:
    """Whether applying the manifest of ``wanted_digest`` over ``existing`` would be a no-op."""
    if existing is None or last is None:
        return False
    return last == memory_of(wanted_digest, existing)


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with the JSON merge patch ``patch`` applied (``None`` removes a key)."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
