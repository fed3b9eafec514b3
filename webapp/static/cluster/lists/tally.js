// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// tally.js: one entry of the workloads' strip, live: how many objects, how many need
// attention. Counted as events come, shown once a frame.

import { objectKey, rowAttention } from "./rows.js";

export class Tally {
  constructor(el) {
    this.total = el.querySelector(".summary-total");
    this.attention = el.querySelector(".summary-attention");
    this.count = el.querySelector(".summary-count");
    this.known = new Map();  // key -> {namespace, attention, unseen}
    this.attentionCount = 0;
    this.syncing = 0;
    this.counted = false;
    this.frame = 0;
  }

  put(key, entry) {
    const old = this.known.get(key);
    if (old && old.attention) this.attentionCount--;
    if (entry) { this.known.set(key, entry); if (entry.attention) this.attentionCount++; }
    else if (old) this.known.delete(key);
  }

  // The sink of one of its watches (`namespace`: the watch's, null for all).
  sink(namespace) {
    const tally = this;
    const inScope = (entry) => namespace === null || entry.namespace === namespace;
    return {
      start() { tally.syncing++; for (const entry of tally.known.values()) if (inScope(entry)) entry.unseen = true; },
      reset() { this.start(); },
      event(event, html) {
        const obj = event.object || {};
        const key = objectKey(obj);
        if (event.type === "DELETED") tally.put(key, null);
        else if (html) tally.put(key, { namespace: (obj.metadata && obj.metadata.namespace) || "", attention: rowAttention(html), unseen: false });
        if (tally.counted && !tally.frame) tally.frame = requestAnimationFrame(() => tally.show());
      },
      synced() {
        tally.syncing = Math.max(0, tally.syncing - 1);
        for (const [key, entry] of tally.known) if (entry.unseen && inScope(entry)) tally.put(key, null);
        if (tally.syncing === 0) { tally.counted = true; tally.show(); }
      },
      error() {},
      stale() {},
    };
  }

  show() {
    if (this.frame) { cancelAnimationFrame(this.frame); this.frame = 0; }
    const attention = this.attentionCount;
    const total = String(this.known.size);
    if (this.total.textContent !== total) this.total.textContent = total;
    if (this.count && this.count.textContent !== String(attention)) this.count.textContent = String(attention);
    if (this.attention) this.attention.hidden = attention === 0;
  }
}
