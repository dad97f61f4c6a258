"""The security settings of a document: every mistake is named by mas-ctl validate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from security_support import document

from mas.ctl.cli import main

pytestmark = [pytest.mark.timeout(60)]


@pytest.mark.parametrize(
    ("a2a", "expected"),
    [
        (
            {"auth": {"schemes": [{"type": "bearer"}]}},
            "spec.endpoints.a.a2a.auth.schemes[0]: {'type': 'bearer'}: Value error, set exactly "
            "one of secret_key_ref or value_env",
        ),
        (
            {"auth": {"schemes": [{"type": "bearer", "name": "X", "value_env": "E"}]}},
            "name 'X' is only for type api_key",
        ),
        (
            {"auth": {"schemes": [{"type": "oauth", "value_env": "E"}]}},
            "spec.endpoints.a.a2a.auth.schemes[0].type: 'oauth': Input should be 'bearer', "
            "'api_key' or 'oidc'",
        ),
        ({"auth": {"schemes": []}}, "spec.endpoints.a.a2a.auth.schemes"),
        ({"max_body_bytes": 12}, "spec.endpoints.a.a2a.max_body_bytes: 12"),
        ({"push": {"allowed_hosts": "h"}}, "spec.endpoints.a.a2a.push.allowed_hosts"),
        ({"push": {"deny": True}}, "spec.endpoints.a.a2a.push.deny"),
    ],
)
def test_bad_security_settings_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], a2a: dict[str, Any], expected: str
) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(document(a2a)))
    assert main(["validate", "-f", str(path)]) == 1
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err


def test_good_security_settings_validate(tmp_path: Path) -> None:
    a2a = {
        "max_body_bytes": 4096,
        "push": {"allow_private": False, "allowed_hosts": ["hooks.internal"]},
        "auth": {
            "schemes": [
                {"type": "bearer", "secret_key_ref": {"name": "s", "key": "k"}},
                {"type": "api_key", "name": "X-Key", "value_env": "KEY"},
            ]
        },
    }
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(document(a2a)))
    assert main(["validate", "-f", str(path)]) == 0


# Hostile documents (issue 23, item 9): every CLI that reads one refuses it through the one
# guarded loader, with exit 2 and one line naming the limit; never a traceback, never a hang.

BOMB = "\n".join(
    [
        "apiVersion: infra.maslab.io/v1",
        "kind: Application",
        "metadata: {name: bomb}",
        "spec:",
        '  a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        *(f"  a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 10)),
    ]
)
HEAD = "apiVersion: infra.maslab.io/v1\nkind: Application\nmetadata: {name: x}\n"
HOSTILE = {
    "alias-bomb": (BOMB, "line 10, column 7: this value holds more than 100,000 values"),
    "deep": (HEAD + "spec: " + "[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    "oversize": ("# " + "x" * (2 * 1024 * 1024) + "\n", "the size limit of a document"),
}


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, timeout=60, check=False
    )


def one_clear_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """The refusal's single stderr line, after checking exit 2 and no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert lines[0].startswith("error: ")
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


CLIS = {
    "mas-ctl validate": ("mas.ctl.cli", "validate", "-f"),
    "mas-operator render": ("mas_operator.cli", "render", "-f"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("cli", list(CLIS))
def test_a_hostile_document_is_refused_naming_the_limit(
    tmp_path: Path, cli: str, case: str
) -> None:
    text, words = HOSTILE[case]
    path = tmp_path / "app.yaml"
    path.write_text(text)
    line = one_clear_line(run_cli(*CLIS[cli], str(path)), words)
    assert line.startswith(f"error: {path}: ")


@pytest.mark.parametrize("cli", list(CLIS))
def test_a_5000_digit_integer_is_a_problem_of_its_field(tmp_path: Path, cli: str) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(HEAD + "spec:\n  endpoints:\n    a:\n      timeout: " + "9" * 5000 + "\n")
    result = run_cli(*CLIS[cli], str(path))
    assert (result.returncode, result.stderr) == (
        1,
        "error: spec.endpoints.a.timeout: the integer 999999999999999999999999... (5,000 "
        f"characters) does not fit 64 bits; accepted: -{2**63} to {2**63 - 1} ({path}, line "
        "7, column 16)\n",
    )


@pytest.mark.parametrize("what", ["fifo", "/dev/zero", "directory"])
@pytest.mark.parametrize("cli", list(CLIS))
def test_a_file_that_is_not_regular_is_refused_at_once(tmp_path: Path, cli: str, what: str) -> None:
    kinds = {"fifo": "a FIFO", "/dev/zero": "a character device", "directory": "a directory"}
    path = Path(what) if what.startswith("/") else tmp_path / what
    if what == "fifo":
        os.mkfifo(path)  # nobody ever writes it: reading it would block for ever
    elif what == "directory":
        path.mkdir()
    line = one_clear_line(run_cli(*CLIS[cli], str(path)))
    assert (
        line
        == f"error: {path}: is not a regular file ({kinds[what]}); give the path of a YAML file"
    )


def test_infra_refs_and_overrides_go_through_the_same_loader(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(document({})))
    fifo = tmp_path / "infra.yaml"
    os.mkfifo(fifo)
    validate = ("mas.ctl.cli", "validate", "-f", str(path))
    one_clear_line(run_cli(*validate, "--infra-ref", str(fifo)), "(a FIFO)")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    one_clear_line(run_cli(*validate, "--infra-ref", str(bomb)), "100,000 values")
    huge = "infra:spec.endpoints[a].timeout=" + "9" * 5000
    one_clear_line(
        run_cli(*validate, "--override", huge),
        "--override infra:spec.endpoints[a].timeout: line 1, column 1: the integer",
    )
