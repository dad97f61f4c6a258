"""Generate the ``Application`` CustomResourceDefinition from the pydantic models.

``python -m mas.infra.crd`` prints the CRD; ``--check FILE`` exits 1 when ``FILE`` differs
from a fresh generation (CI's drift check; ``make crd`` regenerates it).

The pydantic JSON schema is turned into a Kubernetes *structural* schema: references are
inlined, ``Optional`` unions collapse to their type, free-form ``params`` keep unknown fields,
defaults stay in the models (the operator applies them), and each model's
``x-kubernetes-validations`` (CEL) rules are kept.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from mas.infra.generated_files import run
from mas.infra.models import (
    API_GROUP,
    API_VERSION,
    KIND,
    PLURAL,
    SHORT_NAME,
    ApplicationSpec,
    ApplicationStatus,
)

_DROP = {"title", "default", "additionalProperties", "$defs"}

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
    },
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {
        "name": "Agents",
        "type": "string",
        "jsonPath": ".status.agents_ready",
        "description": "Ready deployed agents / deployed agents",
    },
    {
        "name": "Edges",
        "type": "string",
        "priority": 1,
        "jsonPath": ".status.edges_ready",
        "description": "Ready edges / edges (status.routes)",
    },
    {
        "name": "Wired",
        "type": "string",
        "priority": 1,
        "jsonPath": '.status.conditions[?(@.type=="Wired")].status',
    },
    {
        "name": "Conformant",
        "type": "string",
        "priority": 1,
        "jsonPath": '.status.conditions[?(@.type=="Conformant")].status',
        "description": "Every deployed agent passed the conformance probe "
        "(spec.conformance.enabled)",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _cel_string(text: str) -> str:
    """``text`` as a double-quoted CEL string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _key_rule(names: dict[str, Any]) -> dict[str, str]:
    """CEL for a map's key constraints (structural schemas have no ``propertyNames``)."""
    checks = []
    if "pattern" in names:
        checks.append(f"k.matches({_cel_string(names['pattern'])})")
    if "maxLength" in names:
        checks.append(f"size(k) <= {names['maxLength']}")
    what = str(names.get("description", "valid")).rstrip(".")
    return {
        "rule": f"self.all(k, {' && '.join(checks) or 'true'})",
        "message": f"every key must be {what[:1].lower()}{what[1:]}",
    }


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_structural(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return _structural({**target, **extra}, defs)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"cannot express a union of {len(options)} types structurally")
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        return _structural({**options[0], **rest}, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "properties":
            out[key] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key in ("propertyNames", "patternProperties"):
            continue
        elif key == "const":
            out["enum"] = [value]
        elif key == "exclusiveMinimum":
            out["minimum"], out["exclusiveMinimum"] = value, True
        elif key == "exclusiveMaximum":
            out["maximum"], out["exclusiveMaximum"] = value, True
        else:
            out[key] = _structural(value, defs)
    patterns = node.get("patternProperties", {})
    if len(patterns) > 1:
        raise ValueError("cannot express several key patterns structurally")
    names = dict(node.get("propertyNames", {}))
    for pattern, sub in patterns.items():
        names["pattern"] = pattern
        out["additionalProperties"] = _structural(sub, defs)
    if names:
        out.setdefault("x-kubernetes-validations", []).append(_key_rule(names))
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        out["additionalProperties"] = _structural(additional, defs)
    elif additional is True and "properties" not in node:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _schema_of(model: type[ApplicationSpec] | type[ApplicationStatus]) -> dict[str, Any]:
    raw = model.model_json_schema(mode="validation")
    result: dict[str, Any] = _structural(raw, raw.get("$defs", {}))
    return result


def build_crd() -> dict[str, Any]:
    """The CRD manifest as a mapping."""
    schema = {
        "type": "object",
        "description": "A multi-agent system (agency) and its public protocol endpoints.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": _schema_of(ApplicationSpec),
            "status": _schema_of(ApplicationStatus),
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{API_GROUP}",
            "labels": {"app.kubernetes.io/part-of": "maslab"},
        },
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": [SHORT_NAME],
                "categories": ["maslab"],
            },
            "versions": [
                {
                    "name": API_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


HEADER = (
    "# Generated by `python -m mas.infra.crd` from runtime/mas/infra/models.py.\n"
    "# Do not edit by hand: run `make crd`; CI fails when this file drifts.\n"
)


def render_crd() -> str:
    """The CRD as YAML text, exactly as committed."""
    body = yaml.safe_dump(build_crd(), sort_keys=False, width=100, allow_unicode=True)
    return HEADER + body


def main(argv: Sequence[str] | None = None) -> int:
    """Print the CRD, or check a committed copy."""
    return run(render_crd, "make crd", argv, "python -m mas.infra.crd", source="the models")


if __name__ == "__main__":
    sys.exit(main())
