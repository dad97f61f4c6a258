"""The committed CRD is generated from the models and is a structural schema."""

from __future__ import annotations

from typing import Any

import yaml

from mas.infra import crd
from tests.conftest import REPO

COMMITTED = REPO / "crds" / "application.yaml"
FORBIDDEN_KEYS = {"$ref", "anyOf", "oneOf", "allOf", "propertyNames", "patternProperties", "title"}


def walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        out.append((path, node))
        for key, value in node.get("properties", {}).items():
            out += walk(value, f"{path}.{key}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                out += walk(node[key], f"{path}[{key}]")
    return out


def schema() -> dict[str, Any]:
    doc = yaml.safe_load(COMMITTED.read_text())
    result: dict[str, Any] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return result


def test_committed_crd_matches_a_fresh_generation() -> None:
    assert COMMITTED.read_text() == crd.render_crd(), "run `make crd` and commit the result"


def test_check_mode_reports_drift(tmp_path: Any, capsys: Any) -> None:
    stale = tmp_path / "crd.yaml"
    stale.write_text(crd.render_crd().replace("masapp", "oldname"))
    assert crd.main(["--check", str(stale)]) == 1
    assert "differs from the models; run `make crd`" in capsys.readouterr().err
    assert crd.main(["--check", str(COMMITTED)]) == 0


def test_schema_is_structural() -> None:
    for path, node in walk(schema()):
        assert not FORBIDDEN_KEYS & set(node), f"{path} uses {FORBIDDEN_KEYS & set(node)}"
        if "properties" in node or "additionalProperties" in node:
            assert node.get("type") == "object", path
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            assert "type" in node, f"{path} has no type"


def test_names_columns_and_status_subresource() -> None:
    doc = yaml.safe_load(COMMITTED.read_text())
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "applications.infra.maslab.io"
    assert spec["names"]["shortNames"] == ["masapp"]
    version = spec["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"] if c.get("priority", 0) == 0]
    assert columns == ["Ready", "Phase", "Agents", "Age"]


def test_cel_rules_cover_the_single_object_rules() -> None:
    rules = {
        path: [r["rule"] for r in node.get("x-kubernetes-validations", [])]
        for path, node in walk(schema())
    }
    assert any("self.agency.entry in self.agency.agents" in r for r in rules[".spec"])
    assert any("self.endpoints.all" in r for r in rules[".spec"])
    assert any("url.matches" in r for r in rules[".spec.endpoints[additionalProperties]"])
    assert any("k.matches" in r for r in rules[".spec.agency.agents"])


def test_free_form_params_keep_unknown_fields() -> None:
    nodes = dict(walk(schema()))
    for path in (
        ".spec.agency.agents[additionalProperties].spec.model.params",
        ".spec.models[additionalProperties].params",
        ".spec.defaults.model.params",
    ):
        params = nodes[path]
        assert params["type"] == "object", path
        assert params["x-kubernetes-preserve-unknown-fields"] is True, path
        assert set(params) == {"description", "type", "x-kubernetes-preserve-unknown-fields"}
