// cluster/watch/: every watch of the page over one WebSocket (agentwatch.watch.v1,
// docs/watch-protocol.md), or over a few HTTP streams when WebSockets fail; whether each
// watch is live, and the badge and banner that say so (see docs/ui.md).
// status.js: what the page says about being live, from the manager's state: each watch's
// table stale or not, the banner, the badge.

import { STALE_GRACE, staleSince } from "./liveness.js";

export class LiveStatus {
  constructor(badge, banner) {
    this.badge = badge;
    this.banner = banner;
    this.everLive = false;  // once live, a lost connection is "Reconnecting"
  }

  // `state` (manager.js render): {watches, down, trouble, open, websocket, transportWhy,
  // fallbackReason, retryAt, lostAt}; `trouble` as HttpStreams.trouble() says it.
  render(state) {
    const now = Date.now();
    let problem = null;
    const retries = [];
    for (const watch of state.watches) {
      if (watch.sink.stale) watch.sink.stale(staleSince(watch, now));
      if (watch.problem) {
        problem = problem || watch.problem;
        if (watch.problem.retryAt !== null) retries.push(watch.problem.retryAt);
      }
    }
    const trouble = state.trouble;
    this.showBadge(state, problem);
    if (state.down) {
      this.banner.show("The cluster view is disconnected: " + state.down + ". Click the badge to reconnect.", null);
    } else if (trouble && trouble.ended) {
      this.banner.show("Part of the cluster view is not live: " + trouble.ended + ". Click the badge to reconnect.", null);
    } else if (trouble && trouble.refused) {
      this.banner.show("Part of the cluster view is not live: the server refused an HTTP stream: " + trouble.refused, trouble.retryAt);
    } else if (trouble && trouble.unstreamed) {
      this.banner.show("Part of the cluster view is not live: " + trouble.unstreamed + ".", null);
    } else if (problem) {
      // Every watch retries on its own schedule: the next try is the soonest one.
      const upcoming = retries.filter((at) => at > now);
      const next = upcoming.length ? Math.min(...upcoming) : retries.length ? now : null;
      this.banner.show(problem.message, next);
    } else if (state.lostAt !== null && now - state.lostAt >= STALE_GRACE) {
      this.banner.show("Lost the connection to agentwatch", state.retryAt);
    } else {
      this.banner.hide();
    }
  }

  showBadge(state, problem) {
    const trouble = state.trouble;
    if (state.down) { this.badge.show("disconnected", "Disconnected", state.down + ". Click to reconnect."); return; }
    if (trouble && trouble.ended) {
      this.badge.show("disconnected", "Disconnected", "Not live: " + trouble.ended + ". Click to reconnect.");
      return;
    }
    if (trouble && (trouble.refused || trouble.unstreamed)) {
      const why = trouble.refused ? "the server refused an HTTP stream: " + trouble.refused + "; tried again by itself"
        : trouble.unstreamed + " are not live";
      this.badge.show("disconnected", "Partly live", "Only part of the cluster view is live over HTTP streaming: " +
        why + ". Click to reconnect.");
      return;
    }
    if (!state.open) {
      const why = state.transportWhy ? state.transportWhy + ". " : "";
      if (this.everLive) this.badge.show("reconnecting", "Reconnecting", why + "Reconnecting by itself; click to reconnect now.");
      else this.badge.show("connecting", "Connecting", why + "Connecting to the cluster…");
      return;
    }
    this.everLive = true;
    if (problem) {
      this.badge.show("disconnected", "Disconnected", "The cluster view is not live: " + problem.message +
        ". agentwatch keeps trying by itself; click to reconnect now.");
    } else if (state.websocket) {
      this.badge.show("connected", "Live", "Live over a WebSocket: changes in the cluster show as they happen.");
    } else {
      this.badge.show("connected", "Live (HTTP streaming)", "Live over HTTP streaming (server-sent events): " +
        (state.fallbackReason || "WebSocket unavailable") + ". The WebSocket is tried again every minute.");
    }
  }
}
