// The Application page: edge details on click or Enter, and live states from the server.
"use strict";
(function () {
  const detail = document.getElementById("edge-detail");

  function show(edge) {
    for (const e of document.querySelectorAll("g.edge.selected")) e.classList.remove("selected");
    edge.classList.add("selected");
    const title = document.createElement("strong");
    title.textContent = edge.dataset.label;
    const reason = document.createElement("p");
    reason.textContent = "Reason: " + (edge.dataset.reason || "none given");
    const message = document.createElement("p");
    message.textContent = edge.dataset.message || "";
    detail.replaceChildren(title, reason, message);
  }

  for (const edge of document.querySelectorAll("g.edge")) {
    edge.addEventListener("click", () => show(edge));
    edge.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); show(edge); }
    });
  }

  const live = document.getElementById("app-live");
  if (!live) return;
  const nodes = Array.from(document.querySelectorAll("g.node"), (n) => n.dataset.node).join("\n");
  const source = new EventSource(live.dataset.src);
  source.onmessage = (message) => {
    const update = JSON.parse(message.data);
    if (update.gone) { location.reload(); return; }
    if (update.nodes.join("\n") !== nodes) { location.reload(); return; }
    live.dataset.version = update.version;
    const ready = document.getElementById("app-ready");
    ready.textContent = "Ready: " + update.ready;
    ready.className = "badge status-" + update.ready.toLowerCase();
    document.getElementById("app-phase").textContent = update.phase;
    for (const e of update.edges) {
      const state = e.state.toLowerCase();
      for (const g of document.querySelectorAll("g.edge")) {
        if (g.dataset.key !== e.key) continue;
        g.classList.remove("state-ready", "state-pending", "state-unreachable", "state-unknown");
        g.classList.add("state-" + state);
        const label = g.dataset.label.replace(/: [A-Za-z]+$/, ": " + e.state);
        g.dataset.label = label;
        g.dataset.state = e.state;
        g.dataset.reason = e.reason;
        g.dataset.message = e.message;
        g.setAttribute("aria-label", label);
        g.querySelector("title").textContent = label;
        if (g.classList.contains("selected")) show(g);
      }
      for (const row of document.querySelectorAll("tr[data-edge]")) {
        if (row.dataset.edge !== e.key) continue;
        const cell = row.querySelector(".edge-state");
        cell.textContent = e.state;
        cell.className = "edge-state state-" + state;
        row.querySelector(".edge-reason").textContent = e.reason;
        row.querySelector(".edge-message").textContent = e.message;
      }
    }
    for (const a of update.agents) {
      for (const row of document.querySelectorAll("tr[data-agent]")) {
        if (row.dataset.agent !== a.id) continue;
        row.querySelector(".replicas").textContent = a.replicas;
        if (!a.activity) continue;
        const badge = document.createElement("span");
        badge.className = "badge activity-" + a.activity.state;
        badge.title = a.activity.message;
        badge.textContent = a.activity.text;
        row.querySelector(".activity").replaceChildren(badge);
      }
    }
  };
})();
