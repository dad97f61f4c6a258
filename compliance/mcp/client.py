"""The MCP client under test: what ``conformance client --command`` spawns.

    python -m compliance.mcp.client SERVER_URL     (MCP_CONFORMANCE_SCENARIO names the scenario)

It drives the runtime's own MCP client, the ``mcp`` tool source
(:class:`library_ioa.plugins.mcp.tool_source.MCPToolSource`), exactly as an agent does: it
lists the server's tools, then calls each with arguments made from its input schema
(numbers 1, 2, ...; strings ``"conformance"``; booleans true), and prints one line per step.
Exit status 0 when listing and every call came back (a tool error is still an answer), 1
when the server could not be used.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from typing import Any

from library_ioa.plugins.mcp.tool_source import MCPToolSource
from mas.runtime.boundary.tools import ToolSourceError

TIMEOUT_S = 10.0


def arguments_for(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy a simple object schema: every property, typed placeholders."""
    out: dict[str, Any] = {}
    number = 0
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        if kind in ("number", "integer"):
            number += 1
            out[name] = number
        elif kind == "boolean":
            out[name] = True
        elif kind == "array":
            out[name] = []
        elif kind == "object":
            out[name] = {}
        else:
            out[name] = "conformance"
    return out


async def run(url: str) -> int:
    """List, then call every tool; one line per step."""
    source = MCPToolSource(url=url, server="conformance", timeout=TIMEOUT_S)
    try:
        tools = await source.list_tools()
        print(f"tools: {', '.join(t.name for t in tools) or '(none)'}", flush=True)
        for tool in tools:
            outcome = await source.call(tool.name, arguments_for(tool.parameters))
            print(f"{tool.name}: {'ok' if outcome.ok else 'tool error'}: {outcome.text:.200}")
    except ToolSourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        await source.aclose()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m compliance.mcp.client SERVER_URL", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "(none)")
    print(f"scenario: {scenario}", flush=True)
    return asyncio.run(run(args[-1]))


if __name__ == "__main__":
    sys.exit(main())
