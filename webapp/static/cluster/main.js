// cluster/: the Cluster tab, as native modules; this is the page's one script
// (<script type="module">, cluster/page.html), which wires the others (see docs/ui.md):
//   watch/   the transport: every watch of the page over one WebSocket or HTTP streams,
//            whether each is live, the badge and the banner
//   lists/   what the watches feed: tables patched by key, paged lists, the workloads'
//            counts, the list's state in the address
//   panel/   the side panel of one object: tabs, logs, actions, relations
//   ages.js, problems.js, fragment.js: small helpers they share
// A click on a row opens the panel; the page's watches are shared with it.

import { humanDuration, refreshAges } from "./ages.js";
import { ListState } from "./lists/list-state.js";
import { ListTable } from "./lists/list-table.js";
import { namespacePicker } from "./lists/namespace-picker.js";
import { Tally } from "./lists/tally.js";
import { showUsage } from "./lists/usage-columns.js";
import { addressState } from "./panel/address.js";
import { nodeCareRows } from "./panel/node-care.js";
import { Panel } from "./panel/panel.js";
import { parseTime, readableProblem } from "./problems.js";
import { Badge } from "./watch/badge.js";
import { Banner } from "./watch/banner.js";
import { WatchManager } from "./watch/manager.js";
import { LiveStatus } from "./watch/status.js";

const AGE_REFRESH = 5000;

// The problem the server rendered the page with (the banner), as a watch's `problem`.
function initialProblem() {
  const banner = document.getElementById("cluster-banner");
  if (!banner || banner.hidden) return null;
  const retryIn = parseFloat(banner.dataset.retryIn || "");
  return {
    message: readableProblem({ message: banner.querySelector(".banner-message").textContent }),
    retryAt: isNaN(retryIn) ? null : Date.now() + retryIn * 1000,
  };
}

// A list's watches (one per namespace it shows) as one view: its watch, and the
// namespaces when there are several.
function viewOf(watches) {
  const namespaces = watches.map((params) => params.namespace).filter(Boolean);
  if (namespaces.length < 2) return { params: watches[0], namespaces: [] };
  const params = Object.assign({}, watches[0]);
  delete params.namespace;
  return { params, namespaces };
}

// Every list and count of the page, each a view of its list (docs/watch-protocol.md,
// "Views"); a click on a row asks for its panel (`open(row, params, watchId)`).
function watchLists(root, manager, live, open) {
  const outage = initialProblem();
  const list = new ListState(root.querySelector("[data-list-form]"));
  for (const section of root.querySelectorAll("section.k8s-section")) {
    const table = new ListTable(section, list);
    list.tables.push(table);
    // Rendered while the cluster was down: stale from the start.
    const initial = section.classList.contains("is-stale")
      ? { since: parseTime(section.dataset.staleSince), problem: outage } : null;
    const watches = JSON.parse(section.dataset.watches || "[]");
    const byNamespace = new Map(watches.map((params) => [params.namespace || "", params]));
    section.addEventListener("click", (event) => {
      const row = event.target.closest("tbody.rows > tr");
      if (!row || event.target.closest("button, input, select")) return;
      event.preventDefault();
      // `params` are the row's watch, `watchId` the list's on the page.
      const params = byNamespace.get(row.dataset.namespace || "") || byNamespace.get("") || watches[0];
      if (params) open(row, params, table.view ? table.view.id : null);
    });
    if (live && watches.length) {
      const view = viewOf(watches);
      table.follow(manager, view.params, view.namespaces, initial);
    }
  }
  showUsage(root, list);  // CPU and memory of Pods and Nodes, while the page is live
  nodeCareRows(root, list);  // Cordon / Uncordon on the Nodes list's rows, for maintainers
  if (!live) return;
  for (const el of root.querySelectorAll("[data-summary]")) {
    const watches = JSON.parse(el.dataset.watches || "[]");
    if (!watches.length) continue;
    const view = viewOf(watches);
    // Only counts: the first to go without a stream.
    manager.add(view.params, new Tally(el).sink(), null, null, true,
      { namespaces: view.namespaces, limit: 0 });
  }
}

function start(root) {
  const badge = new Badge(document.getElementById("watch-badge"));
  const status = new LiveStatus(badge, new Banner(document.getElementById("cluster-banner")));
  const manager = new WatchManager({
    ticket: root.dataset.ticketUrl, socket: root.dataset.socketPath, stream: root.dataset.streamUrl,
  }, status);
  badge.onReconnect(() => manager.reconnect());
  const live = root.dataset.live === "true";
  const panel = new Panel(document.getElementById("object-panel"), root, manager, {
    object: root.dataset.objectUrl, logs: root.dataset.logsUrl, actions: root.dataset.actionsUrl,
  });
  watchLists(root, manager, live, (row, params, watchId) => {
    panel.open({ params, namespace: row.dataset.namespace || "", name: row.dataset.name || "" },
      { row, watchId, push: true });
  });
  namespacePicker(root);
  refreshAges(root);
  setInterval(() => refreshAges(root), AGE_REFRESH);
  if (live) { manager.render(); manager.start(); }
  window.addEventListener("popstate", () => panel.follow());
  if (addressState().ref) panel.follow();
  // Handles for debugging and for the browser tests (tests/browser/test_cluster_*.py).
  window.agentwatchCluster = { manager, panel, humanDuration, refreshAges };
}

// A module runs once the document is parsed, like a deferred script.
const root = document.getElementById("cluster");
if (root) start(root);
