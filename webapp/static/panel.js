// agentwatch Cluster tab: the side panel of one object: its summary and events kept live
// through the page's watches (watch.js), pod logs, and actions confirmed in the page's
// dialog. watch.js asks for a panel with a `cluster:open` event on #cluster.
"use strict";

(function () {
  const root = document.getElementById("cluster");
  if (!root) return;

  const LOG_LIMIT = 5000;               // lines kept in the browser per log view

  // --- pod logs: a bounded buffer fed by server-sent events ------------------------------

  class LogView {
    constructor(section, url, pod) {
      this.form = section.querySelector("form.logs-controls");
      this.pre = section.querySelector("pre.logs");
      this.status = section.querySelector(".logs-status");
      this.stopButton = section.querySelector(".logs-stop");
      this.pauseButton = section.querySelector(".logs-pause");
      this.url = url;
      this.pod = pod;
      this.lines = [];       // the last LOG_LIMIT lines, shown or not
      this.pending = [];     // lines not drawn yet
      this.paused = false;   // paused: keep reading into the buffer, stop drawing
      this.source = null;
      this.frame = 0;
      this.form.addEventListener("submit", (event) => { event.preventDefault(); this.start(); });
      this.form.querySelector('select[name="container"]').addEventListener("change", () => { if (this.source) this.start(); });
      this.stopButton.addEventListener("click", () => this.stop("Stopped."));
      this.pauseButton.addEventListener("click", () => this.togglePause());
    }

    start() {
      this.stop();
      const data = new FormData(this.form);
      const query = new URLSearchParams({
        namespace: this.pod.namespace, pod: this.pod.name, container: data.get("container") || "",
        tailLines: data.get("tailLines") || "", follow: String(data.has("follow")),
        timestamps: String(data.has("timestamps")), previous: String(data.has("previous")),
      });
      this.lines = [];
      this.pending = [];
      this.pre.textContent = "";
      this.setPaused(false);
      this.say("Loading logs of " + (data.get("container") || "the pod") + "…");
      const source = new EventSource(this.url + "?" + query.toString());
      this.source = source;
      this.stopButton.hidden = false;
      this.pauseButton.hidden = false;
      source.onmessage = (message) => {
        let item;
        try { item = JSON.parse(message.data); } catch (err) { return; }
        if (item.type === "line") this.push(item.line);
        else if (item.type === "end") this.stop(data.has("follow") ? "The log stream ended." : "End of log.");
        else if (item.type === "error") this.stop((item.error && item.error.message) || "Cannot read the logs.", true);
      };
      source.onopen = () => this.say(data.has("follow") ? "Following." : "");
      source.onerror = () => {
        // No automatic reconnect: it would replay the tail and repeat lines.
        if (this.source === source) this.stop("The log stream was interrupted. Show logs again to resume.", true);
      };
    }

    stop(message, failed) {
      if (this.source) { this.source.close(); this.source = null; }
      this.stopButton.hidden = true;
      if (message !== undefined) this.say(message, failed);
    }

    say(text, failed) {
      this.status.textContent = text;
      this.status.classList.toggle("error-text", Boolean(failed));
    }

    push(line) {
      this.lines.push(line);
      if (this.lines.length > LOG_LIMIT) this.lines.splice(0, this.lines.length - LOG_LIMIT);
      if (this.paused) return;
      this.pending.push(line);
      if (this.pending.length > LOG_LIMIT) this.pending.splice(0, this.pending.length - LOG_LIMIT);
      if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
    }

    atBottom() { return this.pre.scrollHeight - this.pre.scrollTop - this.pre.clientHeight < 24; }

    draw() {
      this.frame = 0;
      const follow = this.atBottom();
      const fragment = document.createDocumentFragment();
      for (const line of this.pending) fragment.append(document.createTextNode(line + "\n"));
      this.pending = [];
      this.pre.append(fragment);
      let extra = this.pre.childNodes.length - LOG_LIMIT;
      while (extra-- > 0) this.pre.firstChild.remove();
      if (follow) this.pre.scrollTop = this.pre.scrollHeight;  // only while at the bottom
    }

    togglePause() { this.setPaused(!this.paused); }

    setPaused(paused) {
      this.paused = paused;
      this.pauseButton.textContent = paused ? "Resume" : "Pause";
      this.pauseButton.setAttribute("aria-pressed", String(paused));
      if (!paused && this.pre.childNodes.length !== Math.min(this.lines.length, LOG_LIMIT)) {
        // Catch up with everything read meanwhile (the buffer kept the last LOG_LIMIT).
        this.pre.textContent = "";
        this.pending = this.lines.slice();
        this.draw();
        this.pre.scrollTop = this.pre.scrollHeight;
      }
    }
  }

  // --- actions: confirm, send, show the outcome ------------------------------------------

  // `label`: the confirming button says what it does ("Delete pod"), not "Confirm".
  function confirmDialog(text, label) {
    const dialog = document.getElementById("confirm-dialog");
    if (!dialog || typeof dialog.showModal !== "function") return Promise.resolve(window.confirm(text));
    dialog.querySelector(".confirm-message").textContent = text;
    dialog.querySelector(".confirm-ok").textContent = label || "Confirm";
    dialog.returnValue = "";
    dialog.showModal();
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
    });
  }

  async function act(url, button, target, output) {
    if (!(await confirmDialog(button.dataset.confirm, button.textContent.trim()))) return;
    button.disabled = true;
    output.className = "action-result";
    output.textContent = "Working…";
    try {
      const response = await fetch(url, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": csrfToken() },
        body: JSON.stringify({ action: button.dataset.action, ...target }),
      });
      const body = await response.json().catch(() => ({}));
      if (response.ok) {
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
    }
  }

  // --- the side panel --------------------------------------------------------------------

  class Panel {
    constructor(el, manager, urls) {
      this.el = el;
      this.manager = manager;
      this.urls = urls;
      this.watchIds = [];
      this.logs = null;
      this.refreshTimer = null;
      this.detailsFetch = 0;      // number of the latest details fetch: older answers are dropped
      this.latestVersion = null;  // the object's resourceVersion, as the panel's watch last saw it
      this.selected = null;
      document.addEventListener("keydown", (event) => { if (event.key === "Escape" && !el.hidden && !document.querySelector("dialog[open]")) this.close(); });
    }

    async open(row, watchParams, watchId) {
      this.close();
      const query = new URLSearchParams({
        group: watchParams.group || "", version: watchParams.version, resource: watchParams.resource,
        namespace: row.dataset.namespace || "", name: row.dataset.name || "",
      });
      this.selected = row.dataset.key;
      this.parentWatch = watchId;
      row.classList.add("selected");
      this.el.hidden = false;
      this.el.innerHTML = '<p class="muted panel-loading">Loading…</p>';
      let html;
      try {
        const response = await fetch(this.urls.object + "?" + query.toString(), { headers: { "HX-Request": "true" } });
        html = await response.text();
      } catch (err) {
        html = '<div class="panel"><p class="error"></p></div>';
        this.el.innerHTML = html;
        this.el.querySelector(".error").textContent = "Cannot load the details: " + err.message;
        return;
      }
      if (this.selected !== row.dataset.key) return;  // another row was opened meanwhile
      this.el.innerHTML = html;
      this.el.focus();
      this.el.querySelectorAll("[data-close]").forEach((b) => b.addEventListener("click", () => this.close()));
      const panel = this.el.querySelector(".panel[data-object-watch]");
      if (panel) this.wire(panel);
    }

    wire(panel) {
      const summary = new Table(panel.querySelector("#panel-summary"));
      const events = new Table(panel.querySelector("#panel-events"));
      const gone = panel.querySelector(".panel-gone");
      const within = this.parentWatch && { watchId: this.parentWatch, namespace: panel.dataset.namespace, name: panel.dataset.name };
      this.watchIds.push(this.manager.add(JSON.parse(panel.dataset.objectWatch), new TableSink(summary, {
        object: (type, obj) => {
          gone.hidden = type !== "DELETED";
          // ADDED too: a watch (re)started after a change lists the object anew.
          this.latestVersion = type === "DELETED" ? null : (obj.metadata || {}).resourceVersion || null;
          if (this.latestVersion && this.latestVersion !== shownVersion(panel)) this.refreshDetails(panel);
          syncToggle(panel, obj);
        },
      }), within));
      this.watchIds.push(this.manager.add(JSON.parse(panel.dataset.eventsWatch), new TableSink(events)));
      const logs = panel.querySelector(".panel-logs");
      if (logs) this.logs = new LogView(logs, this.urls.logs, { namespace: panel.dataset.namespace, name: panel.dataset.name });
      const output = panel.querySelector(".action-result");
      const watch = JSON.parse(panel.dataset.objectWatch);
      const target = { group: watch.group, version: watch.version, resource: watch.resource,
        namespace: panel.dataset.namespace, name: panel.dataset.name };
      panel.querySelectorAll("button[data-action]").forEach((button) => {
        button.addEventListener("click", () => act(this.urls.actions, button, target, output));
      });
      refreshAges(panel);
    }

    // Status and spec are YAML rendered by the server: fetched again, at most every 500 ms,
    // until they show the version the watch saw last: a change seen during a fetch fetches
    // again, and a failed fetch is tried again twice.
    refreshDetails(panel, failures = 0) {
      if (this.refreshTimer) return;
      this.refreshTimer = setTimeout(async () => {
        this.refreshTimer = null;
        const fetchNumber = ++this.detailsFetch;
        const wanted = this.latestVersion;
        const current = () => fetchNumber === this.detailsFetch && panel.isConnected;
        let failed = false;
        try {
          const response = await fetch(panel.dataset.detailsUrl, { headers: { "HX-Request": "true" } });
          const html = await response.text();
          if (!current()) return;  // a later fetch owns the section
          if (response.ok) panel.querySelector(".panel-details").innerHTML = html;
          else failed = response.status >= 500;
        } catch (err) {
          failed = true;
        }
        if (!current() || !this.latestVersion || this.latestVersion === shownVersion(panel)) return;
        if (failed) { if (failures < 2) this.refreshDetails(panel, failures + 1); }
        else if (this.latestVersion !== wanted) this.refreshDetails(panel);  // changed meanwhile
      }, 500);
    }

    close() {
      this.latestVersion = null;
      this.detailsFetch++;  // an answer still on its way is for a panel that is gone
      for (const id of this.watchIds) this.manager.remove(id);
      this.watchIds = [];
      if (this.logs) { this.logs.stop(); this.logs = null; }
      clearTimeout(this.refreshTimer);
      this.refreshTimer = null;
      document.querySelectorAll("tr.selected").forEach((row) => row.classList.remove("selected"));
      this.selected = null;
      this.el.hidden = true;
      this.el.innerHTML = "";
    }
  }

  // The resourceVersion the panel's status and spec were rendered from.
  function shownVersion(panel) {
    const details = panel.querySelector(".panel-details [data-resource-version]");
    return details ? details.dataset.resourceVersion : null;
  }

  // Suspend and Resume follow the object's spec.suspend as it changes.
  function syncToggle(panel, obj) {
    const button = panel.querySelector('button[data-action="suspend"], button[data-action="resume"]');
    if (!button || !obj.spec) return;
    const suspended = Boolean(obj.spec.suspend);
    const action = suspended ? "resume" : "suspend";
    if (button.dataset.action === action) return;
    button.dataset.action = action;
    button.textContent = suspended ? "Resume" : "Suspend";
    button.dataset.confirm = button.dataset.confirm.replace(/^\w+/, button.textContent);
  }

  function init() {
    const cluster = window.agentwatchCluster;
    if (!cluster) return;  // watch.js did not start (no #cluster)
    ({ Table, TableSink, refreshAges, csrfToken } = cluster);
    const urls = { object: root.dataset.objectUrl, logs: root.dataset.logsUrl, actions: root.dataset.actionsUrl };
    const panel = new Panel(document.getElementById("object-panel"), cluster.manager, urls);
    root.addEventListener("cluster:open", (event) => {
      const { row, params, watchId } = event.detail;
      panel.open(row, params, watchId);
    });
    cluster.panel = panel;
  }

  // From watch.js (window.agentwatchCluster), once it has started.
  let Table, TableSink, refreshAges, csrfToken;

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
