"""The console's Starlette application: the pages, their live updates, the chat stream.

=======================================================  ====================================
``GET /``                                                 the Applications
``GET /updates``                                          SSE: every row, on each change
``GET /apps/{ns}/{name}``                                 an Application: graph, edges, Events
``GET /apps/{ns}/{name}/updates``                         SSE: its edges and badges on change
``GET /apps/{ns}/{name}/agents/{agent}[?context=ID]``     an agent: card, tasks, chat
``POST /apps/{ns}/{name}/agents/{agent}/turn``            one chat turn, JSON lines
``POST /apps/{ns}/{name}/agents/{agent}/cancel``          cancel a turn's task, JSON
``GET /apps/{ns}/{name}/agents/{agent}/tasks/{id}``       a task: history, artifacts
``GET .../tasks/{id}/files/{n}[?inline=1]``               a file artifact's bytes
``GET /healthz``                                          ``ok``
=======================================================  ====================================

Every page renders from the source's memory; only the agent and task pages call an agent,
each call bounded by :data:`CALL_SECONDS`, and a failed call is a line on the page. The
Application page shows each agent's badge as last read (:mod:`mas.console.badges`); its
update stream reads the badges again every :data:`~mas.console.badges.TTL_SECONDS` while it
is open and sends them when they changed (the reads are shared by every open page).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from mas.console import pages
from mas.console.agents import AgentCalls, file_of, task_record
from mas.console.badges import TTL_SECONDS, Badge, Badges
from mas.console.files import file_response
from mas.console.security import Access, Guard
from mas.console.sources import Source
from mas.console.views import ApplicationView
from mas.ctl.client.errors import ClientError

STATIC = Path(__file__).parent / "static"
CALL_SECONDS = 10.0  # a page waits this long for an agent's card or tasks
KEEPALIVE_SECONDS = 15.0
TEXT_LIMIT = 64 * 1024  # characters of one chat message
BODY_LIMIT = 256 * 1024


@dataclass(frozen=True)
class ConsoleOptions:
    trace_template: str = ""  # e.g. http://jaeger:16686/trace/{trace_id}
    access: Access = field(default_factory=Access)


def build_app(
    source: Source,
    options: ConsoleOptions,
    calls: AgentCalls | None = None,
    badges: Badges | None = None,
) -> Starlette:
    """The console over ``source``; starting and stopping the app starts and stops it."""
    calls = calls or AgentCalls()
    badges = badges or Badges()
    mode = source.mode

    def html(body: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(body, status_code=status, headers={"cache-control": "no-store"})

    def find(request: Request) -> ApplicationView | None:
        return source.application(request.path_params["ns"], request.path_params["name"])

    async def index(request: Request) -> Response:
        return html(pages.applications_page(source.applications(), mode))

    async def list_updates(request: Request) -> Response:
        def payload() -> str:
            return json.dumps([v.summary() for v in source.applications()])

        return _sse(source, lambda key: True, payload)

    async def application(request: Request) -> Response:
        view = find(request)
        if view is None:
            return html(pages.not_found(_missing(request), mode), 404)
        return html(pages.application_page(view, mode, _cached(badges, view)))

    async def app_updates(request: Request) -> Response:
        ns, name = request.path_params["ns"], request.path_params["name"]

        def payload() -> str:
            view = source.application(ns, name)
            return json.dumps(_app_update(view, _cached(badges, view) if view else {}))

        async def refresh() -> None:
            view = source.application(ns, name)
            if view is not None:
                await badges.read_all(_metered(view))

        return _sse(source, lambda key: key in (f"{ns}/{name}", "*"), payload, refresh)

    async def agent(request: Request) -> Response:
        view = find(request)
        agent_id = request.path_params["agent"]
        node = view.agent(agent_id) if view is not None else None
        if view is None or node is None:
            return html(pages.not_found(_missing(request, agent_id), mode), 404)
        context_id = request.query_params.get("context") or str(uuid.uuid4())
        if not _context_ok(context_id):
            return html(pages.not_found(f"{context_id[:60]!r} is not a conversation id", mode), 400)
        card, card_error, tasks, tasks_error = None, "", [], ""
        if node.url:
            card_call = _bounded(calls.card(node.url))
            tasks_call = _bounded(calls.tasks(node.url))
            card_result, tasks_result = await asyncio.gather(card_call, tasks_call)
            if isinstance(card_result, str):
                card_error = card_result
            else:
                card = card_result.card
            if isinstance(tasks_result, str):
                tasks_error = "" if card_error else tasks_result
            else:
                tasks = [task_record(t, node.url) for t in tasks_result]
        else:
            card_error = (
                f"{agent_id} runs in-process (no url of its own): talk to it through the agent "
                "that hosts it"
            )
        body = pages.agent_page(
            view,
            agent_id,
            mode,
            card=card,
            card_error=card_error,
            tasks=tasks,
            tasks_error=tasks_error,
            trace_template=options.trace_template,
            context_id=context_id,
        )
        return html(body)

    async def task(request: Request) -> Response:
        view = find(request)
        agent_id = request.path_params["agent"]
        node = view.agent(agent_id) if view is not None else None
        if view is None or node is None or not node.url:
            return html(pages.not_found(_missing(request, agent_id), mode), 404)
        result = await _bounded(calls.task(node.url, request.path_params["task"]))
        if isinstance(result, str):
            return html(pages.not_found(result, mode), 404)
        record = task_record(result, node.url)
        return html(pages.task_page(view, agent_id, record, mode, options.trace_template))

    async def file(request: Request) -> Response:
        view = find(request)
        agent_id = request.path_params["agent"]
        node = view.agent(agent_id) if view is not None else None
        if view is None or node is None or not node.url:
            return PlainTextResponse(_missing(request, agent_id) + "\n", 404)
        task_id, index = request.path_params["task"], request.path_params["index"]
        result = await _bounded(calls.task(node.url, task_id))
        if isinstance(result, str):
            return PlainTextResponse(result + "\n", 404)
        found = file_of(result, index, node.url)
        if found is None:
            return PlainTextResponse(f"task {task_id} has no file artifact {index}\n", 404)
        return file_response(found, inline=request.query_params.get("inline") == "1")

    def agent_url(request: Request) -> str | Response:
        """The url of the path's agent, or the JSON answer that says there is none."""
        view = find(request)
        agent_id = request.path_params["agent"]
        node = view.agent(agent_id) if view is not None else None
        if view is None or node is None or not node.url:
            return JSONResponse({"error": _missing(request, agent_id)}, status_code=404)
        return node.url

    async def turn(request: Request) -> Response:
        url = agent_url(request)
        if isinstance(url, Response):
            return url
        data = await _json_body(request, ("text", "context_id"))
        if isinstance(data, Response):
            return data
        text, context_id = data["text"], data["context_id"]
        if not isinstance(text, str) or not text.strip() or len(text) > TEXT_LIMIT:
            return JSONResponse(
                {"error": f"text must be 1 to {TEXT_LIMIT} characters, not only spaces"}, 400
            )
        if not isinstance(context_id, str) or not _context_ok(context_id):
            return JSONResponse({"error": "context_id must be 1 to 200 printable characters"}, 400)

        async def lines() -> AsyncIterator[str]:
            async for event in calls.turn(url, text, context_id):
                yield json.dumps(event, ensure_ascii=False) + "\n"

        return StreamingResponse(
            lines(), media_type="application/x-ndjson", headers={"cache-control": "no-store"}
        )

    async def cancel(request: Request) -> Response:
        url = agent_url(request)
        if isinstance(url, Response):
            return url
        data = await _json_body(request, ("context_id",))
        if isinstance(data, Response):
            return data
        context_id, task_id = data["context_id"], data.get("task_id")
        if not isinstance(context_id, str) or not _context_ok(context_id):
            return JSONResponse({"error": "context_id must be 1 to 200 printable characters"}, 400)
        if task_id is not None and (not isinstance(task_id, str) or not _context_ok(task_id)):
            return JSONResponse(
                {"error": "task_id must be absent or 1 to 200 printable characters"}, 400
            )
        outcome = await _bounded(calls.cancel(url, context_id, task_id))
        if isinstance(outcome, str):
            return JSONResponse({"error": outcome}, status_code=502)
        return JSONResponse({"tasks": outcome}, headers={"cache-control": "no-store"})

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok\n")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await source.start()
        try:
            yield
        finally:
            await calls.aclose()
            await badges.aclose()
            await source.stop()

    routes = [
        Route("/", index),
        Route("/updates", list_updates),
        Route("/healthz", healthz),
        Route("/apps/{ns}/{name}", application),
        Route("/apps/{ns}/{name}/updates", app_updates),
        Route("/apps/{ns}/{name}/agents/{agent}", agent),
        Route("/apps/{ns}/{name}/agents/{agent}/turn", turn, methods=["POST"]),
        Route("/apps/{ns}/{name}/agents/{agent}/cancel", cancel, methods=["POST"]),
        Route("/apps/{ns}/{name}/agents/{agent}/tasks/{task}", task),
        Route("/apps/{ns}/{name}/agents/{agent}/tasks/{task}/files/{index:int}", file),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(Guard, access=options.access)
    return app


def _missing(request: Request, agent: str | None = None) -> str:
    what = f"{request.path_params['ns']}/{request.path_params['name']}"
    if agent is None:
        return f"no Application {what}"
    return f"no agent {agent!r} with a url in Application {what}"


async def _json_body(request: Request, required: tuple[str, ...]) -> dict[str, Any] | Response:
    """The request's JSON object with ``required`` keys, or the 4xx answer that says why not."""
    body = await request.body()
    if len(body) > BODY_LIMIT:
        return JSONResponse({"error": f"the request is over {BODY_LIMIT} bytes"}, 413)
    shape = ", ".join(f'"{key}": "..."' for key in required)
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict) or any(key not in data for key in required):
        return JSONResponse({"error": f"the body must be a JSON object {{{shape}}}"}, 400)
    return data


def _context_ok(context_id: str) -> bool:
    return 0 < len(context_id) <= 200 and context_id.isprintable() and bool(context_id.strip())


async def _bounded(call: Any) -> Any:
    """The call's result, or the one line that says why there is none."""
    try:
        return await asyncio.wait_for(call, CALL_SECONDS)
    except TimeoutError:
        return f"the agent did not answer within {CALL_SECONDS:.0f} s"
    except ClientError as exc:
        return str(exc)


def _metered(view: ApplicationView) -> list[tuple[str, str]]:
    """``(metrics url, agent)`` of every deployed agent that has a metrics url."""
    return [(a.metrics_url, a.id) for a in view.deployed if a.metrics_url]


def _cached(badges: Badges, view: ApplicationView) -> dict[str, Badge]:
    """Each metered agent's badge as last read, by agent id."""
    return {agent: badges.cached(url) for url, agent in _metered(view)}


def _app_update(view: ApplicationView | None, shown: dict[str, Badge]) -> dict[str, Any]:
    if view is None:
        return {"gone": True}
    return {
        "version": view.version,
        "ready": view.ready,
        "phase": view.phase,
        "nodes": [a.id for a in view.agents] + [x.id for x in view.externals],
        "edges": [
            {"key": e.key, "state": e.state, "reason": e.reason, "message": e.message}
            for e in view.edges
        ],
        "agents": [
            {
                "id": a.id,
                "replicas": _replicas(a),
                "activity": shown[a.id].as_json(a.ready_replicas) if a.id in shown else None,
            }
            for a in view.agents
            if a.deployed
        ],
    }


def _replicas(agent: Any) -> str:
    if agent.ready_replicas is not None:
        return f"{agent.ready_replicas}/{agent.replicas or 0}"
    return {True: "answers", False: "no answer", None: "not checked"}[agent.reachable]


def _sse(source: Source, wanted: Any, payload: Any, refresh: Any = None) -> StreamingResponse:
    """A stream of ``payload()`` on every wanted change, and a keepalive comment after
    :data:`KEEPALIVE_SECONDS` of silence; with ``refresh``, that coroutine also runs every
    :data:`TTL_SECONDS` (at once first) and the payload is sent again when it changed."""

    async def stream() -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        with source.changes.subscribe() as queue:
            sent = payload()
            yield f"data: {sent}\n\n"
            spoke = due = loop.time()
            while True:
                if refresh is not None and loop.time() >= due:
                    await refresh()
                    due = loop.time() + TTL_SECONDS
                    if payload() != sent:
                        sent = payload()
                        spoke = loop.time()
                        yield f"data: {sent}\n\n"
                quiet_until = spoke + KEEPALIVE_SECONDS
                wake = min(due, quiet_until) if refresh is not None else quiet_until
                try:
                    key = await asyncio.wait_for(queue.get(), max(0.0, wake - loop.time()))
                except TimeoutError:
                    if loop.time() >= quiet_until:
                        spoke = loop.time()
                        yield ": keepalive\n\n"
                    continue
                if wanted(key):
                    sent = payload()
                    spoke = loop.time()
                    yield f"data: {sent}\n\n"

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
