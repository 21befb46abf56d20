// sqlq dashboard: live counts, the rates chart, confirmations. No framework, no build.
// Values from the server are only ever set with textContent: nothing is parsed as HTML.
"use strict";

const POLL_MS = 2000;

function setText(el, value) {
  if (el && el.textContent !== String(value)) el.textContent = String(value);
}

function drawChart(rates) {
  const put = document.getElementById("chart-put");
  const done = document.getElementById("chart-done");
  if (!put || !done || rates.length === 0) return;
  // The x axis spans what was sampled (at least 20 s, at most the 10 minutes kept).
  const now = Date.now() / 1000, span = Math.min(600, Math.max(20, now - rates[0][0]));
  const max = Math.max(1, ...rates.map((r) => Math.max(r[1], r[2])));
  const pts = (i) => rates.map((r) => {
    const x = 600 - ((now - r[0]) / span) * 600;
    const y = 115 - (r[i] / max) * 105;
    return `${x.toFixed(1)},${y.toFixed(1)}`;
  }).join(" ");
  put.setAttribute("points", pts(1));
  done.setAttribute("points", pts(2));
  setText(document.getElementById("chart-max"), `scale: ${max.toFixed(1)}/s`);
  const last = rates[rates.length - 1];
  setText(document.querySelector('[data-live="put-rate"]'), last[1].toFixed(1));
  setText(document.querySelector('[data-live="done-rate"]'), last[2].toFixed(1));
}

function apply(data) {
  for (const key of ["live", "puts", "deletes"]) {
    setText(document.querySelector(`[data-live="${key}"]`), data[key]);
  }
  document.querySelectorAll("[data-tube]").forEach((row) => {
    const counts = data.tubes[row.dataset.tube];
    if (!counts) return;
    row.querySelectorAll("[data-field]").forEach((cell) => {
      const value = counts[cell.dataset.field];
      if (value === undefined) return;
      const target = cell.querySelector("a, span.badge, b") || cell;
      if (cell.dataset.field === "paused" && !cell.querySelector("span")) return;
      setText(target, value);
      if (cell.dataset.field === "buried") cell.classList.toggle("warn", value > 0);
    });
  });
  const table = document.getElementById("tubes");
  const fresh = document.getElementById("new-tubes");
  if (table && fresh) {
    const shown = new Set([...table.querySelectorAll("tr[data-tube]")].map((r) => r.dataset.tube));
    const added = Object.keys(data.tubes).filter((name) => !shown.has(name)).length;
    fresh.hidden = added === 0;
    setText(fresh, `${added} new tube${added === 1 ? "" : "s"}: reload`);
  }
  drawChart(data.rates);
}

async function poll() {
  const live = document.getElementById("live");
  if (document.visibilityState !== "visible") return;  // a hidden tab costs nothing
  try {
    const resp = await fetch("/api/overview", { credentials: "same-origin" });
    if (!resp.ok) throw new Error(resp.status);
    apply(await resp.json());
    live.className = "live on";
  } catch (e) {
    live.className = "live stale";
  }
}

function confirmations() {
  // Destructive or bulk forms carry data-confirm: ask, then send confirm=yes.
  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      const button = event.submitter;
      const count = form.querySelectorAll('input[name="ids"]:checked').length;
      let question = form.dataset.confirm;
      if (form.id === "bulk") {
        if (count === 0) { event.preventDefault(); alert("Select some jobs first."); return; }
        question = `${button.value === "delete" ? "Delete" : "Kick"} ${count} selected jobs?`;
      }
      if (!window.confirm(question)) { event.preventDefault(); return; }
      form.querySelector('input[name="confirm"]').value = "yes";
    });
  });
  const all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", () => {
      document.querySelectorAll('input[name="ids"]').forEach((box) => { box.checked = all.checked; });
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  confirmations();
  if (document.querySelector("[data-live], [data-tube]")) {
    poll();
    setInterval(poll, POLL_MS);
    document.addEventListener("visibilitychange", poll);
  }
});
