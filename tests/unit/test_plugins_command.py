"""``mas-ctl plugins [--check]``: every plugin by category, its distribution and load status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # mas-ctl in a subprocess


def mas_ctl(*args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "mas.ctl.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def rows(out: str) -> dict[tuple[str, str], list[str]]:
    lines = out.splitlines()
    assert lines[0].split() == ["CATEGORY", "NAME", "DISTRIBUTION", "TARGET", "STATUS"]
    table = {}
    for line in lines[1:]:
        category, name, distribution, target, status = line.split(maxsplit=4)
        table[(category, name)] = [distribution, target, status]
    return table


@pytest.fixture
def third_party(tmp_path: Path) -> Path:
    """A real distribution (dist-info) with one plugin that loads and one that does not."""
    (tmp_path / "maslab_cliplug.py").write_text("class Comm:\n    pass\n")
    (tmp_path / "maslab_cliplug_broken.py").write_text("raise ImportError('needs libfoo')\n")
    info = tmp_path / "maslab_cliplug-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: maslab-cliplug\nVersion: 2.0\n")
    (info / "entry_points.txt").write_text(
        "[mas.plugins]\n"
        "agent_comm.pigeon = maslab_cliplug:Comm\n"
        "model.broken = maslab_cliplug_broken:Model\n"
    )
    return tmp_path


def test_the_built_ins_are_listed_by_category_and_all_load() -> None:
    listed = mas_ctl("plugins")
    assert listed.returncode == 0, listed.stderr
    table = rows(listed.stdout)
    assert list(table) == [
        ("agent_comm", "a2a"),
        ("agent_comm", "local"),
        ("agent_expose", "a2a"),
        ("agent_expose", "mcp"),
        ("model", "anthropic"),
        ("model", "echo"),
        ("model", "openai"),
        ("model", "scripted"),
        ("tool_source", "mcp"),
    ]
    assert table[("model", "openai")] == [
        "maslab",
        "mas.runtime.models.openai:OpenAIModel",
        "not loaded",
    ]
    checked = mas_ctl("plugins", "--check")
    assert checked.returncode == 0, checked.stderr
    assert {status for _, _, status in rows(checked.stdout).values()} == {"ok"}
    assert checked.stderr == ""


def test_check_names_the_plugin_that_fails_to_load_and_exits_1(third_party: Path) -> None:
    listed = mas_ctl("plugins", path=third_party)
    assert listed.returncode == 0, listed.stderr
    assert rows(listed.stdout)[("model", "broken")][0] == "maslab-cliplug"
    checked = mas_ctl("plugins", "--check", path=third_party)
    assert checked.returncode == 1
    table = rows(checked.stdout)
    assert table[("agent_comm", "pigeon")] == ["maslab-cliplug", "maslab_cliplug:Comm", "ok"]
    assert table[("model", "broken")][2] == "failed: needs libfoo"
    assert table[("model", "echo")][2] == "ok"
    assert checked.stderr.splitlines() == [
        "error: model plugin 'broken' (entry point of maslab-cliplug, "
        "maslab_cliplug_broken:Model) failed to load: ImportError: needs libfoo"
    ]
    assert "Traceback" not in checked.stderr
