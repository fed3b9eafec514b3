// cluster/panel/: the side panel of one object (see docs/panel.md and docs/ui.md).
// node-care.js: cordon, uncordon and drain a node (docs/operate.md, "Node care"), from a
// node's panel (cluster/_node_care.html) and, cordon/uncordon, from the Nodes list's rows.
// A drain answers at once ("draining") and then streams its progress, one JSON object a
// line, until its report: each evicted, skipped or blocked pod is listed as it happens.

import { confirmDialog } from "../../lib/confirm-dialog.js";
import { csrfToken } from "../../lib/csrf.js";

const QUESTIONS = {
  cordon: (node) => "Cordon node " + node + "? No new pod is scheduled on it; its pods keep running.",
  uncordon: (node) => "Uncordon node " + node + "? Pods may be scheduled on it again.",
  drain: (node) => "Drain node " + node + "? It is cordoned, then its pods are evicted (DaemonSet pods stay); " +
    "a PodDisruptionBudget may hold some back until the drain times out.",
};
const LABELS = { cordon: "Cordon", uncordon: "Uncordon", drain: "Drain node" };

function post(url, body) {
  return fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "Accept": "application/json, application/x-ndjson", "X-CSRF-Token": csrfToken() },
    body: JSON.stringify(body || {}),
  });
}

async function errorOf(response) {
  const body = await response.json().catch(() => ({}));
  return (body.error && body.error.message) || "Failed (HTTP " + response.status + ")";
}

function say(output, text, state) {
  output.className = "action-result node-care-result" + (state ? " " + state : "");
  output.textContent = text;
}

// Cordon or uncordon `node`; resolves to whether it was done.
async function cordon(base, node, action, output) {
  if (!(await confirmDialog(QUESTIONS[action](node), LABELS[action]))) return false;
  say(output, "Working…");
  try {
    const response = await post(base + "/" + encodeURIComponent(node) + "/" + action);
    if (!response.ok) { say(output, await errorOf(response), "failed"); return false; }
    const body = await response.json();
    say(output, body.message, "done");
    return true;
  } catch (err) {
    say(output, "Failed: " + err.message, "failed");
    return false;
  }
}

// One line of a drain's progress, in words.
function progressText(line) {
  switch (line.type) {
    case "cordoned": return line.message;
    case "skipped": return "Skipped " + line.pod + ": " + line.reason;
    case "evicted": return "Evicted " + line.pod;
    case "gone": return line.pod + " is gone";
    case "blocked": return "Blocked: " + line.pod + " — " + line.reason;
    case "failed": return "Could not evict " + line.pod + ": " + line.reason;
    default: return null;
  }
}

// The lines of a streamed answer as they come.
async function* jsonLines(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n")) >= 0) {
      const text = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      if (text.trim()) yield JSON.parse(text);
    }
  }
}

async function drain(base, node, choices, output, progress) {
  if (!(await confirmDialog(QUESTIONS.drain(node), LABELS.drain))) return null;
  progress.replaceChildren();
  progress.hidden = true;
  say(output, "Draining…", "pending");
  let report = null;
  try {
    const response = await post(base + "/" + encodeURIComponent(node) + "/drain", choices);
    if (!response.ok) { say(output, await errorOf(response), "failed"); return null; }
    for await (const line of jsonLines(response)) {
      if (line.type === "done") { report = line; break; }
      const text = progressText(line);
      if (!text) continue;
      const item = document.createElement("li");
      item.dataset.type = line.type;
      if (line.pod) item.dataset.pod = line.pod;
      item.textContent = text;
      progress.append(item);
      progress.hidden = false;
    }
  } catch (err) {
    say(output, "The drain's progress was cut off (" + err.message + "); its outcome is in Activity.", "failed");
    return null;
  }
  if (!report) { say(output, "The drain's progress ended early; its outcome is in Activity.", "failed"); return null; }
  say(output, report.message, report.result === "done" ? "done" : "failed");
  return report;
}

function setToggle(button, cordoned) {
  button.dataset.nodeCare = cordoned ? "uncordon" : "cordon";
  button.textContent = cordoned ? "Uncordon" : "Cordon";
}

// The node whose panel the Nodes list's "Drain…" asked for: its drain form opens.
let drainAskedFor = null;

// A node's panel: its Cordon/Uncordon toggle and its drain form; `done()` after each.
export function wireNodeCare(panel, done) {
  const care = panel.querySelector(".node-care");
  if (!care) return;
  const base = care.dataset.nodeCareUrl;
  const node = care.dataset.node;
  const output = care.querySelector(".node-care-result");
  const progress = care.querySelector(".drain-progress");
  const toggle = care.querySelector('button[data-node-care="cordon"], button[data-node-care="uncordon"]');
  if (drainAskedFor === node) {
    drainAskedFor = null;
    const form = care.querySelector(".drain-form");
    form.open = true;
    form.scrollIntoView({ block: "nearest" });
  }
  // The toggle follows the node as its live summary prints it (a cordon from elsewhere).
  const status = panel.querySelector('dl.panel-summary dd[data-col="status"]');
  if (status) {
    const follow = () => {
      if (!status.textContent || toggle.disabled) return;
      const cordoned = status.textContent.includes("SchedulingDisabled");
      if ((toggle.dataset.nodeCare === "uncordon") !== cordoned) setToggle(toggle, cordoned);
    };
    new MutationObserver(follow).observe(status, { childList: true, characterData: true, subtree: true });
  }
  toggle.addEventListener("click", async () => {
    const action = toggle.dataset.nodeCare;
    toggle.disabled = true;
    if (await cordon(base, node, action, output)) setToggle(toggle, action === "cordon");
    toggle.disabled = false;
    done();
  });
  const drainButton = care.querySelector('button[data-node-care="drain"]');
  drainButton.addEventListener("click", async () => {
    const choices = {};
    for (const box of care.querySelectorAll('.drain-form input[type="checkbox"]')) choices[box.name] = box.checked;
    drainButton.disabled = toggle.disabled = true;
    const report = await drain(base, node, choices, output, progress);
    if (report && report.cordoned) setToggle(toggle, true);
    drainButton.disabled = toggle.disabled = false;
    done();
  });
}

// The Nodes list: a Cordon or Uncordon button on each row (by its status, as kubectl prints
// it: "SchedulingDisabled"), kept as rows are patched, and "Drain…", which opens the node's
// panel with its drain form; the outcome is said above the list.
export function nodeCareRows(root, list) {
  const base = root.dataset.nodeCareUrl;
  if (!base || root.dataset.live !== "true") return;
  for (const table of list.tables) {
    const section = table.section;
    if (section.dataset.resource !== "nodes") continue;
    const output = document.createElement("output");
    output.className = "action-result node-care-result";
    output.setAttribute("aria-live", "polite");
    section.querySelector(".k8s-section-head").append(output);
    const head = section.querySelector("thead tr");
    const th = document.createElement("th");
    th.dataset.col = "node-care";
    th.textContent = "Node care";
    head.append(th);
    for (const td of section.querySelectorAll("tbody.table-state td[colspan]")) td.colSpan = Number(td.colSpan) + 1;
    const body = section.querySelector("tbody.rows");
    const fill = (row) => {
      if (row.nodeType !== 1 || !row.dataset.name) return;
      const status = row.querySelector('td[data-col="status"]');
      const cordoned = !!status && status.textContent.includes("SchedulingDisabled");
      let cell = row.querySelector('td[data-col="node-care"]');
      if (!cell) {
        cell = document.createElement("td");
        cell.dataset.col = "node-care";
        const button = document.createElement("button");
        button.type = "button";
        cell.append(button);
        row.append(cell);
      }
      const button = cell.querySelector("button[data-node-care]") || cell.querySelector("button");
      if (button.dataset.nodeCare !== (cordoned ? "uncordon" : "cordon")) setToggle(button, cordoned);
      button.setAttribute("aria-label", button.textContent + " node " + row.dataset.name);
      if (!cell.querySelector("button[data-drain]")) {
        const drainButton = document.createElement("button");
        drainButton.type = "button";
        drainButton.dataset.drain = "";
        drainButton.textContent = "Drain…";
        drainButton.setAttribute("aria-label", "Drain node " + row.dataset.name + "…");
        cell.append(" ", drainButton);
      }
    };
    body.addEventListener("click", async (event) => {
      const drainButton = event.target.closest("button[data-drain]");
      if (drainButton) {
        // The drain's choices and progress are the node's panel's: open it there.
        event.stopPropagation();
        const row = drainButton.closest("tr");
        drainAskedFor = row.dataset.name;
        row.querySelector("td").click();
        return;
      }
      const button = event.target.closest("button[data-node-care]");
      if (!button) return;
      event.stopPropagation();
      const row = button.closest("tr");
      button.disabled = true;
      const action = button.dataset.nodeCare;
      // The row follows the node as its watch says; the button at once.
      if (await cordon(base, row.dataset.name, action, output)) setToggle(button, action === "cordon");
      button.disabled = false;
    });
    for (const row of body.children) fill(row);
    new MutationObserver((changes) => {
      for (const change of changes) {
        for (const row of change.addedNodes) fill(row);
        if (change.type === "characterData" || change.type === "childList") {
          const row = change.target.nodeType === 1 ? change.target.closest("tbody.rows > tr") : null;
          if (row) fill(row);
        }
      }
    }).observe(body, { childList: true, subtree: true });
  }
}
