"""Small builders of Application documents for the unit tests."""

from __future__ import annotations

import copy
from typing import Any

BASE: dict[str, Any] = {
    "apiVersion": "infra.maslab.io/v1",
    "kind": "Application",
    "metadata": {"name": "demo"},
    "spec": {
        "agency": {
            "entry": "lead",
            "agents": {
                "lead": {"spec": {"delegates_to": ["worker"]}},
                "worker": {},
            },
        },
        "endpoints": {},
    },
}


def document(**spec_changes: Any) -> dict[str, Any]:
    """A copy of :data:`BASE` with top-level ``spec`` keys replaced."""
    doc = copy.deepcopy(BASE)
    doc["spec"].update(copy.deepcopy(spec_changes))
    return doc


def agency(entry: str | None, **agents: list[str]) -> dict[str, Any]:
    """An agency whose agents delegate as given (``lead=["worker"]``)."""
    out: dict[str, Any] = {"agents": {a: {"spec": {"delegates_to": t}} for a, t in agents.items()}}
    if entry is not None:
        out["entry"] = entry
    return out
