"""The pages, as HTML strings from views: every value escaped (:mod:`mas.console.html`).

The pages' scripts (``static/*.js``) add live updates, the edge details and the chat; each
page is readable and navigable without them.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from a2a.types import AgentCard
from google.protobuf.json_format import MessageToDict

from mas.console.badges import Badge
from mas.console.files import download_name, shows_inline
from mas.console.graph import svg
from mas.console.html import attr, esc, page, safe_link
from mas.console.views import ApplicationView, EventView

LIST_COLUMNS = (
    ("name", "Name"),
    ("namespace", "Namespace"),
    ("ready", "Ready"),
    ("phase", "Phase"),
    ("agents", "Agents ready"),
    ("edges", "Edges ready"),
    ("conformant", "Conformant"),
)
EVENTS_SHOWN = 30
AGENTS_LISTED = 500


def app_path(view: ApplicationView) -> str:
    return f"/apps/{quote(view.namespace, safe='')}/{quote(view.name, safe='')}"


def applications_page(views: list[ApplicationView], mode: str) -> str:
    rows = "".join(_list_row(v) for v in views)
    heads = "".join(
        f'<th scope="col"><button type="button" class="sort" data-sort="{k}">{esc(t)}</button></th>'
        for k, t in LIST_COLUMNS
    )
    empty = "" if views else '<p class="empty" id="no-apps">No Applications yet.</p>'
    body = (
        "<h1>Applications</h1>"
        '<div class="toolbar"><label for="filter">Filter</label>'
        '<input id="filter" type="search" placeholder="name, namespace or phase" '
        'autocomplete="off"><span id="live" class="live" aria-live="polite">'
        "live updates: connecting</span></div>"
        f'<table id="apps"><caption class="visually-hidden">Applications</caption>'
        f"<thead><tr>{heads}</tr></thead><tbody>{rows}</tbody></table>{empty}"
    )
    return page("Applications", body, mode=mode, scripts=("list.js",))


def _list_row(view: ApplicationView) -> str:
    summary = view.summary()
    cells = []
    for key, _ in LIST_COLUMNS:
        value = summary[key]
        if key == "name":
            cells.append(
                f'<td data-col="name"><a href="{attr(app_path(view))}">{esc(value)}</a></td>'
            )
        else:
            cls = f" status-{attr(value.lower())}" if key in ("ready", "conformant") else ""
            cells.append(f'<td data-col="{key}" class="{cls.strip()}">{esc(value)}</td>')
    return f'<tr data-key="{attr(view.key)}">{"".join(cells)}</tr>'


def application_page(
    view: ApplicationView, mode: str, badges: dict[str, Badge] | None = None
) -> str:
    """The Application page; ``badges``: each metered agent's badge as last read."""
    shown = badges or {}
    problems = "".join(f'<p class="problem" role="alert">{esc(p)}</p>' for p in view.problems)
    legend = (
        '<ul class="legend" aria-label="edge states">'
        '<li class="state-ready">Ready</li><li class="state-pending">Pending</li>'
        '<li class="state-unreachable">Unreachable</li><li class="state-unknown">Unknown</li></ul>'
    )
    agents = "".join(_agent_row(view, a, shown.get(a.id)) for a in view.agents[:AGENTS_LISTED])
    more = (
        f"<p>{len(view.agents) - AGENTS_LISTED} more agents not listed.</p>"
        if len(view.agents) > AGENTS_LISTED
        else ""
    )
    externals = "".join(
        f"<tr><td>{esc(x.id)}</td><td>{esc(x.kind)}</td><td>{esc(x.protocol)}</td>"
        f"<td>{esc(x.url or '')}</td></tr>"
        for x in view.externals
    )
    edges = "".join(
        f'<tr data-edge="{attr(e.key)}"><td>{esc(e.source)}</td><td>{esc(e.target)}</td>'
        f'<td>{esc(e.via)}</td><td class="edge-state state-{attr(e.state.lower())}">'
        f'{esc(e.state)}</td><td class="edge-reason">{esc(e.reason)}</td>'
        f'<td class="edge-message">{esc(e.message)}</td></tr>'
        for e in view.edges
    )
    conditions = "".join(
        f'<tr><td>{esc(c.type)}</td><td class="status-{attr(c.status.lower())}">{esc(c.status)}'
        f"</td><td>{esc(c.reason)}</td><td>{esc(c.message)}</td></tr>"
        for c in view.conditions
    )
    body = (
        f'<p class="crumbs"><a href="/">Applications</a> / {esc(view.namespace)}</p>'
        f'<h1>{esc(view.name)} <span class="badge status-{attr(view.ready.lower())}" '
        f'id="app-ready">Ready: {esc(view.ready)}</span> '
        f'<span class="badge" id="app-phase">{esc(view.phase)}</span></h1>'
        f'<div id="app-live" data-src="{attr(app_path(view))}/updates" '
        f'data-version="{view.version}"></div>{problems}'
        f'<section aria-labelledby="graph-h"><h2 id="graph-h">Agency</h2>{legend}'
        f'<div class="graph-box">{svg(view)}</div>'
        '<div id="edge-detail" class="detail" aria-live="polite" tabindex="-1">'
        "Select an edge (click, or Tab to it and press Enter) to see its state.</div></section>"
        '<section aria-labelledby="agents-h"><h2 id="agents-h">Agents</h2>'
        '<table><thead><tr><th scope="col">Agent</th><th scope="col">Runs</th>'
        '<th scope="col">Replicas ready</th><th scope="col">Conformant</th>'
        '<th scope="col">Turns (from /metrics)</th>'
        f'<th scope="col">URL</th></tr></thead><tbody>{agents}</tbody></table>{more}</section>'
        + (
            '<section aria-labelledby="ext-h"><h2 id="ext-h">Used endpoints</h2><table><thead>'
            '<tr><th scope="col">Id</th><th scope="col">Kind</th><th scope="col">Protocol</th>'
            f'<th scope="col">URL</th></tr></thead><tbody>{externals}</tbody></table></section>'
            if view.externals
            else ""
        )
        + '<section aria-labelledby="edges-h"><h2 id="edges-h">Edges</h2><table><thead><tr>'
        '<th scope="col">From</th><th scope="col">To</th><th scope="col">Via</th>'
        '<th scope="col">State</th><th scope="col">Reason</th><th scope="col">Message</th>'
        f"</tr></thead><tbody>{edges}</tbody></table></section>"
        '<section aria-labelledby="cond-h"><h2 id="cond-h">Conditions</h2><table><thead><tr>'
        '<th scope="col">Type</th><th scope="col">Status</th><th scope="col">Reason</th>'
        f'<th scope="col">Message</th></tr></thead><tbody>{conditions}</tbody></table></section>'
        '<section aria-labelledby="ev-h"><h2 id="ev-h">Recent Events</h2>'
        f"{events_table(view.events)}</section>"
    )
    return page(view.name, body, mode=mode, scripts=("app.js",))


def _agent_row(view: ApplicationView, agent: Any, badge: Badge | None) -> str:
    href = f"{app_path(view)}/agents/{quote(agent.id, safe='')}"
    link = f'<a href="{attr(href)}">{esc(agent.id)}</a>'
    entry = ' <span class="badge">entry</span>' if agent.entry else ""
    runs = (
        "deployed"
        if agent.deployed
        else ("in-process in " + ", ".join(agent.hosts) if agent.hosts else "in-process")
    )
    if agent.ready_replicas is not None:
        replicas = f"{agent.ready_replicas}/{agent.replicas or 0}"
    elif agent.deployed:
        replicas = {True: "answers", False: "no answer", None: "not checked"}[agent.reachable]
    else:
        replicas = ""
    conformant = agent.conformant or ""
    return (
        f'<tr data-agent="{attr(agent.id)}"><td>{link}{entry}</td><td>{esc(runs)}</td>'
        f'<td class="replicas">{esc(replicas)}</td>'
        f'<td class="status-{attr(conformant.lower())}" title="{attr(agent.conformance_message)}">'
        f"{esc(conformant)}</td>{activity_cell(agent, badge)}<td>{esc(agent.url or '')}</td></tr>"
    )


def activity_cell(agent: Any, badge: Badge | None) -> str:
    """The agent's turns badge (``app.js`` keeps it current); its title says why."""
    if badge is None:
        text = "no metrics url" if agent.deployed else ""
        return f'<td class="activity">{esc(text)}</td>'
    return (
        f'<td class="activity"><span class="badge activity-{attr(badge.state)}" '
        f'title="{attr(badge.message)}">{esc(badge.shown(agent.ready_replicas))}</span></td>'
    )


def events_table(events: list[EventView]) -> str:
    """Warnings first, then the rest; the newest first within each."""
    if not events:
        return '<p class="empty">No recent Events.</p>'
    ordered = sorted(events, key=lambda e: (e.type != "Warning", _neg(e.time)))[:EVENTS_SHOWN]
    rows = "".join(
        f'<tr class="event-{attr(e.type.lower())}"><td>{esc(e.type)}</td><td>{esc(e.reason)}</td>'
        f"<td>{esc(e.message)}</td><td>{esc(e.time)}</td><td>{e.count}</td></tr>"
        for e in ordered
    )
    return (
        '<table id="events"><thead><tr><th scope="col">Type</th><th scope="col">Reason</th>'
        '<th scope="col">Message</th><th scope="col">Time</th><th scope="col">Count</th></tr>'
        f"</thead><tbody>{rows}</tbody></table>"
    )


def _neg(time: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in time)


def agent_page(
    view: ApplicationView,
    agent_id: str,
    mode: str,
    *,
    card: AgentCard | None,
    card_error: str,
    tasks: list[dict[str, Any]],
    tasks_error: str,
    trace_template: str,
    context_id: str,
) -> str:
    agent = view.agent(agent_id)
    assert agent is not None
    base = f"{app_path(view)}/agents/{quote(agent_id, safe='')}"
    where = agent.url or "in-process: " + (", ".join(agent.hosts) or "not hosted")
    parts = [
        f'<p class="crumbs"><a href="/">Applications</a> / <a href="{attr(app_path(view))}">'
        f"{esc(view.name)}</a></p>",
        f'<h1>{esc(agent.name)} <span class="badge">{esc(agent.id)}</span>'
        + (' <span class="badge">entry</span>' if agent.entry else "")
        + "</h1>",
        f'<p>Service URL: <span id="agent-url">{esc(where)}</span></p>',
    ]
    if agent.conformant:
        parts.append(
            f'<p>Conformant: <span class="status-{attr(agent.conformant.lower())}">'
            f"{esc(agent.conformant)}</span> {esc(agent.conformance_message)}</p>"
        )
    if card_error:
        parts.append(f'<p class="problem" role="alert" id="card-error">{esc(card_error)}</p>')
    if card is not None:
        parts.append(card_section(card))
    if agent.url and card is not None:
        parts.append(chat_section(base, context_id))
    parts.append(tasks_section(base, tasks, tasks_error, trace_template))
    return page(agent.name, "".join(parts), mode=mode, scripts=("chat.js",))


def card_section(card: AgentCard) -> str:
    data = MessageToDict(card)
    skills = (
        "".join(
            f'<li class="skill"><strong>{esc(s.name or s.id)}</strong> <code>{esc(s.id)}</code>'
            + (f"<p>{esc(s.description)}</p>" if s.description else "")
            + (
                f'<p class="tags">{" ".join(f"<span>{esc(t)}</span>" for t in s.tags)}</p>'
                if s.tags
                else ""
            )
            + "</li>"
            for s in card.skills
        )
        or "<li>no skills declared</li>"
    )
    interfaces = "".join(
        f"<tr><td>{esc(i.protocol_binding)}</td><td>{esc(i.url)}</td>"
        f"<td>{esc(i.protocol_version)}</td></tr>"
        for i in card.supported_interfaces
    )
    caps = data.get("capabilities", {})
    capabilities = (
        "".join(f"<li>{esc(k)}: {esc(json.dumps(v))}</li>" for k, v in sorted(caps.items()))
        or "<li>none declared</li>"
    )
    schemes = (
        "".join(
            f"<li><code>{esc(name)}</code>: {esc(scheme.WhichOneof('scheme') or 'unknown')}</li>"
            for name, scheme in sorted(card.security_schemes.items())
        )
        or "<li>none: the agent asks for no credentials</li>"
    )
    provider = ""
    if card.HasField("provider"):
        provider = (
            f"<p>Provider: {esc(card.provider.organization)} "
            f"{safe_link(card.provider.url) if card.provider.url else ''}</p>"
        )
    return (
        '<section aria-labelledby="card-h" id="card"><h2 id="card-h">AgentCard</h2>'
        f"<p>{esc(card.description)}</p><p>Version {esc(card.version)}</p>{provider}"
        f'<h3>Skills</h3><ul class="skills">{skills}</ul>'
        '<h3>Interfaces</h3><table><thead><tr><th scope="col">Binding</th>'
        f'<th scope="col">URL</th><th scope="col">A2A</th></tr></thead><tbody>{interfaces}'
        f"</tbody></table><h3>Capabilities</h3><ul>{capabilities}</ul>"
        f"<h3>Security schemes</h3><ul>{schemes}</ul></section>"
    )


def chat_section(base: str, context_id: str) -> str:
    return (
        f'<section aria-labelledby="chat-h" id="chat" data-turn="{attr(base)}/turn" '
        f'data-cancel="{attr(base)}/cancel" data-tasks="{attr(base)}/tasks" '
        f'data-context="{attr(context_id)}">'
        '<h2 id="chat-h">Chat</h2>'
        '<p class="hint">This conversation has its own address: <a id="chat-link" '
        f'href="{attr(base)}?context={attr(quote(context_id, safe=""))}">link</a></p>'
        '<ol id="transcript" aria-live="polite" aria-label="conversation"></ol>'
        '<form id="chat-form"><label for="chat-input">Message</label>'
        '<textarea id="chat-input" name="text" rows="2" required></textarea>'
        '<button type="submit" id="chat-send">Send</button>'
        '<button type="button" id="chat-cancel" disabled>Cancel</button></form>'
        '<p id="chat-status" class="hint" role="status"></p></section>'
    )


def tasks_section(base: str, tasks: list[dict[str, Any]], error: str, trace: str) -> str:
    if error:
        body = f'<p class="problem" role="alert">{esc(error)}</p>'
    elif not tasks:
        body = '<p class="empty">No tasks.</p>'
    else:
        rows = "".join(
            f'<tr><td><a href="{attr(base)}/tasks/{attr(quote(t["id"], safe=""))}">'
            f"{esc(t['id'])}</a></td><td>{esc(t['state'])}</td><td>{esc(t['updated'])}</td>"
            f"<td>{trace_link(trace, t)}</td></tr>"
            for t in tasks
        )
        body = (
            '<table id="tasks"><thead><tr><th scope="col">Task</th><th scope="col">State</th>'
            f'<th scope="col">Updated</th><th scope="col">Trace</th></tr></thead><tbody>{rows}'
            "</tbody></table>"
        )
    return f'<section aria-labelledby="tasks-h"><h2 id="tasks-h">Recent tasks</h2>{body}</section>'


def trace_link(template: str, task: dict[str, Any]) -> str:
    """The trace link the template makes of the task (``{trace_id}``, ``{task_id}``,
    ``{context_id}``), or nothing when it needs an id the task lacks."""
    if not template:
        return ""
    values = {
        "trace_id": task.get("trace_id", ""),
        "task_id": task.get("id", ""),
        "context_id": task.get("context_id", ""),
    }
    for key, value in values.items():
        if "{" + key + "}" in template and not value:
            return ""
        template = template.replace("{" + key + "}", quote(str(value), safe=""))
    return safe_link(template, "trace")


def task_page(
    view: ApplicationView, agent_id: str, record: dict[str, Any], mode: str, trace: str
) -> str:
    base = f"{app_path(view)}/agents/{quote(agent_id, safe='')}"
    history = (
        "".join(
            f'<li class="msg {attr(m["role"])}"><span class="who">{esc(m["role"])}</span> '
            f'<span class="text">{esc(m["text"])}</span></li>'
            for m in record["history"]
        )
        or "<li>no history</li>"
    )
    files = f"{base}/tasks/{quote(record['id'], safe='')}/files"
    artifacts = (
        "".join(artifact_html(a, f"{files}/{a['index']}") for a in record["artifacts"])
        or "<p>No artifacts.</p>"
    )
    link = trace_link(trace, record)
    body = (
        f'<p class="crumbs"><a href="/">Applications</a> / <a href="{attr(app_path(view))}">'
        f'{esc(view.name)}</a> / <a href="{attr(base)}">{esc(agent_id)}</a></p>'
        f"<h1>Task <code>{esc(record['id'])}</code></h1>"
        f'<p>State: <span id="task-state">{esc(record["state"])}</span>, updated '
        f"{esc(record['updated'])}. Context <code>{esc(record['context_id'])}</code>. {link}</p>"
        f'<h2>Reply</h2><p class="reply">{esc(record["reply"])}</p>'
        f'<h2>History</h2><ol class="history">{history}</ol>'
        f'<h2>Artifacts</h2><div id="artifacts">{artifacts}</div>'
    )
    return page(f"task {record['id']}", body, mode=mode)


def artifact_html(record: dict[str, Any], href: str | None = None) -> str:
    """An artifact by kind: text and data as preformatted text (cut, the size said), a url as
    a link only when http(s), a file by its size with a download link to ``href`` (and shown,
    when it is a plain image: :mod:`mas.console.files`)."""
    head = f'<h3>{esc(record["name"])} <span class="badge">{esc(record["type"])}</span></h3>'
    if record["type"] in ("text", "data"):
        cut = (
            f'<p class="hint">{record["size"]} characters: the first '
            f"{len(record['text'])} are shown</p>"
            if record.get("cut")
            else ""
        )
        return f'<div class="artifact">{head}{cut}<pre>{esc(record["text"])}</pre></div>'
    if record["type"] == "url":
        return f'<div class="artifact">{head}<p>{safe_link(record["url"])}</p></div>'
    media = record.get("media_type", "application/octet-stream")
    about = f"a file of {record['size']} bytes ({esc(media)})"
    if href is None:
        return f'<div class="artifact">{head}<p>{about}</p></div>'
    image = (
        f'<p><img class="artifact-image" src="{attr(href)}?inline=1" alt="{attr(record["name"])}">'
        "</p>"
        if shows_inline(media)
        else ""
    )
    link = f'<a href="{attr(href)}" download>download {esc(download_name(record["name"]))}</a>'
    return f'<div class="artifact">{head}{image}<p>{about}: {link}</p></div>'


def not_found(what: str, mode: str) -> str:
    return page(
        "not found",
        f'<h1>Not found</h1><p class="problem">{esc(what)}</p>'
        '<p><a href="/">All Applications</a></p>',
        mode=mode,
    )
