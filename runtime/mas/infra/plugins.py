"""The plugin names of the product: categories, built-ins and the entry-point group.

Pure data, so that whoever validates a document (the runtime, ``mas-ctl``, the operator)
knows which plugins a document may name without importing any of them; the runtime's
:mod:`mas.runtime.registry` loads them.

- :data:`CATEGORIES`: the roles a plugin plays (``agent_comm``, ``agent_expose``, ``model``,
  ``tool_source``);
- :data:`BUILTINS`: the built-in plugins by category and name, each a ``"module:attribute"``
  imported on first use;
- :data:`ENTRY_POINT_GROUP`: the entry-point group of third-party plugins, each entry named
  ``<category>.<name>``.
"""

from __future__ import annotations

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
