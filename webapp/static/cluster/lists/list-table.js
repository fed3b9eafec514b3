// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// list-table.js: a list of the page as a window on the server's list: its first screen
// rendered by the server, the rest paged in as it scrolls. Filter and sort are the
// server's, over the whole list (watch/listing.py); live, the list is a view
// (watch/view.py): the server sends the rows it shows and the counts, never the list.

import { refreshAges } from "../ages.js";
import { readableProblem } from "../problems.js";
import { rowsOf } from "./rows.js";
import { ViewSink } from "./sinks.js";
import { Table } from "./table.js";

// Rows a list shows at first, and adds each time it is scrolled to its end
// (webapp/watch/listing.py PAGE_SIZE).
const PAGE_ROWS = 100;

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
    this.limit = Math.max(PAGE_ROWS, this.body.children.length);  // the window's rows
    this.view = null;         // {manager, params, namespaces, initial, id} once live
    this.fetching = null;     // the AbortController of the rows being fetched
    this.sortCol = this.table.dataset.sortCol || "";
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
  sortAll() {}      // and ordered them

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

  // --- live: a view of the list (docs/watch-protocol.md, "Views") ---

  // What this list asks the server for: its order, its filter and how many rows it shows.
  viewSpec() {
    const th = this.list.sort && this.table.querySelector('thead th[data-col="' + this.list.sort + '"]');
    return { namespaces: this.view.namespaces, sort: this.list.sort || null, dir: this.list.dir,
      q: this.list.q, attention: this.list.attention, numeric: Boolean(th && th.hasAttribute("data-numeric")),
      limit: this.limit };
  }

  // Follows the list through `manager`: `params` its watch (no namespace when it shows
  // several, `namespaces`); `initial` as manager.add takes it. Its watch's id.
  follow(manager, params, namespaces, initial) {
    this.view = { manager, params, namespaces, initial, id: null };
    this.view.id = manager.add(params, new ViewSink(this), null, initial, false, this.viewSpec());
    return this.view.id;
  }

  // The server's window: these rows, in this order, are what the list shows.
  showWindow(message) {
    const selected = this.selectedKey();
    const rows = message.rows.map(([, html]) => this.rowOf(html, selected)).filter(Boolean);
    this.body.replaceChildren(...rows);
    this.byKey = new Map(rows.map((row) => [row.dataset.key, row]));
    refreshAges(this.body);
    this.setCounts(message);
  }

  // What changed in the window: rows gone, then rows put at their places, in order.
  applyRows(message) {
    const selected = this.selectedKey();
    const gone = new Set();
    for (const key of message.drop) {
      const row = this.byKey.get(key);
      if (row) { row.remove(); this.byKey.delete(key); gone.add(key); }
    }
    for (const [index, key, html] of message.put) {
      const row = this.rowOf(html, selected);
      if (!row) continue;
      if (!gone.has(key)) row.classList.add("fresh");
      this.body.insertBefore(row, this.body.children[index] || null);
      this.byKey.set(key, row);
      refreshAges(row);
    }
    this.setCounts(message);
  }

  setCounts(message) {
    this.total = message.total;
    this.nextOffset = this.body.children.length < this.total ? this.body.children.length : null;
    this.scheduleRefresh();
  }

  selectedKey() {
    const row = this.body.querySelector("tr.selected");
    return row ? row.dataset.key : null;
  }

  rowOf(html, selected) {
    const row = rowsOf(html)[0];
    if (row && selected && row.dataset.key === selected) row.classList.add("selected");
    return row || null;
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

  // The first screen again (the filter or the sort changed): live, the view is asked
  // for anew; otherwise the server's rows replace these.
  async reload() {
    this.limit = PAGE_ROWS;
    if (this.view) {
      const { manager, params, namespaces, initial } = this.view;
      manager.remove(this.view.id);
      this.follow(manager, params, namespaces, initial);
      return;
    }
    const page = await this.fetchRows(0);
    if (!page) return;
    this.body.replaceChildren(...page.rows);
    this.byKey = new Map(page.rows.map((row) => [row.dataset.key, row]));
    this.total = page.total;
    this.nextOffset = page.next;
    refreshAges(this.body);
    this.refresh();
  }

  // Scrolled to the end: live, the window grows (the server sends the rows that follow);
  // otherwise the next page is fetched.
  async loadMore() {
    if (this.nextOffset === null || this.moreRow.hidden) return;
    if (this.view) {
      if (this.limit > this.body.children.length) return;  // asked already
      this.limit = this.body.children.length + PAGE_ROWS;
      this.view.manager.resize(this.view.id, this.limit);
      return;
    }
    if (this.fetching) return;
    const page = await this.fetchRows(this.body.children.length);
    if (!page) return;
    for (const row of page.rows) {
      if (this.byKey.has(row.dataset.key)) continue;
      this.body.appendChild(row);
      this.byKey.set(row.dataset.key, row);
    }
    this.total = page.total;
    this.nextOffset = page.next;
    refreshAges(this.body);
    this.refresh();
  }

  // Once a frame: the counts and what stands in for missing rows.
  refresh() {
    if (this.refreshing) { cancelAnimationFrame(this.refreshing); this.refreshing = 0; }
    if (!this.list) return;  // Table's constructor: not ready yet
    const shown = this.body.children.length;
    const total = this.total;
    const failing = this.errorRow && !this.errorRow.hidden;
    const filtering = this.list.filtering();
    if (this.count && this.count.textContent !== String(total)) this.count.textContent = String(total);
    if (this.emptyRow) this.emptyRow.hidden = total > 0 || shown > 0 || failing || this.stale || filtering;
    if (this.filteredRow) this.filteredRow.hidden = total > 0 || shown > 0 || failing || !filtering;
    this.showStaleRow(shown);
    if (this.moreRow) this.moreRow.hidden = this.nextOffset === null || shown >= total;
  }
}
