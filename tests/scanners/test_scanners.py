"""checkov and kube-score over what an admin would install: the rendered chart (cluster-wide
and scoped, with the ``helm test`` hook), and the children the operator renders for the
example and for a replicated Application. Every finding is fixed or skipped in the
manifest with its reason (docs/operations.md, "Scanner findings skipped").

The scanners are built by ``scripts/build-scanners`` into ``$MAS_SCANNERS_DIR`` (default
``~/.cache/maslab/scanners``): without them these tests are skipped with that command, and
fail instead when ``MAS_REQUIRE_SCANNERS=1`` (CI).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mas_operator.children import build_children
from mas_operator.manifests import dump_manifests
from mas_operator.plan import plan_application

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLE = REPO / "examples" / "agency.yaml"
HELM_VERSION = "v3.19.0"  # as tests/operator/operator_support.py
REQUIRE_ENV = "MAS_REQUIRE_SCANNERS"
DEADLINE = 300  # seconds for one scanner run on a busy 2-core machine

pytestmark = pytest.mark.timeout(DEADLINE * 2 + 60)


def _tool(path: Path, what: str) -> Path:
    if os.access(path, os.X_OK):
        return path
    why = f"{what} is missing ({path}): build the scanners once with `scripts/build-scanners`"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {why}", pytrace=False)
    pytest.skip(why)


def scanners_dir() -> Path:
    return Path(os.environ.get("MAS_SCANNERS_DIR") or Path.home() / ".cache/maslab/scanners")


def helm(*args: str) -> str:
    default = Path.home() / ".cache" / "maslab" / "helm" / HELM_VERSION
    binary = _tool(Path(os.environ.get("MAS_HELM_DIR") or default) / "helm", "helm")
    chart = REPO / "charts" / "mas-operator"
    out = subprocess.run(
        [str(binary), "template", "mas-operator", str(chart), "-n", "mas-system", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def replicated_app() -> dict[str, Any]:
    """The example as a replicated Application: two replicas of each deployed agent."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["name"] = "replicated-desk"
    doc["spec"].setdefault("runtime", {})["replicas"] = 2
    return dict(doc)


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Everything scanned, one file per source."""
    out = tmp_path_factory.mktemp("manifests")
    (out / "chart.yaml").write_text(helm("--set", "conformance.test.enabled=true"))
    scoped = ("--set", "watchNamespaces={team-a}", "--set", "conformance.test.enabled=true")
    (out / "chart-scoped.yaml").write_text(helm(*scoped))
    example = plan_application(yaml.safe_load(EXAMPLE.read_text()), "demo")
    (out / "example-children.yaml").write_text(dump_manifests(build_children(example)))
    replicated = plan_application(replicated_app(), "demo")
    (out / "replicated-children.yaml").write_text(dump_manifests(build_children(replicated)))
    return out


def test_the_replicated_application_renders_a_budget(manifests: Path) -> None:
    kinds = [
        d["kind"]
        for d in yaml.safe_load_all((manifests / "replicated-children.yaml").read_text())
        if d
    ]
    assert "PodDisruptionBudget" in kinds  # what the scan below covers beyond the example


def test_checkov_finds_nothing_unexplained(manifests: Path) -> None:
    checkov = _tool(scanners_dir() / "checkov" / "bin" / "checkov", "checkov")
    argv = [str(checkov), "--directory", str(manifests), "--framework", "kubernetes"]
    # JSON, failures and passes only, and no policies fetched from a platform
    argv += ["--output", "json", "--quiet", "--compact", "--skip-download"]
    out = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        env={**os.environ, "LOG_LEVEL": "ERROR"},
    )
    assert out.returncode in (0, 1), out.stderr
    report = json.loads(out.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [
        f"{c['check_id']} {c['resource']} ({Path(c['file_path']).name}): {c['check_name']}"
        for r in reports
        for c in r.get("results", {}).get("failed_checks", [])
    ]
    passed = sum(r.get("summary", {}).get("passed", 0) for r in reports)
    assert passed > 100, f"checkov ran too few checks ({passed}): {out.stderr[-2000:]}"
    assert failed == [], "\n".join(failed)


def test_kube_score_finds_nothing_unexplained(manifests: Path) -> None:
    kube_score = _tool(scanners_dir() / "kube-score", "kube-score")
    files = sorted(str(p) for p in manifests.glob("*.yaml"))
    # No CPU limit by design (its checkov twin CKV_K8S_11 is skipped in each manifest): the
    # flag skips only that part of container-resources, whose memory checks still apply.
    argv = [str(kube_score), "score", "--output-format", "ci", "--exit-one-on-warning"]
    out = subprocess.run(
        [*argv, "--ignore-container-cpu-limit", *files],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    findings = [
        line for line in out.stdout.splitlines() if line.startswith(("[CRITICAL]", "[WARNING]"))
    ]
    assert "[OK]" in out.stdout, out.stdout + out.stderr  # it scored something
    assert findings == [] and out.returncode == 0, "\n".join(findings) or out.stderr
