"""Support of the console tests: the console served in-process on loopback, the example
agency's concierge and researcher served by real ``mas-ctl serve`` processes, a hostile
a2a-sdk agent, and Debian's chromium driven by Playwright (never a downloaded browser).

Without ``/usr/bin/chromium`` the browser tests skip, unless ``MAS_REQUIRE_BROWSER=1``
(CI sets it) makes that a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml
from a2a.helpers.proto_helpers import get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentInterface, AgentSkill
from a2a.types.a2a_pb2 import Part
from compliance.a2a.baseline_server import build_card, open_task
from playwright.async_api import Locator, Page
from starlette.applications import Starlette
from tests.conftest import EXAMPLES
from tests.ctl_client.ctl_client_support import environment
from tests.deadlines import COLD_START
from tests.ports import free_port
from tests.process_lines import wait_for_line
from tests.session_modes.session_modes_support import write_app

from mas.console.app import ConsoleOptions, build_app
from mas.console.sources import Source

HOST = "127.0.0.1"
CHROMIUM = Path("/usr/bin/chromium")
# As root, headless, nothing fetched from outside (Playwright adds a fresh --user-data-dir).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START = 20.0  # the longest a server may take to listen
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
BIG = 5 * 1024 * 1024  # characters of the big artifact
EVIL_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.pwned=5">'
    b"<script>window.pwned=6</script></svg>"
)


def png(width: int, height: int) -> bytes:
    """A grey PNG of ``width`` x ``height``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


# The middle of an edge's line, in the viewport's coordinates.
EDGE_MIDDLE = """(line) => {
  const at = line.getPointAtLength(line.getTotalLength() / 2);
  const m = line.getScreenCTM();
  return [at.x * m.a + at.y * m.c + m.e, at.x * m.b + at.y * m.d + m.f];
}"""


async def click_edge(page: Page, edge: Locator) -> None:
    """Click the middle of ``edge``'s line, where a person clicks it (the middle of the
    edge's box may lie off a curved line)."""
    await edge.scroll_into_view_if_needed()
    x, y = await edge.locator("path.line").evaluate(EDGE_MIDDLE)
    await page.mouse.click(x, y)


def need_browser() -> None:
    if not CHROMIUM.exists():
        if os.environ.get("MAS_REQUIRE_BROWSER") == "1":
            pytest.fail(
                f"{CHROMIUM} is missing and MAS_REQUIRE_BROWSER=1 (apt-get install chromium)"
            )
        pytest.skip(
            f"{CHROMIUM} is missing (apt-get install chromium); MAS_REQUIRE_BROWSER=1 fails"
        )


@contextlib.asynccontextmanager
async def serving(app: Any, name: str, port: int | None = None) -> AsyncIterator[str]:
    """``app`` on uvicorn at ``port`` (default a free one) on loopback until the block ends;
    its base url."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host=HOST, port=port, log_level="error", timeout_graceful_shutdown=2)
    )
    task = asyncio.create_task(server.serve(), name=name)
    try:
        async with asyncio.timeout(START):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield f"http://{HOST}:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, START)


@contextlib.asynccontextmanager
async def console(source: Source, page: Page | None = None, **options: Any) -> AsyncIterator[str]:
    """The console over ``source``, in this process; its base url. ``page`` leaves it
    (about:blank) before it stops, so no live-update stream of the page is cut off."""
    async with serving(build_app(source, ConsoleOptions(**options)), "console") as url:
        try:
            yield url
        finally:
            if page is not None and not page.is_closed():
                await page.goto("about:blank")


@dataclass
class Hostile(AgentExecutor):
    """An agent whose card and answers are hostile: ``link`` answers with a ``javascript:``
    url artifact, ``big`` with a 5 MB text artifact, ``image`` with a PNG, ``svg`` with an
    SVG that scripts, anything else with HOSTILE text."""

    seen: list[str] = field(default_factory=list)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = get_message_text(context.message) if context.message else ""
        self.seen.append(text)
        updater = await open_task(context, event_queue, context.context_id or "")
        await updater.start_work()
        if text == "link":
            await updater.add_artifact([Part(url="javascript:window.pwned=3")], name=HOSTILE)
        elif text == "image":
            dot = Part(raw=png(4, 3), media_type="image/png", filename="dot.png")
            await updater.add_artifact([dot], name="dot")
        elif text == "svg":
            evil = Part(raw=EVIL_SVG, media_type="image/svg+xml", filename=f"{HOSTILE}.svg")
            await updater.add_artifact([evil], name="evil")
        elif text == "big":
            await updater.add_artifact([Part(text="y" * BIG)], name="big")
        await updater.complete(updater.new_agent_message([Part(text=HOSTILE)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


@contextlib.asynccontextmanager
async def hostile_agent() -> AsyncIterator[str]:
    """The hostile agent (JSON-RPC, blocking sends) until the block ends; its url."""
    port = free_port()
    card = build_card(port, 1, name=HOSTILE, description=HOSTILE, streaming=False, push=False)
    del card.supported_interfaces[:]
    card.supported_interfaces.append(
        AgentInterface(
            url=f"http://{HOST}:{port}", protocol_binding="JSONRPC", protocol_version="1.0"
        )
    )
    card.skills.append(AgentSkill(id="evil", name=HOSTILE, description=HOSTILE, tags=[HOSTILE]))
    card.provider.organization = HOSTILE
    card.provider.url = "javascript:window.pwned=4"
    handler = DefaultRequestHandler(
        agent_executor=Hostile(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(
        routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    )
    async with serving(app, "hostile-agent", port) as url:  # the port its card declares
        yield url


def one_agent_document(agent: str, url: str, **spec: Any) -> dict[str, Any]:
    """An Application whose one agent ``agent`` is deployed at ``url`` (served by a test)."""
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "console-test"},
        "spec": {
            "agency": {"entry": agent, "agents": {agent: {"spec": spec}}},
            "endpoints": {agent: {"protocol": "a2a", "url": url, "usage": "deploy"}},
        },
    }


def example_document() -> dict[str, Any]:
    """``examples/agency.yaml`` with every port of it one the OS says is free."""
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / "agency.yaml").read_text())
    for endpoint in document["spec"]["endpoints"].values():
        path = "/mcp" if endpoint["url"].endswith("/mcp") else ""
        endpoint["url"] = f"http://{HOST}:{free_port()}{path}"
        if "grpc_port" in endpoint.get("a2a", {}):
            endpoint["a2a"]["grpc_port"] = free_port()
    return document


@dataclass
class Example:
    """The example agency: its document, its concierge and researcher answering."""

    path: Path
    urls: dict[str, str]  # agent -> url


@contextlib.contextmanager
def serve_example(workdir: Path) -> Iterator[Example]:
    """The example's concierge and researcher, each a real ``mas-ctl serve`` (their ready
    lines awaited with a deadline), until the block ends. web-search and text-tools stay
    unserved: their edges show that."""
    workdir.mkdir(parents=True, exist_ok=True)
    document = example_document()
    path = write_app(workdir / "agency.yaml", document)
    agents = ("researcher", "concierge")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for agent in agents:
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "mas.ctl.cli",
                        "serve",
                        "-f",
                        str(path),
                        "--agent",
                        agent,
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=environment(workdir / agent),
                )
            )
        for agent, process in zip(agents, processes, strict=True):
            line = wait_for_line(process, "serving ", COLD_START, "mas-ctl serve")
            assert line.startswith(f"serving {agent}"), line
        urls = {a: document["spec"]["endpoints"][a]["url"] for a in agents}
        yield Example(path, urls)
    finally:
        for process in processes:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
