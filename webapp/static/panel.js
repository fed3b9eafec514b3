// agentwatch Cluster tab: the side panel of one object. Tabs (Overview · YAML · Events ·
// Logs · Activity) under a sticky head with the object's actions; its summary, events and
// relations kept live through the page's watches (watch.js); pod logs; actions confirmed
// in the page's one dialog. The open panel and its tab live in the address (`panel=`,
// `tab=`): reload, back/forward and a pasted link bring it back. watch.js asks for a
// panel with a `cluster:open` event on #cluster.
"use strict";

(function () {
  const root = document.getElementById("cluster");
  if (!root) return;

  const LOG_LIMIT = 5000;          // lines kept in the browser per log view
  const PANEL_RETRY = 3000;        // ms before a panel whose cluster was out of reach asks again
  const RELATIONS_DEBOUNCE = 800;  // ms: a burst of changes fetches the tree once
  const SEARCH_DEBOUNCE = 120;
  const RELATIONS_POLL = 10;       // s: the tree's refresh when its watches are not followed

  // From watch.js (window.agentwatchCluster), once it has started.
  let Table, TableSink, refreshAges, csrfToken;

  // --- small helpers ---------------------------------------------------------------------

  // Saves `text` as a file named `filename` (the manifest, the log).
  function download(text, filename, type) {
    const url = URL.createObjectURL(new Blob([text], { type: type || "text/plain" }));
    const link = document.createElement("a");
    link.href = url;
    link.download = filename;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  function parseHTML(html) {
    const template = document.createElement("template");
    template.innerHTML = html;
    return template.content;
  }

  // The address's panel state: {ref, tab} (ref null when no panel is open).
  function addressState() {
    const params = new URLSearchParams(location.search);
    return { ref: params.get("panel"), tab: params.get("tab") || "overview" };
  }

  // The page's address with the panel's keys set (or removed); other keys (the list's
  // kind, namespace, filter, sort) are left as they are. Slashes stay readable.
  function addressWith(ref, tab) {
    const params = new URLSearchParams(location.search);
    if (ref) params.set("panel", ref); else params.delete("panel");
    if (ref && tab && tab !== "overview") params.set("tab", tab); else params.delete("tab");
    const query = params.toString().replace(/%2F/g, "/");
    return location.pathname + (query ? "?" + query : "") + location.hash;
  }

  // --- pod logs: a bounded buffer fed by server-sent events ------------------------------

  class LogView {
    constructor(section, url, pod) {
      this.section = section;
      this.form = section.querySelector("form.logs-controls");
      this.pre = section.querySelector("pre.logs");
      this.empty = section.querySelector(".logs-empty");
      this.status = section.querySelector(".logs-status");
      this.stopButton = section.querySelector(".logs-stop");
      this.pauseButton = section.querySelector(".logs-pause");
      this.startButton = section.querySelector(".logs-start");
      this.downloadButton = section.querySelector(".logs-download");
      this.search = section.querySelector('input[name="search"]');
      this.only = section.querySelector('input[name="only"]');
      this.matchesLabel = section.querySelector(".logs-matches");
      this.prevButton = section.querySelector(".logs-prev");
      this.nextButton = section.querySelector(".logs-next");
      this.url = section.dataset.logsUrl || url;
      this.pod = pod;
      this.lines = [];       // {container, text}: the last LOG_LIMIT lines, shown or not
      this.pending = [];     // lines not drawn yet
      this.paused = false;   // paused: keep reading into the buffer, stop drawing
      this.source = null;
      this.started = false;
      this.streaming = false;
      this.frame = 0;
      this.query = "";
      this.matches = [];     // <mark> elements of the search, in order
      this.current = -1;
      this.notes = [];       // containers that could not be read
      this.form.addEventListener("submit", (event) => { event.preventDefault(); this.start(); });
      for (const field of this.form.querySelectorAll("select, input")) {
        if (field.name === "wrap") field.addEventListener("change", () => this.pre.classList.toggle("wrap", field.checked));
        else field.addEventListener("change", () => { if (this.started) this.start(); });
      }
      this.stopButton.addEventListener("click", () => this.finish("Stopped. Read again to follow the log."));
      this.pauseButton.addEventListener("click", () => this.setPaused(!this.paused));
      this.startButton.addEventListener("click", () => this.start());
      this.downloadButton.addEventListener("click", () => download(
        this.lines.map((l) => this.prefix(l) + l.text).join("\n") + "\n", this.downloadButton.dataset.filename));
      let timer = 0;
      this.search.addEventListener("input", () => {
        clearTimeout(timer);
        timer = setTimeout(() => this.setQuery(this.search.value), SEARCH_DEBOUNCE);
      });
      this.search.addEventListener("keydown", (event) => {
        if (event.key !== "Enter") return;
        event.preventDefault();
        clearTimeout(timer);
        if (this.search.value !== this.query) this.setQuery(this.search.value);
        this.step(event.shiftKey ? -1 : 1);
      });
      this.prevButton.addEventListener("click", () => this.step(-1));
      this.nextButton.addEventListener("click", () => this.step(1));
      this.only.addEventListener("change", () => { this.redraw(); this.showMatches(); });
    }

    // Whether a line is drawn: with "Only matching lines", those holding the search.
    shown(line) {
      return !(this.only.checked && this.query) || line.text.toLowerCase().includes(this.query);
    }

    settings() {
      const data = new FormData(this.form);
      const container = data.get("container") || "";
      const multiple = this.form.querySelector('select[name="container"]').options.length > 1;
      const common = {
        namespace: this.pod.namespace, container, tailLines: data.get("tailLines") || "",
        follow: String(data.has("follow")), timestamps: String(data.has("timestamps")),
        previous: String(data.has("previous")),
      };
      // A workload's log: every pod of it, each line naming its pod.
      const workload = this.section.dataset.workload ? JSON.parse(this.section.dataset.workload) : null;
      if (workload) {
        return { container, all: true, pods: true, follow: data.has("follow"),
          query: new URLSearchParams({ ...common, ...workload }) };
      }
      return {
        container, all: !container && multiple, follow: data.has("follow"),
        query: new URLSearchParams({
          ...common, pod: this.pod.name, allContainers: String(!container && multiple),
        }),
      };
    }

    start() {
      this.close();
      const settings = this.settings();
      this.started = true;
      this.all = settings.all;
      this.lines = [];
      this.pending = [];
      this.notes = [];
      this.pre.textContent = "";
      this.matches = [];
      this.current = -1;
      this.showMatches();
      this.setPaused(false);
      this.say("Connecting to the log of " + (settings.pods ? "every pod" : settings.all ? "every container" : settings.container || "the pod") + "…");
      this.showEmpty("Waiting for the log…");
      const source = new EventSource(this.url + "?" + settings.query.toString());
      this.source = source;
      this.streaming = true;
      this.buttons();
      source.onmessage = (message) => {
        let item;
        try { item = JSON.parse(message.data); } catch (err) { return; }
        if (item.type === "line") this.push(item.pod || item.container || null, item.line);
        else if (item.type === "notice") { this.notes.push((item.pod || item.container) + ": " + item.message); this.describe(settings); }
        else if (item.type === "end") this.finish(settings.follow ? "The log stream ended." : "End of the log.");
        else if (item.type === "error") this.finish((item.error && item.error.message) || "Cannot read the logs.", true);
      };
      source.onopen = () => this.describe(settings);
      source.onerror = () => {
        // No automatic reconnect: it would replay the tail and repeat lines.
        if (this.source === source) this.finish("The log stream was interrupted. Read again to resume.", true);
      };
    }

    // What the status line and the empty state say while the log is open.
    describe(settings) {
      if (!this.streaming) return;
      const notes = this.notes.length ? " Not read: " + this.notes.join("; ") + "." : "";
      this.say((settings.follow ? "Following the log" + (settings.pods ? " of every pod" : settings.all ? " of every container" : "") + "." : "Reading the log…") + notes);
      if (!this.lines.length) this.showEmpty(settings.follow ? "No log lines yet. New lines appear here as they are written." : "Reading…");
    }

    close() {
      if (this.source) { this.source.close(); this.source = null; }
      this.streaming = false;
    }

    // The stream is over (ended, failed, stopped): nothing to pause any more.
    finish(message, failed) {
      this.close();
      if (this.paused) this.setPaused(false);
      if (!this.lines.length) this.showEmpty(failed ? "No log lines." : "This log is empty.");
      this.buttons();
      const notes = this.notes.length ? " Not read: " + this.notes.join("; ") + "." : "";
      this.say(message + notes, failed);
    }

    buttons() {
      this.stopButton.hidden = !this.streaming;
      this.pauseButton.hidden = !this.streaming;
      this.startButton.hidden = this.streaming;
      this.downloadButton.disabled = !this.lines.length;
    }

    say(text, failed) {
      this.status.textContent = text;
      this.status.classList.toggle("error-text", Boolean(failed));
    }

    showEmpty(text) {
      this.empty.textContent = text;
      this.empty.hidden = false;
      this.pre.hidden = true;
    }

    prefix(line) { return line.container && this.all ? "[" + line.container + "] " : ""; }

    push(container, text) {
      const line = { container, text };
      this.lines.push(line);
      if (this.lines.length > LOG_LIMIT) this.lines.splice(0, this.lines.length - LOG_LIMIT);
      if (this.lines.length === 1) { this.empty.hidden = true; this.pre.hidden = false; this.downloadButton.disabled = false; }
      if (this.paused) return;
      this.pending.push(line);
      if (this.pending.length > LOG_LIMIT) this.pending.splice(0, this.pending.length - LOG_LIMIT);
      if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
    }

    atBottom() { return this.pre.scrollHeight - this.pre.scrollTop - this.pre.clientHeight < 24; }

    // One <span class="line"> per line; the search's matches in <mark>.
    lineElement(line) {
      const span = document.createElement("span");
      span.className = "line";
      const prefix = this.prefix(line);
      if (prefix) {
        const tag = document.createElement("span");
        tag.className = "log-container";
        tag.textContent = prefix;
        span.append(tag);
      }
      const text = line.text;
      if (!this.query) {
        span.append(text + "\n");
        return span;
      }
      const lower = text.toLowerCase();
      let at = 0;
      for (let found = lower.indexOf(this.query); found !== -1; found = lower.indexOf(this.query, at)) {
        if (found > at) span.append(text.slice(at, found));
        const mark = document.createElement("mark");
        mark.textContent = text.slice(found, found + this.query.length);
        span.append(mark);
        this.matches.push(mark);
        at = found + this.query.length;
      }
      span.append(text.slice(at) + "\n");
      return span;
    }

    draw() {
      this.frame = 0;
      const follow = this.atBottom();
      const fragment = document.createDocumentFragment();
      for (const line of this.pending) if (this.shown(line)) fragment.append(this.lineElement(line));
      this.pending = [];
      this.pre.append(fragment);
      let extra = this.pre.childNodes.length - LOG_LIMIT;
      while (extra-- > 0) this.pre.firstChild.remove();
      if (this.query) { this.matches = this.matches.filter((m) => m.isConnected); this.showMatches(); }
      if (follow) this.pre.scrollTop = this.pre.scrollHeight;  // only while at the bottom
    }

    redraw() {
      this.pre.textContent = "";
      this.matches = [];
      this.pending = this.lines.slice();
      this.draw();
    }

    setQuery(text) {
      this.query = text.toLowerCase();
      this.current = -1;
      const top = this.pre.scrollTop;
      this.redraw();
      this.pre.scrollTop = top;
      this.showMatches();
      if (this.matches.length) this.step(1);
    }

    showMatches() {
      const count = this.matches.length;
      this.matchesLabel.textContent = !this.query ? "" : count ? (this.current + 1 > 0 ? (this.current + 1) + " of " : "") + count + (count === 1 ? " match" : " matches") : "No match";
      this.prevButton.disabled = this.nextButton.disabled = !count;
    }

    step(direction) {
      if (!this.matches.length) return;
      if (this.matches[this.current]) this.matches[this.current].classList.remove("current");
      this.current = (this.current + direction + this.matches.length) % this.matches.length;
      const mark = this.matches[this.current];
      mark.classList.add("current");
      mark.scrollIntoView({ block: "nearest" });
      this.showMatches();
    }

    setPaused(paused) {
      this.paused = paused;
      this.pauseButton.textContent = paused ? "Resume" : "Pause";
      this.pauseButton.setAttribute("aria-pressed", String(paused));
      if (!paused && this.pre.childNodes.length !== Math.min(this.lines.filter((l) => this.shown(l)).length, LOG_LIMIT)) {
        // Catch up with everything read meanwhile (the buffer kept the last LOG_LIMIT).
        this.redraw();
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

  // --- the summary: the object's table row, as a list of its cells ----------------------

  class Summary {
    constructor(dl) {
      this.dl = dl;
    }

    fill(html) {
      if (!this.dl || !html) return;
      const row = parseHTML(html.trim()).firstElementChild;
      if (!row) return;
      for (const cell of row.querySelectorAll("td[data-col]")) {
        const dd = this.dl.querySelector('dd[data-col="' + cell.dataset.col + '"]');
        if (dd) dd.replaceChildren(...cell.childNodes);
      }
      refreshAges(this.dl);
    }
  }

  // --- the side panel --------------------------------------------------------------------

  class Panel {
    constructor(el, manager, urls) {
      this.el = el;
      this.manager = manager;
      this.urls = urls;
      this.watchIds = [];
      this.relationWatchIds = [];
      this.logs = null;
      this.refreshTimer = null;
      this.relationsTimer = null;
      this.relationsPoll = null;
      this.relationsFetch = 0;
      this.objectGone = false;
      this.detailsFetch = 0;      // number of the latest details fetch: older answers are dropped
      this.latestVersion = null;  // the object's resourceVersion, as the panel's watch last saw it
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
        '<button type="button" class="panel-close" aria-label="Close details" data-close>✕</button></div></header>' +
        '<p class="muted panel-loading">Loading…</p></div>';
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
          '<button type="button" class="panel-close" aria-label="Close details" data-close>✕</button></div></header><p class="error" role="alert"></p></div>';
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
      const section = root.querySelector('section.k8s-section[data-resource="' + panel.dataset.kind + '"]');
      if (!section) return;
      for (const row of section.querySelectorAll("tbody.rows > tr")) {
        if (row.dataset.name === panel.dataset.name && (row.dataset.namespace || "") === panel.dataset.namespace) row.classList.add("selected");
      }
    }

    wire(panel) {
      this.panel = panel;
      const summary = new Summary(panel.querySelector("dl.panel-summary"));
      const template = panel.querySelector("template.summary-row");
      if (template) summary.fill(template.innerHTML);
      const events = new Table(panel.querySelector("#panel-events"));
      const eventsCount = panel.querySelector('#panel-tab-events .count');
      const gone = panel.querySelector(".panel-gone");
      const within = this.parentWatch && { watchId: this.parentWatch, namespace: panel.dataset.namespace, name: panel.dataset.name };
      const objectSink = {
        start() {}, reset() {}, error() {}, stale() {}, synced() {},
        event: (event, html) => {
          const obj = event.object || {};
          gone.hidden = event.type !== "DELETED";
          // Nothing can be done to an object that is gone.
          const actions = panel.querySelector(".panel-actions");
          if (actions) actions.hidden = event.type === "DELETED";
          // A deleted object has no relations left to read (the server would answer 404).
          this.objectGone = event.type === "DELETED";
          if (event.type !== "DELETED") summary.fill(html);
          // ADDED too: a watch (re)started after a change lists the object anew.
          this.latestVersion = event.type === "DELETED" ? null : (obj.metadata || {}).resourceVersion || null;
          if (this.latestVersion && this.latestVersion !== shownVersion(panel)) this.refreshDetails(panel);
          this.scheduleRelations(panel);
        },
      };
      this.watchIds.push(this.manager.add(JSON.parse(panel.dataset.objectWatch), objectSink, within));
      const eventsSink = new TableSink(events);
      const countEvents = () => { if (eventsCount) eventsCount.textContent = String(events.rows().length); };
      this.watchIds.push(this.manager.add(JSON.parse(panel.dataset.eventsWatch), {
        start: () => eventsSink.start(), reset: () => eventsSink.reset(), error: (e) => eventsSink.error(e),
        stale: (s) => eventsSink.stale(s),
        synced: () => { eventsSink.synced(); countEvents(); },
        event: (event, html) => { eventsSink.event(event, html); countEvents(); },
      }));
      const logs = panel.querySelector(".panel-logs");
      if (logs) this.logs = new LogView(logs, this.urls.logs, { namespace: panel.dataset.namespace, name: panel.dataset.name });
      const output = panel.querySelector(".action-result");
      const watch = JSON.parse(panel.dataset.objectWatch);
      const target = { group: watch.group, version: watch.version, resource: watch.resource,
        namespace: panel.dataset.namespace, name: panel.dataset.name };
      panel.querySelectorAll("button[data-action]").forEach((button) => {
        button.addEventListener("click", () => act(this.urls.actions, button, target, output, (ok, action) => {
          // Done in the cluster: the toggle says what comes next at once (the object's
          // details confirm it when they are fetched again).
          if (ok && (action === "suspend" || action === "resume")) setToggle(panel, action === "suspend");
          if (this.tab === "activity") this.loadActivity(panel);
          this.scheduleRelations(panel);
        }));
      });
      const scale = panel.querySelector(".scale-control input");
      if (scale) scale.addEventListener("keydown", (event) => {
        if (event.key === "Enter") { event.preventDefault(); panel.querySelector('button[data-action="scale"]').click(); }
      });
      const manifestButton = panel.querySelector(".download-manifest");
      if (manifestButton) manifestButton.addEventListener("click", () => download(
        panel.querySelector("#panel-manifest").textContent, manifestButton.dataset.filename, "application/yaml"));
      // Tabs: a click, or the arrow keys between them.
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
      this.loadRelations(panel);
      refreshAges(panel);
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
      if (tab === "activity") this.loadActivity(panel);
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

    // --- relations: fetched again when what they were read from changes ---

    scheduleRelations(panel) {
      clearTimeout(this.relationsTimer);
      this.relationsTimer = setTimeout(() => this.loadRelations(panel), RELATIONS_DEBOUNCE);
    }

    async loadRelations(panel) {
      clearTimeout(this.relationsTimer);
      if (this.objectGone) return;
      const number = ++this.relationsFetch;
      const box = panel.querySelector(".relations");
      let html;
      try {
        const response = await fetch(panel.dataset.relationsUrl, { headers: { "HX-Request": "true" } });
        if (!response.ok) throw new Error("HTTP " + response.status);
        html = await response.text();
      } catch (err) {
        if (number === this.relationsFetch && panel.isConnected && !box.querySelector(".relations-body")) {
          box.textContent = "Cannot load the relations: " + err.message;
        }
        return;
      }
      if (number !== this.relationsFetch || !panel.isConnected) return;
      box.innerHTML = html;
      const body = box.querySelector(".relations-body");
      if (body) this.followRelations(panel, JSON.parse(body.dataset.watches || "[]"), Number(body.dataset.poll || 0));
    }

    // Watches the kinds the tree was read from (the same shared watches the server read);
    // a change after their first state fetches the tree again. Over HTTP streaming the
    // page's one stream carries few watches, the page's own lists first: the tree is
    // fetched again every `poll` seconds instead.
    followRelations(panel, watches, poll) {
      if (this.manager.mode === "stream" && watches.length) { poll = poll || RELATIONS_POLL; watches = []; }
      const wanted = new Map(watches.map((w) => [JSON.stringify(w), w]));
      const kept = [];
      for (const entry of this.relationWatchIds) {
        if (wanted.has(entry.key)) { kept.push(entry); wanted.delete(entry.key); }
        else this.manager.remove(entry.id);
      }
      for (const [key, params] of wanted) {
        let synced = false;
        const sink = {
          start() { synced = false; }, reset() {}, error() {}, stale() {},
          synced() { synced = true; },
          event: () => { if (synced) this.scheduleRelations(panel); },
        };
        kept.push({ key, id: this.manager.add(params, sink) });
      }
      this.relationWatchIds = kept;
      clearInterval(this.relationsPoll);
      this.relationsPoll = poll ? setInterval(() => this.loadRelations(panel), poll * 1000) : null;
    }

    // The details part (labels, annotations, manifest) is rendered by the server: fetched
    // again, at most every 500 ms, until it shows the version the watch saw last: a change
    // seen during a fetch fetches again, and a failed fetch is tried again twice.
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
          if (response.ok) {
            const fragment = parseHTML(html);
            const manifest = fragment.querySelector('template[data-part="manifest"]');
            if (manifest) {
              panel.querySelector("#panel-manifest").textContent = manifest.content.textContent;
              manifest.remove();
            }
            panel.querySelector(".panel-details").replaceChildren(fragment);
            syncActions(panel);
          } else failed = response.status >= 500;
        } catch (err) {
          failed = true;
        }
        if (!current() || !this.latestVersion || this.latestVersion === shownVersion(panel)) return;
        if (failed) { if (failures < 2) this.refreshDetails(panel, failures + 1); }
        else if (this.latestVersion !== wanted) this.refreshDetails(panel);  // changed meanwhile
      }, 500);
    }

    // `push: false`: the address already says no panel (back/forward) or another one follows.
    close(options) {
      const push = !options || options.push !== false;
      const wasOpen = this.ref !== null;
      clearTimeout(this.retryTimer);
      this.opening++;
      this.latestVersion = null;
      this.objectGone = false;
      this.detailsFetch++;  // an answer still on its way is for a panel that is gone
      this.relationsFetch++;
      for (const id of this.watchIds) this.manager.remove(id);
      for (const entry of this.relationWatchIds) this.manager.remove(entry.id);
      this.watchIds = [];
      this.relationWatchIds = [];
      if (this.logs) { this.logs.close(); this.logs = null; }
      clearTimeout(this.refreshTimer);
      clearTimeout(this.relationsTimer);
      clearInterval(this.relationsPoll);
      this.refreshTimer = this.relationsTimer = this.relationsPoll = null;
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

  // The resourceVersion the panel's details were rendered from.
  function shownVersion(panel) {
    const details = panel.querySelector(".panel-details [data-resource-version]");
    return details ? details.dataset.resourceVersion : null;
  }

  // Suspend/Resume and the scale field follow the object as its details say it is now.
  function syncActions(panel) {
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

  function init() {
    const cluster = window.agentwatchCluster;
    if (!cluster) return;  // watch.js did not start (no #cluster)
    ({ Table, TableSink, refreshAges, csrfToken } = cluster);
    const urls = { object: root.dataset.objectUrl, logs: root.dataset.logsUrl, actions: root.dataset.actionsUrl };
    const panel = new Panel(document.getElementById("object-panel"), cluster.manager, urls);
    root.addEventListener("cluster:open", (event) => {
      const { row, params, watchId } = event.detail;
      panel.open({ params, namespace: row.dataset.namespace || "", name: row.dataset.name || "" },
        { row, watchId, push: true });
    });
    window.addEventListener("popstate", () => panel.follow());
    if (addressState().ref) panel.follow();
    cluster.panel = panel;
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
