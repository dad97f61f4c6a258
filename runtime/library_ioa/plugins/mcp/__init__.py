"""The MCP protocol plugins, on the official SDK (PyPI ``mcp`` 2.x).

- :mod:`~library_ioa.plugins.mcp.tool_source`: MCP tool servers an agent uses
  (registry category ``tool_source``, name ``mcp``);
- :mod:`~library_ioa.plugins.mcp.results`: MCP tool results as model text and artifacts.
"""
