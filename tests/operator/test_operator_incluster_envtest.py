"""The in-cluster URL model on a real API server: what a user sees of the shipped example.

``examples/agency.yaml`` names loopback urls (right for ``mas-ctl run-mas`` on a laptop).
Applied unchanged, the operator advertises each deployed agent at its Service, says so in
the ``Wired`` condition and in one Warning Event per url, and never repeats those Events
while nothing changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_support import Api, eventually, wait_condition

from mas_operator.plan import plan_application

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agency.yaml"
APP = "research-desk"


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def url_events(api: Api) -> list[Any]:
    return [
        e
        for e in api.core.list_namespaced_event(api.ns).items
        if e.reason == "PodLocalUrls" and e.involved_object.name == APP
    ]


def test_the_example_is_advertised_and_routed_through_services(
    start_operator: Any, api: Api
) -> None:
    document = yaml.safe_load(EXAMPLE.read_text())
    notes = [str(n) for n in plan_application(document, api.ns).notes]
    start_operator()
    api.create(document)
    concierge = f"http://{APP}-concierge.{api.ns}.svc:8401"
    researcher = f"http://{APP}-researcher.{api.ns}.svc:8402"

    wired = wait_condition(api, APP, "Wired", "True")
    assert wired["reason"] == "PodLocalUrls"
    # between them, the edges that are not Ready (status.routes)
    assert wired["message"].startswith("4 routes resolved (2 remote), 2 deployed agents; ")
    assert wired["message"].endswith("; pod-local urls: " + "; ".join(notes))
    events = eventually(lambda: len(found := url_events(api)) == 5 and found, what="5 Events")
    assert sorted(e.message for e in events) == sorted(notes)
    assert {e.type for e in events} == {"Warning"}

    status = api.get(APP)["status"]["agents"]
    assert status["concierge"]["url"] == concierge
    assert status["concierge"]["card_url"] == concierge + "/.well-known/agent-card.json"
    assert status["researcher"]["url"] == researcher
    service = api.core.read_namespaced_service(f"{APP}-researcher", api.ns)
    assert service.metadata.annotations["maslab.io/url"] == researcher
    config = api.core.read_namespaced_config_map(f"{APP}-concierge", api.ns).data
    pod = yaml.safe_load(config["application.yaml"])["spec"]["endpoints"]
    assert (pod["concierge"]["url"], pod["researcher"]["url"]) == (concierge, researcher)
    assert pod["web-search"]["url"] == "http://127.0.0.1:8403"  # kept, and warned about

    # Reconciles that change nothing about the urls post no further Events.
    eventually(lambda: api.mark_pods_ready() == 2, what="two pods to stand in for")
    wait_condition(api, APP, "Ready", "True")
    assert len(url_events(api)) == 5


def test_service_urls_need_no_warning(start_operator: Any, api: Api) -> None:
    document = yaml.safe_load(EXAMPLE.read_text())
    for agent in ("concierge", "concierge-mcp", "researcher"):
        del document["spec"]["endpoints"][agent]["url"]
    document["spec"]["endpoints"]["web-search"]["url"] = "http://web-search.tools.svc:8080"
    document["spec"]["endpoints"]["text-tools"]["url"] = "http://text-tools.tools.svc:8600/mcp"
    start_operator()
    api.create(document)
    wired = wait_condition(api, APP, "Wired", "True")
    assert wired["reason"] == "Wired"
    assert "pod-local" not in wired["message"]
    eventually(lambda: api.mark_pods_ready() == 2, what="two pods to stand in for")
    wait_condition(api, APP, "Ready", "True")
    assert url_events(api) == []
