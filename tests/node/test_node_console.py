"""The web console from the chart on a real node, as the README's path has it:
``helm upgrade --set console.enabled=true``, open one URL in Debian's chromium, see the
example as a graph with the edges it can check Ready, the concierge's badge counting its
turns, talk to the concierge with its hop to the researcher shown, then break the researcher
and watch its edge turn, and turn back once the operator has repaired it.

The console runs from our image as its own ServiceAccount (read-only RBAC) and reaches the
agents through their Services. It listens behind its Service here, as it does behind an
authenticating proxy: the host stands in for the proxy (its addresses are the trusted
range) and sends the user header. The release is set back as it was at the end.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from playwright.async_api import Page, async_playwright, expect

from .agency import NS, OPERATOR_NS, RELEASE, Desk
from .support import CHART, eventually, helm

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
CONSOLE = f"{RELEASE}-mas-operator-console"  # the release's fullname, then -console
USER_HEADER = "X-Forwarded-User"
# The host, where the test's browser runs, stands in for the proxy: its addresses on the
# node's bridge and Service network are private ones.
HOST_RANGES = "{10.0.0.0/8,172.16.0.0/12,192.168.0.0/16}"
WAIT = 120_000  # ms: a watch event and an agent's answer on a busy node


@pytest.fixture(scope="module")
def console_url(desk: Desk) -> Iterator[str]:
    """The console enabled on the release, Ready; its Service's url. Disabled afterwards."""
    if not CHROMIUM.exists():
        if os.environ.get("MAS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MAS_REQUIRE_BROWSER=1 but {CHROMIUM} is missing", pytrace=False)
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    kubeconfig = desk.node.kubeconfig
    common = [str(CHART), "-n", OPERATOR_NS, "--reuse-values", "--wait", "--timeout", "10m"]
    done = helm(
        kubeconfig,
        "upgrade",
        RELEASE,
        *common,
        "--set",
        "console.enabled=true",
        "--set",
        f"console.auth.proxyRanges={HOST_RANGES}",
        "--set",
        f"console.auth.proxyHeader={USER_HEADER}",
    )
    assert done.returncode == 0, f"helm upgrade failed:\n{done.stdout}\n{done.stderr}"
    try:
        # the agents admit the console: its principal is in their pods, which roll for it
        desk.rolled_out(console=True)
        core = k8s.CoreV1Api(desk.node.api_client())
        service = core.read_namespaced_service(CONSOLE, OPERATOR_NS)
        port = service.spec.ports[0].port
        url = f"http://{service.spec.cluster_ip}:{port}"
        yield url
    finally:
        done = helm(kubeconfig, "upgrade", RELEASE, *common, "--set", "console.enabled=false")
        assert done.returncode == 0, f"helm upgrade back failed:\n{done.stdout}\n{done.stderr}"
        # and roll back without it: the later tests count one pod per agent
        desk.rolled_out(console=False)


@pytest.fixture
async def page(console_url: str) -> AsyncIterator[Page]:
    """A page with the proxy's user header on every request; any browser console error, page
    error or dialog fails the test.

    The browser reaches the console over plain http at its Service's ClusterIP, where a
    deployment puts the authenticating proxy's TLS: chromium is told to treat that origin as
    the secure one it would be (else it logs, as an error, that it ignored the console's
    Cross-Origin-Opener-Policy header, which applies to secure origins only).
    """
    problems: list[str] = []
    secure = f"--unsafely-treat-insecure-origin-as-secure={console_url}"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=[*CHROMIUM_FLAGS, secure]
        )
        try:
            context = await browser.new_context(extra_http_headers={USER_HEADER: "node-test"})
            opened = await context.new_page()
            opened.on(
                "console",
                lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None,
            )
            opened.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            opened.on("dialog", lambda d: problems.append(f"dialog: {d.message}"))
            yield opened
            await opened.goto("about:blank")  # no live-update stream left open
            await context.close()
        finally:
            await browser.close()
    assert not problems, problems


async def test_the_console_shows_the_example_and_talks_to_the_concierge(
    desk: Desk, console_url: str, page: Page
) -> None:
    # one URL: the Applications, the example among them, Ready
    eventually(lambda: _answers(console_url), "the console's Service to answer", 120)
    await page.goto(console_url + "/")
    row = page.locator(f'#apps tr[data-key="research/{desk.name}"]')
    await expect(row.locator('[data-col="ready"]')).to_have_text("True", timeout=WAIT)
    await expect(row.locator('[data-col="agents"]')).to_have_text("2/2")
    await row.get_by_role("link", name=desk.name).click()
    # the graph: every agent, the hop to the researcher and the in-process edges Ready
    for node in ("concierge", "researcher", "summarizer", "web-search", "text-tools"):
        await expect(page.locator(f'g.node[data-node="{node}"]')).to_be_visible()
    for key in ("concierge|researcher|", "concierge|summarizer|", "researcher|summarizer|"):
        edge = page.locator(f'g.edge[data-key^="{key}"]')
        await expect(edge).to_have_class(re.compile(r"\bstate-ready\b"), timeout=WAIT)
    agent = page.locator('tr[data-agent="concierge"]')
    await expect(agent).to_contain_text(f"{desk.name}-concierge.research.svc")
    # its badge: the turns its /metrics counts, read through its Service (status metrics_url;
    # this file runs before the NetworkPolicy test starts an enforcer, which would admit the
    # metrics port only from metrics_namespace)
    badge = agent.locator(".activity .badge")
    await expect(badge).to_have_text(re.compile(r"^\d+ turns?, "), timeout=WAIT)
    before = int((await badge.inner_text()).split()[0])
    app_page = page.url
    # a conversation with the concierge, through its Service, shows the hop to the researcher
    await agent.get_by_role("link", name="concierge").click()
    await expect(page.locator("#card")).to_contain_text("Answer research questions")
    box = page.get_by_label("Message")
    await box.fill("research the console")
    await box.press("Enter")
    transcript = page.locator("#transcript")
    await expect(transcript.locator(".delegation")).to_contain_text(
        "delegated to researcher: ok", timeout=WAIT
    )
    await expect(transcript.locator("li.agent").last).to_contain_text(
        "found: sources on the console"
    )
    await expect(page.locator("#chat-status")).to_have_text("done")
    # back on the Application page, the badge counts that turn
    await page.goto(app_page)
    await expect(badge).to_have_text(re.compile(rf"^{before + 1} turns?, "), timeout=WAIT)
    # break the researcher as a person would (kubectl scale ... --replicas=0): its edge turns
    # in the open page, then back to Ready once the operator has put its replica back
    hop = page.locator('g.edge[data-key^="concierge|researcher|"]')
    apps = k8s.AppsV1Api(desk.node.api_client())
    await asyncio.to_thread(
        apps.patch_namespaced_deployment_scale,
        f"{desk.name}-researcher",
        NS,
        {"spec": {"replicas": 0}},
    )
    await expect(hop).to_have_class(re.compile(r"\bstate-pending\b"), timeout=WAIT)
    await expect(hop).to_have_class(re.compile(r"\bstate-ready\b"), timeout=WAIT)
    await asyncio.to_thread(desk.rolled_out, True)  # one ready pod per agent again


def _answers(url: str) -> bool:
    import httpx

    return httpx.get(url + "/healthz", timeout=5).text == "ok\n"
