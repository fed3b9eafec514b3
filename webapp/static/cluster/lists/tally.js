// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// tally.js: one entry of the workloads' strip, live: how many objects, how many need
// attention. A view of no rows (watch/view.py): the server counts, shown once a frame.

export class Tally {
  constructor(el) {
    this.total = el.querySelector(".summary-total");
    this.attention = el.querySelector(".summary-attention");
    this.count = el.querySelector(".summary-count");
    this.counts = null;
    this.frame = 0;
  }

  // The sink of its view.
  sink() {
    const tally = this;
    const counted = (message) => {
      tally.counts = message;
      if (!tally.frame) tally.frame = requestAnimationFrame(() => tally.show());
    };
    return { start() {}, reset() {}, window: counted, rows: counted, count: counted,
      synced() {}, error() {}, stale() {} };
  }

  show() {
    this.frame = 0;
    if (!this.counts) return;
    const attention = this.counts.attention;
    const total = String(this.counts.total);
    if (this.total.textContent !== total) this.total.textContent = total;
    if (this.count && this.count.textContent !== String(attention)) this.count.textContent = String(attention);
    if (this.attention) this.attention.hidden = attention === 0;
  }
}
