// cluster/panel/edit.js: Edit and apply, Create from YAML (docs/operate.md "Edit and
// apply"). A panel's Edit button (cluster/_edit_button.html) or the toolbar's Create from
// YAML opens the page's one dialog (cluster/_edit_dialog.html): the manifest in the
// Settings editor's CodeMirror (a plain text area without it), a dry run that shows the
// diff of what the API server would store and any conflict with another field manager,
// then Apply (or Force apply, for maintainers, over those conflicts). An object Flux
// manages says so first and offers to suspend its Kustomization or HelmRelease.
//
// The page renders the dialog (and loads this module) only for people who may act; the
// server checks again on every request. A module loaded by its own tag with the page's
// style nonce, which CodeMirror's <style> element needs under the page's CSP.

import { confirmDialog } from "../../lib/confirm-dialog.js";
import { csrfToken } from "../../lib/csrf.js";
import { followTheme, yamlBase } from "../../lib/yaml-editor.js";

const ownTag = Array.from(document.scripts).find((script) => script.src === import.meta.url);
const STYLE_NONCE = (ownTag && ownTag.nonce) || "";
const dialog = document.getElementById("apply-dialog");

// What the dialog is editing: {mode: "edit", group, version, resource, namespace, name}
// or {mode: "create"}; whether the text was tried as it is now; the owner to suspend.
let state = { mode: "create" };
let triedText = null;
let fluxOwner = null;
let editor = null;

const $ = (selector) => dialog.querySelector(selector);

// CodeMirror over the text area when the bundle loaded; the text area stays the source.
function startEditor() {
  const CM = window.AgentwatchCodeMirror;
  const textarea = $("#apply-yaml");
  if (!CM || editor) return;
  const holder = $(".apply-editor");
  const darkMode = new CM.Compartment();
  editor = new CM.EditorView({
    doc: textarea.value,
    parent: holder,
    extensions: [
      yamlBase(CM, STYLE_NONCE, darkMode),
      CM.lineNumbers(), CM.highlightActiveLineGutter(), CM.foldGutter(), CM.history(),
      CM.drawSelection(), CM.indentOnInput(), CM.bracketMatching(), CM.highlightActiveLine(),
      CM.keymap.of([...CM.defaultKeymap, ...CM.historyKeymap, ...CM.foldKeymap,
        ...CM.searchKeymap, CM.indentWithTab]),
      CM.EditorView.contentAttributes.of({ "aria-labelledby": "apply-label",
        "aria-multiline": "true", "spellcheck": "false", "autocapitalize": "off" }),
      CM.EditorView.updateListener.of((update) => {
        if (update.docChanged) { textarea.value = update.state.doc.toString(); changed(); }
      }),
    ],
  });
  followTheme(CM, editor, darkMode);
  textarea.hidden = true;
  holder.classList.add("enhanced");
}

function setText(text) {
  const textarea = $("#apply-yaml");
  textarea.value = text;
  if (editor) editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: text } });
}

function text() {
  return $("#apply-yaml").value;
}

function say(output, message, kind) {
  output.className = output.className.replace(/\s*(done|failed)\b/g, "") + (kind ? " " + kind : "");
  output.textContent = message;
}

// The text changed since its dry run: Apply waits for another one.
function changed() {
  if (triedText !== null && text() !== triedText) {
    triedText = null;
    $("[data-apply]").disabled = true;
    $("[data-force]").hidden = true;
    say($(".apply-result"), "Changed since the dry run: try it again before applying.", "");
  }
}

function reset(title) {
  $("#apply-title").textContent = title;
  triedText = null;
  fluxOwner = null;
  $("[data-apply]").disabled = true;
  $("[data-force]").hidden = true;
  $(".apply-conflicts").hidden = true;
  $(".apply-diff").hidden = true;
  $(".apply-flux").hidden = true;
  say($(".apply-result"), "", "");
  say($(".apply-flux-result"), "", "");
}

function open() {
  startEditor();
  if (!dialog.open) dialog.showModal();
  if (editor) editor.focus(); else $("#apply-yaml").focus();
}

async function send(url, body) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": csrfToken() },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  return { ok: response.ok, status: response.status, answer };
}

function errorOf(result) {
  return (result.answer.error && result.answer.error.message) || "Failed (HTTP " + result.status + ")";
}

function request(force) {
  const body = { mode: state.mode, yaml: text() };
  if (state.mode === "edit") {
    for (const key of ["group", "version", "resource", "namespace", "name"]) {
      if (state[key]) body[key] = state[key];
    }
  } else if (dialog.dataset.namespace) {
    body.namespace = dialog.dataset.namespace;
  }
  if (force) body.force = true;
  return body;
}

// The unified diff, line by line, as text (nothing from the answer is markup).
function showDiff(unified) {
  const pre = $(".apply-diff pre");
  pre.replaceChildren();
  const lines = unified ? unified.split("\n") : [];
  for (const line of lines) {
    const span = document.createElement("span");
    if (line.startsWith("+") && !line.startsWith("+++")) span.className = "diff-add";
    else if (line.startsWith("-") && !line.startsWith("---")) span.className = "diff-del";
    else if (line.startsWith("@@")) span.className = "diff-hunk";
    span.textContent = line + "\n";
    pre.append(span);
  }
  if (!lines.length) pre.textContent = "No change: the API server would store the object as it is.";
  $(".apply-diff").hidden = false;
}

function showConflicts(conflicts, mayForce) {
  const section = $(".apply-conflicts");
  const body = section.querySelector("tbody");
  body.replaceChildren();
  for (const conflict of conflicts) {
    const row = document.createElement("tr");
    for (const value of [conflict.field, conflict.manager]) {
      const cell = document.createElement("td");
      const code = document.createElement("code");
      code.textContent = value;
      cell.append(code);
      row.append(cell);
    }
    body.append(row);
  }
  section.querySelector(".apply-conflicts-note").textContent = mayForce
    ? "Another field manager set these fields to other values. Force apply takes them over; the diff below is what a forced apply stores."
    : "Another field manager set these fields to other values. Only a maintainer can force an apply over them: set them back, or ask a maintainer.";
  section.hidden = !conflicts.length;
}

async function dryRun() {
  const output = $(".apply-result");
  const button = $("[data-dry-run]");
  button.disabled = true;
  say(output, "Asking the API server for a dry run…", "");
  const tried = text();
  try {
    const result = await send(dialog.dataset.previewUrl, request(false));
    if (!result.ok) {
      say(output, errorOf(result), "failed");
      $(".apply-diff").hidden = true;
      $(".apply-conflicts").hidden = true;
      return;
    }
    const { answer } = result;
    showDiff(answer.unified);
    showConflicts(answer.conflicts || [], answer.mayForce);
    triedText = tried;
    const conflicted = (answer.conflicts || []).length > 0;
    $("[data-apply]").disabled = conflicted;
    $("[data-apply]").title = conflicted ? "Conflicts: see below" : "";
    $("[data-force]").hidden = !(conflicted && answer.mayForce);
    const count = (answer.diff || []).length;
    say(output, conflicted ? "Dry run: conflicts with another field manager."
      : "Dry run: " + count + " field" + (count === 1 ? "" : "s") + " would change.", conflicted ? "failed" : "done");
  } catch (err) {
    say(output, "Failed: " + err.message, "failed");
  } finally {
    button.disabled = false;
  }
}

async function apply(force) {
  const output = $(".apply-result");
  if (force && !(await confirmDialog("Force the apply? The conflicting fields become agentwatch's, and their other manager's next change to them conflicts in turn.", "Force apply"))) return;
  for (const b of dialog.querySelectorAll("[data-apply], [data-force]")) b.disabled = true;
  say(output, "Applying…", "");
  try {
    const result = await send(dialog.dataset.applyUrl, request(force));
    if (result.ok) {
      say(output, result.answer.message.charAt(0).toUpperCase() + result.answer.message.slice(1) + ".", "done");
      showDiff(result.answer.unified);
      $(".apply-conflicts").hidden = true;
      $("[data-force]").hidden = true;
      triedText = null;
      return;
    }
    const error = result.answer.error || {};
    if (error.conflicts) showConflicts(error.conflicts, false);
    say(output, errorOf(result), "failed");
  } catch (err) {
    say(output, "Failed: " + err.message, "failed");
  } finally {
    $("[data-apply]").disabled = triedText === null;
    $("[data-force]").disabled = false;
  }
}

function showFlux(owner, kind, name) {
  fluxOwner = owner;
  if (!owner) return;
  $(".apply-flux-text").textContent = "Flux manages this " + kind + " (" + owner.kind + " " +
    owner.namespace + "/" + owner.name + "): its next reconcile undoes an edit made here. " +
    "Change it in Git, or suspend the " + owner.kind + " first.";
  $(".apply-flux").hidden = false;
}

async function suspendOwner() {
  const output = $(".apply-flux-result");
  if (!fluxOwner) return;
  const owner = fluxOwner;
  if (!(await confirmDialog("Suspend " + owner.kind + " " + owner.namespace + "/" + owner.name + "? Flux stops reconciling it until it is resumed.", "Suspend"))) return;
  say(output, "Suspending…", "");
  const result = await send(dialog.dataset.actionsUrl, { action: "suspend", group: owner.group,
    version: owner.version, resource: owner.resource, namespace: owner.namespace, name: owner.name });
  say(output, result.ok ? "Suspended " + owner.kind + " " + owner.namespace + "/" + owner.name + "." : errorOf(result),
    result.ok ? "done" : "failed");
}

// A panel's Edit: the object's manifest as the editor shows it.
async function edit(panel, button) {
  const watch = JSON.parse(panel.dataset.objectWatch);
  const target = { group: watch.group || "", version: watch.version, resource: watch.resource,
    namespace: panel.dataset.namespace || "", name: panel.dataset.name };
  const query = new URLSearchParams(target);
  if (!target.namespace) query.delete("namespace");
  button.disabled = true;
  try {
    const response = await fetch(dialog.dataset.manifestUrl + "?" + query.toString(),
      { credentials: "same-origin", headers: { "Accept": "application/json" } });
    const answer = await response.json().catch(() => ({}));
    const where = (target.namespace ? target.namespace + "/" : "") + target.name;
    reset("Edit " + (answer.kind || target.resource) + " " + where);
    state = { mode: "edit", ...target };
    if (!response.ok) {
      setText("");
      say($(".apply-result"), (answer.error && answer.error.message) || "Cannot read it (HTTP " + response.status + ")", "failed");
    } else {
      setText(answer.yaml);
      showFlux(answer.flux, answer.kind, target.name);
    }
    open();
  } finally {
    button.disabled = false;
  }
}

function create() {
  reset("Create from YAML");
  state = { mode: "create" };
  const namespace = dialog.dataset.namespace;
  setText("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: example\n" +
    (namespace ? "  namespace: " + namespace + "\n" : "") + "data:\n  key: value\n");
  open();
}

if (dialog) {
  // The panels come and go: their Edit buttons show once this module is here.
  const showButtons = () => document.querySelectorAll("[data-edit][hidden]").forEach((b) => { b.hidden = false; });
  showButtons();
  const panels = document.getElementById("object-panel") || document.body;
  new MutationObserver(showButtons).observe(panels, { childList: true, subtree: true });
  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-edit], [data-create-yaml]");
    if (!button) return;
    if (button.matches("[data-create-yaml]")) create();
    else edit(button.closest(".panel"), button);
  });
  $("#apply-yaml").addEventListener("input", changed);
  $("[data-dry-run]").addEventListener("click", dryRun);
  $("[data-apply]").addEventListener("click", () => apply(false));
  $("[data-force]").addEventListener("click", () => apply(true));
  $("[data-suspend-owner]").addEventListener("click", suspendOwner);
}
