"""Another tool source through the registry: a plugin of category tool_source is a protocol
that tool server endpoints can name, validated and wired like mcp."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from tests.runtime.runtime_support import collect, ended, scripted, wired

from mas.ctl.session.host import RuntimeHost
from mas.infra.errors import ApplicationInvalid
from mas.runtime.boundary.delegation import ToolSpec
from mas.runtime.boundary.tools import ToolOutcome, ToolSourceContract
from mas.runtime.registry import builtin_registry
from mas.runtime.turns import TurnInput


class ClockTools(ToolSourceContract):
    """A local tool table: one tool, ``now``, answering a fixed time."""

    def __init__(
        self, *, url: str | None, server: str, headers: Mapping[str, str], timeout: float
    ) -> None:
        self.server, self.url = server, url

    async def list_tools(self) -> list[ToolSpec]:
        return [ToolSpec("now", "The time.", {"type": "object", "properties": {}})]

    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        return ToolOutcome(True, f"12:00 at {self.url}")


def _app(protocol: str) -> dict[str, Any]:
    return {
        "agents": {
            "lead": {
                "tools": [{"server": "clock"}],
                "model": scripted({"match": "time", "tool": {"name": "now"}, "reply": "{result}"}),
            }
        },
        "endpoints": {"clock": {"protocol": protocol, "usage": "use", "url": "http://clock/"}},
    }


async def test_a_registered_tool_source_serves_an_endpoint_of_its_protocol() -> None:
    registry = builtin_registry()
    registry.register("tool_source", "clock", ClockTools)
    spec = _app("clock")
    app = wired(spec["agents"], registry=registry, endpoints=spec["endpoints"])
    host = RuntimeHost.build(app, ["lead"], registry=registry, env={})
    try:
        events = await collect(host.mailbox("lead").submit(TurnInput("s", "t", "time?")).events())
    finally:
        await host.aclose()
    assert ended(events).text == "12:00 at http://clock/"


def test_without_the_plugin_the_protocol_is_unknown() -> None:
    spec = _app("clock")
    with pytest.raises(ApplicationInvalid, match=r"spec.endpoints.clock.protocol: 'clock' is not"):
        wired(spec["agents"], registry=builtin_registry(), endpoints=spec["endpoints"])
