"""The pages of docs/reference/ are generated, complete, and checked for drift."""

from __future__ import annotations

import argparse
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel, Field

from mas.ctl import cli as ctl_cli
from mas.infra.generated_files import SourceError
from mas.infra.models import AgentId, Application, HeaderName, Model
from mas.reference import application, cli, helm_values
from mas.reference.markdown import anchor, cell, code
from tests.conftest import REPO

REFERENCE = REPO / "docs" / "reference"
PAGES: list[tuple[str, Callable[[], str], Callable[[list[str]], int]]] = [
    ("application.md", application.render, application.main),
    ("helm-values.md", lambda: helm_values.render(REPO), helm_values.main),
    ("cli.md", cli.render, cli.main),
]


@pytest.mark.parametrize(("name", "render"), [(n, r) for n, r, _ in PAGES])
def test_committed_page_matches_a_fresh_generation(name: str, render: Callable[[], str]) -> None:
    assert (REFERENCE / name).read_text() == render(), "run `make reference` and commit it"


@pytest.mark.parametrize(("name", "main"), [(n, m) for n, _, m in PAGES])
def test_check_mode_reports_drift_with_the_command_to_regenerate(
    name: str,
    main: Callable[[list[str]], int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)  # the Helm page reads charts/ from where it runs
    stale = tmp_path / name
    stale.write_text((REFERENCE / name).read_text() + "an edit by hand\n")
    assert main(["--check", str(stale)]) == 1
    assert f"{stale} differs from its source; run `make reference`" in capsys.readouterr().err
    assert main(["--check", str(REFERENCE / name)]) == 0
    assert main(["--check", str(tmp_path / "missing.md")]) == 2


# --- Application ---------------------------------------------------------------------------


def _key(annotation: Any) -> str:
    if annotation == AgentId:
        return "<id>"
    if annotation == HeaderName:
        return "<header>"
    return "<key>"


def model_paths(model: type[BaseModel], path: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    """Every field path of ``model``, walked from the type hints (not from the generator)."""

    def under(annotation: Any, here: str) -> Iterator[tuple[str, type[BaseModel]]]:
        origin, args = get_origin(annotation), get_args(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from model_paths(annotation, here)
        elif origin is list:
            yield from under(args[0], here + "[]")
        elif origin is dict:
            yield from under(args[1], f"{here}.{_key(args[0])}")
        elif origin is Annotated or origin is types.UnionType:
            for arg in args:
                yield from under(arg, here)

    for field, info in model.model_fields.items():
        name = info.alias or field  # as the document spells it (status.routes[].from)
        here = f"{path}.{name}" if path else name
        yield here, model
        yield from under(info.annotation, here)


def test_every_field_of_the_document_is_listed_by_its_path_in_order() -> None:
    page = (REFERENCE / "application.md").read_text()
    index = page.split("## Every field by its path", 1)[1].split("\n## ", 1)[0]
    listed = [line.split("`")[1] for line in index.splitlines() if line.startswith("| [`")]
    expected = [path for path, _ in model_paths(Application)]
    assert len(expected) > 150
    assert listed == expected
    assert "`spec.agency.agents.<id>.spec.delegates_to`" in index
    assert "`spec.endpoints.<id>.headers.<header>.secret_key_ref.key`" in index


def test_every_model_has_a_section_with_each_field_and_its_description() -> None:
    page = (REFERENCE / "application.md").read_text()
    for name, model in application.model_classes().items():
        assert f"\n## {name}\n" in page, name
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for python_name, info in model.model_fields.items():
            field_name = info.alias or python_name
            rows = [line for line in section.splitlines() if line.startswith(f"| `{field_name}` |")]
            assert len(rows) == 1, f"{name}.{field_name}"
            if info.description:
                assert cell(info.description.replace("``", "`")) in rows[0], f"{name}.{field_name}"


def test_rows_show_type_required_default_and_allowed_values() -> None:
    sections = {s.name: s for s in application.build()}
    rows = {r.name: r for r in sections["RuntimeSpec"].rows}
    assert rows["replicas"].shape.type == "integer"
    assert rows["replicas"].default == "`1`"
    assert rows["replicas"].shape.allowed == ["`0` to `100`"]
    assert rows["image_pull_policy"].shape.allowed == ["one of `Always`, `IfNotPresent`, `Never`"]
    assert rows["resources"].default == "its fields' defaults"
    agency = {r.name: r for r in sections["Agency"].rows}
    assert agency["agents"].required and agency["agents"].default == "—"
    assert agency["agents"].shape.type == "map of `<id>` to [AgentManifest](#agentmanifest)"
    assert "1 to 200 entries" in agency["agents"].shape.allowed
    assert sections["Skill"].paths == [
        "spec.agency.agents.<id>.spec.skills[]",
        "spec.endpoints.<id>.a2a.extended_skills[]",
    ]
    assert (
        "set exactly one of secret_key_ref or value_env (bearer, api_key), or oidc alone "
        "(type oidc)" in sections["AuthScheme"].rules
    )


class Inner(Model):
    """An inner model.

    Its second paragraph stays in its section only.
    """

    max_bytes: int = Field(default=2 * 1024 * 1024, gt=0, description="A size in bytes.")


class Outer(Model):
    """A made-up root."""

    mode: Literal["a", "b"] = Field(default="a", description="The mode | with a bar.")
    inner: Inner = Field(default_factory=lambda: Inner(max_bytes=4096))
    by_id: dict[AgentId, Inner] = Field(default_factory=dict, max_length=3)
    names: list[str] | None = Field(default=None, min_length=1)
    free: dict[str, Any] = Field(default_factory=dict)


def test_a_made_up_model_renders_each_kind_of_field() -> None:
    sections = application.build(Outer)
    assert [s.name for s in sections] == ["Outer", "Inner"]
    assert sections[1].paths == ["inner", "by_id.<id>"]
    rows = {r.name: r for r in sections[0].rows}
    assert rows["mode"].description == "The mode \\| with a bar."
    assert rows["inner"].default == "`{max_bytes: 4096}`"
    assert rows["inner"].description == "An inner model."
    assert rows["by_id"].shape.allowed[0] == "at most 3 entries"
    assert rows["names"].shape.type == "list of string"
    assert rows["names"].shape.allowed == ["at least 1 item"]
    assert rows["free"].shape.type == "map (free-form)"
    size = sections[1].rows[0]
    assert size.default == "`2097152` (2 MiB)"
    assert size.shape.allowed == ["> `0`"]
    paths = [p for p, _, _ in application.field_paths(sections)]
    assert paths == [p for p, _ in model_paths(Outer)]


def test_markdown_cells_keep_code_and_escape_the_rest() -> None:
    assert cell("a <b> | `x|<y>`\nz") == "a &lt;b&gt; \\| `x\\|<y>` z"
    assert code("a`b") == "``a`b``"
    assert code("`a") == "`` `a ``"
    assert anchor("mas-ctl run-mas") == "mas-ctl-run-mas"
    assert anchor("Operator at 1,000 Applications") == "operator-at-1000-applications"


# --- Helm values ---------------------------------------------------------------------------


def leaf_and_map_paths(node: Any, path: str = "") -> Iterator[str]:
    for key, value in node.items():
        here = f"{path}.{key}" if path else key
        yield here
        if isinstance(value, dict):
            yield from leaf_and_map_paths(value, here)


def test_every_value_of_each_chart_is_listed() -> None:
    page = (REFERENCE / "helm-values.md").read_text()
    charts = sorted((REPO / "charts").glob("*/values.yaml"))
    assert charts
    for values in charts:
        data = yaml.safe_load(values.read_text())
        section = page.split(f"\n## {values.parent.name}\n", 1)[1].split("\n## ", 1)[0]
        listed = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
        assert listed == list(leaf_and_map_paths(data)), values


def test_values_take_the_comment_block_above_and_the_one_on_their_line() -> None:
    text = (
        "# About a.\n"
        "# Second line.\n"
        "a:\n"
        "  b: 1   # the b\n"
        "\n"
        "# Detached by a blank line.\n"
        "\n"
        "c: 'x # not a comment'\n"
        'd: "1"  # quoted\n'
        "e:\n"
        "  - name: skipped\n"
        "    port: 1\n"
        "tolerations:\n"
        "- key: x\n"
        "  # inside the list\n"
        "  operator: Exists\n"
        "# About f.\n"
        "f: |\n"
        "  g: text, not a key\n"
        "h: 2\n"
    )
    got = [(v.path, v.comment, v.value) for v in helm_values.values_of(text)]
    assert got == [
        ("a", "About a. Second line.", {"b": 1}),
        ("a.b", "the b", 1),
        ("c", "", "x # not a comment"),
        ("d", "quoted", "1"),
        ("e", "", [{"name": "skipped", "port": 1}]),
        ("tolerations", "", [{"key": "x", "operator": "Exists"}]),
        ("f", "About f.", "g: text, not a key\n"),
        ("h", "", 2),
    ]


def test_helm_page_outside_a_repository_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert helm_values.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no charts/*/values.yaml under ") and err.count("\n") == 1


# --- mas-ctl -------------------------------------------------------------------------------


def subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield sub
                yield from subparsers(sub)


def test_every_command_and_option_of_mas_ctl_is_listed() -> None:
    page = (REFERENCE / "cli.md").read_text()
    commands = list(subparsers(ctl_cli.build_parser()))
    assert len(commands) >= len(ctl_cli.COMMAND_MODULES)
    for parser in commands:
        assert f"\n## {parser.prog}\n" in page, parser.prog
        section = page.split(f"\n## {parser.prog}\n", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in section or f", {option}" in section, option
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                shown = action.metavar or action.dest
                assert str(shown) in section or all(str(c) in section for c in action.choices or ())


def test_exit_codes_come_from_the_cli_docstring() -> None:
    codes, note = cli.exit_codes(ctl_cli.__doc__ or "")
    numbers = [number for number, _ in codes]
    assert numbers[:3] == ["0", "1", "2"] and numbers[-1] == "130"
    assert str(ctl_cli.EXIT_INTERRUPTED) in numbers
    assert all(meaning for _, meaning in codes)
    assert note.startswith("Never a traceback")
    page = (REFERENCE / "cli.md").read_text()
    for number, _ in codes:
        assert f"| `{number}` |" in page


def test_a_made_up_parser_lists_nested_commands_once_with_their_aliases() -> None:
    top = argparse.ArgumentParser(prog="tool")
    top.add_argument("-n", "--count", type=int, default=3, help="how many (default: %(default)s)")
    sub = top.add_subparsers(dest="command")
    tasks = sub.add_parser("tasks", aliases=["t"], help="work with tasks")
    inner = tasks.add_subparsers(dest="what")
    show = inner.add_parser("show", help="show one")
    show.add_argument("id", metavar="ID", help="the task id")
    show.add_argument("--tag", action="append", required=True, choices=("a", "b"))
    commands = list(cli._commands(top))
    assert [(c.prog, c.help) for c in commands] == [
        ("tool tasks", "work with tasks (also: t)"),
        ("tool tasks show", "show one"),
    ]
    assert list(cli._arguments(top)) == [("-n, --count COUNT", "`3`", "how many (default: 3)")]
    assert list(cli._arguments(commands[1].parser)) == [
        ("ID", "required", "the task id"),
        ("--tag {a,b}", "required", "(repeatable)"),
    ]


def test_a_cli_docstring_without_exit_codes_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(ctl_cli, "__doc__", "The entry point.")
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert err == "error: mas.ctl.cli: the docstring has no paragraph starting 'Exit codes:'\n"


def test_exit_codes_parse_a_made_up_docstring() -> None:
    doc = "Title.\n\nExit codes: 0 fine; 4 a; b; c; 9 gone.\nMore text.\n\nNext paragraph."
    assert cli.exit_codes(doc) == ([("0", "fine"), ("4", "a; b; c"), ("9", "gone")], "More text.")
    listed = "Exit codes:\n- 0 fine;\n- 2 bad usage\n- 130 interrupted.\n"
    codes = [("0", "fine"), ("2", "bad usage"), ("130", "interrupted")]
    assert cli.exit_codes(listed) == (codes, "")
    with pytest.raises(SourceError, match="no paragraph starting 'Exit codes:'"):
        cli.exit_codes("A module without them.")
