"""Loading documents and the command-line edits: --infra-ref, --override, --bind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from mas.infra.documents import (
    apply_overrides,
    bind_overrides,
    load_document,
    parse_override,
    parse_yaml_text,
    read_yaml_file,
)
from mas.infra.errors import DocumentError, OverrideError
from mas.infra.wiring import wire
from tests.unit.documents import document


def write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_override_sets_nested_values_as_yaml() -> None:
    edits = [
        parse_override("infra:spec.endpoints[worker].url=http://127.0.0.1:9"),
        parse_override("infra:spec.endpoints[worker].timeout=2.5"),
        parse_override("infra:spec.endpoints[worker].a2a.capabilities.streaming=false"),
    ]
    out = apply_overrides(document(), edits)
    assert out["spec"]["endpoints"]["worker"] == {
        "url": "http://127.0.0.1:9",
        "timeout": 2.5,
        "a2a": {"capabilities": {"streaming": False}},
    }


def test_bind_is_a_use_row_and_nothing_else() -> None:
    out = apply_overrides(document(), bind_overrides("worker=a2a://127.0.0.1:8009"))
    assert out["spec"]["endpoints"]["worker"] == {
        "protocol": "a2a",
        "url": "http://127.0.0.1:8009",
        "usage": "use",
    }
    routes = wire(out).routes
    assert [(r.kind, r.url) for r in routes.routes] == [("remote", "http://127.0.0.1:8009")]
    assert routes.listeners == ()


def test_bind_with_a_path_is_refused_by_the_same_validation() -> None:
    out = apply_overrides(document(), bind_overrides("worker=a2a://127.0.0.1:8009/x"))
    with pytest.raises(Exception, match=r"spec.endpoints.worker.url: .* has a path prefix '/x'"):
        wire(out)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("spec.endpoints=1", "must start with 'infra:'"),
        ("infra:spec.endpoints", "expected infra:PATH=VALUE"),
        ("infra:spec..x=1", "cannot read the path at '..x'"),
        ("infra:=1", "the path is empty"),
    ],
)
def test_bad_overrides_say_what_is_accepted(text: str, fragment: str) -> None:
    with pytest.raises(OverrideError, match=re.escape(fragment)):
        parse_override(text)


@pytest.mark.parametrize("text", ["worker", "worker=127.0.0.1:80", "=a2a://h:1", "w=grpc://h:1"])
def test_bad_binds_show_the_accepted_form(text: str) -> None:
    with pytest.raises(OverrideError, match=r"expected NAME=a2a://host:port"):
        bind_overrides(text)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_bind_with_an_http_url_is_refused_with_the_documented_form(scheme: str) -> None:
    with pytest.raises(OverrideError) as refused:
        bind_overrides(f"worker={scheme}://127.0.0.1:8009")
    message = str(refused.value)
    assert f"the scheme is {scheme!r}; --bind takes NAME=a2a://host:port" in message
    assert f"--override infra:spec.endpoints[worker].url={scheme}://127.0.0.1:8009" in message


def test_override_through_a_scalar_is_refused() -> None:
    with pytest.raises(OverrideError, match=r"spec\.agency\.entry is not a mapping"):
        apply_overrides(document(), [parse_override("infra:spec.agency.entry.x=1")])


def test_merge_order_base_then_infra_refs_then_edits_in_cli_order(tmp_path: Path) -> None:
    base = write(tmp_path, "app.yaml", document(endpoints={"worker": {"url": "http://base:1"}}))
    ref1 = write(
        tmp_path,
        "ref1.yaml",
        {"spec": {"endpoints": {"worker": {"url": "http://ref1:1", "timeout": 7}}}},
    )
    ref2 = write(
        tmp_path, "ref2.yaml", {"spec": {"endpoints": {"worker": {"url": "http://ref2:1"}}}}
    )
    merged = load_document(base, infra_refs=[ref1, ref2])
    assert merged["spec"]["endpoints"]["worker"] == {"url": "http://ref2:1", "timeout": 7}
    edits = [
        *bind_overrides("worker=a2a://bind:1"),
        parse_override("infra:spec.endpoints[worker].url=http://override:1"),
    ]
    merged = load_document(base, infra_refs=[ref1], edits=edits)
    assert merged["spec"]["endpoints"]["worker"]["url"] == "http://override:1"
    reversed_order = load_document(base, edits=list(reversed(edits)))
    assert reversed_order["spec"]["endpoints"]["worker"]["url"] == "http://bind:1"


def test_infra_ref_may_not_carry_the_agency(tmp_path: Path) -> None:
    base = write(tmp_path, "app.yaml", document())
    ref = write(tmp_path, "ref.yaml", {"spec": {"agency": {}}})
    with pytest.raises(DocumentError, match=r"spec.agency cannot come from an infra document"):
        load_document(base, infra_refs=[ref])


def test_unreadable_and_non_yaml_files_are_document_errors(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="cannot read the file"):
        read_yaml_file(tmp_path / "nope.yaml")
    with pytest.raises(
        DocumentError,
        match=r"is not valid YAML at line 1, column 5: mapping values are not allowed",
    ):
        parse_yaml_text("a: b: c")
    with pytest.raises(DocumentError, match="expected a mapping"):
        parse_yaml_text("- 1\n- 2")
    with pytest.raises(DocumentError, match="expected one YAML document, found 2"):
        parse_yaml_text("a: 1\n---\nb: 2")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DocumentError, match="is not UTF-8"):
        read_yaml_file(binary)
