// agentwatch page script: relative times, confirmations and copy buttons. A module (base.html):
// it shares the confirmation dialog and the file download with the Cluster tab (lib/).

import { confirmDialog } from "./lib/confirm-dialog.js";
import { saveText } from "./lib/save-text.js";

const UNITS = [["day", 86400], ["hour", 3600], ["minute", 60]];

function relative(date) {
  const seconds = Math.floor((Date.now() - date.getTime()) / 1000);
  if (seconds < 60) return seconds < -60 ? "in the future" : "just now";
  for (const [unit, size] of UNITS) {
    if (seconds >= size) {
      const n = Math.floor(seconds / size);
      return n + " " + unit + (n === 1 ? "" : "s") + " ago";
    }
  }
  return "just now";
}

function refreshTimes(root) {
  for (const el of (root || document).querySelectorAll("time[data-relative]")) {
    const when = new Date(el.getAttribute("datetime"));
    if (!isNaN(when)) el.textContent = relative(when);
  }
}

// Live activity rows are placed by activity.js (the Activity tab's own script).
document.addEventListener("htmx:load", (event) => {
  const el = event.detail.elt;
  refreshTimes(el.parentNode || document);
});

// Behaviour the templates ask for with data attributes: the Content-Security-Policy
// runs no inline handler (onsubmit=, onchange=, …).
// <form data-confirm="Question?">: submitted only once confirmed, in the page's dialog
// (base.html), whose button says what the form's own button says ("Revoke", "Delete").
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || form.dataset.confirm === undefined) return;
  if (form.dataset.confirmed === "yes") { delete form.dataset.confirmed; return; }
  event.preventDefault();
  event.stopImmediatePropagation();
  const dialog = document.getElementById("confirm-dialog");
  const label = (event.submitter && event.submitter.textContent.trim()) || "Confirm";
  if (!dialog || typeof dialog.showModal !== "function") {  // the browser asks; the form goes as is
    if (window.confirm(form.dataset.confirm)) form.submit();
    return;
  }
  confirmDialog(form.dataset.confirm, label).then((confirmed) => {
    if (!confirmed) return;
    form.dataset.confirmed = "yes";
    form.requestSubmit(event.submitter || undefined);
  });
}, true);
// <select data-autosubmit>: a change submits its form.
document.addEventListener("change", (event) => {
  const el = event.target;
  if (el instanceof HTMLElement && el.matches("[data-autosubmit]") && el.form) {
    el.form.requestSubmit();
  }
});
// A token or secret shown once is selected whole on focus, ready to copy.
document.addEventListener("focusin", (event) => {
  const el = event.target;
  if (el instanceof HTMLInputElement && el.classList.contains("token-value")) el.select();
});

// <button data-copy="#id">: copies that element's text, and says so beside the button.
const COPY_WAIT_MS = 2000;  // a clipboard that has not answered by then: select instead
document.addEventListener("click", (event) => {
  const button = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
  if (!button) return;
  const source = document.querySelector(button.getAttribute("data-copy"));
  if (!source) return;
  const text = source instanceof HTMLInputElement ? source.value : source.textContent;
  const said = button.parentElement.querySelector(".copied");
  const done = (ok) => {
    if (!said) return;
    said.textContent = ok ? "Copied" : "Selected: press Ctrl+C to copy";
    said.hidden = false;
  };
  // The clipboard API can refuse (no focus, no permission), or not answer (a prompt left
  // open, a busy browser): then select the text, so one key press copies it, and say so.
  // A copy that lands later still says "Copied".
  const select = () => {
    if (source instanceof HTMLInputElement) { source.focus(); source.select(); }
    else window.getSelection().selectAllChildren(source);
    done(false);
  };
  if (!navigator.clipboard) { select(); return; }
  const unanswered = setTimeout(select, COPY_WAIT_MS);
  navigator.clipboard.writeText(text).then(
    () => { clearTimeout(unanswered); done(true); },
    () => { clearTimeout(unanswered); select(); });
});

// The namespaces chosen on an agent's Cluster tab come back with it from its other tabs
// (kept in this browser only).
for (const link of document.querySelectorAll("a[data-cluster-tab]")) {
  const key = "agentwatch:namespaces:" + link.dataset.clusterTab;
  try {
    if (link.getAttribute("aria-current") === "page") {
      const chosen = new URL(location.href).searchParams.getAll("namespace");
      if (chosen.length) localStorage.setItem(key, JSON.stringify(chosen));
      else localStorage.removeItem(key);
    } else {
      const kept = JSON.parse(localStorage.getItem(key) || "[]");
      if (Array.isArray(kept) && kept.length) {
        const url = new URL(link.href);
        for (const ns of kept) if (typeof ns === "string") url.searchParams.append("namespace", ns);
        link.href = url.pathname + url.search;
      }
    }
  } catch (err) { /* storage refused: the tab opens on every namespace */ }
}

// <details data-fold-narrow>: open on a wide screen, folded on a phone (a long menu
// would push the page's content below the fold).
for (const fold of document.querySelectorAll("details[data-fold-narrow]")) {
  if (window.matchMedia("(max-width: 800px)").matches) fold.open = false;
}

// <button data-download="#id" data-filename="x.yaml">: saves that element's text as a file.
document.addEventListener("click", (event) => {
  const button = event.target instanceof Element ? event.target.closest("[data-download]") : null;
  if (!button) return;
  const source = document.querySelector(button.getAttribute("data-download"));
  if (!source) return;
  saveText(source.textContent, button.dataset.filename || "download.txt", "application/yaml");
});

// <input data-filter="#container">: hides the container's [data-row] rows whose text does
// not hold every word typed (lists filtered in the page; the Cluster tab filters its own
// tables and gives its inputs an empty data-filter). Re-applied after a poll swaps rows.
function applyFilter(input) {
  const container = document.querySelector(input.getAttribute("data-filter"));
  if (!container) return;
  const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const row of container.querySelectorAll("[data-row]")) {
    const text = row.textContent.toLowerCase();
    const match = words.every((word) => text.includes(word));
    row.hidden = !match;
    if (match) shown += 1;
  }
  // data-filter-empty="#note": shown while nothing matches.
  const empty = input.getAttribute("data-filter-empty");
  const note = empty ? document.querySelector(empty) : null;
  if (note) note.hidden = shown > 0 || !words.length;
}
function listFilters() {
  return Array.from(document.querySelectorAll("input[data-filter]"))
    .filter((input) => input.getAttribute("data-filter"));
}
document.addEventListener("input", (event) => {
  const el = event.target;
  if (el instanceof HTMLInputElement && el.getAttribute("data-filter")) applyFilter(el);
});
document.addEventListener("htmx:afterSettle", () => listFilters().forEach(applyFilter));
document.addEventListener("DOMContentLoaded", () => listFilters().forEach(applyFilter));

// On phones a table's rows read as cards: each cell carries its column's name
// (data-label, shown by app.css) so the header can go.
function labelCells(root) {
  for (const table of (root || document).querySelectorAll("table.grid:not(.k8s)")) {
    const names = Array.from(table.querySelectorAll(":scope > thead th"), (th) => th.textContent.trim());
    for (const row of table.querySelectorAll(":scope > tbody > tr")) {
      Array.from(row.children).forEach((cell, i) => {
        if (names[i] && !cell.hasAttribute("colspan") && !cell.dataset.label) cell.dataset.label = names[i];
      });
    }
  }
}
document.addEventListener("htmx:afterSettle", () => labelCells(document));
document.addEventListener("DOMContentLoaded", () => labelCells(document));

document.addEventListener("DOMContentLoaded", () => refreshTimes(document));
setInterval(() => refreshTimes(document), 30000);
