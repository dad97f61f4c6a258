"""``Toolbox``: the tool-server tools of one agent, offered beside its delegate tools.

Rules:

- Sources are the agent's ``spec.tools`` grants in order, each a
  :class:`~mas.runtime.boundary.tools.ToolSourceContract` and an optional name filter.
- :meth:`Toolbox.tools` lists every source that has not been listed yet (a source whose
  listing failed is tried again at the next turn, so a server that comes up later is used).
  It never raises: a failure, a filter naming a tool the server does not list, and a name
  already taken (by a delegate tool or an earlier server; the first one keeps it) each give
  a notice line that the agent reports in the turn's transcript.
- :meth:`Toolbox.call` runs one call and never raises: bad arguments are refused, a tool
  error, an unreachable server and a timeout come back as ``ok=False`` results the model
  reads, and each outcome is counted in ``maslab_tool_calls_total``.
- Concurrency: ``tools`` and ``call`` may run concurrently; a listing race lists twice.
  ``session_id`` is for observers (the session-mode activity view); the toolbox keeps no
  state per session.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mas.runtime import metrics
from mas.runtime.boundary.delegation import ToolResult, ToolSpec, arguments_object
from mas.runtime.boundary.tools import ToolSourceContract, ToolSourceError
from mas.telemetry import tracing

logger = logging.getLogger(__name__)

LIST_CALL = "tools/list"


@dataclass
class _Source:
    source: ToolSourceContract
    names: tuple[str, ...] | None
    listed: list[ToolSpec] | None = None
    problems: list[str] = field(default_factory=list)


class Toolbox:
    """The tool-server tools of agent ``agent_id`` (see the module docstring)."""

    def __init__(
        self,
        agent_id: str,
        sources: Sequence[tuple[ToolSourceContract, tuple[str, ...] | None]],
        *,
        reserved: Collection[str] = (),
    ) -> None:
        self.agent_id = agent_id
        self._sources = [_Source(source, names) for source, names in sources]
        self._reserved = frozenset(reserved)
        self._by_name: dict[str, ToolSourceContract] = {}

    @property
    def servers(self) -> tuple[str, ...]:
        """The tool servers, in ``spec.tools`` order."""
        return tuple(item.source.server for item in self._sources)

    async def tools(self, *, session_id: str = "") -> tuple[list[ToolSpec], list[str]]:
        """The tools to offer, and notice lines for what could not be offered."""
        notices: list[str] = []
        for item in self._sources:
            if item.listed is None:
                await self._list(item)
                notices += item.problems
        offered: list[ToolSpec] = []
        taken = set(self._reserved)
        self._by_name = {}
        for item in self._sources:
            for spec in item.listed or ():
                if spec.name in taken:
                    continue
                taken.add(spec.name)
                offered.append(spec)
                self._by_name[spec.name] = item.source
        return offered, notices

    async def _list(self, item: _Source) -> None:
        server = item.source.server
        try:
            listed = await item.source.list_tools()
        except ToolSourceError as exc:
            logger.warning("agent %s: tool server %s: %s", self.agent_id, server, exc)
            metrics.TOOL_CALLS.labels(self.agent_id, server, LIST_CALL, exc.reason).inc()
            item.problems = [f"tool server {server!r} offers no tools this turn: {exc}"]
            return
        metrics.TOOL_CALLS.labels(self.agent_id, server, LIST_CALL, "ok").inc()
        names = {spec.name for spec in listed}
        problems = [
            f"tool server {server!r} lists no tool {name!r} (spec.tools names it); it lists: "
            + (", ".join(sorted(names)) or "(none)")
            for name in item.names or ()
            if name not in names
        ]
        wanted = listed if item.names is None else [s for s in listed if s.name in item.names]
        before = self._sources[: self._sources.index(item)]
        earlier = {s.name for other in before for s in other.listed or ()}
        for spec in wanted:
            if spec.name in self._reserved or spec.name in earlier:
                problems.append(
                    f"tool {spec.name!r} of server {server!r} is not offered: the name is "
                    "already taken by a delegate tool or an earlier server (filter it out "
                    "with spec.tools[].names)"
                )
        for line in problems:
            logger.warning("agent %s: %s", self.agent_id, line)
        item.listed, item.problems = wanted, problems

    def server_of(self, tool_name: str) -> str | None:
        """The server offering ``tool_name`` at the latest :meth:`tools`, or ``None``."""
        source = self._by_name.get(tool_name)
        return source.server if source is not None else None

    async def call(
        self,
        tool_name: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        turn_id: str,
        session_id: str = "",
    ) -> ToolResult:
        """Run one tool call (see the module docstring); never raises for a failed call."""
        call_id = f"{turn_id}.{uuid.uuid4().hex[:12]}"
        source = self._by_name.get(tool_name)
        if source is None:
            return ToolResult(
                tool_name, None, call_id, False, f"unknown tool {tool_name!r}", "refused"
            )
        server = source.server
        parsed = arguments_object(arguments)
        if isinstance(parsed, str):
            metrics.TOOL_CALLS.labels(self.agent_id, server, tool_name, "refused").inc()
            why = f"{tool_name}: {parsed}"
            return ToolResult(tool_name, server, call_id, False, why, "refused")
        try:
            with tracing.tool_span(self.agent_id, tool_name) as span:
                if span is not None:
                    span.set_attribute("mas.tool.server", server)
                outcome = await source.call(tool_name, dict(parsed))
                if not outcome.ok:
                    tracing.fail(span, f"the tool {tool_name!r} answered an error")
        except ToolSourceError as exc:
            logger.warning("agent %s: tool %s/%s: %s", self.agent_id, server, tool_name, exc)
            metrics.TOOL_CALLS.labels(self.agent_id, server, tool_name, exc.reason).inc()
            return ToolResult(
                tool_name, server, call_id, False, f"tool {tool_name!r} failed: {exc}", "error"
            )
        result = "ok" if outcome.ok else "tool_error"
        metrics.TOOL_CALLS.labels(self.agent_id, server, tool_name, result).inc()
        text = outcome.text
        if not outcome.ok:
            text = f"tool {tool_name!r} reported an error: {text}"
        return ToolResult(
            tool_name,
            server,
            call_id,
            outcome.ok,
            text,
            "completed" if outcome.ok else "failed",
            outcome.artifacts,
        )

    async def aclose(self) -> None:
        """Close every source."""
        for item in self._sources:
            await item.source.aclose()
