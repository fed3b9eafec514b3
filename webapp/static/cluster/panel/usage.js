// cluster/panel/: the side panel of one object: its tabs, live summary, events and
// relations, pod logs and actions (see docs/panel.md and docs/ui.md).
// usage.js: a pod's or a node's resource usage in its Overview (docs/operate.md,
// "Resource usage"): a pod's containers against their requests and limits, each with a
// sparkline of the samples the server kept since the panel opened (up to 15 minutes,
// in memory only); a node against its allocatable, and its pods with theirs. Read every
// few seconds while the panel is open (metrics-server has no watch).

import { cpuText, memoryText } from "../usage-format.js";

const SVG = "http://www.w3.org/2000/svg";
const SPARK_WIDTH = 120;
const SPARK_HEIGHT = 28;
const RETRY = 30000;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// "250m / 500m" with a bar (its title: "250m of 500m limit"), or the number alone when
// there is nothing to hold it to.
function amount(used, max, text, of) {
  const span = el("span", "usage");
  if (max > 0) {
    const meter = document.createElement("meter");
    meter.min = 0;
    meter.max = max;
    meter.value = Math.min(used, max);
    meter.high = max * 0.8;
    meter.optimum = 0;
    meter.setAttribute("aria-label", of ? text + " of " + of : text);
    span.append(meter, " ");
  }
  span.append(text);
  if (of) {
    span.append(el("span", "muted", " / " + of.split(" ")[0]));
    span.title = text + " of " + of;
  }
  return span;
}

// An inline SVG line of `values` (oldest first) scaled to `top` (a limit, else the highest).
export function sparkline(values, top, label) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "usage-spark");
  svg.setAttribute("viewBox", "0 0 " + SPARK_WIDTH + " " + SPARK_HEIGHT);
  svg.setAttribute("width", String(SPARK_WIDTH));
  svg.setAttribute("height", String(SPARK_HEIGHT));
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  svg.dataset.points = String(values.length);
  const title = document.createElementNS(SVG, "title");
  title.textContent = label;
  svg.append(title);
  const high = Math.max(top || 0, ...values, 1);
  const step = values.length > 1 ? SPARK_WIDTH / (values.length - 1) : 0;
  const points = values.map((v, i) => (i * step).toFixed(1) + "," + (SPARK_HEIGHT - 1 - (v / high) * (SPARK_HEIGHT - 2)).toFixed(1));
  if (top) {  // the limit, as a line along the top
    const limit = document.createElementNS(SVG, "line");
    limit.setAttribute("class", "usage-spark-limit");
    const y = (SPARK_HEIGHT - 1 - (top / high) * (SPARK_HEIGHT - 2)).toFixed(1);
    limit.setAttribute("x1", "0"); limit.setAttribute("x2", String(SPARK_WIDTH));
    limit.setAttribute("y1", y); limit.setAttribute("y2", y);
    svg.append(limit);
  }
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("class", "usage-spark-line");
  line.setAttribute("points", points.length === 1 ? points[0] + " " + SPARK_WIDTH + "," + points[0].split(",")[1] : points.join(" "));
  svg.append(line);
  return svg;
}

function minutes(seconds) { return Math.round(seconds / 60) + " minutes"; }

function podUsage(box, body) {
  const table = el("table", "grid usage-containers");
  const head = el("tr");
  for (const label of ["Container", "CPU", "Memory", "CPU, last " + minutes(body.historySeconds), "Memory, last " + minutes(body.historySeconds)]) head.append(el("th", "", label));
  table.append(el("thead"));
  table.tHead.append(head);
  const rows = el("tbody");
  for (const c of body.containers) {
    const tr = el("tr");
    tr.dataset.container = c.name;
    const cpuOf = c.cpuLimit ? cpuText(c.cpuLimit) + " limit" : c.cpuRequest ? cpuText(c.cpuRequest) + " requested" : "";
    const memoryOf = c.memoryLimit ? memoryText(c.memoryLimit) + " limit" : c.memoryRequest ? memoryText(c.memoryRequest) + " requested" : "";
    const cpus = body.history.map((p) => (p.containers[c.name] || [0, 0])[0]);
    const memories = body.history.map((p) => (p.containers[c.name] || [0, 0])[1]);
    const cells = [
      el("td", "", c.name),
      el("td", ""), el("td", ""), el("td", ""), el("td", ""),
    ];
    cells[1].dataset.col = "cpu-usage";
    cells[1].append(amount(c.cpu, c.cpuLimit || c.cpuRequest, cpuText(c.cpu), cpuOf));
    cells[2].dataset.col = "memory-usage";
    cells[2].append(amount(c.memory, c.memoryLimit || c.memoryRequest, memoryText(c.memory), memoryOf));
    cells[3].append(sparkline(cpus, c.cpuLimit, "CPU of " + c.name + ": " + cpus.map(cpuText).join(", ")));
    cells[4].append(sparkline(memories, c.memoryLimit, "Memory of " + c.name + ": " + memories.map(memoryText).join(", ")));
    tr.append(...cells);
    rows.append(tr);
  }
  table.append(rows);
  box.replaceChildren(table);
  if (!body.containers.length) box.replaceChildren(el("p", "muted", "No usage yet: no container of this pod is running."));
}

function nodeUsage(box, body) {
  const [cpu, memory] = body.usage || [0, 0];
  const [cpuAlloc, memoryAlloc] = body.allocatable || [0, 0];
  const facts = el("dl", "usage-node");
  facts.append(el("dt", "", "CPU"), el("dd", ""), el("dt", "", "Memory"), el("dd", ""));
  facts.children[1].dataset.col = "cpu-usage";
  facts.children[1].append(amount(cpu, cpuAlloc, cpuText(cpu), cpuText(cpuAlloc) + " allocatable"));
  facts.children[3].dataset.col = "memory-usage";
  facts.children[3].append(amount(memory, memoryAlloc, memoryText(memory), memoryText(memoryAlloc) + " allocatable"));
  const table = el("table", "grid usage-pods");
  const head = el("tr");
  for (const label of ["Pod", "Namespace", "CPU", "Memory"]) head.append(el("th", "", label));
  table.append(el("thead"));
  table.tHead.append(head);
  const rows = el("tbody");
  for (const pod of body.pods) {
    const tr = el("tr");
    tr.dataset.name = pod.name;
    tr.dataset.namespace = pod.namespace;
    const memoryCell = el("td", "");
    memoryCell.append(amount(pod.memory, pod.memoryLimit, memoryText(pod.memory), pod.memoryLimit ? memoryText(pod.memoryLimit) + " limit" : ""));
    tr.append(el("td", "", pod.name), el("td", "", pod.namespace), el("td", "", cpuText(pod.cpu)), memoryCell);
    rows.append(tr);
  }
  table.append(rows);
  box.replaceChildren(facts, el("h4", "", "Pods on this node"), table);
}

// The usage section of an open panel (`panel`: its .panel element), or null for other kinds.
export function panelUsage(panel, url) {
  const kind = panel.dataset.kind;
  if (!url || (kind !== "pods" && kind !== "nodes")) return null;
  const section = el("section", "panel-usage");
  section.setAttribute("aria-labelledby", "panel-usage-title");
  const title = el("h3", "", "Resource usage");
  title.id = "panel-usage-title";
  const box = el("div", "usage-box");
  box.setAttribute("aria-live", "polite");
  box.append(el("p", "muted", "Reading usage…"));
  section.append(title, box);
  const overview = panel.querySelector("#tabpanel-overview");
  const relations = overview && overview.querySelector(".panel-relations");
  if (!overview) return null;
  overview.insertBefore(section, relations);
  const target = new URL(url + (kind === "pods" ? "/pod" : "/node"), location.href);
  if (kind === "pods") target.searchParams.set("namespace", panel.dataset.namespace);
  target.searchParams.set("name", panel.dataset.name);
  let timer = 0;
  let closed = false;
  const read = async () => {
    let delay = RETRY;
    try {
      const response = await fetch(target, { credentials: "same-origin", headers: { "Accept": "application/json" } });
      const body = await response.json();
      if (!response.ok) throw new Error((body.error && body.error.message) || "HTTP " + response.status);
      if (closed) return;
      delay = Math.max(1000, (body.interval || 15) * 1000);
      if (!body.available) box.replaceChildren(el("p", "muted usage-unavailable", body.message || "Usage cannot be shown."));
      else if (kind === "pods") podUsage(box, body);
      else nodeUsage(box, body);
    } catch (err) {
      if (closed) return;
      box.replaceChildren(el("p", "error", "Usage could not be read: " + err.message));
    }
    if (!closed) timer = setTimeout(read, delay);
  };
  read();
  return { close() { closed = true; clearTimeout(timer); } };
}
