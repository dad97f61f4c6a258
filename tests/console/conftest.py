"""Fixtures of the console tests: Debian's chromium under Playwright, and a page that fails
its test on any error in the browser's console, an uncaught script error, or a dialog (a
script of an agent's that ran)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from console_support import CHROMIUM, CHROMIUM_FLAGS, Example, need_browser, serve_example
from playwright.async_api import Browser, Page, async_playwright
from tests.ctl_client.ctl_client_support import OurAgent, serve_desk


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    need_browser()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context()
    opened = await context.new_page()
    problems: list[str] = []
    opened.on(
        "console",
        lambda message: (
            problems.append(f"console {message.type}: {message.text}")
            if message.type == "error"
            else None
        ),
    )
    opened.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    opened.on("dialog", lambda dialog: problems.append(f"dialog: {dialog.message}"))
    yield opened
    pwned = await opened.evaluate("window.pwned === undefined ? null : window.pwned")
    await context.close()
    assert pwned is None, f"a script from an agent ran (window.pwned = {pwned})"
    assert not problems, problems


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OurAgent]:
    """The scripted desk of the client tests, served by a real ``mas-ctl serve``."""
    with serve_desk(tmp_path_factory.mktemp("desk")) as agent:
        yield agent


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    """The example agency's concierge and researcher, each a real ``mas-ctl serve``."""
    with serve_example(tmp_path_factory.mktemp("example")) as served:
        yield served
