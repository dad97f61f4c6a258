"""Manifests as text and as owned objects: YAML for people, owner references for the API."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """Block-style YAML without anchors; multi-line strings as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_manifests(manifests: Iterable[Mapping[str, Any]]) -> str:
    """The manifests as one multi-document YAML stream (each starting with ``---``)."""
    return "".join(
        "---\n" + yaml.dump(dict(m), Dumper=_Dumper, sort_keys=False, default_flow_style=False)
        for m in manifests
    )


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """A controller owner reference to ``owner`` (garbage collection removes the child)."""
    metadata = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _copy(value: Any) -> Any:
    """A deep copy of a manifest's tree of dicts and lists (its leaves are immutable
    scalars): what :func:`copy.deepcopy` gives, without its memo and its dispatch."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


def owned(manifest: Mapping[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``manifest`` owned by ``owner`` (``manifest`` is left as it was)."""
    out: dict[str, Any] = _copy(manifest)
    out["metadata"]["ownerReferences"] = [owner_reference(owner)]
    return out
