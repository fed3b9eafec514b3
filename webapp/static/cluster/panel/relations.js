// cluster/panel/: the side panel of one object: its tabs, live summary, events and
// relations, pod logs and actions (see docs/panel.md and docs/ui.md).
// relations.js: the Overview's relations (owners, owned objects, a Service's pods, a Flux
// inventory), rendered by the server and fetched again when what they were read from
// changes.

const RELATIONS_DEBOUNCE = 800;  // ms: a burst of changes fetches the tree once
const RELATIONS_POLL = 10;       // s: the tree's refresh when its watches are not followed

// One per open panel; close() when the panel goes.
export class Relations {
  constructor(panel, manager) {
    this.panel = panel;
    this.manager = manager;
    this.watches = [];     // {key, id}: the page's watches the tree follows
    this.timer = null;
    this.poll = null;
    this.fetches = 0;      // number of the latest fetch: older answers are dropped
    this.objectGone = false;  // a deleted object has no relations left to read (a 404)
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load(), RELATIONS_DEBOUNCE);
  }

  async load() {
    clearTimeout(this.timer);
    if (this.objectGone) return;
    const panel = this.panel;
    const number = ++this.fetches;
    const box = panel.querySelector(".relations");
    let html;
    try {
      const response = await fetch(panel.dataset.relationsUrl, { headers: { "HX-Request": "true" } });
      if (!response.ok) throw new Error("HTTP " + response.status);
      html = await response.text();
    } catch (err) {
      if (number === this.fetches && panel.isConnected && !box.querySelector(".relations-body")) {
        box.textContent = "Cannot load the relations: " + err.message;
      }
      return;
    }
    if (number !== this.fetches || !panel.isConnected) return;
    box.innerHTML = html;
    const body = box.querySelector(".relations-body");
    if (body) this.follow(JSON.parse(body.dataset.watches || "[]"), Number(body.dataset.poll || 0));
  }

  // Watches the kinds the tree was read from (the same shared watches the server read);
  // a change after their first state fetches the tree again. Over HTTP streaming the
  // page's streams carry few watches, the page's own lists first: the tree is fetched
  // again every `poll` seconds instead.
  follow(watches, poll) {
    if (this.manager.mode === "stream" && watches.length) { poll = poll || RELATIONS_POLL; watches = []; }
    const wanted = new Map(watches.map((w) => [JSON.stringify(w), w]));
    const kept = [];
    for (const entry of this.watches) {
      if (wanted.has(entry.key)) { kept.push(entry); wanted.delete(entry.key); }
      else this.manager.remove(entry.id);
    }
    for (const [key, params] of wanted) {
      let synced = false;
      const sink = {
        start() { synced = false; }, reset() {}, error() {}, stale() {},
        synced() { synced = true; },
        event: () => { if (synced) this.schedule(); },
      };
      kept.push({ key, id: this.manager.add(params, sink) });
    }
    this.watches = kept;
    clearInterval(this.poll);
    this.poll = poll ? setInterval(() => this.load(), poll * 1000) : null;
  }

  close() {
    this.fetches++;  // an answer still on its way is for a panel that is gone
    for (const entry of this.watches) this.manager.remove(entry.id);
    this.watches = [];
    clearTimeout(this.timer);
    clearInterval(this.poll);
    this.timer = this.poll = null;
  }
}
