// cluster/panel/: the side panel of one object: its tabs, live summary, events and
// relations, pod logs and actions (see docs/panel.md and docs/ui.md).
// actions.js: the panel's actions (delete, restart, scale, trigger, reconcile, suspend,
// resume): confirmed in the page's one dialog, sent, their outcome said; the buttons
// follow the object as its details say it is now.

import { confirmDialog } from "../../lib/confirm-dialog.js";
import { csrfToken } from "../../lib/csrf.js";

// The body of an action, or null (and why, in `output`) when it cannot be sent.
function actionBody(button, target, output) {
  const body = { action: button.dataset.action, ...target };
  if (button.dataset.action !== "scale") return { body, question: button.dataset.confirm };
  const input = button.parentElement.querySelector('input[type="number"]');
  const replicas = Number(input.value);
  if (input.value === "" || !Number.isInteger(replicas) || replicas < 0 || replicas > Number(input.max)) {
    output.className = "action-result failed";
    output.textContent = "Replicas: a whole number from 0 to " + input.max;
    return null;
  }
  body.replicas = replicas;
  const question = button.dataset.confirm.replace("{current}", input.dataset.current).replace("{replicas}", String(replicas));
  return { body, question };
}

async function act(url, button, target, output, done) {
  const prepared = actionBody(button, target, output);
  if (!prepared) return;
  if (!(await confirmDialog(prepared.question, button.textContent.trim()))) return;
  let ok = false;
  button.disabled = true;
  output.className = "action-result";
  output.textContent = "Working…";
  try {
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": csrfToken() },
      body: JSON.stringify(prepared.body),
    });
    const body = await response.json().catch(() => ({}));
    if (response.ok) {
      ok = true;
      output.textContent = body.message + (body.result === "pending" ? " (pending)" : "");
      output.classList.add(body.result === "pending" ? "pending" : "done");
    } else {
      output.textContent = (body.error && body.error.message) || "Failed (HTTP " + response.status + ")";
      output.classList.add("failed");
    }
  } catch (err) {
    output.textContent = "Failed: " + err.message;
    output.classList.add("failed");
  } finally {
    button.disabled = false;
    done(ok, prepared.body.action);
  }
}

// The panel's action buttons sent to `url`; `done()` after each, whatever its outcome.
export function wireActions(panel, url, done) {
  const output = panel.querySelector(".action-result");
  const watch = JSON.parse(panel.dataset.objectWatch);
  const target = { group: watch.group, version: watch.version, resource: watch.resource,
    namespace: panel.dataset.namespace, name: panel.dataset.name };
  panel.querySelectorAll("button[data-action]").forEach((button) => {
    button.addEventListener("click", () => act(url, button, target, output, (ok, action) => {
      // Done in the cluster: the toggle says what comes next at once (the object's
      // details confirm it when they are fetched again).
      if (ok && (action === "suspend" || action === "resume")) setToggle(panel, action === "suspend");
      done();
    }));
  });
  const scale = panel.querySelector(".scale-control input");
  if (scale) scale.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); panel.querySelector('button[data-action="scale"]').click(); }
  });
}

// Suspend/Resume and the scale field follow the object as its details say it is now.
export function syncActions(panel) {
  const details = panel.querySelector(".panel-details [data-resource-version]");
  if (!details) return;
  const scale = panel.querySelector(".scale-control input");
  if (scale && details.dataset.replicas !== undefined && scale.dataset.current !== details.dataset.replicas) {
    if (scale.value === scale.dataset.current) scale.value = details.dataset.replicas;  // not being edited
    scale.dataset.current = details.dataset.replicas;
  }
  setToggle(panel, details.dataset.suspended === "true");
}

function setToggle(panel, suspended) {
  const button = panel.querySelector('button[data-action="suspend"], button[data-action="resume"]');
  if (!button) return;
  const action = suspended ? "resume" : "suspend";
  if (button.dataset.action === action) return;
  button.dataset.action = action;
  button.textContent = suspended ? "Resume" : "Suspend";
  button.dataset.confirm = button.dataset.confirm.replace(/^\w+/, button.textContent)
    .replace(/Flux (stops applying|applies) it( again)?\./, suspended ? "Flux applies it again." : "Flux stops applying it.");
}
