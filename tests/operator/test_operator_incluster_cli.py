"""The in-cluster URL rules as a user sees them: ``mas-operator render`` and
``mas-ctl validate --cluster`` say what the operator's Warning Events say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(120)  # cold processes: the suite default

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agency.yaml"


def run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ")]


def test_render_and_validate_cluster_warn_as_the_operator_does() -> None:
    expected = [
        f"warning: {note}"
        for note in plan_application(yaml.safe_load(EXAMPLE.read_text()), "team-a").notes
    ]
    assert len(expected) == 5  # the concierge's two doors, the researcher, two used peers
    render = run("mas_operator.cli", "render", "-f", str(EXAMPLE), "-n", "team-a")
    validate = run("mas.ctl.cli", "validate", "-f", str(EXAMPLE), "--cluster", "-n", "team-a")
    assert (render.returncode, validate.returncode) == (0, 0), render.stderr + validate.stderr
    assert warnings(render.stderr) == expected
    assert warnings(validate.stderr) == expected
    assert "http://127.0.0.1" not in "".join(
        a for a in render.stdout.splitlines() if "maslab.io/url" in a or "card-url" in a
    )
    assert "is valid" in validate.stdout


def test_validate_without_cluster_keeps_the_laptop_urls_silently() -> None:
    """On a laptop (``run-mas``) 127.0.0.1 is right: no warning."""
    out = run("mas.ctl.cli", "validate", "-f", str(EXAMPLE))
    assert out.returncode == 0, out.stderr
    assert warnings(out.stderr) == []


def test_validate_cluster_with_service_urls_is_quiet(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    for agent in ("concierge", "concierge-mcp", "researcher"):
        del doc["spec"]["endpoints"][agent]["url"]
    doc["spec"]["endpoints"]["web-search"]["url"] = "http://web-search.tools.svc:8080"
    doc["spec"]["endpoints"]["text-tools"]["url"] = "http://text-tools.tools.svc:8600/mcp"
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = run("mas.ctl.cli", "validate", "-f", str(path), "--cluster")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


def test_validate_namespace_needs_cluster() -> None:
    out = run("mas.ctl.cli", "validate", "-f", str(EXAMPLE), "-n", "team-a")
    assert out.returncode == 2
    assert out.stderr == "error: --namespace needs --cluster\n"


def test_routes_cluster_shows_what_the_pods_route_to() -> None:
    out = run("mas.ctl.cli", "routes", "-f", str(EXAMPLE), "--cluster", "-n", "team-a")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:]]
    remote = {(r[0], r[1]): r[4] for r in rows if r[2] == "remote"}
    assert remote == {
        ("concierge", "researcher"): "http://research-desk-researcher.team-a.svc:8402",
        ("researcher", "web-search"): "http://127.0.0.1:8403",
    }
    assert len(warnings(out.stderr)) == 5
