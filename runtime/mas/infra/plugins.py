"""The plugin names of the product: categories, built-ins and the entry-point group.

Pure data, so that whoever validates a document (the runtime, ``mas-ctl``, the operator)
knows which plugins a document may name without importing any of them; the runtime's
:mod:`mas.runtime.registry` loads them.

- :data:`CATEGORIES`: the roles a plugin plays (``agent_comm``, ``agent_expose``, ``model``,
  ``tool_source``);
- :data:`BUILTINS`: the built-in plugins by category and name, each a ``"module:attribute"``
  imported on first use;
- :data:`ENTRY_POINT_GROUP`: the entry-point group of third-party plugins, each entry named
  ``<category>.<name>`` (:func:`entry_point_key`; any other name is a
  :class:`~mas.infra.errors.PluginNameError` naming it);
- :func:`installed_plugins`: the names a document may use in this process: the built-ins and
  every installed entry point, none of them imported.
"""

from __future__ import annotations

from importlib import metadata

from mas.infra.errors import PluginNameError
from mas.infra.validation import KnownPlugins

ENTRY_POINT_GROUP = "mas.plugins"
CATEGORIES = ("agent_comm", "agent_expose", "model", "tool_source")

BUILTINS: dict[str, dict[str, str]] = {
    "agent_comm": {
        "local": "mas.runtime.comm.local:LocalAgentComm",
        "a2a": "library_ioa.plugins.a2a.agent_comm:A2AAgentComm",
    },
    "agent_expose": {
        "a2a": "library_ioa.plugins.a2a.exposure:A2AExposure",
        "mcp": "library_ioa.plugins.mcp.exposure:MCPExposure",
    },
    "model": {
        "echo": "mas.runtime.models.echo:EchoModel",
        "scripted": "mas.runtime.models.scripted:ScriptedModel",
        "openai": "mas.runtime.models.openai:OpenAIModel",
        "anthropic": "mas.runtime.models.anthropic:AnthropicModel",
    },
    "tool_source": {
        "mcp": "library_ioa.plugins.mcp.tool_source:MCPToolSource",
    },
}


def entry_point_key(name: str, value: str, group: str = ENTRY_POINT_GROUP) -> tuple[str, str]:
    """``(category, plugin name)`` of the entry point ``name = value`` of ``group``."""
    category, dot, plugin = name.partition(".")
    if not dot or not plugin:
        raise PluginNameError(
            f"entry point {name!r} = {value!r} in group {group!r} must be named "
            f"<category>.<name>; categories: {', '.join(CATEGORIES)}"
        )
    return category, plugin


def installed_plugins(group: str = ENTRY_POINT_GROUP) -> KnownPlugins:
    """The plugin names of the built-ins and of every installed entry point of ``group``."""
    names: dict[str, set[str]] = {
        category: set(BUILTINS.get(category, {})) for category in CATEGORIES
    }
    for ep in metadata.entry_points(group=group):
        category, plugin = entry_point_key(ep.name, ep.value, group)
        names.setdefault(category, set()).add(plugin)
    return KnownPlugins(
        agent_comm=sorted(names["agent_comm"]),
        agent_expose=sorted(names["agent_expose"]),
        model=sorted(names["model"]),
        tool_source=sorted(names["tool_source"]),
    )
