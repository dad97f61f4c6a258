"""The console's pure parts: the graph and pages escape what agents, cards and Applications
say, the layout survives cycles and 200 agents, the access rules, and an Application object
read as the cluster source reads it (no sockets, no browser: tests/console has those)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml
from a2a.types import AgentCard, AgentSkill
from prometheus_client import CollectorRegistry, Counter, generate_latest

from mas.console import pages
from mas.console.badges import Badge, MetricsError, counts
from mas.console.cluster_source import application_view
from mas.console.files import download_name, file_response
from mas.console.graph import layout, svg
from mas.console.html import safe_link
from mas.console.security import AccessError, check_bind
from mas.console.views import (
    AgentNode,
    ApplicationView,
    EdgeView,
    EventView,
    planned_edges,
    structure,
)
from mas.infra.wiring import wire
from mas.runtime.turns import ArtifactEmitted
from tests.conftest import EXAMPLES

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def example() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / "agency.yaml").read_text())
    return data


def hostile_view() -> ApplicationView:
    return ApplicationView(
        name="desk",
        namespace="team-a",
        entry="a",
        agents=[
            AgentNode("a", HOSTILE, entry=True, deployed=True, url="http://127.0.0.1:1"),
            AgentNode("b", "b"),
        ],
        edges=[EdgeView("a", "b", "in-process", "Pending", HOSTILE, HOSTILE)],
        events=[EventView("Warning", HOSTILE, HOSTILE, "2026-01-01T00:00:00Z")],
    )


def no_markup_from(text: str) -> None:
    """Nothing of HOSTILE survives as markup."""
    assert "<script>" not in text
    assert "<img" not in text
    assert "&lt;script&gt;" in text


def test_the_example_has_every_agent_endpoint_and_edge_as_drawn() -> None:
    wired = wire(example())
    agents, externals = structure(wired.app, wired.routes)
    assert [(a.id, a.entry, a.deployed) for a in agents] == [
        ("concierge", True, True),
        ("summarizer", False, False),
        ("researcher", False, True),
    ]
    assert sorted(a.hosts for a in agents if a.id == "summarizer")[0] == (
        "concierge",
        "researcher",
    )
    assert [(x.id, x.kind) for x in externals] == [
        ("web-search", "external agent"),
        ("text-tools", "tool server"),
    ]
    edges = planned_edges(wired.app, wired.routes)
    assert [(e.source, e.target, e.via) for e in edges] == [
        ("concierge", "researcher", "a2a"),
        ("concierge", "summarizer", "in-process"),
        ("researcher", "web-search", "a2a"),
        ("researcher", "summarizer", "in-process"),
        ("summarizer", "text-tools", "mcp"),
    ]
    view = ApplicationView("research-desk", "local", entry="concierge", agents=agents)
    view.externals, view.edges = externals, edges
    drawn = svg(view)
    assert drawn.count('class="edge ') == 5
    for node in ("concierge", "summarizer", "researcher", "web-search", "text-tools"):
        assert f'data-node="{node}"' in drawn


def test_hostile_strings_are_escaped_in_the_graph_and_the_page() -> None:
    view = hostile_view()
    no_markup_from(svg(view))
    no_markup_from(pages.application_page(view, "laptop"))


def test_a_cycle_and_a_self_loop_are_placed_once() -> None:
    view = ApplicationView("c", "n", entry="a", agents=[AgentNode(x, x) for x in "abc"])
    view.edges = [EdgeView(*pair, "in-process") for pair in ("ab", "bc", "ca", "cc")]
    placed = layout(view)
    assert {k: p.layer for k, p in placed.items()} == {"a": 0, "b": 1, "c": 2}
    assert svg(view).count('class="edge ') == 4


def test_two_hundred_agents_draw_within_bounds() -> None:
    agents = [AgentNode(f"a{i}", f"a{i}", entry=i == 0, deployed=True) for i in range(200)]
    edges = [EdgeView("a0", f"a{i}", "a2a") for i in range(1, 200)]
    view = ApplicationView("big", "n", entry="a0", agents=agents, edges=edges)
    drawn = svg(view)
    assert drawn.count('class="node ') == 200
    height = int(re.search(r'height="(\d+)"', drawn).group(1))  # type: ignore[union-attr]
    assert height < 200 * 100


def test_an_empty_application_says_so() -> None:
    assert "no agents" in svg(ApplicationView("e", "n"))


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", " JavaScript:alert(1)", "data:text/html,x", "vbscript:x"]
)
def test_only_http_urls_become_links(url: str) -> None:
    shown = safe_link(url)
    assert "<a " not in shown and "href" not in shown


def test_an_http_url_is_a_link_without_referrer() -> None:
    assert safe_link("https://x.example/a?b=<c>") == (
        '<a href="https://x.example/a?b=&lt;c&gt;" rel="noopener noreferrer nofollow">'
        "https://x.example/a?b=&lt;c&gt;</a>"
    )


def test_a_hostile_card_renders_inert() -> None:
    card = AgentCard(name=HOSTILE, description=HOSTILE, version="1")
    card.skills.append(AgentSkill(id="s", name=HOSTILE, description=HOSTILE, tags=[HOSTILE]))
    card.provider.organization = HOSTILE
    card.provider.url = "javascript:alert(1)"
    shown = pages.card_section(card)
    no_markup_from(shown)
    assert "javascript:" not in re.findall(r'href="([^"]*)"', shown)


def test_artifacts_render_by_kind_and_a_big_one_says_it_is_cut() -> None:
    big = {"kind": "artifact", "name": HOSTILE, "type": "text", "text": "x" * 10, "size": 5 << 20}
    big["cut"] = True
    shown = pages.artifact_html(big)
    no_markup_from(shown)
    assert f"{5 << 20} characters: the first 10 are shown" in shown
    url = pages.artifact_html({"name": "u", "type": "url", "url": "javascript:alert(1)"})
    assert "href" not in url


@pytest.mark.parametrize(
    ("name", "saved"),
    [
        ("../../escape/report.bin", "report.bin"),
        ("C:\\Users\\x\\notes.txt", "notes.txt"),
        (HOSTILE + ".png", "script_img_src_x_onerror_alert_1_.png"),
        ('a"; filename=evil.sh', "a_filename_evil.sh"),
        ("..", "file"),
    ],
)
def test_a_file_is_saved_under_a_safe_last_segment(name: str, saved: str) -> None:
    assert download_name(name) == saved


def test_only_plain_images_are_shown_and_everything_else_is_an_attachment() -> None:
    png = ArtifactEmitted("file", "dot.png", content=b"\x89PNG", media_type="image/png")
    shown = file_response(png, inline=True)
    assert shown.media_type == "image/png"
    assert shown.headers["content-disposition"] == 'inline; filename="dot.png"'
    saved = file_response(png, inline=False)
    assert saved.headers["content-disposition"].startswith("attachment;")
    for media in ("image/svg+xml", "text/html", "application/javascript", None):
        other = ArtifactEmitted("file", "x", content=b"<script>", media_type=media)
        answer = file_response(other, inline=True)
        assert answer.media_type == "application/octet-stream", media
        assert answer.headers["content-disposition"] == 'attachment; filename="x"'
    record = {"name": HOSTILE, "type": "file", "size": 4, "media_type": "image/svg+xml"}
    html = pages.artifact_html(record, "/apps/a/b/agents/c/tasks/t/files/0")
    assert "<img" not in html and 'href="/apps/a/b/agents/c/tasks/t/files/0" download' in html
    record["media_type"] = "image/png"
    html = pages.artifact_html(record, "/apps/a/b/agents/c/tasks/t/files/0")
    assert 'src="/apps/a/b/agents/c/tasks/t/files/0?inline=1"' in html


def test_the_trace_link_is_built_from_the_template_or_left_out() -> None:
    task = {"id": "t 1", "context_id": "c", "trace_id": ""}
    assert pages.trace_link("http://j/trace/{trace_id}", task) == ""
    link = pages.trace_link("http://j/search?task={task_id}", task)
    assert 'href="http://j/search?task=t%201"' in link
    assert pages.trace_link("javascript:{task_id}", task).startswith("<span")


def test_loopback_needs_no_proxy_and_anything_else_does() -> None:
    assert not check_bind("127.0.0.1", None, []).proxied
    assert not check_bind("::1", None, []).proxied
    with pytest.raises(AccessError, match=r"not a loopback address.*--trusted-proxy-header"):
        check_bind("0.0.0.0", None, [])
    with pytest.raises(AccessError, match="--trusted-proxy-range"):
        check_bind("0.0.0.0", "X-Forwarded-User", [])
    with pytest.raises(AccessError, match="'ten' is not an address range"):
        check_bind("0.0.0.0", "X-Forwarded-User", ["ten"])
    access = check_bind("0.0.0.0", "X-Forwarded-User", ["10.0.0.0/8"])
    assert access.refusal("10.1.2.3", "alice") is None
    refused = access.refusal("192.0.2.1", "alice")
    assert refused is not None and refused.status_code == 403
    unnamed = access.refusal("10.1.2.3", None)
    assert unnamed is not None and unnamed.status_code == 401


def with_status() -> dict[str, Any]:
    obj = example()
    obj["metadata"].update(namespace="team-a", resourceVersion="7")
    obj["status"] = {
        "phase": "Ready",
        "conditions": [{"type": "Ready", "status": "True", "reason": "AllAgentsReady"}],
        "agents": {
            "concierge": {
                "url": "http://research-desk-concierge.team-a.svc:8401",
                "metrics_url": "http://research-desk-concierge.team-a.svc:9464/metrics",
                "replicas": 1,
                "ready_replicas": 1,
            },
            "researcher": {
                "url": "http://research-desk-researcher.team-a.svc:8402",
                "replicas": 0,
                "ready_replicas": 0,
            },
        },
        "routes": [
            {
                "from": "concierge",
                "to": "researcher",
                "via": "a2a",
                "state": "Pending",
                "reason": "ScaledToZero",
                "message": "scaled to 0 replicas",
            }
        ],
    }
    return obj


def test_an_application_object_reads_as_its_status_says() -> None:
    view = application_view(with_status(), [])
    assert (view.key, view.ready, view.phase) == ("team-a/research-desk", "True", "Ready")
    concierge = view.agent("concierge")
    assert concierge is not None and concierge.url == (
        "http://research-desk-concierge.team-a.svc:8401"
    )
    assert concierge.metrics_url == "http://research-desk-concierge.team-a.svc:9464/metrics"
    researcher = view.agent("researcher")
    assert researcher is not None and researcher.metrics_url is None  # none reported: no badge
    assert view.agents_ready == "1/2"
    assert [(e.target, e.state, e.reason) for e in view.edges] == [
        ("researcher", "Pending", "ScaledToZero")
    ]


def test_an_application_without_routes_shows_its_planned_edges_unknown() -> None:
    obj = with_status()
    del obj["status"]["routes"]
    del obj["status"]["agents"]
    view = application_view(obj, [])
    assert len(view.edges) == 5 and {e.state for e in view.edges} == {"Unknown"}
    assert all(a.url is None for a in view.agents)  # never the laptop's 127.0.0.1
    assert all(a.metrics_url is None for a in view.agents)


def test_a_spec_that_does_not_wire_says_why_and_keeps_the_status_nodes() -> None:
    obj = copy.deepcopy(with_status())
    obj["spec"]["agency"]["agents"]["concierge"]["spec"]["delegates_to"] = ["nobody"]
    view = application_view(obj, [])
    assert view.problems and "nobody" in " ".join(view.problems)
    assert {a.id for a in view.agents} == {"concierge", "researcher"}


def exposition(turns: dict[tuple[str, str], int]) -> str:
    """The runtime's turn counter, as ``mas.runtime.metrics`` declares it, in text."""
    registry = CollectorRegistry()
    counter = Counter("maslab_turns", "Turns ended.", ["agent", "outcome"], registry=registry)
    for (agent, outcome), count in turns.items():
        counter.labels(agent, outcome).inc(count)
    return generate_latest(registry).decode()


def test_turns_and_errors_are_the_agents_own_from_real_exposition() -> None:
    text = exposition(
        {
            ("desk", "completed"): 4,
            ("desk", "failed"): 2,
            ("desk", "input_required"): 1,
            ("desk", "withdrawn"): 5,  # never ran: not a turn
            ("helper", "completed"): 9,  # another agent of the same runtime
        }
    )
    assert counts(text, "desk") == (7, 2)
    assert counts(text, "helper") == (9, 0)
    assert counts(text, "nobody") == (0, 0)


@pytest.mark.parametrize("body", ["<html><body>hi</body></html>", '{"turns": 3}', "garbage"])
def test_an_answer_that_is_not_prometheus_text_says_so(body: str) -> None:
    with pytest.raises(MetricsError, match="not Prometheus text"):
        counts(body, "desk")


def test_a_badge_says_its_counts_or_why_there_are_none() -> None:
    assert Badge("ok", 1, 0, None).text == "1 turn, ?/min, 0 errors"
    assert Badge("ok", 12, 1, 2.25).text == "12 turns, 2.2/min, 1 error"
    assert Badge("unreachable", message="x").text == "metrics unreachable"
    # through a Service, one read is one pod's counters: the badge says so with several ready
    assert Badge("ok", 3, 0, 1.0).shown(2) == "3 turns, 1.0/min, 0 errors (one pod of 2)"
    assert Badge("ok", 3, 0, 1.0).shown(1) == Badge("ok", 3, 0, 1.0).text
    assert Badge("unreachable").shown(3) == "metrics unreachable"


def test_the_agent_table_shows_the_badge_escaped() -> None:
    view = application_view(with_status(), [])
    badge = Badge("unreachable", message=HOSTILE)
    body = pages.application_page(view, "cluster", {"concierge": badge})
    no_markup_from(body)
    row = re.search(r'<tr data-agent="concierge">.*?</tr>', body)
    assert row is not None and "metrics unreachable" in row.group(0)
    assert "no metrics url" in body  # the researcher: no metrics_url reported
