// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// sinks.js: what a watch does with its messages (the sink contract is in
// ../watch/manager.js): rows into a table, or a view's window into a paged list.

import { isConnectivity, readableProblem } from "../problems.js";
import { objectKey } from "./rows.js";

// Connectivity problems go to the page's one banner; the table only turns stale.
function showProblem(table, error) {
  if (isConnectivity(error)) table.clearError();
  else table.showError(readableProblem(error));
}

// Rows into a Table (table.js), plus optional hooks ({object(type, obj)}).
export class TableSink {
  constructor(table, hooks) { this.table = table; this.hooks = hooks || {}; }
  start() { this.table.markUnconfirmed(); }
  event(event, html) {
    const obj = event.object || {};
    if (event.type === "DELETED") this.table.remove(objectKey(obj));
    else if (html) { this.table.upsert(html); this.table.confirm(objectKey(obj)); }
    if (this.hooks.object) this.hooks.object(event.type, obj);
  }
  synced() { this.table.clearError(); this.table.sweepUnconfirmed(); }
  reset() { this.table.markUnconfirmed(); }
  error(error) { showProblem(this.table, error); }
  stale(since) { this.table.setStale(since); }
}

// The view of a ListTable (list-table.js): its window's rows and the list's counts.
export class ViewSink {
  constructor(table) { this.table = table; }
  start() {}
  window(message) { this.table.showWindow(message); }
  rows(message) { this.table.applyRows(message); }
  count(message) { this.table.setCounts(message); }
  synced() { this.table.clearError(); }
  reset() {}
  error(error) { showProblem(this.table, error); }
  stale(since) { this.table.setStale(since); }
}
