"""The shared exposure helper: which agents bind, and the errors it gives."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest
from a2a_support import STEP, free_port
from tests.fast_path import fast_path_document

from mas.ctl.session.exposure import ExposureError, bind_listeners, deployed_agents
from mas.ctl.session.host import RuntimeHost
from mas.infra.wiring import wire
from mas.runtime.registry import Registry, default_registry

pytestmark = pytest.mark.integration


def document(endpoints: dict[str, Any]) -> dict[str, Any]:
    return fast_path_document(
        {
            "apiVersion": "infra.maslab.io/v1",
            "kind": "Application",
            "metadata": {"name": "helper"},
            "spec": {
                "agency": {
                    "entry": "a",
                    "agents": {"a": {"spec": {"delegates_to": ["b"]}}, "b": {}, "c": {}},
                },
                "endpoints": endpoints,
            },
        }
    )


async def test_only_deployed_hosted_agents_bind_and_use_rows_never_listen() -> None:
    a, b = free_port(), free_port()
    wired = wire(
        document(
            {
                "a": {"url": f"http://127.0.0.1:{a}", "usage": "use-and-deploy"},
                "b": {"url": f"http://127.0.0.1:{b}", "usage": "deploy"},
                "c": {"url": f"http://127.0.0.1:{free_port()}", "usage": "use"},
            }
        ),
        default_registry().known_plugins(),
    )
    host = RuntimeHost.build(wired, ["a", "c"])
    try:
        assert set(host.agents) == {"a", "b", "c"}  # b is a's private worker (local route)
        assert deployed_agents(wired, host) == ["a", "b"]
        listeners = await bind_listeners(wired, host, drain_timeout=1)
        try:
            assert [item.agent for item in listeners.bound] == ["a", "b"]
            async with httpx.AsyncClient(timeout=STEP) as http:
                for port, name in ((a, "a"), (b, "b")):
                    card = await http.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json")
                    assert card.json()["name"] == name
        finally:
            await listeners.aclose()
    finally:
        await host.aclose()


async def test_binding_a_use_row_or_an_unknown_protocol_is_refused() -> None:
    wired = wire(
        document({"c": {"url": f"http://127.0.0.1:{free_port()}", "usage": "use"}}),
        default_registry().known_plugins(),
    )
    host = RuntimeHost.build(wired, ["a", "c"])
    try:
        with pytest.raises(ExposureError, match=r"spec.endpoints.c.usage: is use; a listener"):
            await bind_listeners(wired, host, agents=["c"])
        registry = Registry()  # a registry without the A2A ingress
        deployed = wire(
            document({"a": {"url": f"http://127.0.0.1:{free_port()}", "usage": "deploy"}}),
            default_registry().known_plugins(),
        )
        with pytest.raises(
            ExposureError, match=r"'a2a' has no agent_expose plugin; known: \(none\)"
        ):
            await bind_listeners(deployed, host, agents=["a"], registry=registry)
    finally:
        await host.aclose()


async def test_a_taken_port_is_an_exposure_error_and_nothing_stays_bound() -> None:

    a, b = free_port(), free_port()
    wired = wire(
        document(
            {
                "a": {"url": f"http://127.0.0.1:{a}", "usage": "deploy"},
                "b": {"url": f"http://127.0.0.1:{b}", "usage": "deploy"},
            }
        ),
        default_registry().known_plugins(),
    )
    host = RuntimeHost.build(wired, ["a"])
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", b))
            taken.listen(1)
            with pytest.raises(ExposureError, match=f"agent 'b': cannot listen on 127.0.0.1:{b}"):
                await bind_listeners(wired, host)
        with socket.socket() as again:
            again.bind(("127.0.0.1", a))  # a's listener was closed again
    finally:
        await host.aclose()
