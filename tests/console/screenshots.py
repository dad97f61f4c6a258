"""The console's pages as a person sees them, one PNG each: the screenshots of
docs/console.md, made by the walk a browser test takes too
(``test_console_browser.py::test_every_page_shows_what_the_docs_show``).

``scripts/console-screenshots [--out DIR]`` serves the example's concierge and researcher
(``mas-ctl serve``), the console over the example, drives Debian's chromium through
:func:`shoot` and writes the PNGs into ``docs/images/console`` (or ``DIR``).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from pathlib import Path

from console_support import CHROMIUM, CHROMIUM_FLAGS, click_edge, console, serve_example
from playwright.async_api import Page, async_playwright, expect

OUT = Path(__file__).resolve().parents[2] / "docs" / "images" / "console"
PAGES = ("applications", "application", "agent", "task")
VIEWPORT = {"width": 1180, "height": 820}
WAIT = 20_000  # ms: the longest one thing the page shows may take to appear
QUESTION = "research A2A 1.0"


async def shoot(page: Page, url: str, out: Path) -> dict[str, Path]:
    """Walk the console at ``url`` (over the served example) page by page, waiting on what
    each shows, and write one PNG per page into ``out``; name -> file."""
    out.mkdir(parents=True, exist_ok=True)
    shots: dict[str, Path] = {}

    async def snap(name: str) -> None:
        """The viewport, or less when the page is shorter (no blank band in the docs)."""
        shots[name] = out / f"{name}.png"
        tall = await page.evaluate("Math.ceil(document.body.getBoundingClientRect().height)")
        clip = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": min(tall, VIEWPORT["height"])}
        await page.screenshot(path=str(shots[name]), clip=clip)

    await page.set_viewport_size(VIEWPORT)
    await page.goto(url + "/")
    row = page.locator("#apps tbody tr", has_text="research-desk")
    await expect(row.locator('[data-col="ready"]')).to_have_text("True", timeout=WAIT)
    await expect(page.locator("#live")).to_have_text("live updates: on", timeout=WAIT)
    await snap("applications")

    await row.get_by_role("link", name="research-desk").click()
    hop = page.locator('g.edge[data-key="concierge|researcher|a2a"]')
    await expect(hop).to_have_class(re.compile(r"\bstate-ready\b"), timeout=WAIT)
    await click_edge(page, hop)
    await expect(page.locator("#edge-detail")).to_contain_text("TargetReady")
    badge = page.locator('tr[data-agent="concierge"] .activity .badge')
    await expect(badge).to_have_text(re.compile(r"^\d+ turns?, "), timeout=WAIT)
    await snap("application")

    await page.locator('tr[data-agent="concierge"]').get_by_role("link").click()
    box = page.get_by_label("Message")
    await box.fill(QUESTION)
    await box.press("Enter")
    await expect(page.locator("#chat-status")).to_have_text("done", timeout=WAIT)
    await expect(page.locator("#transcript .delegation")).to_contain_text("researcher")
    await page.locator("#chat").scroll_into_view_if_needed()
    await snap("agent")

    await page.reload()  # the task the turn made is listed now
    task = page.locator("#tasks tbody tr", has_text="completed").first.get_by_role("link")
    await task.click()
    await expect(page.locator("#task-state")).to_have_text("completed", timeout=WAIT)
    await expect(page.locator(".history")).to_contain_text(QUESTION)
    await snap("task")
    return shots


async def main(out: Path) -> int:
    if not CHROMIUM.exists():
        print(f"error: {CHROMIUM} is missing (apt-get install chromium)", file=sys.stderr)
        return 1
    import yaml

    from mas.console.document_source import DocumentSource
    from mas.infra.wiring import wire

    with tempfile.TemporaryDirectory() as work, serve_example(Path(work)) as example:
        source = DocumentSource(wire(yaml.safe_load(example.path.read_text())), interval=0.3)
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS
            )
            try:
                page = await browser.new_page()
                async with console(source, page) as url:
                    shots = await shoot(page, url, out)
            finally:
                await browser.close()
    for name in PAGES:
        print(f"{shots[name]} {shots[name].stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the PNGs go ({OUT})")
    sys.exit(asyncio.run(main(parser.parse_args().out)))
