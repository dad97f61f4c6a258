"""The agency laid out in layers and drawn as SVG, on the server.

Layers: the entry agent first, then every node by its shortest distance from the entry
along the edges (a cycle does not loop: a node is placed once); nodes no edge from the entry
reaches follow in a last layer of their own. Within a layer, nodes keep the document's
order. Every label is escaped; an edge is a focusable ``<g>`` whose ``data-*`` attributes
carry its state, reason and message for the page's script (click or Enter shows them); under
its line lies a wide transparent copy (``path.hit``), so a click near the line lands on it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from mas.console.html import attr, esc
from mas.console.views import ApplicationView

NODE_W, NODE_H = 170, 54
GAP_X, GAP_Y = 130, 26
MARGIN = 20
LABEL_CHARS = 22  # of a node's name on the graph (the page lists the whole name)
LABEL_AT = 0.75  # where along a forward edge its via label sits (0: source, 1: target)


@dataclass(frozen=True)
class Placed:
    id: str
    layer: int
    row: int

    @property
    def x(self) -> int:
        return MARGIN + self.layer * (NODE_W + GAP_X)

    @property
    def y(self) -> int:
        return MARGIN + self.row * (NODE_H + GAP_Y)


def layout(view: ApplicationView) -> dict[str, Placed]:
    """Where each node goes (see the module docstring)."""
    order = [a.id for a in view.agents] + [x.id for x in view.externals]
    for edge in view.edges:  # a target the spec does not list still gets a node
        for end in (edge.source, edge.target):
            if end not in order:
                order.append(end)
    out_edges: dict[str, list[str]] = {}
    for edge in view.edges:
        out_edges.setdefault(edge.source, []).append(edge.target)
    depth: dict[str, int] = {}
    start = view.entry if view.entry in order else (order[0] if order else None)
    if start is not None:
        depth[start] = 0
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for target in out_edges.get(node, []):
                if target not in depth:
                    depth[target] = depth[node] + 1
                    queue.append(target)
    last = max(depth.values(), default=-1) + 1
    rows: dict[int, int] = {}
    placed = {}
    for node in order:
        layer = depth.get(node, last)
        row = rows.get(layer, 0)
        rows[layer] = row + 1
        placed[node] = Placed(node, layer, row)
    return placed


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def svg(view: ApplicationView) -> str:
    """The graph as an ``<svg>`` element (its size follows the layout)."""
    placed = layout(view)
    if not placed:
        return '<p class="empty">This Application has no agents to draw.</p>'
    width = max(p.x for p in placed.values()) + NODE_W + MARGIN + 50  # room for side bends
    height = max(p.y for p in placed.values()) + 2 * NODE_H + MARGIN  # and back edges
    parts = [
        f'<svg class="graph" role="group" aria-label="{attr("agency of " + view.name)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="10" '
        'markerHeight="10" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>',
    ]
    for edge in view.edges:
        a, b = placed[edge.source], placed[edge.target]
        x1, y1, x2, y2 = _ends(a, b)
        label = f"{edge.source} → {edge.target} ({edge.via}): {edge.state}"
        # the via label sits on the line, nearer the target: edges that cross in the middle
        # (two nodes swapping rows) keep their labels apart
        tx, ty = x1 + 0.55 * (x2 - x1), y1 + 0.55 * (y2 - y1)
        if a.id == b.id:
            path = f"M{x1},{y1} c10,-40 30,-40 {x2 - x1},{y2 - y1}"
        elif b.layer == a.layer:  # same layer: from one's side to the other's, bent outwards
            bend = x1 + 45
            path = f"M{x1},{y1} C{bend},{y1} {bend},{y2} {x2},{y2}"
        elif b.layer < a.layer:  # back to an earlier layer: below both
            low = max(y1, y2) + NODE_H
            path = f"M{x1},{y1} C{x1},{low} {x2},{low} {x2},{y2}"
        else:
            mid = (x1 + x2) / 2
            path = f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"
            tx = _on_curve(LABEL_AT, x1, mid, mid, x2)
            ty = _on_curve(LABEL_AT, y1, y1, y2, y2)
        parts.append(
            f'<g class="edge state-{attr(edge.state.lower())}" tabindex="0" role="button" '
            f'data-key="{attr(edge.key)}" data-label="{attr(label)}" '
            f'data-state="{attr(edge.state)}" data-reason="{attr(edge.reason)}" '
            f'data-message="{attr(edge.message)}" aria-label="{attr(label)}">'
            f"<title>{esc(label)}</title>"
            f'<path class="hit" d="{path}"/><path class="line" d="{path}" '
            'marker-end="url(#arrow)"/>'
            f'<text class="via" x="{tx:.0f}" y="{ty - 6:.0f}">'
            f"{esc(edge.via)}</text></g>"
        )
    agents = {a.id: a for a in view.agents}
    externals = {x.id: x for x in view.externals}
    for node_id, p in placed.items():
        agent = agents.get(node_id)
        if agent is not None:
            kind = "deployed" if agent.deployed else "in-process"
            classes = f"node agent {kind}" + (" entry" if agent.entry else "")
            sub = ("entry · " if agent.entry else "") + kind
            title = f"agent {agent.id} ({sub})"
            link = f"/apps/{view.namespace}/{view.name}/agents/{agent.id}"
        else:
            external = externals.get(node_id)
            kind = external.kind if external is not None else "unknown"
            classes = "node external " + ("tool" if kind == "tool server" else "a2a")
            sub = kind
            title = f"{kind} {node_id}"
            link = ""
        body = (
            f'<rect x="{p.x}" y="{p.y}" width="{NODE_W}" height="{NODE_H}" rx="8"/>'
            f'<text class="name" x="{p.x + 10}" y="{p.y + 22}">{esc(_short(node_id))}</text>'
            f'<text class="sub" x="{p.x + 10}" y="{p.y + 42}">{esc(sub)}</text>'
        )
        inner = (
            f'<g class="{attr(classes)}" data-node="{attr(node_id)}">'
            f"<title>{esc(title)}</title>{body}</g>"
        )
        if link:
            inner = f'<a href="{attr(link)}" aria-label="{attr(title)}">{inner}</a>'
        parts.append(inner)
    parts.append("</svg>")
    return "".join(parts)


def _on_curve(t: float, start: float, c1: float, c2: float, end: float) -> float:
    """One coordinate of the cubic Bezier ``start, c1, c2, end`` at ``t``."""
    u = 1 - t
    return u**3 * start + 3 * u * u * t * c1 + 3 * u * t * t * c2 + t**3 * end


def _ends(a: Placed, b: Placed) -> tuple[float, float, float, float]:
    if a.id == b.id:
        return a.x + NODE_W - 40, a.y, a.x + NODE_W - 10, a.y
    if b.layer > a.layer:
        return a.x + NODE_W, a.y + NODE_H / 2, b.x, b.y + NODE_H / 2
    if b.layer == a.layer:  # right side to right side
        return a.x + NODE_W, a.y + NODE_H / 2, b.x + NODE_W, b.y + NODE_H / 2
    return a.x + NODE_W / 2, a.y + NODE_H, b.x + NODE_W / 2, b.y + NODE_H
