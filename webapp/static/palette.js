// The command palette (docs/fleet.md): Ctrl+K (or / where the page has no list filter)
// opens it anywhere. It finds objects in every cluster the person may view (GET /search:
// names, kinds, namespaces, labels), the app's pages, and the actions of the object whose
// side panel is open. Arrow keys move, Enter opens, Esc closes. A result opens the object's
// side panel in its cluster, by URL.
const DEBOUNCE_MS = 60;

let dialog = null;
let input = null;
let list = null;
let note = null;
let items = [];  // {label, where, run}
let selected = -1;
let pending = null;
let timer = null;
let asked = "";

function typing(el) {
  return el instanceof HTMLElement && (el.isContentEditable
    || el.matches("input:not([type=checkbox]):not([type=radio]):not([type=button]):not([type=submit]), textarea, select"));
}

function visible(el) {
  return el.checkVisibility ? el.checkVisibility() : el.offsetParent !== null;
}

function build() {
  dialog = document.createElement("dialog");
  dialog.className = "palette";
  dialog.id = "palette";
  dialog.setAttribute("aria-label", "Search and commands");
  input = document.createElement("input");
  input.type = "search";
  input.placeholder = "Find objects, pages, actions…";
  input.setAttribute("aria-label", "Search");
  input.setAttribute("role", "combobox");
  input.setAttribute("aria-expanded", "true");
  input.setAttribute("aria-controls", "palette-results");
  input.setAttribute("autocomplete", "off");
  list = document.createElement("ul");
  list.className = "palette-results";
  list.id = "palette-results";
  list.setAttribute("role", "listbox");
  note = document.createElement("p");
  note.className = "palette-note";
  note.setAttribute("role", "status");
  dialog.append(input, list, note);
  document.body.append(dialog);
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(query, DEBOUNCE_MS);
  });
  input.addEventListener("keydown", onKey);
  list.addEventListener("click", (event) => {
    const li = event.target instanceof Element ? event.target.closest("li[data-i]") : null;
    if (li) choose(Number(li.dataset.i));
  });
  dialog.addEventListener("click", (event) => { if (event.target === dialog) dialog.close(); });
}

// The open side panel's actions (restart, scale, delete...): run by clicking them.
function panelActions() {
  const group = Array.from(document.querySelectorAll(".panel-actions")).find(visible);
  if (!group) return [];
  const target = (group.getAttribute("aria-label") || "").replace(/^Actions on /, "");
  return Array.from(group.querySelectorAll("button[data-action]")).filter(visible)
    .map((button) => ({ label: button.textContent.trim(), where: target, group: "Actions",
                        run: () => button.click() }));
}

function render() {
  list.replaceChildren();
  let group = null;
  items.forEach((item, i) => {
    if (item.group !== group) {
      group = item.group;
      const head = document.createElement("li");
      head.className = "group";
      head.setAttribute("role", "presentation");
      head.textContent = group;
      list.append(head);
    }
    const li = document.createElement("li");
    li.setAttribute("role", "option");
    li.id = "palette-item-" + i;
    li.dataset.i = String(i);
    const label = document.createElement("span");
    label.className = "label";
    label.textContent = item.label;
    const where = document.createElement("span");
    where.className = "where";
    where.textContent = item.where || "";
    li.append(label, where);
    list.append(li);
  });
  select(items.length ? 0 : -1);
}

function select(i) {
  selected = i;
  for (const li of list.querySelectorAll("li[role=option]")) {
    const on = Number(li.dataset.i) === i;
    li.setAttribute("aria-selected", on ? "true" : "false");
    if (on) li.scrollIntoView({ block: "nearest" });
  }
  if (i >= 0) input.setAttribute("aria-activedescendant", "palette-item-" + i);
  else input.removeAttribute("aria-activedescendant");
}

function choose(i) {
  const item = items[i];
  if (!item) return;
  dialog.close();
  item.run();
}

function onKey(event) {
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    if (items.length) {
      const step = event.key === "ArrowDown" ? 1 : -1;
      select((selected + step + items.length) % items.length);
    }
    event.preventDefault();
  } else if (event.key === "Enter") {
    clearTimeout(timer);
    if (input.value !== asked) { query().then(() => choose(selected)); } else { choose(selected); }
    event.preventDefault();
  }
}

function matching(list_, words) {
  return list_.filter((item) => words.every((w) => item.label.toLowerCase().includes(w)
    || (item.where || "").toLowerCase().includes(w)));
}

async function query() {
  const text = input.value;
  asked = text;
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  const actions = matching(panelActions(), words);
  if (pending) pending.abort();
  pending = new AbortController();
  let found = { objects: [], pages: [], unavailable: [] };
  try {
    const response = await fetch("/search?q=" + encodeURIComponent(text),
      { signal: pending.signal, headers: { Accept: "application/json" } });
    if (response.ok) found = await response.json();
  } catch (error) {
    if (error.name === "AbortError") return;
  }
  if (text !== input.value) return;  // a newer query is on its way
  const go = (url) => () => window.location.assign(url);
  items = actions.concat(
    found.objects.map((o) => ({
      label: o.name, group: "Objects", attention: o.attention,
      where: `${o.kind} · ${o.namespace ? o.namespace + " · " : ""}${o.agent}`
        + (o.attention ? " · needs attention" : ""),
      run: go(o.url),
    })),
    found.pages.map((p) => ({ label: p.title, where: "", group: "Pages", run: go(p.url) })));
  render();
  const out = (found.unavailable || []).map((u) => `${u.agent}: ${u.problem}`);
  note.textContent = words.length && !found.objects.length ? "No object matches." : "";
  if (out.length) note.textContent += (note.textContent ? " " : "") + "Not searched: " + out.join("; ");
}

export function openPalette() {
  if (!dialog) build();
  if (dialog.open) return;
  dialog.showModal();
  input.select();
  query();
}

document.addEventListener("keydown", (event) => {
  if (event.key.toLowerCase() === "k" && (event.ctrlKey || event.metaKey) && !event.altKey) {
    event.preventDefault();
    openPalette();
    return;
  }
  if (event.key !== "/" || event.defaultPrevented || event.ctrlKey || event.metaKey
      || event.altKey || typing(event.target)) return;
  const modal = Array.from(document.querySelectorAll("dialog[open]")).some((d) => d.matches(":modal"));
  if (modal) return;
  event.preventDefault();
  openPalette();
});
