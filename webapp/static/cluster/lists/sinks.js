// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// sinks.js: what a watch does with its messages (the sink contract is in
// ../watch/manager.js): rows into a table, rows into a paged list, or both of one watch's
// messages to several sinks.

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

// One watch of a ListTable (list-table.js): `namespace` is the watch's, null for all.
export class ListSink {
  constructor(table, namespace) { this.table = table; this.namespace = namespace; }
  start() { this.table.startSync(this); }
  event(event, html) {
    const obj = event.object || {};
    const key = objectKey(obj);
    if (event.type === "DELETED") this.table.forget(key);
    else if (html) this.table.change(key, (obj.metadata && obj.metadata.namespace) || "", html);
  }
  synced() { this.table.clearError(); this.table.endSync(this); }
  reset() { this.table.startSync(this); }
  error(error) { showProblem(this.table, error); }
  stale(since) { this.table.setStale(since); }
}

// One watch's messages to several sinks (a list and the strip's count of the same kind).
export function fanOut(sinks) {
  const each = (method) => (...args) => { for (const sink of sinks) if (sink[method]) sink[method](...args); };
  return { start: each("start"), event: each("event"), synced: each("synced"), reset: each("reset"),
    error: each("error"), stale: each("stale") };
}
