"""The protocol library of MAS Lab: what speaks a protocol on an agent's behalf.

- :mod:`library_ioa.plugins.a2a`: the A2A client (``agent_comm``), the A2A exposure
  (``agent_expose``) with its server package, and the AgentCard;
- :mod:`library_ioa.plugins.mcp`: MCP tool servers (``tool_source``) and the agent as an
  MCP server (``agent_expose``, the MCP door);
- :mod:`library_ioa.serving`: the listeners, connection guards, inbound auth and metrics
  both plugins and ``mas-ctl serve`` share;
- :mod:`library_ioa.errors`: :class:`~library_ioa.errors.LibraryError` and its tree.

The runtime loads the plugins by name (:mod:`mas.runtime.registry`); the two plugins never
import each other, and ``serving`` imports neither (the import-linter contracts).
"""
