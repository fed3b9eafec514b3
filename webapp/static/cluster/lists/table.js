// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// table.js: a table whose rows are patched by key, never re-rendered; sorted and filtered
// in the page. The panel's events use it as is; the page's lists extend it (list-table.js).

import { agoWords, refreshAges } from "../ages.js";
import { fragmentOf } from "../fragment.js";

export class Table {
  constructor(table, filter) {
    this.table = table;
    this.body = table.querySelector("tbody.rows");
    this.errorRow = table.querySelector("tr.error-row");
    this.emptyRow = table.querySelector("tr.empty-row");
    this.filteredRow = table.querySelector("tr.filtered-row");
    this.staleRow = table.querySelector("tr.stale-row");
    this.section = table.closest(".k8s-section");
    this.count = this.section?.querySelector(".count") || null;
    this.note = this.section?.querySelector(".stale-note") || null;
    this.stale = false;        // set by the watch (setStale), from the page's first render on
    this.staleSince = "";
    this.filter = filter;
    this.query = "";
    this.byKey = new Map();  // data-key -> row: lookups stay cheap with thousands of rows
    this.refreshing = 0;
    for (const row of this.rows()) this.byKey.set(row.dataset.key, row);
    this.columns = new Set(Array.from(table.querySelectorAll("thead th[data-col]"), (th) => th.dataset.col));
    this.sortCol = table.dataset.sortCol || "name";
    this.sortDir = table.dataset.sortDir === "desc" ? -1 : 1;
    for (const th of table.querySelectorAll("thead th[data-col]")) {
      th.querySelector("button.sort")?.addEventListener("click", () => this.sortBy(th.dataset.col));
    }
    if (filter) filter.addEventListener("input", () => this.applyFilter(filter.value));
    this.sortAll();
    this.refresh();
  }

  rows() { return Array.from(this.body.children); }

  find(key) { return this.byKey.get(key) || null; }

  sortValue(row, col) {
    const cell = row.querySelector('td[data-col="' + col + '"]');
    return cell ? cell.dataset.sort || "" : "";
  }

  compare(a, b) {
    const th = this.table.querySelector('thead th[data-col="' + this.sortCol + '"]');
    const x = this.sortValue(a, this.sortCol), y = this.sortValue(b, this.sortCol);
    let order;
    if (th && th.hasAttribute("data-numeric")) {
      // Unknown values (empty) sort last whatever the direction.
      if (x === "" || y === "") order = x === y ? 0 : (x === "" ? 1 : -1) * this.sortDir;
      else order = Number(x) - Number(y);
    } else {
      order = x.localeCompare(y, undefined, { numeric: true });
    }
    if (order === 0 && a.dataset.seq && b.dataset.seq) {
      order = Number(a.dataset.seq) - Number(b.dataset.seq);  // events of one second
    }
    if (order === 0) {  // kubectl's order: namespace, then name
      order = (a.dataset.namespace || "").localeCompare(b.dataset.namespace || "") ||
        (a.dataset.name || "").localeCompare(b.dataset.name || "", undefined, { numeric: true });
    }
    return order * this.sortDir;
  }

  sortBy(col) {
    if (this.sortCol === col) this.sortDir = -this.sortDir;
    else { this.sortCol = col; this.sortDir = 1; }
    this.table.dataset.sortCol = col;
    this.table.dataset.sortDir = this.sortDir === 1 ? "asc" : "desc";
    for (const th of this.table.querySelectorAll("thead th[data-col]")) {
      th.setAttribute("aria-sort", th.dataset.col !== col ? "none"
        : this.sortDir === 1 ? "ascending" : "descending");
    }
    this.sortAll();
  }

  sortAll() {
    const sorted = this.rows().sort((a, b) => this.compare(a, b));
    // Moving only rows that are out of place keeps the DOM (and selection) calm.
    sorted.forEach((row, i) => { if (this.body.children[i] !== row) this.body.insertBefore(row, this.body.children[i] || null); });
  }

  insertSorted(row) {
    const rows = this.body.children;
    let low = 0, high = rows.length;
    while (low < high) {  // binary search: thousands of rows stay cheap
      const mid = (low + high) >> 1;
      if (this.compare(rows[mid], row) <= 0) low = mid + 1; else high = mid;
    }
    this.body.insertBefore(row, rows[low] || null);
  }

  upsert(html) {
    const row = fragmentOf(html.trim()).firstElementChild;
    if (row && row.dataset.key) this.upsertRow(row);
  }

  upsertRow(row) {
    // A row rendered for another table (the panel riding on a page table's stream)
    // may carry a NAMESPACE cell this one has no header for.
    for (const cell of row.querySelectorAll("td[data-col]")) if (!this.columns.has(cell.dataset.col)) cell.remove();
    const old = this.find(row.dataset.key);
    if (old) {
      if (old.classList.contains("selected")) row.classList.add("selected");
      const stays = this.sortValue(old, this.sortCol) === this.sortValue(row, this.sortCol);
      if (stays) old.replaceWith(row);
      else { old.remove(); this.insertSorted(row); }
    } else {
      this.insertSorted(row);
      row.classList.add("fresh");
    }
    this.byKey.set(row.dataset.key, row);
    this.matchFilter(row);
    refreshAges(row);
    this.scheduleRefresh();
  }

  remove(key) {
    const row = this.find(key);
    if (row) { row.remove(); this.byKey.delete(key); this.scheduleRefresh(); }
  }

  // Rows of a (re)started watch are unconfirmed until the new state names them again.
  markUnconfirmed() { for (const row of this.rows()) row.dataset.unconfirmed = "1"; }

  confirm(key) { const row = this.find(key); if (row) delete row.dataset.unconfirmed; }

  sweepUnconfirmed() {
    for (const row of this.body.querySelectorAll("tr[data-unconfirmed]")) {
      row.remove();
      this.byKey.delete(row.dataset.key);
    }
    this.refresh();
  }

  showError(message) {
    if (!this.errorRow) return;
    this.errorRow.querySelector(".message").textContent = message;
    this.errorRow.hidden = false;
    this.refresh();
  }

  clearError() {
    if (this.errorRow && !this.errorRow.hidden) { this.errorRow.hidden = true; this.refresh(); }
  }

  // Not live (`since`: ISO time it was last live, "" when not known) or live again (null):
  // rows dimmed, ages frozen, and the section says since when.
  setStale(since) {
    const stale = since !== null;
    since = since || "";
    if (stale !== this.stale || since !== this.staleSince) {
      this.stale = stale;
      this.staleSince = since;
      for (const el of [this.table, this.section]) {
        if (!el) continue;
        el.classList.toggle("is-stale", stale);
        if (stale && since) el.dataset.staleSince = since; else delete el.dataset.staleSince;
      }
      refreshAges(this.table);  // frozen at `since`, or counting again
      this.refresh();
    }
    if (!this.note) return;
    const when = Date.parse(since);
    const text = !stale ? "" : isNaN(when) ? "Not live · last known state"
      : "Not live · last updated " + agoWords((Date.now() - when) / 1000) + " ago";
    if (this.note.textContent !== text) this.note.textContent = text;
    this.note.hidden = !stale;
  }

  matchFilter(row) {
    row.hidden = this.query !== "" && !row.textContent.toLowerCase().includes(this.query);
  }

  applyFilter(text) {
    this.query = text.trim().toLowerCase();
    for (const row of this.rows()) this.matchFilter(row);
    this.refresh();
  }

  // A snapshot of thousands of rows arrives as thousands of events: count once a frame.
  scheduleRefresh() {
    if (!this.refreshing) this.refreshing = requestAnimationFrame(() => this.refresh());
  }

  refresh() {
    if (this.refreshing) { cancelAnimationFrame(this.refreshing); this.refreshing = 0; }
    const rows = this.rows();
    const shown = rows.filter((row) => !row.hidden).length;
    const failing = this.errorRow && !this.errorRow.hidden;
    // An empty stale table knows nothing: "No pods" would be a claim about now.
    if (this.emptyRow) this.emptyRow.hidden = rows.length > 0 || failing || this.stale;
    this.showStaleRow(rows.length);
    if (this.filteredRow) this.filteredRow.hidden = rows.length === 0 || shown > 0;
    if (this.count) this.count.textContent = this.query ? shown + " of " + rows.length : String(rows.length);
  }

  // The row that stands in for the rows while the table is stale and has none.
  showStaleRow(rowCount) {
    if (!this.staleRow) return;
    const failing = this.errorRow && !this.errorRow.hidden;
    this.staleRow.hidden = rowCount > 0 || failing || !this.stale;
    const text = this.staleSince ? "Nothing here when last updated." : "Nothing known: the cluster view is not live.";
    const cell = this.staleRow.firstElementChild;
    if (cell && cell.textContent !== text) cell.textContent = text;
  }
}
