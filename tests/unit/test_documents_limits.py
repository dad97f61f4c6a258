"""The guarded YAML loader: each limit fails with one error naming it, and where it broke.

Hostile documents (issue 23, item 9) must fail fast: each test asserts on the error, never
on wall time; the timeout mark is the guard against a regression that parses for ever.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from mas.infra import guarded_yaml
from mas.infra.documents import parse_override, parse_yaml_text, read_yaml_file
from mas.infra.errors import ApplicationInvalid, DocumentError, OverrideError, Problem
from mas.infra.guarded_yaml import (
    DEFAULT_LIMITS,
    INT64_MAX,
    DocumentLimits,
    load_yaml,
    read_document_text,
)

pytestmark = [pytest.mark.timeout(20)]

EXAMPLE = Path(__file__).parents[2] / "examples" / "agency.yaml"


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A billion laughs: ``width ** levels`` strings from a few hundred bytes."""
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


def refusal(text: str, limits: DocumentLimits = DEFAULT_LIMITS) -> str:
    with pytest.raises(DocumentError) as refused:
        load_yaml(text, "app.yaml", limits)
    return str(refused.value)


def test_a_plain_document_reads_as_safe_load_reads_it() -> None:
    text = EXAMPLE.read_text()
    assert load_yaml(text) == list(yaml.safe_load_all(text))
    mixed = "a: &x {k: 1, f: 2.5, h: 0x1F, o: 0o17, s: 1_000}\nb: *x\nc: [true, null, '9']\n"
    assert load_yaml(mixed) == [yaml.safe_load(mixed)]


def test_an_alias_bomb_is_refused_before_it_is_built() -> None:
    message = refusal(alias_bomb())
    assert message == (
        "app.yaml: line 6, column 5: this value holds more than 100,000 values once its "
        "aliases are expanded, the limit of a document"
    )


def test_aliases_within_the_limit_are_expanded() -> None:
    small = alias_bomb(levels=2, width=3)  # 3 + 3*3 + 3*3*3 strings, and the lists
    assert load_yaml(small)[0]["a2"] == [[["lol"] * 3] * 3] * 3
    assert "more than 20 values" in refusal(small, DocumentLimits(max_values=20))


def test_a_recursive_alias_is_refused() -> None:
    assert refusal("a: &a [1, *a]\n") == (
        "app.yaml: line 1, column 4: an alias refers to a collection that holds it"
    )


@pytest.mark.parametrize(
    "text",
    [
        "x: " + "[" * 100_000 + "]" * 100_000,  # flow: libyaml's own cap meets it first
        "".join("  " * i + "k:\n" for i in range(100)) + "  " * 100 + "v: 1\n",  # block
        "x: " + "[" * 65 + "]" * 65,  # one level past the limit
    ],
    ids=["flow-100000", "block-100", "flow-65"],
)
def test_nesting_deeper_than_the_limit_is_refused(text: str) -> None:
    message = refusal(text)
    assert message.startswith("app.yaml: line ")
    assert message.endswith(": nested deeper than 64 levels, the depth limit of a document")


def test_nesting_at_the_limit_reads() -> None:
    assert load_yaml("[" * 64 + "]" * 64) == [json.loads("[" * 64 + "]" * 64)]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("x: " + "9" * 5000, "999999999999999999999999... (5,000 characters)"),
        (f"x: {INT64_MAX + 1}", str(INT64_MAX + 1)),
        (f"x: -{INT64_MAX + 2}", f"-{INT64_MAX + 2}"),
        ("x: 0x" + "f" * 17, "0x" + "f" * 17),
    ],
    ids=["5000-digits", "int64-max+1", "int64-min-1", "hex-68-bits"],
)
def test_an_integer_past_64_bits_is_a_problem_of_its_field(text: str, shown: str) -> None:
    with pytest.raises(ApplicationInvalid) as refused:
        load_yaml(f"spec:\n  timeouts: [1, {text.removeprefix('x: ')}]", "app.yaml")
    [problem] = refused.value.problems
    assert problem == Problem(
        "spec.timeouts[1]",
        f"the integer {shown} does not fit 64 bits; accepted: -{INT64_MAX + 1} to "
        f"{INT64_MAX} (app.yaml, line 2, column 17)",
    )
    # With no field to name (the whole document is the number), the line is named.
    assert refusal(text.removeprefix("x: ")).startswith(
        f"app.yaml: line 1, column 1: the integer {shown} does not fit 64 bits"
    )


def test_64_bit_integers_read() -> None:
    assert load_yaml(f"[{INT64_MAX}, -{INT64_MAX + 1}]") == [[INT64_MAX, -INT64_MAX - 1]]


@pytest.mark.parametrize("literal", [".inf", "-.Inf", ".nan", "1.0e+5000"])
def test_a_number_json_cannot_hold_is_a_problem_of_its_field(literal: str) -> None:
    with pytest.raises(ApplicationInvalid) as refused:
        load_yaml(f"a: 1\nx: {{y: {literal}}}\n", "app.yaml")
    assert str(refused.value) == (
        f"x.y: {literal} is not a finite number; a document holds JSON numbers "
        "(app.yaml, line 2, column 8)"
    )


def test_the_time_limit_is_named() -> None:
    message = refusal("a: 1\n", DocumentLimits(max_seconds=0))
    assert message == (
        "app.yaml: line 1, column 1: reading the document took longer than 0 s, the time "
        "limit of a document"
    )


def test_text_longer_than_the_size_limit_is_refused() -> None:
    assert refusal("a: 1234\n", DocumentLimits(max_bytes=4)) == (
        "app.yaml: longer than 4 characters, the size limit of a document"
    )


def test_a_file_over_the_size_limit_is_read_one_byte_past_it(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a: " + b"x" * 100)
    assert read_document_text(path, DocumentLimits(max_bytes=103)) == "a: " + "x" * 100
    with pytest.raises(DocumentError) as refused:
        read_document_text(path, DocumentLimits(max_bytes=102))
    assert str(refused.value) == (
        f"{path}: the file is larger than 102 bytes, the size limit of a document"
    )


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "app.yaml"
    os.mkfifo(fifo)
    with pytest.raises(DocumentError) as refused:
        read_yaml_file(fifo)
    assert str(refused.value) == (
        f"{fifo}: is not a regular file (a FIFO); give the path of a YAML file"
    )


@pytest.mark.parametrize(
    ("path", "kind"), [("/dev/zero", "a character device"), (".", "a directory")]
)
def test_other_files_that_are_not_regular_are_refused(path: str, kind: str) -> None:
    with pytest.raises(DocumentError) as refused:
        read_yaml_file(path)
    assert (
        str(refused.value)
        == f"{path}: is not a regular file ({kind}); give the path of a YAML file"
    )


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_bytes(b"a: \xff\n")
    with pytest.raises(DocumentError, match=r"is not UTF-8 text \(byte 3\)"):
        read_yaml_file(path)


def test_a_key_that_is_not_plain_text_is_quoted_in_the_path() -> None:
    # found by test_validate_command_never_crashes: a newline in a key split the problem's
    # one line in two
    text = yaml.safe_dump({"apiVersion": {"\n": INT64_MAX + 1, "a.b": [1, INT64_MAX + 1]}})
    with pytest.raises(ApplicationInvalid) as refused:
        load_yaml(text, "app.yaml")
    paths = sorted(p.path for p in refused.value.problems)
    assert paths[0] in ("apiVersion['\\n']", "apiVersion['a.b'][1]")
    assert all("\n" not in str(p) for p in refused.value.problems)


def test_parse_yaml_text_is_guarded_too() -> None:
    with pytest.raises(DocumentError, match="expanded, the limit of a document"):
        parse_yaml_text(alias_bomb(), "stdin")


def test_an_override_value_is_read_within_the_same_limits() -> None:
    with pytest.raises(OverrideError) as refused:
        parse_override("infra:spec.endpoints[w].timeout=" + "9" * 5000)
    assert str(refused.value).startswith(
        "--override infra:spec.endpoints[w].timeout: line 1, column 1: the integer "
        "999999999999999999999999... (5,000 characters) does not fit 64 bits"
    )
    with pytest.raises(OverrideError, match="expanded, the limit of a document"):
        parse_override("infra:spec.x=" + alias_bomb().replace("\n", ", ").join("{}"))
    assert parse_override("infra:spec.x=a\n---\nb").value == "a\n---\nb"
    assert parse_override("infra:spec.x=# nothing").value is None
    assert parse_override("infra:spec.x=").value == ""


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (alias_bomb(), "line 6, column 5: this value holds more than 100,000 values"),
        ("x: " + "[" * 100_000 + "]" * 100_000, "line 1, column 67: nested deeper than 64"),
        ("9" * 5000, "line 1, column 1: the integer 99999"),
        (".nan", "line 1, column 1: .nan is not a finite number"),
    ],
    ids=["alias-bomb", "deep-flow", "5000-digits", "nan"],
)
def test_without_libyaml_the_python_parser_is_guarded_alike(
    monkeypatch: pytest.MonkeyPatch, text: str, words: str
) -> None:
    monkeypatch.setattr(guarded_yaml, "_Loader", guarded_yaml._PyLoader)
    assert words in refusal(text)
    assert load_yaml(EXAMPLE.read_text()) == list(yaml.safe_load_all(EXAMPLE.read_text()))
