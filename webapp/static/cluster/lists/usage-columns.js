// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// usage-columns.js: CPU and memory columns of the Pods, Nodes and workloads' lists, from
// metrics.k8s.io (docs/operate.md, "Resource usage"): the page asks the server every few
// seconds while it shows them (metrics-server has no watch); each row gets its usage as
// `kubectl top` prints it and a bar against its limit (pods), allocatable (nodes) or its
// pods' limits (a workload: the sum of its running pods).
// Sorting by them is the server's (a view sorted by usage); the strip counts the pods near
// their memory limit. A cluster without metrics-server gets one sentence instead.

import { cpuText, memoryText } from "../usage-format.js";

const WORKLOADS = new Set(["deployments", "statefulsets", "daemonsets", "replicasets", "jobs"]);
const USAGE_KINDS = new Set(["pods", "nodes", ...WORKLOADS]);
// Not "cpu" and "memory": the Nodes list has CPU and memory columns of its own (what a node
// offers); there the usage columns say "used".
const COLUMNS = [["cpu-usage", "CPU"], ["memory-usage", "Memory"]];
const RETRY = 30000;  // ms before asking again after the server could not answer
const LIVE_WAIT = 5000;  // ms usage waits for the lists to be live before it asks anyway

// The namespaces a list of watches shows (none: every namespace).
function namespacesOf(watches) {
  return watches.map((params) => params.namespace).filter(Boolean);
}

// One usage cell: the number, and a bar against `max` when there is one.
function usageCell(col, value, max, text, of) {
  const td = document.createElement("td");
  td.dataset.col = col;
  td.className = "usage-cell";
  td.dataset.sort = value === null ? "" : String(value);
  if (value === null) { td.textContent = "—"; return td; }
  const span = document.createElement("span");
  span.className = "usage";
  if (max > 0) {
    const meter = document.createElement("meter");
    meter.min = 0;
    meter.max = max;
    meter.value = Math.min(value, max);
    meter.high = max * 0.8;
    meter.optimum = 0;
    meter.setAttribute("aria-label", text + " of " + of);
    span.append(meter, " ");
    span.title = text + " of " + of;
  }
  span.append(text);
  td.append(span);
  return td;
}

class UsageColumns {
  constructor(root, list, table, note) {
    this.root = root;
    this.list = list;
    this.table = table;
    this.note = note;
    this.kind = table.section.dataset.resource;
    this.values = new Map();   // "namespace/name" (pods) or name (nodes) -> cells' values
    this.shown = false;
  }

  // The columns' headers, before Age (where kubectl top's numbers sit beside the status).
  addHeaders() {
    if (this.shown) return;
    this.shown = true;
    const head = this.table.table.querySelector("thead tr");
    const age = head.querySelector('th[data-col="age"]');
    const sortCol = this.table.table.dataset.sortCol || "";
    const sortDir = this.table.table.dataset.sortDir || "asc";
    for (const [col, label] of COLUMNS) {
      const th = document.createElement("th");
      th.dataset.col = col;
      th.className = "usage-col";
      th.setAttribute("data-numeric", "");
      th.setAttribute("aria-sort", col !== sortCol ? "none" : sortDir === "desc" ? "descending" : "ascending");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.textContent = this.kind === "nodes" ? label + " used" : label;
      button.title = label + " in use (metrics.k8s.io), against the " + (this.kind === "nodes" ? "node's allocatable"
        : this.kind === "pods" ? "pod's limit" : "limits of its running pods");
      button.addEventListener("click", () => this.list.sortBy(col));
      th.append(button);
      head.insertBefore(th, age);
    }
    for (const td of this.table.table.querySelectorAll("tbody.table-state td[colspan]")) {
      td.colSpan = Number(td.colSpan) + COLUMNS.length;
    }
    new MutationObserver((changes) => {
      for (const change of changes) for (const row of change.addedNodes) if (row.nodeType === 1) this.fill(row);
    }).observe(this.table.body, { childList: true });
  }

  keyOf(row) {
    const key = (row.dataset.namespace || "") + "/" + (row.dataset.name || "");
    return this.kind === "nodes" ? row.dataset.name || "" : this.kind === "pods" ? key : this.kind + "/" + key;
  }

  // A row's usage cells, made or made again.
  fill(row) {
    if (!row.dataset || row.dataset.key === undefined) return;
    const found = this.values.get(this.keyOf(row));
    const age = row.querySelector('td[data-col="age"]');
    for (const [col] of COLUMNS) {
      let cell;
      if (!found) cell = usageCell(col, null);
      else if (col === "cpu-usage") cell = usageCell(col, found.cpu, found.cpuMax, cpuText(found.cpu), found.cpuOf);
      else cell = usageCell(col, found.memory, found.memoryMax, memoryText(found.memory), found.memoryOf);
      const old = row.querySelector('td[data-col="' + col + '"]');
      if (old) {
        if (old.dataset.sort === cell.dataset.sort && old.childElementCount === cell.childElementCount) continue;
        old.replaceWith(cell);
      } else {
        row.insertBefore(cell, age);
      }
    }
  }

  show(body) {
    this.values = new Map();
    if (this.kind === "nodes") {
      for (const [name, [cpu, memory, cpuAlloc, memoryAlloc]] of Object.entries(body.nodes || {})) {
        this.values.set(name, { cpu, memory, cpuMax: cpuAlloc, memoryMax: memoryAlloc,
          cpuOf: cpuText(cpuAlloc) + " allocatable", memoryOf: memoryText(memoryAlloc) + " allocatable" });
      }
    } else if (WORKLOADS.has(this.kind)) {
      for (const [key, [cpu, memory, memoryLimit, pods]] of Object.entries(body.workloads || {})) {
        if (!key.startsWith(this.kind + "/")) continue;
        const over = " over " + pods + (pods === 1 ? " pod" : " pods");
        this.values.set(key, { cpu, memory, cpuMax: 0, memoryMax: memoryLimit,
          cpuOf: "", memoryOf: memoryText(memoryLimit) + " limit" + over });
      }
    } else {
      for (const [key, [cpu, memory, cpuLimit, memoryLimit, cpuRequest, memoryRequest]] of Object.entries(body.pods || {})) {
        this.values.set(key, { cpu, memory,
          cpuMax: cpuLimit || cpuRequest, memoryMax: memoryLimit || memoryRequest,
          cpuOf: cpuLimit ? cpuText(cpuLimit) + " limit" : cpuText(cpuRequest) + " requested",
          memoryOf: memoryLimit ? memoryText(memoryLimit) + " limit" : memoryText(memoryRequest) + " requested" });
      }
    }
    this.addHeaders();
    for (const row of this.table.body.children) this.fill(row);
  }
}

// Polls one scope's usage (its namespaces) for the lists and the strip that show it.
class UsageFeed {
  constructor(url, namespaces, note) {
    this.url = new URL(url, location.href);
    for (const ns of namespaces) this.url.searchParams.append("namespace", ns);
    this.note = note;
    this.readers = [];
    this.timer = 0;
  }

  async read() {
    let delay = RETRY;
    try {
      const response = await fetch(this.url, { credentials: "same-origin", headers: { "Accept": "application/json" } });
      const body = await response.json();
      if (!response.ok) throw new Error((body.error && body.error.message) || "HTTP " + response.status);
      delay = Math.max(1000, (body.interval || 15) * 1000);
      if (!body.available) {
        this.say(body.message || "CPU and memory usage cannot be shown.");
      } else {
        this.say("");
        for (const reader of this.readers) reader(body);
      }
    } catch (err) {
      this.say("CPU and memory usage could not be read: " + err.message);
    }
    this.timer = setTimeout(() => this.read(), document.hidden ? Math.max(delay, RETRY) : delay);
  }

  say(text) {
    if (this.note.textContent !== text) this.note.textContent = text;
    this.note.hidden = !text;
  }
}

// The strip's entry of pods near their memory limit (hidden at none).
function nearLimitEntry(strip) {
  const li = document.createElement("li");
  li.className = "usage-near";
  li.dataset.usageNear = "";
  li.hidden = true;
  li.title = "Pods using at least 90% of their memory limit (metrics.k8s.io)";
  const count = document.createElement("strong");
  count.className = "summary-count";
  li.append(count, " pods near their memory limit");
  strip.append(li);
  return (body) => {
    count.textContent = String(body.nearLimit || 0);
    li.hidden = !body.nearLimit;
  };
}

// `start` once the page's lists are live (the badge says so), or after LIVE_WAIT: the
// first read of usage (a poll's first LISTs) does not compete with the lists' first render.
function whenLive(start) {
  const badge = document.getElementById("watch-badge");
  let started = false;
  const go = () => { if (!started) { started = true; start(); } };
  if (!badge || badge.dataset.state === "connected") { go(); return; }
  const observer = new MutationObserver(() => {
    if (badge.dataset.state === "connected") { observer.disconnect(); go(); }
  });
  observer.observe(badge, { attributes: true, attributeFilter: ["data-state"] });
  setTimeout(() => { observer.disconnect(); go(); }, LIVE_WAIT);
}

// Every list of the page that can show usage, and the strip: one feed per namespaces shown.
export function showUsage(root, list) {
  const url = root.dataset.usageUrl;
  if (!url || root.dataset.live !== "true") return;
  const note = document.createElement("p");
  note.className = "usage-note muted";
  note.id = "usage-note";
  note.setAttribute("role", "status");
  note.hidden = true;
  const feeds = new Map();
  const feedOf = (watches) => {
    const namespaces = namespacesOf(watches).sort();
    const key = namespaces.join(",");
    if (!feeds.has(key)) feeds.set(key, new UsageFeed(url, namespaces, note));
    return feeds.get(key);
  };
  for (const table of list.tables) {
    if (!USAGE_KINDS.has(table.section.dataset.resource)) continue;
    const columns = new UsageColumns(root, list, table, note);
    feedOf(JSON.parse(table.section.dataset.watches || "[]")).readers.push((body) => columns.show(body));
  }
  const pods = root.querySelector('[data-summary="pods"]');
  if (pods) feedOf(JSON.parse(pods.dataset.watches || "[]")).readers.push(nearLimitEntry(pods.parentElement));
  if (!feeds.size) return;
  const first = root.querySelector("section.k8s-section") || root.querySelector(".summary-strip");
  if (first) first.before(note);
  whenLive(() => { for (const feed of feeds.values()) feed.read(); });
}
