"""``mas-operator`` as a user runs it: exit codes, messages, and render's manifests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.deadlines import COLD_START

from mas_operator.children import build_children
from mas_operator.manifests import dump_manifests
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(120)  # the suite default: a cold mas-operator each

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLE = REPO / "examples" / "agency.yaml"


def mas_operator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mas_operator.cli", *args],
        capture_output=True,
        text=True,
        timeout=COLD_START,
        check=False,
    )


def test_render_prints_what_the_operator_applies() -> None:
    out = mas_operator("render", "-f", str(EXAMPLE), "-n", "demo")
    assert out.returncode == 0, out.stderr
    plan = plan_application(yaml.safe_load(EXAMPLE.read_text()), "demo")
    assert out.stdout == dump_manifests(build_children(plan))
    kinds = [d["kind"] for d in yaml.safe_load_all(out.stdout)]
    # the Application's events Role and RoleBinding, then each agent's children
    agent = ["ConfigMap", "Service", "ServiceAccount", "Deployment", "NetworkPolicy"]
    assert kinds == ["Role", "RoleBinding", *agent, *agent]


def test_render_without_denial_events_grants_the_agents_nothing() -> None:
    out = mas_operator("render", "-f", str(EXAMPLE), "-n", "demo", "--no-denial-events")
    assert out.returncode == 0, out.stderr
    docs = list(yaml.safe_load_all(out.stdout))
    assert [d["kind"] for d in docs] == [
        "ConfigMap",
        "Service",
        "ServiceAccount",
        "Deployment",
        "NetworkPolicy",
    ] * 2
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        assert "MAS_A2A_DENIAL_EVENTS" not in {e["name"] for e in env}


def test_render_of_an_invalid_document_names_every_problem(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["agency"]["agents"]["concierge"]["spec"]["delegates_to"] = ["ghost"]
    doc["spec"]["endpoints"]["researcher"]["usage"] = "sometimes"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = mas_operator("render", "-f", str(path))
    assert out.returncode == 1
    assert out.stdout == ""
    assert "error: spec.endpoints.researcher.usage: 'sometimes'" in out.stderr
    assert "Traceback" not in out.stderr


def test_render_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    out = mas_operator("render", "-f", str(tmp_path / "nope.yaml"))
    assert out.returncode == 2
    assert out.stderr.startswith("error: ")
    assert "nope.yaml" in out.stderr and "Traceback" not in out.stderr


def test_run_needs_a_namespace_or_all_namespaces() -> None:
    out = mas_operator("run")
    assert out.returncode == 2
    assert "one of the arguments -n/--namespace -A/--all-namespaces is required" in out.stderr


def test_run_refuses_a_bad_resync_naming_what_is_accepted() -> None:
    out = mas_operator("run", "-A", "--resync", "soon")
    assert out.returncode == 2
    assert "'soon' is not a number of seconds" in out.stderr


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("often", "'often' is not a whole number of passes"),
        ("-1", "'-1': accepted: 0 (never) or more passes"),
    ],
)
def test_run_refuses_a_bad_cold_every_naming_what_is_accepted(value: str, message: str) -> None:
    out = mas_operator("run", "-A", "--cold-every", value)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr


def test_run_without_credentials_says_where_it_looked(tmp_path: Path) -> None:
    out = mas_operator("run", "-A", "--kubeconfig", str(tmp_path / "missing"))
    assert out.returncode == 2
    assert out.stderr.startswith("error: no cluster credentials (tried --kubeconfig")
    assert "Traceback" not in out.stderr


def test_run_refuses_a_liveness_url_it_cannot_serve() -> None:
    out = mas_operator("run", "-A", "--liveness", "healthz")
    assert out.returncode == 2
    assert "'healthz' is not a liveness URL; accepted: http://HOST:PORT[/PATH]" in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-n", "a", "--timeout", "0"], "'0': accepted: a number of seconds above 0"),
        (["-n", "a", "--timeout", "7200"], "'7200': accepted: a number of seconds in (0, 3600]"),
        (["-n", "a", "--parallel", "0"], "'0' is not a count; accepted: 1 to 64"),
        ([], "one of the arguments -n/--namespace -A/--all-namespaces is required"),
        (["-n", "a", "--kubeconfig", "/nonexistent/kubeconfig"], "error: no cluster credentials"),
    ],
)
def test_conformance_usage_errors_exit_2_naming_the_value(args: list[str], message: str) -> None:
    out = mas_operator("conformance", *args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
