"""``status.routes`` on a real API server: every edge of the shipped example, a target scaled
to 0 (its edges go Pending, a Warning Event fires once, a Normal one when it is back), and
an external endpoint: Unknown, or, with the opt-in card check against a bare a2a-sdk server
on loopback, Ready, then Unreachable with its backoff in the status once the server stops.

No kubelet runs here: the tests mark pods Ready through pods/status, standing in for it
(the Deployment controller then counts ready replicas as in a real cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml
from operator_support import (
    Api,
    card_app,
    eventually,
    full_passes,
    printer_columns,
    wait_condition,
)
from tests.ports import free_port

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(180)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agency.yaml"
APP = "research-desk"
TO_RESEARCHER = ("concierge", "researcher", "a2a")
VIA_RESEARCHER = ("researcher", "summarizer", "in-process")
TO_WEB_SEARCH = ("researcher", "web-search", "a2a")


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


def routes(api: Api) -> dict[tuple[str, str, str], dict[str, Any]]:
    status = api.get(APP).get("status") or {}
    return {(r["from"], r["to"], r["via"]): r for r in status.get("routes") or []}


def wait_route(api: Api, key: tuple[str, str, str], state: str, **fields: Any) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        route = routes(api).get(key)
        if route is None or route["state"] != state:
            return None
        return route if all(route.get(k) == v for k, v in fields.items()) else None

    return eventually(check, 60, what=f"edge {key} {state} {fields}")


def edge_events(api: Api) -> list[tuple[str, str, str]]:
    return sorted(
        (e.type, e.reason, e.message)
        for e in api.core.list_namespaced_event(api.ns).items
        if e.reason in ("EdgeNotReady", "EdgeReady") and e.involved_object.name == APP
    )


def test_the_example_reports_every_edge(start_operator: Any, api: Api) -> None:
    start_operator()
    api.create(example())
    researcher = f"http://{APP}-researcher.{api.ns}.svc:8402"
    pending = wait_route(api, TO_RESEARCHER, "Pending")
    assert pending == {
        "from": "concierge",
        "to": "researcher",
        "via": "a2a",
        "url": researcher,
        "state": "Pending",
        "reason": "NoReadyReplicas",
        "message": "0/1 replicas ready",
        "lastTransitionTime": pending["lastTransitionTime"],
    }
    wired = wait_condition(api, APP, "Wired", "True")
    assert "concierge -> researcher (a2a): Pending: 0/1 replicas ready" in wired["message"]

    eventually(lambda: api.mark_pods_ready() == 2, what="two pods to stand in for")
    wait_condition(api, APP, "Ready", "True")
    ready = wait_route(api, TO_RESEARCHER, "Ready")
    found = routes(api)
    assert {key: (r["state"], r["reason"], r.get("url")) for key, r in found.items()} == {
        TO_RESEARCHER: ("Ready", "TargetReady", researcher),
        ("concierge", "summarizer", "in-process"): ("Ready", "HostReady", None),
        TO_WEB_SEARCH: ("Unknown", "NotChecked", "http://127.0.0.1:8403"),
        VIA_RESEARCHER: ("Ready", "HostReady", None),
        ("summarizer", "text-tools", "mcp"): ("Unknown", "NotChecked", "http://127.0.0.1:8600/mcp"),
    }
    assert ready["message"] == "1/1 replicas ready"
    assert ready["lastTransitionTime"] >= pending["lastTransitionTime"]
    assert printer_columns(api, APP)["Edges"] == "3/5"  # kubectl get masapp -o wide
    wired = api.condition(APP, "Wired")
    assert wired is not None and wired["status"] == "True"
    assert "edges not Ready" not in wired["message"]
    assert (
        "state Unknown: researcher -> web-search (a2a), summarizer -> text-tools (mcp)"
        in (wired["message"])
    )
    assert edge_events(api) == []  # nothing left Ready: no Event


def test_a_target_scaled_to_zero_goes_pending_and_back(start_operator: Any, api: Api) -> None:
    op = start_operator()
    doc = example()
    doc["spec"]["runtime"] = {"autoscaling": True}  # `kubectl scale` owns the replicas
    api.create(doc)
    eventually(lambda: api.mark_pods_ready() == 2, what="two pods to stand in for")
    wait_route(api, TO_RESEARCHER, "Ready")
    wait_route(api, VIA_RESEARCHER, "Ready")

    deployment = f"{APP}-researcher"
    api.apps.patch_namespaced_deployment_scale(deployment, api.ns, {"spec": {"replicas": 0}})
    down = wait_route(api, TO_RESEARCHER, "Pending", reason="ScaledToZero")
    assert down["message"] == "scaled to 0 replicas"
    hosted = wait_route(api, VIA_RESEARCHER, "Pending", reason="ScaledToZero")
    assert hosted["message"] == "runs in the pods of researcher: scaled to 0 replicas"
    assert printer_columns(api, APP)["Edges"] == "1/5"
    wired = api.condition(APP, "Wired")
    assert wired is not None and (wired["status"], wired["reason"]) == ("True", "PodLocalUrls")
    assert (
        "edges not Ready: concierge -> researcher (a2a): Pending: scaled to 0 replicas; "
        "researcher -> summarizer (in-process): Pending: runs in the pods of researcher: "
        "scaled to 0 replicas; state Unknown: " in wired["message"]
    )
    warnings = [
        ("Warning", "EdgeNotReady", f"edge {edge} is Pending: {message}")
        for edge, message in (
            ("concierge -> researcher (a2a)", down["message"]),
            ("researcher -> summarizer (in-process)", hosted["message"]),
        )
    ]
    eventually(lambda: edge_events(api) == sorted(warnings), what="one Warning per edge")
    full_passes(op)  # every Application reconciled again since: still one Event per edge
    assert edge_events(api) == sorted(warnings)

    api.apps.patch_namespaced_deployment_scale(deployment, api.ns, {"spec": {"replicas": 1}})
    eventually(lambda: api.mark_pods_ready() == 2, what="the new researcher pod")
    back = wait_route(api, TO_RESEARCHER, "Ready")
    assert back["lastTransitionTime"] >= down["lastTransitionTime"]
    recovered = [
        ("Normal", "EdgeReady", "edge concierge -> researcher (a2a) is Ready: 1/1 replicas ready"),
        (
            "Normal",
            "EdgeReady",
            "edge researcher -> summarizer (in-process) is Ready: runs in the pods of researcher",
        ),
    ]
    eventually(
        lambda: edge_events(api) == sorted(warnings + recovered), what="one Normal Event per edge"
    )


@contextlib.contextmanager
def card_server() -> Iterator[tuple[str, threading.Event]]:
    """A bare a2a-sdk server publishing its AgentCard on 127.0.0.1, in a thread of its own.
    Yields its url and an event: set it to stop the server (the context waits for it)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = card_app(url)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    stop = threading.Event()
    failed: list[BaseException] = []

    def main() -> None:
        async def serve() -> None:
            serving = asyncio.create_task(server.serve())
            while not stop.is_set() and not serving.done():
                await asyncio.sleep(0.05)
            server.should_exit = True
            await serving

        try:
            asyncio.run(serve())
        except BaseException as exc:  # reported by the test
            failed.append(exc)

    thread = threading.Thread(target=main, name="card-server", daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started or failed, 30, interval=0.05, what="the card server")
        assert not failed, failed
        yield url, stop
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive(), "the card server did not stop"


def seconds(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def test_an_external_endpoint_is_checked_only_when_asked(start_operator: Any, api: Api) -> None:
    start_operator()
    with card_server() as (url, stop):
        doc = example()
        doc["spec"]["endpoints"]["web-search"]["url"] = url
        api.create(doc)
        unknown = wait_route(api, TO_WEB_SEARCH, "Unknown", reason="NotChecked")
        assert unknown["url"] == url  # the configured url: no check without the opt-in

        doc["spec"]["routes"] = {
            "check_external": True,
            "check_interval_seconds": 2,
            "check_timeout_seconds": 2,
        }
        api.patch_spec(APP, doc["spec"])
        ready = wait_route(api, TO_WEB_SEARCH, "Ready", reason="CardAnswered")
        card = f"{url}/.well-known/agent-card.json"
        assert ready["message"] == f"the AgentCard at {card} answered (name 'Web Search')"
        assert "checkFailures" not in ready and "nextCheckTime" not in ready
        assert routes(api)[("summarizer", "text-tools", "mcp")]["state"] == "Unknown"
        stop.set()

    # Stopped: the next check fails; each further failure waits twice as long.
    seen: dict[int, dict[str, Any]] = {}

    def fourth_failure() -> bool:
        route = routes(api)[TO_WEB_SEARCH]
        if route["state"] == "Unreachable":
            seen.setdefault(route["checkFailures"], route)
        return 4 in seen

    eventually(fourth_failure, 90, what="four failed card checks in a row")
    first = seen[1]
    assert first["reason"] == "CardCheckFailed"
    assert first["message"].startswith(f"GET {card} failed: ")
    assert first["message"].endswith("(1 failed checks in a row)")
    assert seen[4]["lastTransitionTime"] == first["lastTransitionTime"]  # still Unreachable
    assert 2 in seen  # each failure is written (the 2nd stands for 4 s)
    # The n-th failure in a row waits 2 * 2**(n-1) s (a tenth of jitter): the 2nd's next
    # check is 4 s after it, the 4th's 16 s after it, and the 4th comes 4 + 8 s after the
    # 2nd, so their nextCheckTimes are about 24 s apart (without backoff: 4 s).
    gap = seconds(seen[4]["nextCheckTime"]) - seconds(seen[2]["nextCheckTime"])
    assert gap >= 16, (seen[2], seen[4])
    warning = f"edge researcher -> web-search (a2a) is Unreachable: {first['message']}"
    eventually(
        lambda: (
            [e for e in edge_events(api) if e[1] == "EdgeNotReady"]
            == [("Warning", "EdgeNotReady", warning)]
        ),
        what="one Warning for the edge that left Ready",
    )
