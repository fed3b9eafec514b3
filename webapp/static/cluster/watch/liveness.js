// cluster/watch/: every watch of the page over one WebSocket (agentwatch.watch.v1,
// docs/watch-protocol.md), or over a few HTTP streams when WebSockets fail; whether each
// watch is live, and the badge and banner that say so (see docs/ui.md).
// liveness.js: a watch of the page, and whether it is live: `notLive` ({since, at,
// atOnce}) while its table is not live, `problem` ({message, retryAt}) while the relay
// cannot reach the cluster.

import { parseTime, readableProblem } from "../problems.js";

// A blip of the page's own connection this short does not dim the tables.
export const STALE_GRACE = 2000;

// `within`: {watchId, namespace, name} when another watch of the page already sees this
// one's object: over HTTP streaming it rides along on that one's messages.
// `initial`: {since, problem} for a table the server rendered while the cluster was down.
// `minor`: only counts (the workloads' strip): the last to get a stream.
// `view`: the window on a list this watch is (docs/watch-protocol.md, "Views"), or null.
export function newWatch(id, params, sink, within, initial, minor, view) {
  const watch = { id, params, sink, within: within || null, problem: null,
    notLive: null, lastNotLive: null, liveAt: 0, minor: Boolean(minor), view: view || null };
  if (initial) {
    watch.notLive = { since: initial.since, at: Date.now(), atOnce: true };
    watch.problem = initial.problem;
  }
  return watch;
}

// Not live since `since` (epoch ms; null: not known). `atOnce`: the server said so, so
// the table turns stale now, not after STALE_GRACE (a blip of the page's own connection
// would otherwise dim every table for a moment).
export function markNotLive(watch, since, atOnce) {
  if (!watch.notLive) watch.notLive = { since, at: Date.now(), atOnce };
  else if (atOnce) { watch.notLive.since = since; watch.notLive.atOnce = true; }
}

export function markLive(watch) {
  if (watch.notLive) { watch.lastNotLive = watch.notLive; watch.liveAt = Date.now(); }
  watch.notLive = null;
  watch.problem = null;
}

// The relay says the cluster is out of reach (a connectivity error of the watch).
export function markProblem(watch, error) {
  let since = parseTime(error.since);
  if (since === null) {
    // A subscription while the cluster is down gets the cached state and `synced`,
    // then this error: that `synced` did not make it live, so keep when it last was.
    const relapse = watch.lastNotLive && Date.now() - watch.liveAt < 1000 ? watch.lastNotLive : null;
    const before = watch.notLive || relapse;
    since = before ? before.since : Date.now();
  }
  markNotLive(watch, since, true);
  const retryIn = error.retryInSeconds;
  watch.problem = {
    message: readableProblem(error),
    retryAt: typeof retryIn === "number" && isFinite(retryIn) ? Date.now() + Math.max(0, retryIn) * 1000 : null,
  };
}

// What the watch's table shows at `now`: null (live), or since when it is not live (an
// ISO time, "" when not known).
export function staleSince(watch, now) {
  const off = watch.notLive;
  const shown = off && (off.atOnce || now - off.at >= STALE_GRACE);
  return !shown ? null : off.since === null ? "" : new Date(off.since).toISOString();
}
