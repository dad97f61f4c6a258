"""The laptop source: one Application document, its agents reached at their urls.

The document is read and wired once (:mod:`mas.infra`), so a bad one fails the command with
the same lines as ``mas-ctl validate``. Every :attr:`DocumentSource.interval` seconds the
AgentCard of each deployed agent, and of each external A2A endpoint an edge reaches, is
fetched (``GET <url>/.well-known/agent-card.json``, :data:`CHECK_SECONDS` at most, a 200
answer with a JSON object counts); the edges' states follow:

=============  =================  ====================================================
state          reason             when
=============  =================  ====================================================
Ready          TargetReady        a deployed target's card answered
Ready          HostReady          in-process: every agent whose runtime runs it answers
Ready          CardAnswered       an external A2A endpoint's card answered
Unreachable    NoAnswer           a deployed target (or a host) does not answer
Unreachable    CardCheckFailed    an external endpoint's card did not answer
Unknown        NotChecked         an MCP tool server (no AgentCard)
Unknown        NotHosted          in-process, but no deployed agent runs the source
Unknown        NoUrl              the target has no url
=============  =================  ====================================================

A change of an agent's answer is kept as an Event (Warning when it stops answering).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from datetime import UTC, datetime

import httpx

from mas.console.sources import Source
from mas.console.views import (
    IN_PROCESS,
    READY,
    UNKNOWN,
    UNREACHABLE,
    ApplicationView,
    ConditionView,
    EdgeView,
    EventView,
    planned_edges,
    structure,
)
from mas.infra.wiring import Wired

logger = logging.getLogger(__name__)

CARD_PATH = "/.well-known/agent-card.json"
CHECK_SECONDS = 3.0
EVENTS_KEPT = 50
NAMESPACE = "local"  # what the pages name the namespace of a document's Application


class DocumentSource(Source):
    """One wired document (see the module docstring)."""

    def __init__(self, wired: Wired, *, interval: float = 2.0) -> None:
        super().__init__()
        self.wired = wired
        self.interval = interval
        app = wired.app
        agents, externals = structure(app, wired.routes)
        self._view = ApplicationView(
            name=app.metadata.name,
            namespace=app.metadata.namespace or NAMESPACE,
            entry=app.spec.agency.entry,
            agents=agents,
            externals=externals,
            edges=planned_edges(app, wired.routes),
            phase="Checking",
        )
        self._answers: dict[str, str | None] = {}  # url -> None (answered) or why not
        self._task: asyncio.Task[None] | None = None
        self._http: httpx.AsyncClient | None = None

    @property
    def mode(self) -> str:
        return "laptop"

    def applications(self) -> list[ApplicationView]:
        return [self._view]

    async def start(self) -> None:
        self._http = httpx.AsyncClient(timeout=CHECK_SECONDS, follow_redirects=False)
        await self.check()
        self._task = asyncio.create_task(self._loop(), name="console-document-checks")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._http is not None:
            await self._http.aclose()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.check()
            except Exception:  # never let one failed round end the checks
                logger.exception("checking the agents' cards failed")

    def _urls(self) -> list[str]:
        view = self._view
        urls = [a.url for a in view.agents if a.deployed and a.url]
        urls += [x.url for x in view.externals if x.protocol == "a2a" and x.url]
        return list(dict.fromkeys(urls))

    async def check(self) -> None:
        """Fetch every card once; publish the Application when anything changed."""
        urls = self._urls()
        results = await asyncio.gather(*(self._answer(url) for url in urls))
        answers = dict(zip(urls, results, strict=True))
        if answers == self._answers and self._view.phase != "Checking":
            return
        before = self._answers
        self._answers = answers
        self._view = self._derive(before)
        self.changes.publish(self._view.key)

    async def _answer(self, url: str) -> str | None:
        assert self._http is not None
        try:
            response = await self._http.get(url.rstrip("/") + CARD_PATH)
        except httpx.HTTPError as exc:
            return f"cannot reach {url}: {type(exc).__name__}"
        if response.status_code != 200:
            return f"{url}{CARD_PATH} answered HTTP {response.status_code}"
        try:
            body = json.loads(response.content)
        except ValueError:
            return f"{url}{CARD_PATH} is not JSON"
        if not isinstance(body, dict):
            return f"{url}{CARD_PATH} is not a JSON object"
        return None

    def _derive(self, before: dict[str, str | None]) -> ApplicationView:
        view = self._view
        agents = []
        for node in view.agents:
            if node.deployed and node.url:
                reachable = self._answers.get(node.url) is None
                agents.append(dataclasses.replace(node, reachable=reachable))
            else:
                agents.append(node)
        edges = [self._edge(edge) for edge in view.edges]
        down = [a for a in agents if a.deployed and not a.reachable]
        ready = "False" if down else "True"
        message = (
            "; ".join(f"{a.id}: {self._answers.get(a.url or '') or 'no url'}" for a in down)
            or "every deployed agent's AgentCard answered"
        )
        events = list(view.events)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for agent in agents:
            if not agent.deployed or not agent.url:
                continue
            was, now_why = before.get(agent.url, "unseen"), self._answers.get(agent.url)
            if was == "unseen" and now_why is None:
                continue
            if (was is None) != (now_why is None) or was == "unseen":
                kind, reason = (
                    ("Normal", "AgentAnswers") if now_why is None else ("Warning", "AgentDown")
                )
                text = f"{agent.id} answers at {agent.url}" if now_why is None else now_why
                events.append(EventView(kind, reason, text, now))
        return dataclasses.replace(
            view,
            agents=agents,
            edges=edges,
            ready=ready,
            phase="Ready" if not down else "Degraded",
            conditions=[
                ConditionView(
                    "Ready", ready, "AllAgentsAnswer" if not down else "AgentsDown", message
                )
            ],
            events=events[-EVENTS_KEPT:],
            version=view.version + 1,
        )

    def _edge(self, edge: EdgeView) -> EdgeView:
        view = self._view
        if edge.via == IN_PROCESS:
            hosts = [a for a in view.agents if a.deployed and edge.source in self._hosted(a.id)]
            if not hosts:
                why = f"no deployed agent runs {edge.source}, so this edge is not served"
                return dataclasses.replace(edge, state=UNKNOWN, reason="NotHosted", message=why)
            down = [h for h in hosts if self._answers.get(h.url or "") is not None]
            if down:
                why = "; ".join(f"{h.id}: {self._answers.get(h.url or '')}" for h in down)
                return dataclasses.replace(
                    edge, state=UNREACHABLE, reason="NoAnswer", message=f"runs in {why}"
                )
            names = ", ".join(h.id for h in hosts)
            return dataclasses.replace(
                edge, state=READY, reason="HostReady", message=f"runs in the runtime of {names}"
            )
        if edge.via == "mcp" or edge.via not in ("a2a", "grpc"):
            what = f"a {edge.via} tool server: not checked (it has no AgentCard)"
            return dataclasses.replace(edge, state=UNKNOWN, reason="NotChecked", message=what)
        if not edge.url:
            return dataclasses.replace(edge, state=UNKNOWN, reason="NoUrl", message="no url")
        if edge.url not in self._answers:
            what = "not checked: the console fetches no card at this url"
            return dataclasses.replace(edge, state=UNKNOWN, reason="NotChecked", message=what)
        target = view.agent(edge.target)
        answer = self._answers[edge.url]
        deployed = target is not None and target.deployed
        if answer is None:
            reason = "TargetReady" if deployed else "CardAnswered"
            return dataclasses.replace(
                edge, state=READY, reason=reason, message=f"the AgentCard at {edge.url} answered"
            )
        reason = "NoAnswer" if deployed else "CardCheckFailed"
        return dataclasses.replace(edge, state=UNREACHABLE, reason=reason, message=answer)

    def _hosted(self, root: str) -> tuple[str, ...]:
        return tuple(self.wired.routes.runtimes.get(root, ()))
