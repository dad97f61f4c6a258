"""The security settings of a document: every mistake is named by mas-ctl validate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from security_support import document

from mas.ctl.cli import main

pytestmark = [pytest.mark.timeout(30)]


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
            "spec.endpoints.a.a2a.auth.schemes[0].type: 'oauth': Input should be 'bearer' or "
            "'api_key'",
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
