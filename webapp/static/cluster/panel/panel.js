// cluster/panel/: the side panel of one object: its tabs, live summary, events and
// relations, pod logs and actions (see docs/panel.md and docs/ui.md).
// panel.js: the panel itself (#object-panel): opened from a row of the page (main.js) or
// from the address, its tabs (Overview · YAML · Events · Logs · Activity) under a sticky
// head with the object's actions, its watches added to the page's and dropped on close.

import { saveText } from "../../lib/save-text.js";
import { refreshAges } from "../ages.js";
import { TableSink } from "../lists/sinks.js";
import { Table } from "../lists/table.js";
import { wireActions } from "./actions.js";
import { loadChanges } from "./changes.js";
import { addressState, addressWith } from "./address.js";
import { Details } from "./details.js";
import { LogView } from "./logs.js";
import { wireNodeCare } from "./node-care.js";
import { Relations } from "./relations.js";
import { Summary } from "./summary.js";
import { TerminalView } from "./terminal.js";
import { panelUsage } from "./usage.js";

const PANEL_RETRY = 3000;  // ms before a panel whose cluster was out of reach asks again

const CLOSE_BUTTON = '<button type="button" class="panel-close" aria-label="Close details" data-close>✕</button>';

export class Panel {
  // `root`: #cluster (its tables); `manager`: the page's WatchManager; `urls`: {object,
  // logs, actions}.
  constructor(el, root, manager, urls) {
    this.el = el;
    this.root = root;
    this.manager = manager;
    this.urls = urls;
    this.watchIds = [];
    this.logs = null;
    this.terminal = null;       // the Shell tab of a pod (terminal.js)
    this.details = null;        // the open panel's Details and Relations
    this.relations = null;
    this.ref = null;            // the open panel's `panel=` value
    this.opening = 0;
    this.panel = null;
    this.tab = "overview";
    // Esc: shortcuts.js clicks the last visible [data-close], the panel's close button.
  }

  // `what`: {ref} (a deep link) or {params, namespace, name} (a row of the page).
  // `options`: {row, watchId, tab, push}: push adds a history entry.
  async open(what, options) {
    options = options || {};
    this.close({ push: false });
    const query = what.ref ? new URLSearchParams({ ref: what.ref }) : new URLSearchParams({
      group: what.params.group || "", version: what.params.version, resource: what.params.resource,
      namespace: what.namespace || "", name: what.name || "",
    });
    const tab = options.tab || "overview";
    query.set("tab", tab);
    const opening = ++this.opening;
    this.parentWatch = options.watchId || null;
    if (options.row) options.row.classList.add("selected");
    this.el.hidden = false;
    // Closable while it loads too (Esc, the button): the answer is then dropped.
    this.el.innerHTML = '<div class="panel"><header class="panel-head"><div class="panel-title"><div class="panel-name"></div>' +
      CLOSE_BUTTON + '</div></header><p class="muted panel-loading">Loading…</p></div>';
    this.wireClose();
    let html;
    try {
      const response = await fetch(this.urls.object + "?" + query.toString(), { headers: { "HX-Request": "true" } });
      html = await response.text();
      if (!response.ok && (response.headers.get("Content-Type") || "").startsWith("application/json")) {
        const body = JSON.parse(html);
        throw new Error((body.error && body.error.message) || "HTTP " + response.status);
      }
    } catch (err) {
      if (opening !== this.opening) return;
      this.el.innerHTML = '<div class="panel panel-error"><header class="panel-head"><div class="panel-title"><div class="panel-name"></div>' +
        CLOSE_BUTTON + '</div></header><p class="error" role="alert"></p></div>';
      this.el.querySelector(".error").textContent = "Cannot load the details: " + err.message;
      this.ref = what.ref || null;
      this.wireClose();
      return;
    }
    if (opening !== this.opening) return;  // another object was opened meanwhile
    this.el.innerHTML = html;
    this.wireClose();
    if (this.el.querySelector(".panel-error[data-retry]")) {
      // The cluster was out of reach: ask again, the same way, until it answers.
      this.ref = what.ref || null;
      this.retryTimer = setTimeout(() => {
        if (opening === this.opening) this.open(what, { tab, row: options.row, watchId: options.watchId });
      }, PANEL_RETRY);
      return;
    }
    const panel = this.el.querySelector(".panel[data-object-watch]");
    this.ref = panel ? panel.dataset.ref : what.ref || null;
    if (options.push && this.ref) history.pushState({ panel: this.ref }, "", addressWith(this.ref, tab));
    if (panel) {
      this.wire(panel);
      this.markRow(panel);
    }
    this.el.focus();
  }

  wireClose() {
    this.el.querySelectorAll("[data-close]").forEach((b) => b.addEventListener("click", () => this.close()));
  }

  // The page's row of this object, if its table shows it.
  markRow(panel) {
    document.querySelectorAll("tr.selected").forEach((row) => row.classList.remove("selected"));
    const section = this.root.querySelector('section.k8s-section[data-resource="' + panel.dataset.kind + '"]');
    if (!section) return;
    for (const row of section.querySelectorAll("tbody.rows > tr")) {
      if (row.dataset.name === panel.dataset.name && (row.dataset.namespace || "") === panel.dataset.namespace) row.classList.add("selected");
    }
  }

  wire(panel) {
    this.panel = panel;
    const details = this.details = new Details(panel);
    const relations = this.relations = new Relations(panel, this.manager);
    const summary = new Summary(panel.querySelector("dl.panel-summary"));
    const template = panel.querySelector("template.summary-row");
    if (template) summary.fill(template.innerHTML);
    const gone = panel.querySelector(".panel-gone");
    const within = this.parentWatch && { watchId: this.parentWatch, namespace: panel.dataset.namespace, name: panel.dataset.name };
    // The object's own watch: its snapshot holds the object, or it is gone (deleted before
    // the watch began: no DELETED event will ever say so).
    let seen = false;
    const objectSink = {
      start() { seen = false; }, reset() { seen = false; }, error() {}, stale() {},
      synced: () => { if (!seen) objectSink.event({ type: "DELETED" }, ""); },
      event: (event, html) => {
        const obj = event.object || {};
        const deleted = event.type === "DELETED";
        seen = !deleted;
        gone.hidden = !deleted;
        // Nothing can be done to an object that is gone.
        const actions = panel.querySelector(".panel-actions");
        if (actions) actions.hidden = deleted;
        relations.objectGone = deleted;
        if (!deleted) summary.fill(html);
        // ADDED too: a watch (re)started after a change lists the object anew.
        details.saw(deleted ? null : (obj.metadata || {}).resourceVersion || null);
        relations.schedule();
      },
    };
    this.watchIds.push(this.manager.add(JSON.parse(panel.dataset.objectWatch), objectSink, within));
    this.watchEvents(panel);
    const logs = panel.querySelector(".panel-logs");
    if (logs) this.logs = new LogView(logs, this.urls.logs, { namespace: panel.dataset.namespace, name: panel.dataset.name });
    const shell = panel.querySelector(".panel-terminal");
    if (shell) this.terminal = new TerminalView(shell);
    wireActions(panel, this.urls.actions, () => {
      if (this.tab === "activity") this.loadActivity(panel);
      relations.schedule();
    });
    wireNodeCare(panel, () => {
      if (this.tab === "activity") this.loadActivity(panel);
    });
    const manifestButton = panel.querySelector(".download-manifest");
    if (manifestButton) manifestButton.addEventListener("click", () => saveText(
      panel.querySelector("#panel-manifest").textContent, manifestButton.dataset.filename, "application/yaml"));
    const tabs = this.wireTabs(panel);
    // A link to another object of the tree opens its panel here.
    panel.addEventListener("click", (event) => {
      const link = event.target.closest("a[data-panel-link]");
      if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
      const ref = new URL(link.href, location.href).searchParams.get("panel");
      if (!ref) return;
      event.preventDefault();
      this.open({ ref }, { push: true });
    });
    const selected = tabs.find((t) => t.getAttribute("aria-selected") === "true");
    this.select(panel, selected ? selected.dataset.tab : "overview", false);
    relations.load();
    this.usage = panelUsage(panel, this.root.dataset.usageUrl);  // pods and nodes
    refreshAges(panel);
  }

  // The Events tab: a live table of the object's events, counted in its tab.
  watchEvents(panel) {
    const events = new Table(panel.querySelector("#panel-events"));
    const eventsCount = panel.querySelector('#panel-tab-events .count');
    const eventsSink = new TableSink(events);
    const countEvents = () => { if (eventsCount) eventsCount.textContent = String(events.rows().length); };
    this.watchIds.push(this.manager.add(JSON.parse(panel.dataset.eventsWatch), {
      start: () => eventsSink.start(), reset: () => eventsSink.reset(), error: (e) => eventsSink.error(e),
      stale: (s) => eventsSink.stale(s),
      synced: () => { eventsSink.synced(); countEvents(); },
      event: (event, html) => { eventsSink.event(event, html); countEvents(); },
    }));
  }

  // Tabs: a click, or the arrow keys between them. Returns the tab buttons.
  wireTabs(panel) {
    const tabs = Array.from(panel.querySelectorAll('[role="tab"]'));
    tabs.forEach((button, index) => {
      button.addEventListener("click", () => this.select(panel, button.dataset.tab, true));
      button.addEventListener("keydown", (event) => {
        const step = { ArrowRight: 1, ArrowLeft: -1, Home: -index, End: tabs.length - 1 - index }[event.key];
        if (step === undefined) return;
        event.preventDefault();
        const next = tabs[(index + step + tabs.length) % tabs.length];
        next.focus();
        this.select(panel, next.dataset.tab, true);
      });
    });
    return tabs;
  }

  // Shows `tab`; `record`: the address says so (replacing its entry, not adding one).
  select(panel, tab, record) {
    this.tab = tab;
    for (const button of panel.querySelectorAll('[role="tab"]')) {
      const on = button.dataset.tab === tab;
      button.setAttribute("aria-selected", String(on));
      button.tabIndex = on ? 0 : -1;
    }
    for (const section of panel.querySelectorAll('[role="tabpanel"]')) section.hidden = section.id !== "tabpanel-" + tab;
    if (tab === "logs" && this.logs && !this.logs.started) this.logs.start();
    if (tab === "shell" && this.terminal) this.terminal.refit();
    if (tab === "activity") this.loadActivity(panel);
    if (tab === "changes") loadChanges(panel);
    if (record && this.ref) history.replaceState(history.state, "", addressWith(this.ref, tab));
  }

  async loadActivity(panel) {
    const box = panel.querySelector("#tabpanel-activity .activity");
    try {
      const response = await fetch(panel.dataset.activityUrl, { headers: { "HX-Request": "true" } });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const html = await response.text();
      if (panel.isConnected) box.innerHTML = html;
      document.dispatchEvent(new CustomEvent("htmx:load", { detail: { elt: box } }));  // relative times
    } catch (err) {
      if (panel.isConnected) box.textContent = "Cannot load the activity: " + err.message;
    }
  }

  // `push: false`: the address already says no panel (back/forward) or another one follows.
  close(options) {
    const push = !options || options.push !== false;
    const wasOpen = this.ref !== null;
    clearTimeout(this.retryTimer);
    this.opening++;
    if (this.details) { this.details.close(); this.details = null; }
    if (this.relations) { this.relations.close(); this.relations = null; }
    if (this.usage) { this.usage.close(); this.usage = null; }
    for (const id of this.watchIds) this.manager.remove(id);
    this.watchIds = [];
    if (this.logs) { this.logs.close(); this.logs = null; }
    if (this.terminal) { this.terminal.close(); this.terminal = null; }
    document.querySelectorAll("tr.selected").forEach((row) => row.classList.remove("selected"));
    this.ref = null;
    this.panel = null;
    this.el.hidden = true;
    this.el.innerHTML = "";
    if (push && wasOpen && addressState().ref) history.pushState({}, "", addressWith(null));
  }

  // Back, forward, or a page opened with `panel=`: show what the address says.
  follow() {
    const state = addressState();
    if (!state.ref) { if (this.ref !== null || !this.el.hidden) this.close({ push: false }); return; }
    if (state.ref === this.ref && this.panel) { this.select(this.panel, state.tab, false); return; }
    this.open({ ref: state.ref }, { tab: state.tab, push: false });
  }
}
