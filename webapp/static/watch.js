// agentwatch Cluster tab: every watch of the page over one WebSocket (agentwatch.watch.v1,
// docs/watch-protocol.md), HTTP streaming when WebSockets fail, rows patched in place by
// key, the connection badge. The side panel (its live events, logs and actions) is
// panel.js: a click on a row asks for it with a `cluster:open` event on #cluster.
"use strict";

(function () {
  const root = document.getElementById("cluster");
  if (!root) return;

  const PROTOCOL = "agentwatch.watch.v1";
  const TICKET_PREFIX = "agentwatch.ticket.";
  const FAILURES_BEFORE_FALLBACK = 3;   // WebSocket failures within FAILURE_WINDOW
  const FAILURE_WINDOW = 60000;
  const WEBSOCKET_RETRY = 60000;        // while on HTTP streaming, try the WebSocket again
  const AGE_REFRESH = 5000;
  const TICK = 1000;                    // "last updated … ago" and the retry countdown
  const STALE_GRACE = 2000;             // a connection blip this short does not dim the tables
  // HTTP streaming: at most STREAM_WATCHES watches per stream (webapp/watch/stream.py
  // MAX_WATCHES) and at most MAX_STREAMS streams a page: browsers allow six HTTP/1.1
  // connections per host, and the panel's logs, actions and the rows' pages need some.
  const STREAM_WATCHES = 10;
  const MAX_STREAMS = 3;
  const STREAM_REOPENS = 3;             // closed streams reopened without data before giving up
  // Text of the Python libraries under the relay, never shown as is (the server cleans it
  // too; this is the second line of defence).
  const LIBRARY_TEXT = /HTTPS?ConnectionPool|Max retries|urllib3|\[Errno|NewConnectionError|Traceback/;

  function csrfToken() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  function objectKey(obj) {
    const meta = (obj && obj.metadata) || {};
    return meta.uid || (meta.namespace || "") + "/" + (meta.name || "");
  }

  // --- ages, as kubectl prints them (duration.HumanDuration) -----------------------------

  function humanDuration(s) {
    s = Math.floor(s);
    if (s < -1) return "<invalid>";
    if (s < 0) return "0s";
    if (s < 120) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 10) return s % 60 === 0 ? m + "m" : m + "m" + (s % 60) + "s";
    if (m < 180) return m + "m";
    const h = Math.floor(s / 3600);
    if (h < 8) return m % 60 === 0 ? h + "h" : h + "h" + (m % 60) + "m";
    if (h < 48) return h + "h";
    const d = Math.floor(h / 24);
    if (h < 24 * 8) return h % 24 === 0 ? d + "d" : d + "d" + (h % 24) + "h";
    if (h < 24 * 365 * 2) return d + "d";
    const y = Math.floor(d / 365);
    if (h < 24 * 365 * 8) return d % 365 === 0 ? y + "y" : y + "y" + (d % 365) + "d";
    return y + "y";
  }

  // Ages of a stale table are frozen at the moment it was last live (they were true then,
  // and nobody knows what is true now); without that moment they stay as rendered.
  function refreshAges(scope) {
    const now = Date.now();
    for (const el of (scope || document).querySelectorAll("time[data-age]")) {
      const stale = el.closest(".is-stale");
      const at = stale ? Date.parse(stale.dataset.staleSince || "") : now;
      if (isNaN(at)) continue;
      const when = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(when)) el.textContent = humanDuration((at - when) / 1000);
    }
  }

  // "40 s", "3 min", "2 h", "5 d": how long ago a table was last live.
  function agoWords(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    if (seconds < 60) return seconds + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min";
    if (seconds < 2 * 86400) return Math.floor(seconds / 3600) + " h";
    return Math.floor(seconds / 86400) + " d";
  }

  // What the page says about a problem: the server's sentence, or a plain one instead of
  // a library's exception text.
  function readableProblem(error) {
    const text = String((error && (error.message || error.reason)) || "").trim();
    return !text || LIBRARY_TEXT.test(text) ? "Cannot reach the cluster" : text;
  }

  // Connectivity problems make a table stale; a 403 or a 404 is an answer, shown in its table.
  function isConnectivity(error) {
    const code = Number(error && error.code) || 0;
    return code === 0 || code >= 500;
  }

  function parseTime(value) {
    const when = typeof value === "string" ? Date.parse(value) : NaN;
    return isNaN(when) ? null : when;
  }

  // --- a table whose rows are patched by key, never re-rendered --------------------------

  class Table {
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
      const template = document.createElement("template");
      template.innerHTML = html.trim();
      const row = template.content.firstElementChild;
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
      if (this.staleRow) {
        this.staleRow.hidden = rows.length > 0 || failing || !this.stale;
        const text = this.staleSince ? "Nothing here when last updated." : "Nothing known: the cluster view is not live.";
        const cell = this.staleRow.firstElementChild;
        if (cell && cell.textContent !== text) cell.textContent = text;
      }
      if (this.filteredRow) this.filteredRow.hidden = rows.length === 0 || shown > 0;
      if (this.count) this.count.textContent = this.query ? shown + " of " + rows.length : String(rows.length);
    }
  }

  // What a watch does with its messages: rows into a table, plus optional hooks.
  class TableSink {
    constructor(table, hooks) { this.table = table; this.hooks = hooks || {}; }
    start() { this.table.markUnconfirmed(); }
    event(event, html) {
      const obj = event.object || {};
      if (event.type === "DELETED") this.table.remove(objectKey(obj));
      else if (html) { this.table.upsert(html); this.table.confirm(objectKey(obj)); }
      if (this.hooks.object) this.hooks.object(event.type, obj);
    }
    synced() { this.table.clearError(); this.table.sweepUnconfirmed(); }
    reset() { this.table.markUnconfirmed(); }
    // Connectivity problems go to the page's one banner; the table only turns stale.
    error(error) {
      if (isConnectivity(error)) this.table.clearError();
      else this.table.showError(readableProblem(error));
    }
    stale(since) { this.table.setStale(since); }
  }

  // --- a list of the page: its first screen from the server, the rest paged -------------
  // Filter and sort are the server's, over the whole list (watch/listing.py); live events
  // touch the rows on screen and the counts, and never build rows nobody sees.

  const ENTITIES = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&#39;": "'", "&#34;": '"', "&quot;": '"' };

  // A row's text for the filter (what the server's filter reads: its cells' text).
  function rowText(html) {
    return html.replace(/<[^>]*>/g, "\n").replace(/&(amp|lt|gt|#39|#34|quot);/g, (m) => ENTITIES[m]).toLowerCase();
  }

  function rowAttention(html) {
    const head = html.slice(0, html.indexOf(">") + 1);
    return / data-attention[\s>]/.test(head);
  }

  function parseRows(html) {
    const template = document.createElement("template");
    template.innerHTML = html;
    return Array.from(template.content.children).filter((el) => el.tagName === "TR" && el.dataset.key);
  }

  class ListTable extends Table {
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
        const row = parseRows(change.html)[0];
        if (!row || (!this.byKey.has(key) && !this.belongs(row))) continue;
        this.upsertRow(row);
      }
    }

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
        return { rows: parseRows(html), total: Number(response.headers.get("X-Total-Count") || 0),
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
      if (this.staleRow) {
        this.staleRow.hidden = shown > 0 || failing || !this.stale;
        const text = this.staleSince ? "Nothing here when last updated." : "Nothing known: the cluster view is not live.";
        const cell = this.staleRow.firstElementChild;
        if (cell && cell.textContent !== text) cell.textContent = text;
      }
      if (this.moreRow) this.moreRow.hidden = this.nextOffset === null || shown >= total;
    }
  }

  class ListSink {
    constructor(table, namespace) { this.table = table; this.namespace = namespace; }
    start() { this.table.startSync(this); }
    event(event, html) {
      const obj = event.object || {};
      const key = objectKey(obj);
      if (event.type === "DELETED") this.table.forget(key);
      else if (html) this.table.change(key, (obj.metadata && obj.metadata.namespace) || "", html);
    }
    synced() { this.table.clearError(); this.table.endSync(this); }
    reset() { this.table.startSync(this); }
    error(error) {
      if (isConnectivity(error)) this.table.clearError();
      else this.table.showError(readableProblem(error));
    }
    stale(since) { this.table.setStale(since); }
  }

  // The page's list state, as its URL holds it: filter and sort change here without a
  // reload (the URL follows, so reload, back and links keep them); kind, namespaces and the
  // label selector are the page's watches, changed by navigating.
  class ListState {
    constructor(form) {
      this.form = form;
      this.tables = [];
      const url = new URL(location.href);
      this.q = url.searchParams.get("q") || "";
      this.sort = url.searchParams.get("sort") || "";
      this.dir = url.searchParams.get("dir") === "desc" ? "desc" : "asc";
      this.attention = ["1", "true"].includes(url.searchParams.get("attention"));
      this.watched = this.watchedOf(url);
      this.timer = 0;
      const filter = form && form.querySelector("[data-filter]");
      if (filter) {
        filter.addEventListener("input", () => {
          clearTimeout(this.timer);
          this.timer = setTimeout(() => this.setFilter(filter.value), 250);
        });
      }
      window.addEventListener("popstate", () => this.restore());
    }

    // What the page's watches are made of: another value is another page.
    watchedOf(url) {
      return JSON.stringify(["kind", "namespace", "selector", "attention"].map((name) => url.searchParams.getAll(name)));
    }

    // Asked for every event: split once per filter text.
    words() {
      if (this.wordsOf !== this.q) { this.wordsOf = this.q; this.wordList = this.q.toLowerCase().split(/\s+/).filter(Boolean); }
      return this.wordList;
    }

    filtering() { return this.words().length > 0 || this.attention; }

    params() { return [["q", this.q], ["sort", this.sort], ["dir", this.sort && this.dir === "desc" ? "desc" : ""]]; }

    writeURL(push) {
      const url = new URL(location.href);
      for (const [name, value] of this.params()) {
        if (value) url.searchParams.set(name, value); else url.searchParams.delete(name);
      }
      if (url.href === location.href) return;
      if (push) history.pushState(null, "", url); else history.replaceState(history.state, "", url);
    }

    // The form's hidden fields follow, so Apply keeps the sort.
    writeForm() {
      if (!this.form) return;
      for (const name of ["sort", "dir"]) {
        let input = this.form.querySelector('input[type="hidden"][name="' + name + '"]');
        const value = name === "sort" ? this.sort : (this.sort ? this.dir : "");
        if (!value) { if (input) input.remove(); continue; }
        if (!input) {
          input = document.createElement("input");
          input.type = "hidden";
          input.name = name;
          this.form.prepend(input);
        }
        input.value = value;
      }
    }

    setFilter(text) {
      const q = text.trim();
      if (q === this.q) return;
      this.q = q;
      this.writeURL(false);
      for (const table of this.tables) table.reload();
    }

    sortBy(col) {
      if (this.sort === col) this.dir = this.dir === "asc" ? "desc" : "asc";
      else { this.sort = col; this.dir = "asc"; }
      this.writeURL(true);
      this.applySort();
    }

    applySort() {
      this.writeForm();
      for (const table of this.tables) { table.showSort(this.sort, this.dir); table.reload(); }
    }

    // Back or forward: the sort and the filter of that entry; another list is another page.
    restore() {
      const url = new URL(location.href);
      if (this.watchedOf(url) !== this.watched) { location.replace(url.href); return; }
      const q = url.searchParams.get("q") || "";
      const sort = url.searchParams.get("sort") || "";
      const dir = url.searchParams.get("dir") === "desc" ? "desc" : "asc";
      if (q === this.q && sort === this.sort && dir === this.dir) return;  // the panel's entry
      this.q = q;
      this.sort = sort;
      this.dir = dir;
      const filter = this.form && this.form.querySelector("[data-filter]");
      if (filter) filter.value = this.q;
      this.applySort();
    }
  }

  // One entry of the workloads' strip, live: how many objects, how many need attention.
  // Counted as events come, shown once a frame.
  class Tally {
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

  // One watch's messages to several sinks (a list and the strip's count of the same kind).
  function fanOut(sinks) {
    const each = (method) => (...args) => { for (const sink of sinks) if (sink[method]) sink[method](...args); };
    return { start: each("start"), event: each("event"), synced: each("synced"), reset: each("reset"),
      error: each("error"), stale: each("stale") };
  }

  // The namespace picker: its checkboxes narrowed to what the search says.
  function namespacePicker(root) {
    const picker = root.querySelector("[data-namespace-picker]");
    if (!picker) return;
    const search = picker.querySelector("[data-namespace-search]");
    if (!search) return;
    search.addEventListener("input", () => {
      const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      for (const item of picker.querySelectorAll(".namespace-options li")) {
        const text = item.textContent.toLowerCase();
        item.hidden = !words.every((word) => text.includes(word));
      }
    });
    search.addEventListener("keydown", (event) => {
      if (event.key !== "Enter") return;
      event.preventDefault();  // Enter ticks the one namespace left, it does not submit
      const left = Array.from(picker.querySelectorAll(".namespace-options li")).filter((li) => !li.hidden);
      if (left.length === 1) { const box = left[0].querySelector("input"); box.checked = !box.checked; }
    });
    picker.addEventListener("toggle", () => { if (picker.open) search.focus(); });
  }

  // --- the connection badge and the page's one banner -----------------------------------

  // The badge names the cluster view's transport: Live (WebSocket), Live (HTTP streaming),
  // Reconnecting, Disconnected; Connecting before the first answer.
  class Badge {
    constructor(el) {
      this.el = el;
      this.hint = document.getElementById("watch-hint");
    }
    show(state, label, title) {
      if (!this.el) return;
      const shown = state + "\n" + label + "\n" + title;
      if (shown === this.shown) return;  // asked after every message: touch the DOM on change only
      this.shown = shown;
      this.el.dataset.state = state;
      this.el.title = title;
      this.el.querySelector(".label").textContent = label;
      this.el.setAttribute("aria-label", "Cluster view: " + label + ". " + title);
      // The agent's "Connected" in the header measures its own calls to agentwatch, not this
      // view: when the two would read as a contradiction, say that they measure different things.
      if (this.hint) {
        const agentConnected = document.querySelector("#agent-status .status-connected") !== null;
        this.hint.hidden = !agentConnected || (state !== "disconnected" && state !== "reconnecting");
      }
    }
  }

  // What is wrong and when the next try is, once for the whole page (not once per table).
  class Banner {
    constructor(el) {
      this.el = el;
      this.message = el ? el.querySelector(".banner-message") : null;
      this.retry = el ? el.querySelector(".banner-retry") : null;
    }

    // `retryAt`: local time of the next try, or null when not known.
    show(message, retryAt) {
      if (!this.el) return;
      let retry = "";
      if (retryAt !== null) {
        const left = Math.ceil((retryAt - Date.now()) / 1000);
        retry = left > 0 ? " — retrying in " + left + " s" : " — retrying now";
      }
      if (this.message.textContent !== message) this.message.textContent = message;
      if (this.retry.textContent !== retry) this.retry.textContent = retry;
      this.el.hidden = false;
    }

    hide() { if (this.el && !this.el.hidden) this.el.hidden = true; }
  }

  function describeClose(event) {
    const reasons = {
      1000: "closed", 1001: "the server is going away", 1006: "the connection was lost",
      4400: "the server refused a message", 4401: "the ticket was refused",
      4403: "access refused", 4404: "unknown agent", 4429: "too slow to read updates",
    };
    const why = event.reason || reasons[event.code] || "closed";
    return "WebSocket closed (" + event.code + "): " + why;
  }

  // --- the watch manager: one WebSocket, or a few EventSources carrying every watch ------

  class WatchManager {
    constructor(el) {
      this.urls = {
        ticket: el.dataset.ticketUrl, socket: el.dataset.socketPath, stream: el.dataset.streamUrl,
      };
      this.badge = new Badge(document.getElementById("watch-badge"));
      this.banner = new Banner(document.getElementById("cluster-banner"));
      // id -> {id, params, sink, within, problem, notLive, lastNotLive, liveAt}: `problem`,
      // the cluster's {message, retryAt} while the relay cannot reach it; `notLive`,
      // {since, at, atOnce} while the watch's table is not live (see markNotLive).
      this.watches = new Map();
      this.nextId = 1;
      this.mode = "websocket";    // or "stream" (HTTP streaming fallback)
      this.ws = null;
      this.wsOpen = false;
      // Streaming mode: each stream {ids, source, lastEventId, open, gotData, reopens,
      // refused: {message, retryAt} after a 429, ended: why, once it will not reopen}.
      this.streams = [];
      this.positions = new Map();  // watchId -> its position, from its stream's last id
      this.unstreamed = [];        // watches beyond what MAX_STREAMS streams carry
      this.reopenTimer = null;
      this.failures = [];         // times of recent WebSocket failures
      this.ticketRetried = false;
      this.down = null;           // why the transport is down, or null
      this.transportWhy = "";     // why it is (re)connecting, for the badge
      this.retryAt = null;        // when the page tries its own connection again
      this.lostAt = null;         // when the page's connection was lost
      this.everLive = false;      // once live, a lost connection is "Reconnecting"
      this.renderTimer = 0;
      this.gotData = false;
      this.timer = null;
      this.attempt = 0;
      this.stopped = false;
      if (this.badge.el && this.badge.el.tagName === "BUTTON") {
        this.badge.el.addEventListener("click", () => {
          if (["disconnected", "reconnecting"].includes(this.badge.el.dataset.state)) this.reconnect();
        });
      }
      window.addEventListener("pagehide", () => this.stop());
      setInterval(() => this.render(), TICK);  // "last updated … ago", the countdown
    }

    // `within`: {watchId, namespace, name} when another watch of the page already sees
    // this one's object: over HTTP streaming it rides along on that one's messages.
    // `initial`: {since, problem} for a table the server rendered while the cluster was down.
    // `minor`: only counts (the workloads' strip): the last to get a stream.
    add(params, sink, within, initial, minor) {
      const id = "w" + this.nextId++;
      const watch = { id, params, sink, within: within || null, problem: null,
        notLive: null, lastNotLive: null, liveAt: 0, minor: Boolean(minor) };
      if (initial) {
        watch.notLive = { since: initial.since, at: Date.now(), atOnce: true };
        watch.problem = initial.problem;
      }
      this.watches.set(id, watch);
      if (this.mode === "websocket" && this.wsOpen) { sink.start(); this.send({ type: "watch", watchId: id, watchParams: params }); }
      else if (this.mode === "stream") this.streamWatch(watch);
      this.scheduleRender();
      return id;
    }

    riding(watch) {
      return this.mode === "stream" && watch.within && this.watches.has(watch.within.watchId);
    }

    streamWatch(watch) {
      if (this.riding(watch)) return;
      watch.sink.start();
      this.reopenStream();
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

    remove(id) {
      if (!this.watches.delete(id)) return;
      this.positions.delete(id);
      if (this.wsOpen) this.send({ type: "unwatch", watchId: id });
      if (this.mode === "stream") this.reopenStream();
      this.scheduleRender();
    }

    send(message) { if (this.ws && this.wsOpen) this.ws.send(JSON.stringify(message)); }

    start() { this.connectWebSocket(); }

    stop() {
      this.stopped = true;
      this.attempt++;
      clearTimeout(this.timer);
      this.closeSocket();
      this.closeSources();
    }

    // A click on a disconnected badge: everything again, WebSocket first, no reload. What
    // the cluster's problem was stays said until a watch is live again.
    reconnect() {
      clearTimeout(this.timer);
      this.attempt++;
      this.closeSocket();
      this.closeSources();
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

    closeSources() {
      clearTimeout(this.reopenTimer);
      for (const stream of this.streams) this.closeStream(stream);
      this.streams = [];
      this.positions.clear();
      this.unstreamed = [];
    }

    closeStream(stream) {
      clearTimeout(stream.timer);
      if (stream.source) stream.source.close();
      stream.source = null;
      stream.open = false;
    }

    async ticket() {
      const response = await fetch(this.urls.ticket, {
        method: "POST", credentials: "same-origin",
        headers: { "X-CSRF-Token": csrfToken(), "Accept": "application/json" },
      });
      if (!response.ok) throw new Error("ticket refused (HTTP " + response.status + ")");
      return (await response.json()).ticket;
    }

    socketURL() {
      const url = new URL(this.urls.socket, location.href);
      url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
      url.host = location.host;
      return url.href;
    }

    // Opens a WebSocket; `onOpen` decides what to do with it (connect or switch back).
    // Only the latest attempt counts: a click on the badge supersedes one in flight.
    async openWebSocket(onOpen, onFail) {
      const attempt = ++this.attempt;
      const current = () => attempt === this.attempt && !this.stopped;
      let ticket;
      try { ticket = await this.ticket(); } catch (err) {
        if (current()) onFail({ code: 0, reason: "cannot get a ticket: " + err.message });
        return;
      }
      if (!current()) return;
      let ws;
      try { ws = new WebSocket(this.socketURL(), [PROTOCOL, TICKET_PREFIX + ticket]); }
      catch (err) { onFail({ code: 0, reason: String(err) }); return; }
      ws.onopen = () => {
        ws.onclose = null;  // from here on, whoever uses the socket handles its end
        if (current()) onOpen(ws); else ws.close(1000);
      };
      ws.onclose = (event) => { if (current()) onFail(event); };
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
        this.send({ type: "watch", watchId: watch.id, watchParams: watch.params });
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

    // --- HTTP streaming fallback ---

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
      for (const watch of this.watches.values()) this.streamWatch(watch);
      this.scheduleWebSocketRetry();
    }

    // The watches that do not ride along go over as few streams as hold them. When the set
    // changes, only the streams whose watches changed open again, with their watches' last
    // positions, so those resume where they were and only new watches start with a
    // snapshot. Changes in one go arrange the streams once.
    reopenStream() {
      clearTimeout(this.reopenTimer);
      this.reopenTimer = setTimeout(() => this.arrangeStreams(), 0);
    }

    arrangeStreams() {
      if (this.mode !== "stream" || this.stopped) return;
      const streamed = Array.from(this.watches.values()).filter((w) => !this.riding(w));
      // Lists first, counts last: what does not fit is the strip's, not a table's.
      streamed.sort((a, b) => Number(a.minor) - Number(b.minor));
      const carried = streamed.slice(0, MAX_STREAMS * STREAM_WATCHES).map((w) => w.id);
      this.unstreamed = streamed.slice(carried.length).map((w) => w.id);
      for (const id of this.unstreamed) this.markNotLive(this.watches.get(id), Date.now(), true);
      const wanted = new Set(carried);
      const changed = new Set();
      for (const stream of this.streams) {
        this.keepPositions(stream);
        const kept = stream.ids.filter((id) => wanted.has(id));
        if (kept.length !== stream.ids.length) { stream.ids = kept; changed.add(stream); }
      }
      const placed = new Set(this.streams.flatMap((stream) => stream.ids));
      for (const id of carried) {
        if (placed.has(id)) continue;
        let stream = this.streams.find((s) => s.ids.length < STREAM_WATCHES);
        if (!stream) { stream = this.newStream([]); this.streams.push(stream); }
        stream.ids.push(id);
        changed.add(stream);
      }
      for (const stream of this.streams.filter((s) => !s.ids.length)) this.closeStream(stream);
      this.streams = this.streams.filter((s) => s.ids.length);
      // Watches gone from several streams leave them half empty: pack them again.
      if (this.streams.length > Math.ceil(carried.length / STREAM_WATCHES)) {
        for (const stream of this.streams) this.closeStream(stream);
        this.streams = [];
        for (let at = 0; at < carried.length; at += STREAM_WATCHES) {
          const stream = this.newStream(carried.slice(at, at + STREAM_WATCHES));
          this.streams.push(stream);
          changed.add(stream);
        }
      }
      for (const stream of changed) if (this.streams.includes(stream)) this.openStream(stream);
      this.scheduleRender();
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

    streamURL(stream) {
      this.keepPositions(stream);
      const query = new URLSearchParams({
        watches: JSON.stringify(stream.ids.map((id) => ({ watchId: id, watchParams: this.watches.get(id).params }))),
      });
      const known = new URLSearchParams();
      for (const id of stream.ids) if (this.positions.has(id)) known.set(id, this.positions.get(id));
      if (known.toString()) query.set("lastEventId", known.toString());
      return this.urls.stream + "?" + query.toString();
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
        if (!stream.gotData) { stream.gotData = true; stream.reopens = 0; this.scheduleRender(); }
        this.dispatch(message.data);
      };
      source.onerror = () => {
        if (stream.source !== source) return;
        stream.open = false;
        this.transportLost(stream.ids);
        if (source.readyState === EventSource.CLOSED) {
          stream.source = null;
          this.streamRefused(stream, url);  // EventSource gives up on an HTTP error: ask why
        } else {
          this.transportWhy = "HTTP stream interrupted; resuming";  // EventSource retries by itself
        }
        this.scheduleRender();
      };
      source.onopen = () => {
        stream.open = true;
        if (this.streams.every((s) => s.open)) { this.transportWhy = ""; this.lostAt = null; }
        this.scheduleRender();
      };
    }

    // EventSource does not say why it was refused: the same request again does. A 429 (too
    // many streams or watches for this user) is tried again when the server says; another
    // refusal ends the stream until a click on the badge.
    async streamRefused(stream, url) {
      const current = () => this.streams.includes(stream) && !stream.source && !this.stopped && this.mode === "stream";
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
        for (const watch of watches) this.markNotLive(watch, Date.now(), true);
        stream.timer = setTimeout(() => { if (current()) this.openStream(stream); }, retryAfter * 1000);
      } else if ((status === 200 || status === 0) && stream.reopens < STREAM_REOPENS) {
        stream.reopens++;
        stream.timer = setTimeout(() => { if (current()) this.openStream(stream); }, 2000);
      } else {
        stream.ended = message ? "the server refused an HTTP stream (" + message + ")" : "the server ended an HTTP stream";
      }
      this.scheduleRender();
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
        this.closeSources();
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
      if (first || message.type !== "event") this.scheduleRender();
    }

    handle(watch, message) {
      switch (message.type) {
        case "event":
          watch.sink.event(message.event || {}, message.html);
          break;
        case "synced":  // the initial state, or live again after an error
          this.markLive(watch);
          watch.sink.synced();
          break;
        case "reset":
          watch.sink.reset();
          break;
        case "error": {
          const error = message.error || {};
          watch.sink.error(error);
          if (isConnectivity(error)) this.markProblem(watch, error);
          break;
        }
      }
    }

    // --- whether each watch is live ---

    // Not live since `since` (epoch ms; null: not known). `atOnce`: the server said so, so
    // the table turns stale now, not after STALE_GRACE (a blip of the page's own connection
    // would otherwise dim every table for a moment).
    markNotLive(watch, since, atOnce) {
      if (!watch.notLive) watch.notLive = { since, at: Date.now(), atOnce };
      else if (atOnce) { watch.notLive.since = since; watch.notLive.atOnce = true; }
    }

    markLive(watch) {
      if (watch.notLive) { watch.lastNotLive = watch.notLive; watch.liveAt = Date.now(); }
      watch.notLive = null;
      watch.problem = null;
    }

    markProblem(watch, error) {
      let since = parseTime(error.since);
      if (since === null) {
        // A subscription while the cluster is down gets the cached state and `synced`,
        // then this error: that `synced` did not make it live, so keep when it last was.
        const relapse = watch.lastNotLive && Date.now() - watch.liveAt < 1000 ? watch.lastNotLive : null;
        const before = watch.notLive || relapse;
        since = before ? before.since : Date.now();
      }
      this.markNotLive(watch, since, true);
      const retryIn = error.retryInSeconds;
      watch.problem = {
        message: readableProblem(error),
        retryAt: typeof retryIn === "number" && isFinite(retryIn) ? Date.now() + Math.max(0, retryIn) * 1000 : null,
      };
    }

    // The page's connection (or one stream, `ids` its watches) dropped: nothing it carried
    // is live until each watch syncs again.
    transportLost(ids) {
      const now = Date.now();
      if (this.lostAt === null) this.lostAt = now;
      const lost = ids ? ids.map((id) => this.watches.get(id)).filter(Boolean) : this.watches.values();
      for (const watch of lost) this.markNotLive(watch, now, false);
    }

    // What streaming mode cannot carry now: {ended}, or {refused, retryAt}, or {unstreamed}.
    streamTrouble() {
      if (this.mode !== "stream") return null;
      const ended = this.streams.find((s) => s.ended);
      if (ended) return { ended: ended.ended };
      const refused = this.streams.filter((s) => s.refused);
      if (refused.length) {
        return { refused: refused[0].refused.message, retryAt: Math.min(...refused.map((s) => s.refused.retryAt)) };
      }
      if (this.unstreamed.length) {
        const total = this.unstreamed.length + this.streams.reduce((n, s) => n + s.ids.length, 0);
        return { unstreamed: this.unstreamed.length + " of this page's " + total + " watches (HTTP streaming carries " +
          MAX_STREAMS * STREAM_WATCHES + "; show fewer namespaces or kinds)" };
      }
      return null;
    }

    // --- the tables' stale marks, the banner, the badge ---

    setDown(why) { this.down = why; this.scheduleRender(); }

    // Thousands of events of a snapshot render once.
    scheduleRender() {
      if (!this.renderTimer) this.renderTimer = setTimeout(() => this.render(), 0);
    }

    render() {
      clearTimeout(this.renderTimer);
      this.renderTimer = 0;
      const now = Date.now();
      let problem = null;
      const retries = [];
      for (const watch of this.watches.values()) {
        const off = watch.notLive;
        const shown = off && (off.atOnce || now - off.at >= STALE_GRACE);
        if (watch.sink.stale) watch.sink.stale(!shown ? null : off.since === null ? "" : new Date(off.since).toISOString());
        if (watch.problem) {
          problem = problem || watch.problem;
          if (watch.problem.retryAt !== null) retries.push(watch.problem.retryAt);
        }
      }
      const trouble = this.streamTrouble();
      this.updateBadge(problem, trouble);
      if (this.down) {
        this.banner.show("The cluster view is disconnected: " + this.down + ". Click the badge to reconnect.", null);
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
      } else if (this.lostAt !== null && now - this.lostAt >= STALE_GRACE) {
        this.banner.show("Lost the connection to agentwatch", this.retryAt);
      } else {
        this.banner.hide();
      }
    }

    updateBadge(problem, trouble) {
      if (problem === undefined) problem = Array.from(this.watches.values()).find((w) => w.problem)?.problem || null;
      if (trouble === undefined) trouble = this.streamTrouble();
      if (this.down) { this.badge.show("disconnected", "Disconnected", this.down + ". Click to reconnect."); return; }
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
      const websocket = this.mode === "websocket";
      // Streaming: live once every stream is open and has spoken.
      const open = websocket ? this.wsOpen && this.gotData
        : this.streams.length > 0 && this.streams.every((s) => s.open && s.gotData);
      if (!open) {
        const why = this.transportWhy ? this.transportWhy + ". " : "";
        if (this.everLive) this.badge.show("reconnecting", "Reconnecting", why + "Reconnecting by itself; click to reconnect now.");
        else this.badge.show("connecting", "Connecting", why + "Connecting to the cluster…");
        return;
      }
      this.everLive = true;
      if (problem) {
        this.badge.show("disconnected", "Disconnected", "The cluster view is not live: " + problem.message +
          ". agentwatch keeps trying by itself; click to reconnect now.");
      } else if (websocket) {
        this.badge.show("connected", "Live", "Live over a WebSocket: changes in the cluster show as they happen.");
      } else {
        this.badge.show("connected", "Live (HTTP streaming)", "Live over HTTP streaming (server-sent events): " +
          (this.fallbackReason || "WebSocket unavailable") + ". The WebSocket is tried again every minute.");
      }
    }
  }

  // --- the page --------------------------------------------------------------------------

  // The problem the server rendered the page with (the banner), as a watch's `problem`.
  function initialProblem() {
    const banner = document.getElementById("cluster-banner");
    if (!banner || banner.hidden) return null;
    const retryIn = parseFloat(banner.dataset.retryIn || "");
    return {
      message: readableProblem({ message: banner.querySelector(".banner-message").textContent }),
      retryAt: isNaN(retryIn) ? null : Date.now() + retryIn * 1000,
    };
  }

  function init() {
    const manager = new WatchManager(root);
    const live = root.dataset.live === "true";
    const outage = initialProblem();
    const list = new ListState(root.querySelector("[data-list-form]"));
    // Watches by their params: a list and the strip that count the same objects share one.
    const wanted = new Map();  // JSON of params -> {params, sinks, initial, ids: [holder]}
    const want = (params, sink, initial) => {
      const key = JSON.stringify(params);
      if (!wanted.has(key)) wanted.set(key, { params, sinks: [], initial: initial || null, holders: [] });
      const entry = wanted.get(key);
      entry.sinks.push(sink);
      return entry;
    };
    for (const section of root.querySelectorAll("section.k8s-section")) {
      const table = new ListTable(section, list);
      list.tables.push(table);
      // Rendered while the cluster was down: stale from the start.
      const initial = section.classList.contains("is-stale")
        ? { since: parseTime(section.dataset.staleSince), problem: outage } : null;
      const ids = new Map();  // namespace ("" for all) -> its watch, for the panel
      for (const params of JSON.parse(section.dataset.watches || "[]")) {
        const holder = { id: null, params };
        want(params, new ListSink(table, params.namespace || null), initial).holders.push(holder);
        ids.set(params.namespace || "", holder);
      }
      section.addEventListener("click", (event) => {
        const row = event.target.closest("tbody.rows > tr");
        if (!row || event.target.closest("button, input, select")) return;
        event.preventDefault();
        const watch = ids.get(row.dataset.namespace || "") || ids.get("") || ids.values().next().value;
        // panel.js opens it: `params` are the row's watch, `watchId` its id on the page.
        if (watch) root.dispatchEvent(new CustomEvent("cluster:open", { detail: { row, params: watch.params, watchId: watch.id } }));
      });
    }
    for (const el of root.querySelectorAll("[data-summary]")) {
      const tally = new Tally(el);
      for (const params of JSON.parse(el.dataset.watches || "[]")) want(params, tally.sink(params.namespace || null));
    }
    if (live) {
      for (const entry of wanted.values()) {
        const sink = entry.sinks.length === 1 ? entry.sinks[0] : fanOut(entry.sinks);
        // A watch only the strip counts with is minor: the first to go without a stream.
        const id = manager.add(entry.params, sink, null, entry.initial, entry.holders.length === 0);
        for (const holder of entry.holders) holder.id = id;
      }
    }
    namespacePicker(root);
    refreshAges(root);
    setInterval(() => refreshAges(root), AGE_REFRESH);
    if (live) { manager.render(); manager.start(); }
    // What panel.js builds on, and handles for debugging and tests.
    window.agentwatchCluster = { manager, Table, TableSink, csrfToken, humanDuration, refreshAges,
      readableProblem };
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
