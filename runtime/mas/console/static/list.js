// The Applications list: filter, sort, and rows kept current by the server's events.
"use strict";
(function () {
  const table = document.getElementById("apps");
  const body = table.tBodies[0];
  const filter = document.getElementById("filter");
  const live = document.getElementById("live");
  const columns = ["name", "namespace", "ready", "phase", "agents", "edges", "conformant"];
  let rows = [];
  let sortKey = "name";
  let sortUp = true;

  function cell(row, key) {
    const td = document.createElement("td");
    td.dataset.col = key;
    const value = row[key] || "";
    if (key === "name") {
      const a = document.createElement("a");
      a.href = "/apps/" + encodeURIComponent(row.namespace) + "/" + encodeURIComponent(row.name);
      a.textContent = value;
      td.appendChild(a);
    } else {
      td.textContent = value;
      if (key === "ready" || key === "conformant") td.className = "status-" + value.toLowerCase();
    }
    return td;
  }

  function render() {
    const words = filter.value.trim().toLowerCase();
    const shown = rows
      .filter((r) => !words || [r.name, r.namespace, r.phase].join(" ").toLowerCase().includes(words))
      .sort((a, b) => (sortUp ? 1 : -1) * String(a[sortKey]).localeCompare(String(b[sortKey]), undefined, { numeric: true }));
    const fresh = document.createDocumentFragment();
    for (const row of shown) {
      const tr = document.createElement("tr");
      tr.dataset.key = row.key;
      for (const key of columns) tr.appendChild(cell(row, key));
      fresh.appendChild(tr);
    }
    body.replaceChildren(fresh);
    const none = document.getElementById("no-apps");
    if (none) none.hidden = rows.length > 0;
  }

  for (const button of table.querySelectorAll("button.sort")) {
    button.addEventListener("click", () => {
      const key = button.dataset.sort;
      sortUp = key === sortKey ? !sortUp : true;
      sortKey = key;
      for (const b of table.querySelectorAll("button.sort")) b.removeAttribute("aria-sort");
      button.closest("th").setAttribute("aria-sort", sortUp ? "ascending" : "descending");
      render();
    });
  }
  filter.addEventListener("input", render);

  const events = new EventSource("/updates");
  events.onopen = () => { live.textContent = "live updates: on"; };
  events.onerror = () => { live.textContent = "live updates: reconnecting"; };
  events.onmessage = (message) => {
    rows = JSON.parse(message.data);
    render();
  };
})();
