// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// list-table.js: a list of the page as a window on the server's list: its first screen
// rendered by the server, the rest paged in as it scrolls. Filter and sort are the
// server's, over the whole list (watch/listing.py); live events touch the rows on screen
// and the counts, and never build rows nobody sees.

import { refreshAges } from "../ages.js";
import { readableProblem } from "../problems.js";
import { rowAttention, rowText, rowsOf } from "./rows.js";
import { Table } from "./table.js";

export class ListTable extends Table {
  // `list`: the page's ListState (filter, sort), shared by its lists.
  constructor(section, list) {
    super(section.querySelector("table"), null);
    this.section = section;
    this.list = list;
    this.rowsUrl = section.dataset.rowsUrl;
    this.total = Number(section.dataset.total || 0);
    this.nextOffset = section.dataset.nextOffset ? Number(section.dataset.nextOffset) : null;
    this.moreRow = this.table.querySelector("tr.more-row");
    // key -> {namespace, html, text, attention, unseen}: every object the watches told of.
    // `text` (the filter's) is read from `html` only once a filter needs it.
    this.known = new Map();
    this.matching = 0;        // how many of them match the filter
    // key -> {html, insert} or null (remove): the rows' changes, applied once a frame.
    this.pending = new Map();
    this.syncing = new Set(); // sinks whose (re)started state is still arriving
    // key -> {namespace, html}: objects first told of while their watch was syncing, in
    // a list that shows every row. The server rendered the page before they existed (a
    // sync's objects are otherwise rows already shown or paged in), so they are shown
    // once the sync ends. A longer list only counts them (its rows come page by page).
    this.arrived = new Map();
    this.counted = false;     // every watch synced once: counts are the page's own
    this.fetching = null;     // the AbortController of the rows being fetched
    this.sortCol = this.table.dataset.sortCol || "";
    this.sortAll();
    const more = this.moreRow && this.moreRow.querySelector("[data-load-more]");
    if (more) more.addEventListener("click", () => this.loadMore());
    if (this.moreRow && "IntersectionObserver" in window) {
      new IntersectionObserver((entries) => {
        if (entries.some((entry) => entry.isIntersecting)) this.loadMore();
      }, { rootMargin: "600px" }).observe(this.moreRow);
    }
    this.refresh();
  }

  matchFilter() {}  // the server filtered these rows

  sortBy(col) { this.list.sortBy(col); }

  // The list's sort changed (the page's state): headers say so, rows come again.
  showSort(col, dir) {
    this.sortCol = col;
    this.sortDir = dir === "desc" ? -1 : 1;
    this.table.dataset.sortCol = col;
    this.table.dataset.sortDir = dir;
    for (const th of this.table.querySelectorAll("thead th[data-col]")) {
      th.setAttribute("aria-sort", th.dataset.col !== col ? "none" : dir === "desc" ? "descending" : "ascending");
    }
  }

  matches(entry) {
    if (this.list.attention && !entry.attention) return false;
    const words = this.list.words();
    if (!words.length) return true;
    if (entry.text === null) { entry.text = rowText(entry.html); entry.html = null; }
    return words.every((word) => entry.text.includes(word));
  }

  setKnown(key, entry) {
    const old = this.known.get(key);
    if (old && this.matches(old)) this.matching--;
    if (entry) {
      this.known.set(key, entry);
      if (this.matches(entry)) this.matching++;
    } else {
      this.known.delete(key);
    }
    return old;
  }

  recount() {
    this.matching = 0;
    for (const entry of this.known.values()) if (this.matches(entry)) this.matching++;
  }

  inScope(namespace, sink) { return sink.namespace === null || namespace === sink.namespace; }

  // Whether a watch covering this namespace is receiving its snapshot (whose rows the page
  // already shows or pages in): a new object of a namespace whose watch is live is shown
  // even while another namespace's watch is still syncing.
  syncingFor(namespace) {
    for (const sink of this.syncing) if (this.inScope(namespace, sink)) return true;
    return false;
  }

  startSync(sink) {
    this.applyPending();
    this.syncing.add(sink);
    for (const entry of this.known.values()) if (this.inScope(entry.namespace, sink)) entry.unseen = true;
    for (const row of this.rows()) if (this.inScope(row.dataset.namespace || "", sink)) row.dataset.unconfirmed = "1";
  }

  endSync(sink) {
    this.applyPending();  // a change waiting for its frame confirms its row
    this.syncing.delete(sink);
    for (const [key, entry] of this.known) if (entry.unseen && this.inScope(entry.namespace, sink)) this.setKnown(key, null);
    for (const [key, late] of this.arrived) {
      if (!this.inScope(late.namespace, sink)) continue;
      this.arrived.delete(key);
      const entry = this.known.get(key);
      if (entry && !this.byKey.has(key) && this.matches(entry)) this.pending.set(key, { html: late.html, insert: true });
    }
    for (const row of this.body.querySelectorAll("tr[data-unconfirmed]")) {
      if (this.inScope(row.dataset.namespace || "", sink)) { row.remove(); this.byKey.delete(row.dataset.key); }
    }
    if (this.syncing.size === 0) this.counted = true;
    this.refresh();
  }

  // An object added or changed: its row is replaced if it is on screen; a new object is
  // shown if it belongs among the rows on screen; otherwise only the counts move. Nothing
  // here parses the row: that waits for the frame, and only for rows that will be shown.
  change(key, namespace, html) {
    const entry = { namespace, html, text: null, attention: rowAttention(html), unseen: false };
    const old = this.setKnown(key, entry);
    const match = this.matches(entry);
    const queued = this.pending.get(key);
    if (this.byKey.has(key)) this.pending.set(key, match ? { html, insert: false } : null);
    else if (queued) { if (match) queued.html = html; else this.pending.delete(key); }
    else if (match && !old && !this.syncingFor(namespace)) this.pending.set(key, { html, insert: true });
    else if (!old && this.nextOffset === null && this.syncingFor(namespace)) this.arrived.set(key, { namespace, html });
    if (this.arrived.has(key)) this.arrived.get(key).html = html;
    this.scheduleRefresh();
  }

  forget(key) {
    this.setKnown(key, null);
    if (this.byKey.has(key)) this.pending.set(key, null);
    else if (!this.pending.delete(key) && !this.counted && this.total > 0) this.total--;
    this.scheduleRefresh();
  }

  // A new row belongs on screen if every row is here, or if it sorts before the last one.
  belongs(row) {
    if (this.nextOffset === null) return true;
    const last = this.body.lastElementChild;
    return !last || this.compare(row, last) < 0;
  }

  // The rows' changes since the last frame, each object's last one only.
  applyPending() {
    if (!this.pending.size) return;
    const pending = this.pending;
    this.pending = new Map();
    for (const [key, change] of pending) {
      if (!change) {
        const row = this.find(key);
        if (row) { row.remove(); this.byKey.delete(key); }
        continue;
      }
      const row = rowsOf(change.html)[0];
      if (!row || (!this.byKey.has(key) && !this.belongs(row))) continue;
      this.upsertRow(row);
    }
  }

  // --- pages of rows, from the server ---

  url(offset) {
    const url = new URL(this.rowsUrl, location.href);
    for (const [name, value] of this.list.params()) {
      url.searchParams.delete(name);
      if (value) url.searchParams.set(name, value);
    }
    url.searchParams.set("offset", String(offset));
    return url;
  }

  async fetchRows(offset) {
    if (this.fetching) this.fetching.abort();
    const controller = new AbortController();
    this.fetching = controller;
    try {
      const response = await fetch(this.url(offset), { credentials: "same-origin", signal: controller.signal, headers: { "Accept": "text/html" } });
      if (!response.ok) {
        let message = "The rows could not be loaded (HTTP " + response.status + ")";
        try { message = readableProblem((await response.json()).error); } catch (err) { /* not JSON */ }
        this.showError(message);
        return null;
      }
      const html = await response.text();
      return { rows: rowsOf(html), total: Number(response.headers.get("X-Total-Count") || 0),
        next: response.headers.get("X-Next-Offset") ? Number(response.headers.get("X-Next-Offset")) : null };
    } catch (err) {
      if (err.name !== "AbortError") this.showError("The rows could not be loaded: " + err.message);
      return null;
    } finally {
      if (this.fetching === controller) this.fetching = null;
    }
  }

  // The first screen again (the filter or the sort changed): the server's rows replace these.
  async reload() {
    this.recount();
    const page = await this.fetchRows(0);
    if (!page) return;
    this.pending.clear();  // the server's rows are newer than the old rows' changes
    this.body.replaceChildren(...page.rows);
    this.byKey = new Map(page.rows.map((row) => [row.dataset.key, row]));
    if (!this.counted) this.total = page.total;
    this.nextOffset = page.next;
    refreshAges(this.body);
    this.refresh();
  }

  async loadMore() {
    if (this.fetching || this.nextOffset === null || this.moreRow.hidden) return;
    this.applyPending();  // the offset counts the rows on screen
    const page = await this.fetchRows(this.body.children.length);
    if (!page) return;
    this.applyPending();
    for (const row of page.rows) {
      if (this.byKey.has(row.dataset.key)) continue;  // shown already (it arrived live)
      this.body.appendChild(row);
      this.byKey.set(row.dataset.key, row);
    }
    if (!this.counted) this.total = page.total;
    this.nextOffset = page.next;
    refreshAges(this.body);
    this.refresh();
  }

  // Once a frame: the rows' changes, then the counts.
  refresh() {
    if (this.refreshing) { cancelAnimationFrame(this.refreshing); this.refreshing = 0; }
    if (!this.list) return;  // Table's constructor: not ready yet
    this.applyPending();
    const shown = this.body.children.length;
    const total = this.counted ? this.matching : this.total;
    const failing = this.errorRow && !this.errorRow.hidden;
    const filtering = this.list.filtering();
    if (this.count && this.count.textContent !== String(total)) this.count.textContent = String(total);
    if (this.emptyRow) this.emptyRow.hidden = total > 0 || shown > 0 || failing || this.stale || filtering;
    if (this.filteredRow) this.filteredRow.hidden = total > 0 || shown > 0 || failing || !filtering;
    this.showStaleRow(shown);
    if (this.moreRow) this.moreRow.hidden = this.nextOffset === null || shown >= total;
  }
}
