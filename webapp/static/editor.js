// The configuration editor of the Settings tab: CodeMirror over the form's text area.
//
// Progressive enhancement: the <textarea name="config"> stays the form's field (hidden and
// kept up to date), so without this script, or without CodeMirror, the form works as plain
// HTML. What the script adds: line numbers and YAML highlighting, the server's problems
// marked at their line:column (checked as you type, with the same validation as a save),
// problem lists whose items move the cursor, keys and values suggested from the schema, and
// the changes against the version in force shown before a save.
//
// The Content-Security-Policy refuses inline styles; CodeMirror writes its base styles into
// a <style> element, which carries the nonce that this page's policy allows (the server
// gives it to this script tag; see webapp/headers.py). Our own look is in editor.css.
// A module (_editor_head.html), for the CSRF token's reader (lib/csrf.js).

import { csrfToken } from "./lib/csrf.js";
import { followTheme, yamlBase } from "./lib/yaml-editor.js";

// This module's own tag (a module has no document.currentScript): browsers hide the
// nonce from the markup, not from the element's `nonce` property.
const ownTag = Array.from(document.scripts).find((script) => script.src === import.meta.url);
const STYLE_NONCE = (ownTag && ownTag.nonce) || "";
const CHECK_DELAY_MS = 700;

// The browser and the server compare texts as the server stores them.
function normalized(text) {
  const trimmed = text.replace(/\r\n?/g, "\n").replace(/\s+$/, "");
  return trimmed ? trimmed + "\n" : "";
}

// 1-based line and column (as the server reports them) to a document position.
function positionOf(doc, line, column) {
  const number = Math.min(Math.max(1, line || 1), doc.lines);
  const row = doc.line(number);
  return row.from + Math.min(Math.max(0, (column || 1) - 1), row.length);
}

// What a problem marks: the word or value starting at its position (at least one
// character, so a mark shows even at the end of a line).
function rangeOf(doc, problem) {
  if (!problem.line) return { from: 0, to: Math.min(1, doc.length) };
  const from = positionOf(doc, problem.line, problem.column);
  const row = doc.lineAt(from);
  const rest = row.text.slice(from - row.from);
  const word = rest.match(/^[^\s,:{}[\]#]+/);
  let to = from + (word ? word[0].length : 0);
  if (to === from) to = Math.min(row.to, from + 1);
  return { from, to };
}

function diagnosticsOf(doc, problems) {
  return problems.map((problem) => {
    const { from, to } = rangeOf(doc, problem);
    return { from, to, severity: "error", message: problem.message };
  });
}

// Problems drawn by the server (a refused save, the Check button) as plain objects.
function problemsIn(root) {
  return Array.from(root.querySelectorAll(".config-problems > li")).map((item) => {
    const link = item.querySelector("[data-line]");
    const message = item.querySelector(".config-message");
    return {
      line: link ? Number(link.dataset.line) : null,
      column: link ? Number(link.dataset.column) : null,
      message: (message || item).textContent.trim(),
    };
  });
}

// The live check's answer, drawn like agentconfig/_check.html (text only: no markup
// from the answer reaches the page).
function renderCheck(target, answer) {
  target.replaceChildren();
  if (answer.ok) {
    const said = document.createElement("p");
    said.className = "flash";
    said.setAttribute("role", "status");
    said.textContent = "Valid." + answer.deprecations.map((d) => " Warning: " + d.message + ".").join("");
    target.append(said);
    return;
  }
  const box = document.createElement("div");
  box.className = "error";
  const head = document.createElement("p");
  const n = answer.problems.length;
  head.textContent = n + " problem" + (n === 1 ? "" : "s") + ":";
  const list = document.createElement("ul");
  list.className = "config-problems";
  for (const problem of answer.problems) {
    const item = document.createElement("li");
    if (problem.line) {
      const link = document.createElement("a");
      link.className = "config-position";
      link.href = "#config-text";
      link.dataset.line = problem.line;
      link.dataset.column = problem.column || 1;
      const code = document.createElement("code");
      code.textContent = problem.line + ":" + problem.column;
      link.append(code);
      item.append(link, " ");
    }
    const message = document.createElement("span");
    message.className = "config-message";
    message.textContent = problem.message;
    item.append(message);
    list.append(item);
  }
  box.append(head, list);
  target.append(box);
}

function start() {
  const CM = window.AgentwatchCodeMirror;
  const textarea = document.getElementById("config-text");
  const holder = document.getElementById("config-editor");
  const form = document.getElementById("config-form");
  if (!CM || !textarea || !holder || !form) return;
  const editable = !textarea.readOnly;
  const checkTarget = document.getElementById("config-check");
  const darkMode = new CM.Compartment();
  let controller = null;  // the live check in flight, aborted by a newer one

  // The server's validation, as a CodeMirror linter: the same rules as a save.
  async function serverCheck(view) {
    // Marks are placed in the text that was checked (CodeMirror drops them if it changed).
    const doc = view.state.doc;
    const text = doc.toString();
    if (controller) controller.abort();
    controller = new AbortController();
    let answer;
    try {
      const response = await fetch(holder.dataset.checkUrl, {
        method: "POST",
        signal: controller.signal,
        credentials: "same-origin",
        headers: { "Accept": "application/json", "X-CSRF-Token": csrfToken() },
        body: new URLSearchParams({ config: text }),
      });
      if (!response.ok) return [];
      answer = await response.json();
    } catch (error) {
      return [];  // aborted by a newer check, or offline: the save still validates
    }
    if (view.state.doc === doc) {
      if (checkTarget) renderCheck(checkTarget, answer);
      showValidity(answer.problems.length === 0);
      // The live check's list replaces a refused save's: the problems are listed once.
      const refusedList = document.querySelector("#config-problems .config-problems");
      if (refusedList && checkTarget) refusedList.remove();
    }
    return diagnosticsOf(doc, answer.problems);
  }

  // Save only what would be taken: while the text has problems the buttons say why.
  function showValidity(valid) {
    for (const button of document.querySelectorAll("#config-form button[type=submit], .config-review-save")) {
      button.disabled = !valid;
      button.title = valid ? "" : "Fix the problems listed below first";
    }
  }

  const shared = yamlBase(CM, STYLE_NONCE, darkMode);
  const view = new CM.EditorView({
    doc: textarea.value,
    parent: holder,
    extensions: [
      shared,
      CM.lineNumbers(), CM.highlightActiveLineGutter(), CM.foldGutter(), CM.lintGutter(),
      CM.highlightSpecialChars(), CM.history(), CM.drawSelection(), CM.indentOnInput(),
      CM.bracketMatching(), CM.highlightActiveLine(), CM.highlightSelectionMatches(),
      CM.rectangularSelection(), CM.crosshairCursor(),
      CM.keymap.of([...CM.defaultKeymap, ...CM.historyKeymap, ...CM.foldKeymap,
        ...CM.searchKeymap, ...CM.lintKeymap, CM.indentWithTab]),
      CM.EditorState.readOnly.of(!editable),
      CM.EditorView.editable.of(editable),
      CM.EditorView.contentAttributes.of({
        "aria-labelledby": "config-label", "aria-multiline": "true",
        "spellcheck": "false", "autocorrect": "off", "autocapitalize": "off",
      }),
      editable ? CM.linter(serverCheck, { delay: CHECK_DELAY_MS }) : [],
      editable ? completion(CM, holder.dataset.schemaUrl) : [],
      CM.EditorView.updateListener.of((update) => {
        if (update.docChanged) textarea.value = update.state.doc.toString();
      }),
    ],
  });
  textarea.hidden = true;
  holder.classList.add("enhanced");
  // The label named the text area: clicking it now focuses the editor.
  const label = document.getElementById("config-label");
  if (label) label.addEventListener("click", (event) => { event.preventDefault(); view.focus(); });

  // Problems the server drew with the page (a refused save) are marked at once.
  const refused = document.getElementById("config-problems");
  if (refused) {
    view.dispatch(CM.setDiagnostics(view.state, diagnosticsOf(view.state.doc, problemsIn(refused))));
  }

  function moveTo(line, column) {
    const pos = positionOf(view.state.doc, line, column);
    view.dispatch({ selection: { anchor: pos },
      effects: CM.EditorView.scrollIntoView(pos, { y: "center" }) });
    view.focus();
  }

  // Any problem's position, wherever it is listed, moves the cursor there.
  document.addEventListener("click", (event) => {
    const link = event.target instanceof Element ? event.target.closest(".config-problems [data-line]") : null;
    if (!link) return;
    event.preventDefault();
    moveTo(Number(link.dataset.line), Number(link.dataset.column));
  });

  // "Change access in the configuration": to the `user_access` section, added with
  // today's access when the text has none yet.
  document.addEventListener("click", (event) => {
    const link = event.target instanceof Element ? event.target.closest("[data-config-goto]") : null;
    if (!link) return;
    event.preventDefault();
    const key = link.dataset.configGoto;
    const doc = view.state.doc;
    for (let n = 1; n <= doc.lines; n++) {
      if (doc.line(n).text.startsWith(key + ":")) { moveTo(n, key.length + 2); return; }
    }
    if (!editable) { view.focus(); return; }
    const section = holder.dataset.accessSection || key + ":\n";
    const text = doc.toString();
    const head = text.length && !text.endsWith("\n") ? "\n" : "";
    view.dispatch({ changes: { from: doc.length, insert: head + section } });
    moveTo(view.state.doc.lineAt(doc.length + head.length).number, key.length + 2);
  });

  // The Check button's answer (htmx) marks its problems too.
  document.body.addEventListener("htmx:afterSwap", (event) => {
    if (event.detail.target === checkTarget) {
      view.dispatch(CM.setDiagnostics(view.state, diagnosticsOf(view.state.doc, problemsIn(checkTarget))));
    }
  });

  followTheme(CM, view, darkMode);

  if (editable) {
    if (refused) showValidity(false);  // a refused text stays refused until it changes
    setUpReview(CM, form, holder, view, shared);
    // Leaving with edits not saved asks first (the browser's own question); a save that
    // goes out does not (registered after the review's handler, which holds it back).
    let submitting = false;
    form.addEventListener("submit", (event) => { if (!event.defaultPrevented) submitting = true; });
    window.addEventListener("beforeunload", (event) => {
      if (submitting || normalized(view.state.doc.toString()) === normalized(holder.dataset.inForce || "")) return;
      event.preventDefault();
      event.returnValue = "";
    });
    for (const el of form.querySelectorAll(".config-keys")) el.hidden = false;
    // Checked as you type: the Check button has nothing to add.
    for (const el of form.querySelectorAll(".config-check")) el.hidden = true;
  }
}

// Keys and values suggested from the JSON Schema (editor-complete.js), fetched once.
function completion(CM, url) {
  const complete = window.AgentwatchConfigCompletion;
  if (!complete || !url) return [];
  let source = null;
  const loading = fetch(url, { credentials: "same-origin" })
    .then((response) => (response.ok ? response.json() : null))
    .then((schema) => { source = schema ? complete.source(schema) : null; })
    .catch(() => {});
  return CM.autocompletion({
    override: [async (context) => { await loading; return source ? source(context) : null; }],
  });
}

// Before a save, the changes against the version in force, side by side.
function setUpReview(CM, form, holder, view, shared) {
  const dialog = document.getElementById("config-review");
  const opener = form.querySelector(".config-review-open");
  if (!dialog || typeof dialog.showModal !== "function") return;
  const diff = dialog.querySelector(".config-review-diff");
  let merge = null;
  let saving = false;

  function open() {
    const original = normalized(holder.dataset.inForce || "");
    const current = normalized(view.state.doc.toString());
    if (merge) merge.destroy();
    const readOnly = (name) => [shared, CM.lineNumbers(), CM.EditorState.readOnly.of(true),
      CM.EditorView.editable.of(false), CM.EditorView.contentAttributes.of({ "aria-label": name })];
    merge = new CM.MergeView({
      a: { doc: original, extensions: readOnly(holder.dataset.inForceLabel) },
      b: { doc: current, extensions: readOnly("Your text") },
      parent: diff,
      collapseUnchanged: { margin: 2, minSize: 4 },
    });
    dialog.querySelector(".config-review-old").textContent = holder.dataset.inForceLabel;
    const same = original === current;
    dialog.querySelector(".config-review-summary").textContent = same
      ? "No changes against the version in force: saving keeps it."
      : "Lines removed are marked on the left, lines added on the right.";
    dialog.returnValue = "";
    dialog.showModal();
    dialog.querySelector(".config-review-save").focus();
  }

  if (opener) {
    opener.hidden = false;
    opener.addEventListener("click", open);
  }
  form.addEventListener("submit", (event) => {
    if (saving) return;
    event.preventDefault();
    open();
  });
  dialog.addEventListener("close", () => {
    if (dialog.returnValue !== "save") { view.focus(); return; }
    saving = true;
    form.requestSubmit();
  });
}

document.addEventListener("DOMContentLoaded", start);
