"""mas-ctl validate and routes: exit codes, messages, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mas.ctl.cli import main
from tests.conftest import DATA, EXAMPLES

EXAMPLE = str(EXAMPLES / "agency.yaml")


def test_validate_valid_document_prints_one_summary_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "-f", EXAMPLE]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert "Application 'research-desk' is valid: 3 agents (entry 'concierge')" in out[0]
    assert "4 routes (2 remote)" in out[0]


def test_validate_invalid_document_lists_every_problem(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "-f", str(DATA / "invalid" / "missing-delegation-target.yaml")])
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    assert err == [
        "error: spec.agency.agents.editor.spec.delegates_to[0]: delegation target 'fact-checker' "
        "of agent 'editor' is neither an agent of the agency nor an endpoint with usage use or "
        "use-and-deploy",
        "error: spec.agency.agents.writer.spec.delegates_to[0]: delegation target 'researcher' "
        "of agent 'writer' is neither an agent of the agency nor an endpoint with usage use or "
        "use-and-deploy",
    ]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["validate", "-f", "/nonexistent/app.yaml"], "cannot read the file"),
        (["validate", "-f", EXAMPLE, "--override", "spec.x=1"], "must start with 'infra:'"),
        (["validate", "-f", EXAMPLE, "--bind", "researcher"], "expected NAME=a2a://host:port"),
        (
            ["validate", "-f", EXAMPLE, "--bind", "researcher=http://127.0.0.1:9100"],
            "the scheme is 'http'; --bind takes NAME=a2a://host:port",
        ),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    args: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert fragment in err[0]


def test_not_yaml_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec: [unclosed\n")
    assert main(["validate", "-f", str(bad)]) == 2
    assert "is not valid YAML at line 2" in capsys.readouterr().err


def test_bind_reroutes_in_the_routes_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["routes", "-f", EXAMPLE, "--bind", "summarizer=a2a://127.0.0.1:9100"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["FROM", "TO", "KIND", "PROTOCOL", "URL"]
    assert ["concierge", "summarizer", "remote", "a2a", "http://127.0.0.1:9100"] in [
        line.split() for line in lines
    ]


def test_routes_json_lists_routes_listeners_and_runtimes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["routes", "-f", EXAMPLE, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agent_comm"] == {"name": "local", "source": "library default"}
    assert [(r["from"], r["to"], r["kind"]) for r in doc["routes"]] == [
        ("concierge", "researcher", "remote"),
        ("concierge", "summarizer", "local"),
        ("researcher", "web-search", "remote"),
        ("researcher", "summarizer", "local"),
    ]
    assert doc["runtimes"] == {
        "concierge": ["concierge", "summarizer"],
        "researcher": ["researcher", "summarizer"],
    }


@pytest.mark.integration  # a subprocess
def test_console_script_runs_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "app.yaml"
    bad.write_text("apiVersion: infra/v1\nkind: Application\nmetadata: {name: x}\nspec: {}\n")
    result = subprocess.run(
        [sys.executable, "-m", "mas.ctl.cli", "validate", "-f", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == "error: spec.agency: is required\n"
    assert "Traceback" not in result.stderr
