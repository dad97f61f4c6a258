"""The plugin registry: built-ins by name, test plugins, real entry points, loud failures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mas.infra.errors import PluginNameError
from mas.infra.plugins import BUILTINS, installed_plugins
from mas.runtime.errors import PluginConfigError, PluginLoadError, UnknownPlugin
from mas.runtime.registry import Registry, builtin_registry


class EchoComm:
    """A small test plugin."""

    def __init__(self, prefix: str = ">", *, bus: object | None = None) -> None:
        self.prefix, self.bus = prefix, bus


def test_builtins_are_listed_without_importing_them() -> None:
    registry = builtin_registry()
    assert registry.names("agent_comm") == ["a2a", "local"]
    assert registry.names("agent_expose") == ["a2a", "mcp"]
    assert registry.names("model") == ["anthropic", "echo", "openai", "scripted"]
    assert registry.names("tool_source") == ["mcp"]
    assert set(BUILTINS) == {"agent_comm", "agent_expose", "model", "tool_source"}
    known = registry.known_plugins()
    assert list(known.agent_comm) == ["a2a", "local"]
    assert list(known.tool_source) == ["mcp"]


def test_create_passes_params_then_runtime_context() -> None:
    registry = Registry()
    registry.register("agent_comm", "echo", EchoComm)
    bus = object()
    plugin = registry.create("agent_comm", "echo", {"prefix": "#"}, bus=bus)
    assert isinstance(plugin, EchoComm)
    assert (plugin.prefix, plugin.bus) == ("#", bus)


def test_lazy_target_string_is_imported_on_first_use() -> None:
    registry = Registry()
    registry.register("agent_comm", "echo", f"{__name__}:EchoComm")
    assert registry.get("agent_comm", "echo") is EchoComm


def test_unknown_plugin_lists_the_known_ones() -> None:
    registry = Registry()
    registry.register("model", "echo", EchoComm)
    with pytest.raises(UnknownPlugin, match=r"no model plugin named 'gpt'; known: echo"):
        registry.get("model", "gpt")


def test_bad_params_name_the_plugin_and_the_keys() -> None:
    registry = Registry()
    registry.register("agent_comm", "echo", EchoComm)
    with pytest.raises(
        PluginConfigError, match=r"agent_comm plugin 'echo' refused its parameters \['colour'\]"
    ):
        registry.create("agent_comm", "echo", {"colour": "red"})


def test_failing_import_is_a_loud_error_naming_the_plugin() -> None:
    registry = Registry()
    registry.register("model", "broken", "no_such_module_anywhere:Model")
    with pytest.raises(PluginLoadError) as caught:
        registry.get("model", "broken")
    message = str(caught.value)
    assert "model plugin 'broken'" in message
    assert "no_such_module_anywhere:Model" in message
    assert "ModuleNotFoundError" in message


def test_non_callable_plugin_is_refused() -> None:
    registry = Registry()
    registry.register("model", "attr", "sys:maxsize")
    with pytest.raises(PluginLoadError, match=r"model plugin 'attr' .* is not callable"):
        registry.get("model", "attr")


@pytest.fixture
def plugin_dist(tmp_path: Path) -> Iterator[Path]:
    """A real installed distribution (dist-info on sys.path) declaring mas.plugins entry points."""
    (tmp_path / "maslab_testplug.py").write_text(
        "class Comm:\n    def __init__(self, **kw):\n        self.kw = kw\n"
    )
    info = tmp_path / "maslab_testplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: maslab-testplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[mas.plugins]\n"
        "agent_comm.pigeon = maslab_testplug:Comm\n"
        "model.missing = maslab_testplug_absent:Model\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("maslab_testplug", None)


def test_entry_point_plugins_load_and_failures_name_the_distribution(plugin_dist: Path) -> None:
    registry = builtin_registry()
    registry.load_entry_points()
    assert "pigeon" in registry.names("agent_comm")
    plugin: Any = registry.create("agent_comm", "pigeon", {"url": "x"})
    assert plugin.kw == {"url": "x"}
    with pytest.raises(
        PluginLoadError, match=r"model plugin 'missing' \(entry point of maslab-testplug"
    ):
        registry.get("model", "missing")


def test_malformed_entry_point_name_is_an_error(plugin_dist: Path) -> None:
    info = plugin_dist / "maslab_testplug-1.0.dist-info" / "entry_points.txt"
    info.write_text("[mas.plugins]\npigeon = maslab_testplug:Comm\n")
    with pytest.raises(PluginLoadError, match=r"must be named <category>.<name>"):
        Registry().load_entry_points()


def test_installed_plugins_names_what_the_registry_would_load(plugin_dist: Path) -> None:
    """The operator validates with ``installed_plugins`` (no runtime import): the same names."""
    registry = builtin_registry()
    registry.load_entry_points()
    known = installed_plugins()
    assert "pigeon" in known.agent_comm and "missing" in known.model
    assert known == registry.known_plugins()
    assert "maslab_testplug" not in sys.modules  # names only, nothing imported


def test_installed_plugins_refuses_a_malformed_entry_point(plugin_dist: Path) -> None:
    info = plugin_dist / "maslab_testplug-1.0.dist-info" / "entry_points.txt"
    info.write_text("[mas.plugins]\npigeon = maslab_testplug:Comm\n")
    with pytest.raises(PluginNameError, match=r"'pigeon' = 'maslab_testplug:Comm' .* <category>"):
        installed_plugins()
