"""The console in a real browser (Debian's chromium under Playwright), the way a person uses
it: the agency on the graph, an edge that changes state live, a chat turn that streams and
shows its delegation, a question answered in the page, hostile agents that stay inert.

Every wait is one of Playwright's auto-waiting ``expect`` assertions on what the page shows,
with its deadline; the page fixture fails a test on any browser console error."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from console_support import (
    BIG,
    HOSTILE,
    Example,
    click_edge,
    console,
    hostile_agent,
    one_agent_document,
)
from playwright.async_api import Page, expect
from screenshots import PAGES, shoot
from tests.conftest import EXAMPLES
from tests.ctl_client.ctl_client_support import OurAgent, serve_desk
from tests.session_modes.session_modes_support import write_app

from mas.console.document_source import DocumentSource
from mas.infra.wiring import wire
from mas.runtime.registry import default_registry

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
WAIT = 20_000  # ms: the longest one thing the page shows may take to appear
EXAMPLE_EDGES = (
    "concierge|researcher|a2a",
    "concierge|summarizer|in-process",
    "researcher|web-search|a2a",
    "researcher|summarizer|in-process",
    "summarizer|text-tools|mcp",
)


def source_of(path: Path, interval: float = 0.3) -> DocumentSource:
    import yaml

    document = yaml.safe_load(path.read_text())
    return DocumentSource(wire(document, default_registry().known_plugins()), interval=interval)


def desk_path(agent: OurAgent) -> Path:
    return agent.release.parent / "desk.yaml"


async def test_the_example_is_drawn_with_every_agent_and_edge(page: Page) -> None:
    async with console(source_of(EXAMPLES / "agency.yaml"), page) as url:
        await page.goto(url + "/")
        row = page.locator("#apps tbody tr", has_text="research-desk")
        await expect(row).to_have_count(1, timeout=WAIT)
        await row.get_by_role("link", name="research-desk").click()
        await expect(page.get_by_role("heading", level=1)).to_contain_text("research-desk")
        for node in ("concierge", "summarizer", "researcher", "web-search", "text-tools"):
            await expect(page.locator(f'g.node[data-node="{node}"]')).to_be_visible()
        await expect(page.locator("g.node.entry")).to_have_attribute("data-node", "concierge")
        await expect(page.locator("g.node.in-process")).to_have_attribute("data-node", "summarizer")
        await expect(page.locator("g.node.external.tool")).to_have_attribute(
            "data-node", "text-tools"
        )
        for key in EXAMPLE_EDGES:
            await expect(page.locator(f'g.edge[data-key="{key}"]')).to_have_count(1)
        # the keyboard reaches an edge and Enter shows why it is in its state
        edge = page.locator('g.edge[data-key="summarizer|text-tools|mcp"]')
        await edge.focus()
        await page.keyboard.press("Enter")
        await expect(page.locator("#edge-detail")).to_contain_text("NotChecked")
        await expect(page.locator("#edge-detail")).to_contain_text("no AgentCard")


async def test_an_edge_turns_when_its_agent_stops_answering(page: Page, tmp_path: Path) -> None:
    with serve_desk(tmp_path / "desk") as desk:
        async with console(source_of(desk_path(desk)), page) as url:
            await page.goto(url + "/apps/local/session-modes")
            edge = page.locator('g.edge[data-key="desk|helper|in-process"]')
            await expect(edge).to_have_class(re.compile(r"\bstate-ready\b"), timeout=WAIT)
            await expect(page.locator("#app-ready")).to_have_text("Ready: True")
            desk.process.send_signal(signal.SIGKILL)
            # no reload: the page's live updates turn the edge
            await expect(edge).to_have_class(re.compile(r"\bstate-unreachable\b"), timeout=WAIT)
            await expect(page.locator("#app-ready")).to_have_text("Ready: False")
            await click_edge(page, edge)
            await expect(page.locator("#edge-detail")).to_contain_text("NoAnswer")
            row = page.locator('tr[data-agent="desk"] .replicas')
            await expect(row).to_have_text("no answer")
            events = page.locator("#events")
            await page.reload()
            await expect(events).to_contain_text("AgentDown")


async def test_a_chat_turn_streams_and_shows_the_delegation(page: Page, desk: OurAgent) -> None:
    async with console(source_of(desk_path(desk)), page) as url:
        await page.goto(url + "/apps/local/session-modes/agents/desk")
        await expect(page.locator("#card")).to_contain_text("Skills")
        box = page.get_by_label("Message")
        await box.fill("ask helper hi")
        await box.press("Enter")
        transcript = page.locator("#transcript")
        await expect(transcript.locator(".delegation")).to_have_text(
            "· delegated to helper: ok: helper did: hi", timeout=WAIT
        )
        await expect(transcript.locator("li.agent").last).to_contain_text(
            "helper said: helper did: hi"
        )
        await expect(page.locator("#chat-status")).to_have_text("done")
        # the text streams: a held story shows its first word before it is released
        await box.fill("story")
        await page.get_by_role("button", name="Send").click()
        story = transcript.locator("li.agent").last.locator(".text")
        await expect(story).to_have_text("one ", timeout=WAIT)
        await expect(page.get_by_role("button", name="Cancel")).to_be_enabled()
        desk.release.touch()
        await expect(story).to_have_text("one two three", timeout=WAIT)
        await expect(page.locator("#chat-status")).to_have_text("done")
        desk.release.unlink()


async def test_an_agents_badge_counts_the_turn_just_had(page: Page, desk: OurAgent) -> None:
    """The badge reads the agent's /metrics (``mas-ctl serve``'s, on its A2A port) and is
    kept current by the page's update stream: a turn in the chat shows, without a reload."""
    async with console(source_of(desk_path(desk)), page) as url:
        await page.goto(url + "/apps/local/session-modes")
        badge = page.locator('tr[data-agent="desk"] .activity .badge')
        await expect(badge).to_have_text(re.compile(r"^\d+ turns?, "), timeout=WAIT)
        before = int((await badge.inner_text()).split()[0])
        await page.locator('tr[data-agent="desk"]').get_by_role("link", name="desk").click()
        box = page.get_by_label("Message")
        await box.fill("ask helper count me")
        await box.press("Enter")
        await expect(page.locator("#chat-status")).to_have_text("done", timeout=WAIT)
        await page.get_by_role("link", name="session-modes").click()
        counted = re.compile(rf"^{before + 1} turns?, [0-9.?]+/min, \d+ errors?$")
        await expect(badge).to_have_text(counted, timeout=WAIT)


async def test_a_conversation_with_the_concierge_shows_the_hop_to_the_researcher(
    page: Page, example: Example
) -> None:
    async with console(source_of(example.path), page) as url:
        await page.goto(url + "/apps/local/research-desk")
        # both agents answer: the concierge's hop to the researcher is Ready on the graph
        hop = page.locator('g.edge[data-key="concierge|researcher|a2a"]')
        await expect(hop).to_have_class(re.compile(r"\bstate-ready\b"), timeout=WAIT)
        await expect(page.locator("#app-ready")).to_have_text("Ready: True")
        # web-search is not served here: its edge says so
        search = page.locator('g.edge[data-key="researcher|web-search|a2a"]')
        await expect(search).to_have_class(re.compile(r"\bstate-unreachable\b"))
        await page.locator('tr[data-agent="concierge"]').get_by_role("link").click()
        await expect(page.locator("#card")).to_contain_text("Answer research questions")
        box = page.get_by_label("Message")
        await box.fill("research A2A 1.0")
        await box.press("Enter")
        transcript = page.locator("#transcript")
        await expect(transcript.locator(".delegation")).to_have_text(
            re.compile(r"^· delegated to researcher: ok"), timeout=WAIT
        )
        await expect(transcript.locator("li.agent").last).to_contain_text(
            "found: sources on A2A 1.0"
        )
        await expect(page.locator("#chat-status")).to_have_text("done")


async def test_cancel_ends_the_turn_and_its_task(page: Page, desk: OurAgent) -> None:
    async with console(source_of(desk_path(desk)), page) as url:
        await page.goto(url + "/apps/local/session-modes/agents/desk")
        box = page.get_by_label("Message")
        await box.fill("story")
        await box.press("Enter")
        transcript = page.locator("#transcript")
        reply = transcript.locator("li.agent").last
        await expect(reply.locator(".text")).to_have_text("one ", timeout=WAIT)
        await page.get_by_role("button", name="Cancel").click()
        # the agent ended the turn canceled: the stream said so, the page did not guess
        await expect(transcript.locator("li.note").last).to_have_text("canceled", timeout=WAIT)
        await expect(page.locator("#chat-status")).to_have_text("canceled")
        await expect(page.get_by_role("button", name="Send")).to_be_enabled()
        await expect(reply.locator(".text")).to_have_text("one ")
        task_id = await reply.get_attribute("data-task")
        assert task_id
        # the agent's task list says the task was canceled
        await page.reload()
        row = page.locator("#tasks tbody tr", has_text=task_id)
        await expect(row).to_contain_text("canceled")


async def test_a_file_artifact_downloads_from_the_chat_and_the_task_page(
    page: Page, desk: OurAgent, tmp_path: Path
) -> None:
    async with console(source_of(desk_path(desk)), page) as url:
        await page.goto(url + "/apps/local/session-modes/agents/desk")
        box = page.get_by_label("Message")
        await box.fill("files")
        await box.press("Enter")
        await expect(page.locator("#chat-status")).to_have_text("done", timeout=WAIT)
        transcript = page.locator("#transcript")
        await expect(transcript.locator("li.artifact pre").first).to_have_text("the notes")
        await expect(transcript.locator("li.artifact pre").nth(1)).to_contain_text('"count": 3')
        link = transcript.get_by_role("link", name=re.compile("^download "))
        async with page.expect_download() as downloading:
            await link.click()
        saved = await downloading.value
        # the agent named it ../../escape/report.bin: only its last segment is kept
        assert saved.suggested_filename == "report.bin"
        await saved.save_as(tmp_path / "report.bin")
        assert (tmp_path / "report.bin").read_bytes() == b"hello file"
        # the task page lists the same artifacts, the file with its link
        task_id = await transcript.locator("li.agent").last.get_attribute("data-task")
        assert task_id
        await page.goto(url + f"/apps/local/session-modes/agents/desk/tasks/{task_id}")
        artifacts = page.locator("#artifacts")
        await expect(artifacts).to_contain_text("the notes")
        async with page.expect_download() as downloading:
            await artifacts.get_by_role("link", name="download report.bin").click()
        assert (await downloading.value).suggested_filename == "report.bin"


async def test_a_question_is_answered_in_the_page(page: Page, desk: OurAgent) -> None:
    async with console(source_of(desk_path(desk)), page) as url:
        await page.goto(url + "/apps/local/session-modes/agents/desk")
        box = page.get_by_label("Message")
        await box.fill("book")
        await box.press("Enter")
        transcript = page.locator("#transcript")
        await expect(transcript.locator(".question").last).to_contain_text(
            "Which day?", timeout=WAIT
        )
        await expect(page.locator("#chat-status")).to_contain_text("answer it")
        await expect(box).to_be_focused()
        await box.fill("monday")
        await box.press("Enter")
        await expect(transcript.locator("li.agent").last).to_contain_text(
            "Booked for monday", timeout=WAIT
        )
        await expect(page.locator("#chat-status")).to_have_text("done")
        # the conversation has its own address: a reload keeps the context, the task is listed
        context = await page.locator("#chat").get_attribute("data-context")
        assert context and f"context={context}" in page.url
        await page.reload()
        await expect(page.locator("#chat")).to_have_attribute("data-context", context)
        await expect(page.locator("#tasks")).to_contain_text("completed")


async def test_a_hostile_agent_renders_inert(page: Page, tmp_path: Path) -> None:
    async with hostile_agent() as agent_url:
        path = write_app(tmp_path / "hostile.yaml", one_agent_document("bad", agent_url))
        async with console(source_of(path), page) as url:
            await page.goto(url + "/apps/local/console-test/agents/bad")
            skills = page.locator("#card .skill")
            await expect(skills.filter(has_text="evil")).to_contain_text(HOSTILE)
            await expect(page.locator("h1")).to_contain_text("bad")
            # only the console's own script; no element an agent wrote
            await expect(page.locator("script")).to_have_count(1)
            await expect(page.locator("main img")).to_have_count(0)
            await expect(page.locator('a[href^="javascript"]')).to_have_count(0)
            box = page.get_by_label("Message")
            await box.fill("link")
            await box.press("Enter")
            inert = page.locator("#transcript .inert-url")
            await expect(inert).to_contain_text("javascript:window.pwned=3", timeout=WAIT)
            await expect(page.locator("#transcript li.agent").last).to_contain_text(HOSTILE)
            await expect(page.locator('a[href^="javascript"]')).to_have_count(0)
            await box.fill("big")
            await box.press("Enter")
            await expect(page.locator("#transcript")).to_contain_text(
                f"{BIG} characters: the first 65536 are shown", timeout=WAIT
            )
            await expect(page.locator("#chat-status")).to_have_text("done")
            # a plain image is shown; an SVG (which could script) is a download only
            await box.fill("image")
            await box.press("Enter")
            dot = page.locator("#transcript img.artifact-image")
            await expect(dot).to_have_js_property("naturalWidth", 4, timeout=WAIT)
            await expect(page.locator("#chat-status")).to_have_text("done")
            await box.fill("svg")
            await box.press("Enter")
            evil = page.locator("#transcript li.artifact").last
            await expect(evil.get_by_role("link")).to_contain_text("download", timeout=WAIT)
            await expect(page.locator("#transcript img.artifact-image")).to_have_count(1)
            async with page.expect_download() as downloading:
                await evil.get_by_role("link").click()
            saved = await downloading.value
            # its name had markup and slashes: only safe characters of the last segment stay
            assert saved.suggested_filename == "script_img_src_x_onerror_window.pwned_2_.svg"


async def test_an_agent_that_is_down_is_said_and_the_page_stays_usable(
    page: Page, tmp_path: Path
) -> None:
    from tests.ports import free_port

    nowhere = f"http://127.0.0.1:{free_port()}"
    path = write_app(tmp_path / "down.yaml", one_agent_document("gone", nowhere))
    async with console(source_of(path), page) as url:
        await page.goto(url + "/apps/local/console-test/agents/gone")
        await expect(page.locator("#card-error")).to_contain_text(f"cannot reach {nowhere}")
        await page.get_by_role("link", name="console-test").click()
        await expect(page.locator('g.node[data-node="gone"]')).to_be_visible()
        await expect(page.locator("#app-ready")).to_have_text("Ready: False", timeout=WAIT)
        activity = page.locator('tr[data-agent="gone"] .activity .badge')
        await expect(activity).to_have_text("metrics unreachable", timeout=WAIT)
        await expect(activity).to_have_attribute("title", re.compile(r"^cannot reach "))


async def test_every_page_shows_what_the_docs_show(
    page: Page, example: Example, tmp_path: Path
) -> None:
    """The walk scripts/console-screenshots takes for docs/console.md, each page awaited on
    what it shows; every PNG written."""
    async with console(source_of(example.path), page) as url:
        shots = await shoot(page, url, tmp_path)
    assert sorted(shots) == sorted(PAGES)
    for name, path in shots.items():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
