// The chat panel: one turn at a time, streamed as JSON lines; every string shown as text.
"use strict";
(function () {
  const chat = document.getElementById("chat");
  if (!chat) return;
  const form = document.getElementById("chat-form");
  const input = document.getElementById("chat-input");
  const send = document.getElementById("chat-send");
  const cancel = document.getElementById("chat-cancel");
  const status = document.getElementById("chat-status");
  const transcript = document.getElementById("transcript");
  const contextId = chat.dataset.context;
  // Only these are shown inline; any other file is a download (mas/console/files.py).
  const INLINE_IMAGES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  let running = null; // the turn under way: { controller, taskId }

  // The conversation has its own address: put it in the location bar without a reload.
  const here = new URL(location.href);
  if (here.searchParams.get("context") !== contextId) {
    here.searchParams.set("context", contextId);
    history.replaceState(null, "", here.toString());
  }

  let pending = null; // the reply of the turn under way while it has no text yet

  function line(kind, who, text) {
    const li = document.createElement("li");
    li.className = kind;
    if (who) {
      const w = document.createElement("span");
      w.className = "who";
      w.textContent = who;
      li.appendChild(w);
    }
    const t = document.createElement("span");
    t.className = "text";
    t.textContent = text || "";
    li.appendChild(t);
    transcript.appendChild(li);
    keepReplyLast();
    return t;
  }

  // What the agent did before it said anything (a delegation, an artifact) shows above its
  // reply, in the order it happened.
  function keepReplyLast() {
    if (pending && !pending.textContent) transcript.appendChild(pending.parentElement);
  }

  function artifact(event) {
    const li = document.createElement("li");
    li.className = "note artifact";
    const head = document.createElement("div");
    head.textContent = "artifact " + event.name + " (" + event.type + ")";
    li.appendChild(head);
    if (event.type === "text" || event.type === "data") {
      if (event.cut) {
        const note = document.createElement("div");
        note.textContent = event.size + " characters: the first " + event.text.length + " are shown";
        li.appendChild(note);
      }
      const pre = document.createElement("pre");
      pre.textContent = event.text;
      li.appendChild(pre);
    } else if (event.type === "url") {
      let url = null;
      try { url = new URL(event.url); } catch (e) { url = null; }
      if (url && (url.protocol === "http:" || url.protocol === "https:")) {
        const a = document.createElement("a");
        a.href = url.href;
        a.rel = "noopener noreferrer nofollow";
        a.textContent = event.url;
        li.appendChild(a);
      } else {
        const span = document.createElement("span");
        span.className = "inert-url";
        span.textContent = event.url + " (not a link: only http(s) urls are)";
        li.appendChild(span);
      }
    } else {
      const d = document.createElement("div");
      d.textContent = "a file of " + event.size + " bytes" + (event.media_type ? " (" + event.media_type + ")" : "");
      li.appendChild(d);
      if (event.task_id !== undefined) {
        const href = chat.dataset.tasks + "/" + encodeURIComponent(event.task_id) + "/files/" + event.index;
        if (INLINE_IMAGES.includes((event.media_type || "").split(";")[0].trim().toLowerCase())) {
          const img = document.createElement("img");
          img.className = "artifact-image";
          img.src = href + "?inline=1";
          img.alt = event.name;
          li.appendChild(img);
        }
        const a = document.createElement("a");
        a.href = href;
        a.download = "";
        a.textContent = "download " + event.name;
        li.appendChild(a);
      }
    }
    transcript.appendChild(li);
    keepReplyLast();
  }

  async function turn(text) {
    line("user", "you", text);
    const reply = line("agent", "agent", "");
    pending = reply;
    const controller = new AbortController();
    const current = { controller: controller, taskId: null };
    running = current;
    send.disabled = true;
    cancel.disabled = false;
    status.textContent = "the agent is answering";
    let ended = null;
    try {
      const response = await fetch(chat.dataset.turn, {
        method: "POST",
        headers: { "content-type": "application/json", "x-console": "1" },
        body: JSON.stringify({ text: text, context_id: contextId }),
        signal: controller.signal,
      });
      if (!response.ok) {
        let why = "HTTP " + response.status;
        try { why = (await response.json()).error || why; } catch (e) { /* not JSON */ }
        line("error", "", "the console refused the message: " + why);
        return;
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffered = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        let at;
        while ((at = buffered.indexOf("\n")) >= 0) {
          const event = JSON.parse(buffered.slice(0, at));
          buffered = buffered.slice(at + 1);
          if (event.kind === "text") reply.textContent += event.text;
          else if (event.kind === "task") {
            current.taskId = event.task_id;
            reply.parentElement.dataset.task = event.task_id;
          }
          else if (event.kind === "delegated") {
            const what = (event.tool ? "tool " : "delegated to ") + event.target + ": " + (event.ok ? "ok" : "failed");
            line("note delegation", "", "· " + what + (event.detail ? ": " + event.detail : ""));
          } else if (event.kind === "artifact") artifact(event);
          else if (event.kind === "ended") ended = event;
          else if (event.kind === "error") line("error", "", event.message);
        }
      }
    } catch (error) {
      if (error.name === "AbortError") line("note", "", "canceled");
      else line("error", "", "the turn broke off: " + error.message);
    } finally {
      pending = null;
      running = null;
      send.disabled = false;
      cancel.disabled = true;
    }
    if (ended) {
      if (ended.status === "input_required") {
        if (!reply.textContent) reply.textContent = ended.text;
        else if (ended.text && ended.text !== reply.textContent) line("agent question", "agent asks", ended.text);
        reply.parentElement.classList.add("question");
        status.textContent = "the agent asks: answer it in the box below";
        input.focus();
      } else if (ended.status === "completed") {
        if (!reply.textContent) reply.textContent = ended.text;
        status.textContent = "done";
      } else if (ended.status === "canceled") {
        line("note", "", "canceled");
        status.textContent = "canceled";
      } else {
        line("error", "", "the turn " + ended.status + (ended.text ? ": " + ended.text : ""));
        status.textContent = ended.status;
      }
    } else if (!status.textContent.startsWith("the agent asks")) {
      status.textContent = "";
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value;
    if (!text.trim() || running) return;
    input.value = "";
    turn(text);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
  });
  // Cancel asks the console to cancel the turn's task; the agent then ends the stream
  // "canceled". When the console cannot, the page stops reading the stream (the console
  // cancels the task when the stream is cut).
  cancel.addEventListener("click", async () => {
    const turn = running;
    if (!turn) return;
    cancel.disabled = true;
    status.textContent = "canceling";
    let why = null;
    try {
      const response = await fetch(chat.dataset.cancel, {
        method: "POST",
        headers: { "content-type": "application/json", "x-console": "1" },
        body: JSON.stringify({ context_id: contextId, task_id: turn.taskId }),
      });
      if (!response.ok) {
        why = "HTTP " + response.status;
        try { why = (await response.json()).error || why; } catch (e) { /* not JSON */ }
      }
    } catch (error) {
      why = error.message;
    }
    if (why !== null && running === turn) {
      line("error", "", "the console could not cancel the task: " + why);
      turn.controller.abort();
    }
  });
})();
