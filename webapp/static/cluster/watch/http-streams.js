// cluster/watch/: every watch of the page over one WebSocket (agentwatch.watch.v1,
// docs/watch-protocol.md), or over a few HTTP streams when WebSockets fail; whether each
// watch is live, and the badge and banner that say so (see docs/ui.md).
// http-streams.js: the fallback: the page's watches over a few server-sent-event streams
// (webapp/watch/stream.py), each resumed from its last position when it opens again.

import { readableProblem } from "../problems.js";
import { markNotLive } from "./liveness.js";

// At most STREAM_WATCHES watches per stream (webapp/watch/stream.py MAX_WATCHES) and at
// most MAX_STREAMS streams a page: browsers allow six HTTP/1.1 connections per host, and
// the panel's logs, actions and the rows' pages need some. A stream's URL fits the
// server's request line (webapp/server.py LIMIT_REQUEST_LINE, 8,190 bytes, with "GET "
// and " HTTP/1.1" around it): views over many namespaces take a stream of fewer watches.
const STREAM_WATCHES = 10;
const MAX_STREAMS = 3;
const MAX_URL = 8000;
const STREAM_REOPENS = 3;  // closed streams reopened without data before giving up

// Whether a watch rides along on another watch's stream (see liveness.js, `within`).
// A view carries rows, not its objects' events: nothing rides along on it.
export function ridesAlong(watch, watches) {
  const carrier = watch.within && watches.get(watch.within.watchId);
  return Boolean(carrier) && !carrier.view;
}

export class HttpStreams {
  // `url`: the stream endpoint. `watches`: the page's (id -> watch, liveness.js).
  // `on`: what the manager hears: message(data), lost(ids) (a stream dropped),
  // interrupted() (it resumes by itself), allOpen(), change() (something to show).
  constructor(url, watches, on) {
    this.url = url;
    this.watches = watches;
    this.on = on;
    // Each stream {ids, source, lastEventId, open, gotData, reopens, refused: {message,
    // retryAt} after a 429, ended: why, once it will not reopen}.
    this.streams = [];
    this.positions = new Map();  // watchId -> its position, from its stream's last id
    this.unstreamed = [];        // watches beyond what MAX_STREAMS streams carry
    this.reopenTimer = null;
    this.active = false;         // between start() and closeAll()
  }

  start() { this.active = true; }

  closeAll() {
    this.active = false;
    clearTimeout(this.reopenTimer);
    for (const stream of this.streams) this.closeStream(stream);
    this.streams = [];
    this.positions.clear();
    this.unstreamed = [];
  }

  forget(id) { this.positions.delete(id); }

  // The watches that do not ride along go over as few streams as hold them. When the set
  // changes, only the streams whose watches changed open again, with their watches' last
  // positions, so those resume where they were and only new watches start with a
  // snapshot. Changes in one go arrange the streams once.
  rearrange() {
    clearTimeout(this.reopenTimer);
    this.reopenTimer = setTimeout(() => this.arrange(), 0);
  }

  arrange() {
    if (!this.active) return;
    const streamed = Array.from(this.watches.values()).filter((w) => !ridesAlong(w, this.watches));
    // Lists first, counts last: what does not fit is the strip's, not a table's.
    streamed.sort((a, b) => Number(a.minor) - Number(b.minor));
    for (const stream of this.streams) this.keepPositions(stream);  // their URLs' length
    const packed = this.pack(streamed.map((w) => w.id));
    const carried = packed.streams.flat();
    this.unstreamed = packed.left;
    for (const id of this.unstreamed) markNotLive(this.watches.get(id), Date.now(), true);
    const wanted = new Set(carried);
    const changed = new Set();
    for (const stream of this.streams) {
      const kept = stream.ids.filter((id) => wanted.has(id));
      if (kept.length !== stream.ids.length) { stream.ids = kept; changed.add(stream); }
    }
    const placed = new Set(this.streams.flatMap((stream) => stream.ids));
    for (const id of carried) {
      if (placed.has(id)) continue;
      let stream = this.streams.find((s) => this.fits(s.ids, id));
      if (!stream) { stream = this.newStream([]); this.streams.push(stream); }
      stream.ids.push(id);
      changed.add(stream);
    }
    for (const stream of this.streams.filter((s) => !s.ids.length)) this.closeStream(stream);
    this.streams = this.streams.filter((s) => s.ids.length);
    // Watches gone from several streams leave them half empty: pack them again.
    if (this.streams.length > packed.streams.length) {
      for (const stream of this.streams) this.closeStream(stream);
      this.streams = packed.streams.map((ids) => this.newStream(ids));
      for (const stream of this.streams) changed.add(stream);
    }
    for (const stream of changed) if (this.streams.includes(stream)) this.openStream(stream);
    this.on.change();
  }

  // The stream carrying this watch opens again (a view's window changed): its other
  // watches resume from their positions, the view starts with its window.
  reopen(id) {
    const stream = this.streams.find((s) => s.ids.includes(id));
    if (stream && this.active) { this.keepPositions(stream); this.openStream(stream); }
  }

  newStream(ids) {
    return { ids, source: null, lastEventId: "", open: false, gotData: false, reopens: 0,
      refused: null, ended: null, timer: null };
  }

  // A stream's last id holds each of its watches' positions (`w1=123&w2=456`).
  keepPositions(stream) {
    if (!stream.lastEventId) return;
    for (const [id, position] of new URLSearchParams(stream.lastEventId)) {
      if (this.watches.has(id) && position) this.positions.set(id, position);
    }
    stream.lastEventId = "";
  }

  // `ids` in order over as few streams as carry them (at most MAX_STREAMS), and the ids
  // that none can: {streams: [[id, ...], ...], left: [id, ...]}.
  pack(ids) {
    const streams = [];
    const left = [];
    for (const id of ids) {
      let bin = streams.find((s) => this.fits(s, id));
      if (!bin && streams.length < MAX_STREAMS && this.fits([], id)) streams.push(bin = []);
      if (bin) bin.push(id); else left.push(id);
    }
    return { streams, left };
  }

  fits(ids, id) {
    return ids.length < STREAM_WATCHES && this.urlOf([...ids, id]).length <= MAX_URL;
  }

  streamURL(stream) {
    this.keepPositions(stream);
    return this.urlOf(stream.ids);
  }

  urlOf(ids) {
    const query = new URLSearchParams({
      watches: JSON.stringify(ids.map((id) => {
        const watch = this.watches.get(id);
        return watch.view ? { watchId: id, watchParams: watch.params, view: watch.view }
          : { watchId: id, watchParams: watch.params };
      })),
    });
    const known = new URLSearchParams();
    for (const id of ids) if (this.positions.has(id)) known.set(id, this.positions.get(id));
    if (known.toString()) query.set("lastEventId", known.toString());
    return this.url + "?" + query.toString();
  }

  openStream(stream) {
    this.closeStream(stream);
    stream.gotData = false;
    stream.refused = null;
    stream.ended = null;
    const url = this.streamURL(stream);
    const source = new EventSource(url);
    stream.source = source;
    source.onmessage = (message) => {
      if (message.lastEventId) stream.lastEventId = message.lastEventId;
      if (!stream.gotData) { stream.gotData = true; stream.reopens = 0; this.on.change(); }
      this.on.message(message.data);
    };
    source.onerror = () => {
      if (stream.source !== source) return;
      stream.open = false;
      this.on.lost(stream.ids);
      if (source.readyState === EventSource.CLOSED) {
        stream.source = null;
        this.streamRefused(stream, url);  // EventSource gives up on an HTTP error: ask why
      } else {
        this.on.interrupted();  // EventSource retries by itself
      }
      this.on.change();
    };
    source.onopen = () => {
      stream.open = true;
      if (this.streams.every((s) => s.open)) this.on.allOpen();
      this.on.change();
    };
  }

  closeStream(stream) {
    clearTimeout(stream.timer);
    if (stream.source) stream.source.close();
    stream.source = null;
    stream.open = false;
  }

  // EventSource does not say why it was refused: the same request again does. A 429 (too
  // many streams or watches for this user) is tried again when the server says; another
  // refusal ends the stream until a click on the badge.
  async streamRefused(stream, url) {
    const current = () => this.active && this.streams.includes(stream) && !stream.source;
    const controller = new AbortController();
    let status = 0, message = "", retryAfter = 10;
    try {
      const response = await fetch(url, { credentials: "same-origin", signal: controller.signal,
        headers: { "Accept": "text/event-stream" } });
      status = response.status;
      if (response.ok) controller.abort();  // the stream works again: this was a blip
      else {
        retryAfter = Number(response.headers.get("Retry-After")) || retryAfter;
        try { message = readableProblem((await response.json()).error); } catch (err) { /* not JSON */ }
      }
    } catch (err) {
      if (err.name !== "AbortError") message = "Cannot reach agentwatch";
    }
    if (!current()) return;
    const watches = stream.ids.map((id) => this.watches.get(id)).filter(Boolean);
    if (status === 429) {
      stream.refused = { message: message || "Too many open streams", retryAt: Date.now() + retryAfter * 1000 };
      for (const watch of watches) markNotLive(watch, Date.now(), true);
      stream.timer = setTimeout(() => { if (current()) this.openStream(stream); }, retryAfter * 1000);
    } else if ((status === 200 || status === 0) && stream.reopens < STREAM_REOPENS) {
      stream.reopens++;
      stream.timer = setTimeout(() => { if (current()) this.openStream(stream); }, 2000);
    } else {
      stream.ended = message ? "the server refused an HTTP stream (" + message + ")" : "the server ended an HTTP stream";
    }
    this.on.change();
  }

  // Live once every stream is open and has spoken.
  live() { return this.streams.length > 0 && this.streams.every((s) => s.open && s.gotData); }

  // What the streams cannot carry now: {ended}, or {refused, retryAt}, or {unstreamed}; null.
  trouble() {
    const ended = this.streams.find((s) => s.ended);
    if (ended) return { ended: ended.ended };
    const refused = this.streams.filter((s) => s.refused);
    if (refused.length) {
      return { refused: refused[0].refused.message, retryAt: Math.min(...refused.map((s) => s.refused.retryAt)) };
    }
    if (this.unstreamed.length) {
      const carried = this.streams.reduce((n, s) => n + s.ids.length, 0);
      return { unstreamed: this.unstreamed.length + " of this page's " + (carried + this.unstreamed.length) +
        " watches (HTTP streaming carries " + carried + "; show fewer namespaces or kinds)" };
    }
    return null;
  }
}
