"""Every routing case of the spec's "Registry and routing" and "Exposure topology"."""

from __future__ import annotations

import pytest

from mas.infra.errors import WiringError
from mas.infra.routes import build_routes, choose_agent_comm
from mas.infra.validation import parse_application
from tests.unit.documents import agency, document


def routes_of(**spec: object) -> list[tuple[str, str, str, str, str | None]]:
    routes = build_routes(parse_application(document(**spec)))
    return [(r.source, r.target, r.kind, r.protocol, r.url) for r in routes.routes]


def test_local_agent_gives_in_process_route_through_library_default() -> None:
    assert routes_of() == [("lead", "worker", "local", "local", None)]


@pytest.mark.parametrize("usage", ["use", "use-and-deploy"])
def test_used_endpoint_gives_remote_route_with_its_settings(usage: str) -> None:
    endpoints = {
        "worker": {
            "url": "http://10.0.0.9:8000",
            "usage": usage,
            "timeout": 5,
            "headers": {"X-Api-Key": {"secret_key_ref": {"name": "keys", "key": "worker"}}},
        }
    }
    routes = build_routes(parse_application(document(endpoints=endpoints)))
    (route,) = routes.routes
    assert (route.kind, route.protocol, route.url, route.timeout) == (
        "remote",
        "a2a",
        "http://10.0.0.9:8000",
        5.0,
    )
    assert route.headers["X-Api-Key"].secret_key_ref is not None


def test_legacy_expose_routes_remotely_and_deploys() -> None:
    endpoints = {"worker": {"url": "http://127.0.0.1:8001", "expose": True}}
    routes = build_routes(parse_application(document(endpoints=endpoints)))
    assert [r.kind for r in routes.routes] == ["remote"]
    assert [item.agent for item in routes.listeners] == ["worker"]


def test_deploy_only_endpoint_is_no_route_so_a_local_agent_stays_in_process() -> None:
    endpoints = {"worker": {"url": "http://127.0.0.1:8001", "usage": "deploy"}}
    routes = build_routes(parse_application(document(endpoints=endpoints)))
    assert [(r.kind, r.protocol) for r in routes.routes] == [("local", "local")]
    assert routes.listener("worker") is not None
    assert routes.runtimes == {"worker": ("worker",)}


def test_overlay_routes_an_agent_with_a_local_ref_remotely() -> None:
    # The agency has "worker" locally; the overlay's endpoint deliberately routes it remotely.
    endpoints = {"worker": {"url": "http://worker.remote:80", "usage": "use"}}
    assert routes_of(endpoints=endpoints) == [
        ("lead", "worker", "remote", "a2a", "http://worker.remote:80")
    ]


def test_external_use_peer_is_reachable_without_being_in_the_agency() -> None:
    spec = {
        "agency": agency("lead", lead=["search"]),
        "endpoints": {"search": {"url": "http://127.0.0.1:9", "usage": "use"}},
    }
    assert routes_of(**spec) == [("lead", "search", "remote", "a2a", "http://127.0.0.1:9")]


def test_private_worker_may_be_exposed() -> None:
    endpoints = {"worker": {"url": "http://127.0.0.1:8001", "usage": "deploy"}}
    routes = build_routes(parse_application(document(endpoints=endpoints)))
    assert routes.listener("worker") is not None
    assert routes.listener("lead") is None


def test_missing_targets_list_every_one_and_the_deploy_only_hint() -> None:
    spec = {
        "agency": agency("a", a=["ghost", "b"], b=["deployed-only", "ghost"]),
        "endpoints": {"deployed-only": {"url": "http://127.0.0.1:7", "usage": "deploy"}},
    }
    with pytest.raises(WiringError) as caught:
        build_routes(parse_application(document(**spec)))
    assert [(m.source, m.target, m.index) for m in caught.value.missing] == [
        ("a", "ghost", 0),
        ("b", "deployed-only", 0),
        ("b", "ghost", 1),
    ]
    assert "has usage: deploy, which is not a route" in caught.value.missing[1].problem.message


def test_hosting_puts_private_workers_beside_each_deployed_delegator() -> None:
    spec = {
        "agency": agency(
            "front",
            front=["helper", "back"],
            back=["helper"],
            helper=["tool"],
            tool=[],
        ),
        "endpoints": {
            "front": {"url": "http://127.0.0.1:8001", "usage": "deploy"},
            "back": {"url": "http://127.0.0.1:8002", "usage": "use-and-deploy"},
        },
    }
    routes = build_routes(parse_application(document(**spec)))
    assert routes.runtimes == {
        "front": ("front", "helper", "tool"),
        "back": ("back", "helper", "tool"),
    }
    assert [(r.source, r.target, r.kind) for r in routes.from_agent("front")] == [
        ("front", "helper", "local"),
        ("front", "back", "remote"),
    ]


def test_delegation_cycle_is_wired_and_hosting_terminates() -> None:
    spec = {"agency": agency("a", a=["b"], b=["a"])}
    routes = build_routes(parse_application(document(**spec)))
    assert routes.hosted_with(("a",)) == ("a", "b")


def test_agent_comm_precedence_spec_then_defaults_then_library() -> None:
    both = parse_application(
        document(
            agent_comm={"protocol": "a2a", "params": {"k": 1}},
            defaults={"agent_comm": {"type": "local"}},
        )
    )
    assert (choose_agent_comm(both).name, choose_agent_comm(both).source) == (
        "a2a",
        "spec.agent_comm",
    )
    defaults_only = parse_application(document(defaults={"agent_comm": {"type": "bus"}}))
    assert choose_agent_comm(defaults_only).name == "bus"
    assert choose_agent_comm(parse_application(document())).source == "library default"
    routes = build_routes(both)
    assert [(r.protocol, dict(r.params)) for r in routes.routes] == [("a2a", {"k": 1})]
