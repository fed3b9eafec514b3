// cluster/watch/: every watch of the page over one WebSocket (agentwatch.watch.v1,
// docs/watch-protocol.md), or over a few HTTP streams when WebSockets fail; whether each
// watch is live, and the badge and banner that say so (see docs/ui.md).
// manager.js: the watch manager. It carries the page's watches, one transport at a time,
// and hands each watch's messages to its sink:
//
//   sink.start()          the watch's state is (re)starting: what follows is its snapshot
//   sink.event(e, html)   an object ADDED / MODIFIED / DELETED, with its row's HTML
//   sink.synced()         the state is complete (or live again after an error)
//   sink.reset()          the relay starts the state again (rows are confirmed anew)
//   sink.error(error)     {code, message, ...}: an answer (403, 404) or the cluster out of reach
//   sink.stale(since)     not live since `since` (ISO, "" unknown) or live again (null)
//
// A view's sink (a watch added with `view`, docs/watch-protocol.md "Views") gets, instead
// of events, sink.window(m) (the rows shown, whole), sink.rows(m) (what changed in them)
// and sink.count(m) (the counts alone); each message carries `total` and `attention`.

import { isConnectivity } from "../problems.js";
import { HttpStreams, ridesAlong } from "./http-streams.js";
import { markLive, markNotLive, markProblem, newWatch } from "./liveness.js";
import { describeClose, openSocket } from "./socket.js";

const FAILURES_BEFORE_FALLBACK = 3;   // WebSocket failures within FAILURE_WINDOW
const FAILURE_WINDOW = 60000;
const WEBSOCKET_RETRY = 60000;        // while on HTTP streaming, try the WebSocket again
const TICK = 1000;                    // "last updated … ago" and the retry countdown

// Messages about objects and rows: they change nothing the badge or banner show.
const QUIET = new Set(["event", "rows", "count"]);

function watchMessage(watch) {
  const message = { type: "watch", watchId: watch.id, watchParams: watch.params };
  if (watch.view) message.view = watch.view;
  return message;
}

export class WatchManager {
  // `urls`: {ticket, socket, stream}. `status`: the LiveStatus (status.js) it reports to.
  constructor(urls, status) {
    this.urls = urls;
    this.status = status;
    this.watches = new Map();   // id -> watch (liveness.js)
    this.nextId = 1;
    this.mode = "websocket";    // or "stream" (HTTP streaming fallback)
    this.ws = null;
    this.wsOpen = false;
    this.httpStreams = new HttpStreams(urls.stream, this.watches, {
      message: (data) => this.dispatch(data),
      lost: (ids) => this.transportLost(ids),
      interrupted: () => { this.transportWhy = "HTTP stream interrupted; resuming"; },
      allOpen: () => { this.transportWhy = ""; this.lostAt = null; },
      change: () => this.scheduleRender(),
    });
    this.failures = [];         // times of recent WebSocket failures
    this.ticketRetried = false;
    this.down = null;           // why the transport is down, or null
    this.transportWhy = "";     // why it is (re)connecting, for the badge
    this.fallbackReason = "";   // why the page streams over HTTP
    this.retryAt = null;        // when the page tries its own connection again
    this.lostAt = null;         // when the page's connection was lost
    this.renderTimer = 0;
    this.gotData = false;
    this.timer = null;
    this.attempt = 0;
    this.stopped = false;
    window.addEventListener("pagehide", () => this.stop());
    setInterval(() => this.render(), TICK);  // "last updated … ago", the countdown
  }

  // Adds a watch (see liveness.js newWatch for `within`, `initial`, `minor`, `view`);
  // its id.
  add(params, sink, within, initial, minor, view) {
    const id = "w" + this.nextId++;
    const watch = newWatch(id, params, sink, within, initial, minor, view);
    this.watches.set(id, watch);
    if (this.mode === "websocket" && this.wsOpen) { sink.start(); this.send(watchMessage(watch)); }
    else if (this.mode === "stream") this.streamWatch(watch);
    this.scheduleRender();
    return id;
  }

  remove(id) {
    if (!this.watches.delete(id)) return;
    this.httpStreams.forget(id);
    if (this.wsOpen) this.send({ type: "unwatch", watchId: id });
    if (this.mode === "stream") this.httpStreams.rearrange();
    this.scheduleRender();
  }

  // A view's page shows `limit` rows now: its window follows (a stream opens again).
  resize(id, limit) {
    const watch = this.watches.get(id);
    if (!watch || !watch.view) return;
    watch.view = Object.assign({}, watch.view, { limit });
    if (this.mode === "websocket" && this.wsOpen) this.send({ type: "window", watchId: id, limit });
    else if (this.mode === "stream") this.httpStreams.reopen(id);
  }

  riding(watch) {
    return this.mode === "stream" && ridesAlong(watch, this.watches);
  }

  streamWatch(watch) {
    if (this.riding(watch)) return;
    watch.sink.start();
    this.httpStreams.rearrange();
  }

  // Messages of a streamed watch, passed on to the watches riding along (their object only).
  forward(message) {
    if (this.mode !== "stream") return;
    for (const rider of this.watches.values()) {
      if (!rider.within || rider.within.watchId !== message.watchId) continue;
      if (message.type === "event") {
        const meta = (message.event && message.event.object && message.event.object.metadata) || {};
        if (meta.name !== rider.within.name || (meta.namespace || "") !== rider.within.namespace) continue;
      }
      this.handle(rider, message);
    }
  }

  send(message) { if (this.ws && this.wsOpen) this.ws.send(JSON.stringify(message)); }

  start() { this.connectWebSocket(); }

  stop() {
    this.stopped = true;
    this.attempt++;
    clearTimeout(this.timer);
    this.closeSocket();
    this.httpStreams.closeAll();
  }

  // A click on a disconnected badge: everything again, WebSocket first, no reload. What
  // the cluster's problem was stays said until a watch is live again.
  reconnect() {
    clearTimeout(this.timer);
    this.attempt++;
    this.closeSocket();
    this.httpStreams.closeAll();
    this.transportLost();
    this.failures = [];
    this.ticketRetried = false;
    this.mode = "websocket";
    this.down = null;
    this.transportWhy = "";
    this.gotData = false;
    this.connectWebSocket();
  }

  closeSocket() {
    const ws = this.ws;
    this.ws = null;
    this.wsOpen = false;
    if (ws) { ws.onclose = ws.onmessage = ws.onopen = ws.onerror = null; ws.close(1000); }
  }

  // --- the WebSocket ---

  // Only the latest attempt counts: a click on the badge supersedes one in flight.
  openWebSocket(onOpen, onFail) {
    const attempt = ++this.attempt;
    openSocket(this.urls, () => attempt === this.attempt && !this.stopped, onOpen, onFail);
  }

  connectWebSocket() {
    if (this.stopped) return;
    this.retryAt = null;
    this.scheduleRender();
    this.openWebSocket((ws) => this.useWebSocket(ws), (event) => this.socketFailed(event, false));
  }

  useWebSocket(ws) {
    this.ws = ws;
    this.wsOpen = true;
    this.mode = "websocket";
    this.ticketRetried = false;
    this.down = null;
    this.transportWhy = "";
    this.retryAt = null;
    this.lostAt = null;
    ws.onmessage = (message) => this.dispatch(message.data);
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.wsOpen = false;
      this.transportLost();
      this.socketFailed(event, true);
    };
    for (const watch of this.watches.values()) {
      watch.sink.start();
      this.send(watchMessage(watch));
    }
    this.scheduleRender();
  }

  socketFailed(event, opened) {
    if (this.stopped) return;
    const why = event.code ? describeClose(event) : "WebSocket unavailable: " + (event.reason || "connection failed");
    if (event.code === 4403 || event.code === 4404 || event.code === 4400) {
      this.setDown(why);  // retrying cannot help: show it
      return;
    }
    if (event.code === 4401 && !this.ticketRetried) {
      this.ticketRetried = true;  // the ticket expired on the way: one more try
      this.connectWebSocket();
      return;
    }
    // A ticket refused twice means the WebSocket path itself is broken here (e.g. a
    // proxy dropping the subprotocol): the session still works for HTTP streaming.
    const now = Date.now();
    this.failures = this.failures.filter((t) => now - t < FAILURE_WINDOW);
    this.failures.push(now);
    if (event.code === 4401 || this.failures.length >= FAILURES_BEFORE_FALLBACK) {
      this.fallBack(why);
      return;
    }
    const delay = (opened ? 500 : 500 * this.failures.length) * (0.75 + Math.random() / 2);
    this.transportWhy = why;
    this.retryAt = Date.now() + delay;
    this.scheduleRender();
    this.timer = setTimeout(() => this.connectWebSocket(), delay);
  }

  // --- the HTTP streaming fallback (http-streams.js) ---

  fallBack(why) {
    this.closeSocket();
    this.mode = "stream";
    this.fallbackReason = why;
    this.down = null;
    this.gotData = false;
    this.transportWhy = why + "; switching to HTTP streaming";
    this.retryAt = null;
    this.transportLost();
    this.scheduleRender();
    this.httpStreams.start();
    for (const watch of this.watches.values()) this.streamWatch(watch);
    this.scheduleWebSocketRetry();
  }

  scheduleWebSocketRetry() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.retryWebSocket(), WEBSOCKET_RETRY);
  }

  // While streaming, the WebSocket is tried again now and then; when it opens, every
  // watch moves over (rows are marked stale, the new snapshot reconciles them).
  retryWebSocket() {
    if (this.stopped || this.mode !== "stream") return;
    this.openWebSocket((ws) => {
      if (this.mode !== "stream") { ws.close(1000); return; }
      this.httpStreams.closeAll();
      this.transportLost();
      this.failures = [];
      this.useWebSocket(ws);
    }, () => this.scheduleWebSocketRetry());
  }

  // --- messages ---

  dispatch(data) {
    let message;
    try { message = JSON.parse(data); } catch (err) { return; }
    const watch = this.watches.get(message.watchId);
    if (!watch) return;  // a late message of a watch this page dropped
    const first = !this.gotData;
    this.gotData = true;
    this.handle(watch, message);
    this.forward(message);
    // An object's event changes nothing the badge, the banner or the stale marks show.
    if (first || !QUIET.has(message.type)) this.scheduleRender();
  }

  handle(watch, message) {
    switch (message.type) {
      case "event":
        watch.sink.event(message.event || {}, message.html);
        break;
      case "synced":  // the initial state, or live again after an error
        markLive(watch);
        watch.sink.synced();
        break;
      case "reset":
        watch.sink.reset();
        break;
      case "window":
      case "rows":
      case "count":
        if (watch.sink[message.type]) watch.sink[message.type](message);
        break;
      case "error": {
        const error = message.error || {};
        watch.sink.error(error);
        if (isConnectivity(error)) markProblem(watch, error);
        break;
      }
    }
  }

  // The page's connection (or one stream, `ids` its watches) dropped: nothing it carried
  // is live until each watch syncs again.
  transportLost(ids) {
    const now = Date.now();
    if (this.lostAt === null) this.lostAt = now;
    const lost = ids ? ids.map((id) => this.watches.get(id)).filter(Boolean) : this.watches.values();
    for (const watch of lost) markNotLive(watch, now, false);
  }

  // --- what the page shows (status.js) ---

  setDown(why) { this.down = why; this.scheduleRender(); }

  // Thousands of events of a snapshot render once.
  scheduleRender() {
    if (!this.renderTimer) this.renderTimer = setTimeout(() => this.render(), 0);
  }

  render() {
    clearTimeout(this.renderTimer);
    this.renderTimer = 0;
    const websocket = this.mode === "websocket";
    this.status.render({
      watches: this.watches.values(),
      down: this.down,
      trouble: websocket ? null : this.httpStreams.trouble(),
      open: websocket ? this.wsOpen && this.gotData : this.httpStreams.live(),
      websocket,
      transportWhy: this.transportWhy,
      fallbackReason: this.fallbackReason,
      retryAt: this.retryAt,
      lostAt: this.lostAt,
    });
  }
}
