"""A tiny MCP tool server for the example Application, on the official MCP SDK only.

It serves two tools over streamable HTTP at ``http://127.0.0.1:<port>/mcp``:

- ``word_count(text)``: the number of words and characters of the text;
- ``top_words(text, n)``: the ``n`` most frequent words (lowercased, ties in first-seen order).

Run it beside ``mas-ctl run-mas -f examples/agency.yaml`` (the ``text-tools`` endpoint)::

    python examples/mcp_text_tools.py --port 8600

It prints ``serving MCP text tools at <url>`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import re
import socket
import sys
from collections import Counter

import uvicorn
from mcp.server.mcpserver import MCPServer

WORD = re.compile(r"[\w'-]+")

server = MCPServer("text-tools", version="1.0.0", log_level="WARNING")


@server.tool()
def word_count(text: str) -> dict[str, int]:
    """Count the words and characters of a text."""
    return {"words": len(WORD.findall(text)), "characters": len(text)}


@server.tool()
def top_words(text: str, n: int = 3) -> list[str]:
    """The n most frequent words of a text (lowercased)."""
    counts = Counter(word.lower() for word in WORD.findall(text))
    return [word for word, _ in counts.most_common(max(n, 0))]


class _Announcing(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        port = self.servers[0].sockets[0].getsockname()[1]
        print(f"serving MCP text tools at http://{self.config.host}:{port}/mcp", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8600, help="0 picks a free port")
    args = parser.parse_args(argv)
    config = uvicorn.Config(
        server.streamable_http_app(host=args.host),
        host=args.host,
        port=args.port,
        log_level="warning",
        ws="none",
    )
    _Announcing(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
