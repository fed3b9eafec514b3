// The Activity tab's page script: places live rows in time order, folds identical rows
// (the same rule as webapp/folding.py: same data-fold key, within the list's
// data-fold-window of the fold's newest row), keeps new rows behind an "N new" button
// while the reader is scrolled down or busy in the list, and opens folds and long messages
// (folds of the notifications page too).
"use strict";

(function () {
  const held = [];  // live rows waiting behind the "N new" button, newest first
  let refoldPending = false;
  const FOLD_COMMITS = 3;  // commits a fold names, the newest (webapp/views/feed_rows.py)

  function feedList() { return document.getElementById("feed-list"); }

  function stamp(row) { return BigInt(row.dataset.ts); }

  function isNewer(a, b) {
    const ta = stamp(a), tb = stamp(b);
    return ta > tb || (ta === tb && Number(a.dataset.id) > Number(b.dataset.id));
  }

  // Every event row of the list, folded or not (not the folds' own items).
  function eventRows(list) {
    return Array.from(list.querySelectorAll("li.event:not(.fold)"));
  }

  function levelOf(row) {
    const match = /\blevel-(\w+)/.exec(row.className);
    return match ? match[1] : "info";
  }

  function foldItem(rows, open) {
    const head = rows[0];
    const item = document.createElement("li");
    item.className = "event fold level-" + levelOf(head);
    for (const name of ["id", "ts", "day", "dayLabel", "fold", "href"]) {
      if (head.dataset[name] !== undefined) item.dataset[name] = head.dataset[name];
    }
    item.dataset.count = String(rows.length);
    item.dataset.row = "";
    const top = document.createElement("div");
    top.className = "fold-head";
    const icon = head.querySelector(".level");
    if (icon) top.appendChild(icon.cloneNode(true));
    // The newest row's message with its links, and the commits the fold holds when they
    // are several (webapp/views/feed_rows.py draws the same).
    const headSummary = head.querySelector(".summary");
    const summary = headSummary ? headSummary.cloneNode(true) : document.createElement("span");
    summary.className = "summary";
    top.appendChild(summary);
    const commits = new Map();
    for (const row of rows) {
      const link = row.querySelector(".summary a.commit");
      if (link && !commits.has(link.textContent)) commits.set(link.textContent, link);
    }
    if (commits.size > 1) {
      const list = document.createElement("span");
      list.className = "fold-commits";
      list.append("in commits ");
      const shown = Array.from(commits.values()).slice(0, FOLD_COMMITS);
      shown.forEach((link, i) => {
        if (i) list.append(", ");
        list.appendChild(link.cloneNode(true));
      });
      if (commits.size > shown.length) list.append(" and " + (commits.size - shown.length) + " more");
      top.append(" ", list);
    }
    const members = document.createElement("ol");
    members.className = "fold-members";
    members.id = "fold-" + head.dataset.id;
    members.hidden = !open;
    const toggle = document.createElement("button");
    toggle.type = "button";
    toggle.className = "fold-toggle";
    toggle.title = "Identical events within an hour";
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    toggle.setAttribute("aria-controls", members.id);
    toggle.textContent = "×" + rows.length;
    const said = document.createElement("span");
    said.className = "visually-hidden";
    said.textContent = " identical events: " + (open ? "hide them" : "show them");
    toggle.appendChild(said);
    top.appendChild(toggle);
    for (const selector of [".chip", "a.when"]) {
      const part = head.querySelector(selector);
      if (part) top.appendChild(part.cloneNode(true));
    }
    item.appendChild(top);
    for (const row of rows) members.appendChild(row);
    item.appendChild(members);
    return item;
  }

  // Folds the whole list again from its rows: after live rows or an older page arrive.
  function refold(list) {
    const window = BigInt(list.dataset.foldWindow || "0");
    const rows = eventRows(list);
    rows.sort((a, b) => (isNewer(a, b) ? -1 : isNewer(b, a) ? 1 : 0));
    const open = new Set();
    for (const fold of list.querySelectorAll(":scope > li.fold")) {
      const expanded = fold.querySelector(".fold-toggle[aria-expanded='true']");
      if (expanded) for (const row of eventRows(fold)) open.add(row.id);
    }
    const groups = [];
    const latest = new Map();
    for (const row of rows) {
      const key = row.dataset.fold;
      const group = key ? latest.get(key) : undefined;
      if (group && stamp(group[0]) - stamp(row) <= window) { group.push(row); continue; }
      const fresh = [row];
      if (key) latest.set(key, fresh);
      groups.push(fresh);
    }
    for (const item of list.querySelectorAll(":scope > li.fold, :scope > li.event")) item.remove();
    const older = list.querySelector(":scope > li.older");
    const items = document.createDocumentFragment();
    for (const group of groups) {
      items.appendChild(group.length === 1 ? group[0]
        : foldItem(group, group.some((row) => open.has(row.id))));
    }
    list.insertBefore(items, older);
    regroupDays(list);
  }

  function regroupDays(list) {
    for (const header of list.querySelectorAll(":scope > li.day")) header.remove();
    let day = null;
    for (const item of list.querySelectorAll(":scope > li.event")) {
      if (item.dataset.day !== day) {
        day = item.dataset.day;
        const header = document.createElement("li");
        header.className = "day";
        header.dataset.day = day;
        header.textContent = item.dataset.dayLabel;
        list.insertBefore(header, item);
      }
    }
  }

  // The reader is scrolled down past the top of the list, has text of it selected, or
  // is working in it (focus on a row's link or button): new rows would move what they read.
  function reading(list) {
    if (list.getBoundingClientRect().top < 0) return true;
    const selection = window.getSelection();
    if (selection && !selection.isCollapsed && list.contains(selection.anchorNode)) return true;
    const active = document.activeElement;
    return !!active && active !== document.body && list.contains(active);
  }

  function place(list, rows) {
    const older = list.querySelector(":scope > li.older");
    const loaded = eventRows(list);
    const oldest = loaded.reduce((a, b) => (a && isNewer(b, a) ? a : b), null);
    let placed = 0;
    for (const row of rows) {
      // Older than every loaded row while older pages remain: it comes with its page.
      if (older && oldest && !isNewer(row, oldest)) continue;
      row.classList.add("fresh");
      list.insertBefore(row, older);
      placed += 1;
    }
    if (!placed) return;
    const empty = document.getElementById("feed-empty");
    if (empty) empty.remove();
    refold(list);
  }

  function showPill() {
    const pill = document.getElementById("feed-new");
    if (!pill) return;
    pill.textContent = held.length + " new";
    pill.setAttribute("aria-label", held.length + " new event" + (held.length === 1 ? "" : "s")
      + ": show");
    pill.hidden = held.length === 0;
  }

  function release() {
    const list = feedList();
    const rows = held.splice(0);
    showPill();
    // The rows the button shows stay marked (until the next ones): what is new is found
    // again after the page has scrolled to it.
    document.querySelectorAll("ol.feed li.event.revealed").forEach((row) => row.classList.remove("revealed"));
    for (const row of rows) row.classList.add("revealed");
    if (list) {
      place(list, rows);
      const feed = document.getElementById("feed");
      if (feed) feed.scrollIntoView({ block: "start" });
    }
  }

  function incoming(box) {
    const list = feedList();
    const rows = Array.from(box.querySelectorAll("li.event"));
    box.remove();
    if (!list) return;
    const waiting = new Set(held.map((row) => row.id));
    const fresh = rows.filter((row) => !document.getElementById(row.id) && !waiting.has(row.id));
    if (!fresh.length) return;
    if (held.length || reading(list)) {
      held.push(...fresh);
      showPill();
      return;
    }
    place(list, fresh);
  }

  // The feed replaced by a filter change: what waited belonged to the old filters.
  function feedReplaced() {
    held.splice(0);
    showPill();
  }

  function scheduleRefold() {
    if (refoldPending) return;
    refoldPending = true;
    setTimeout(() => {
      refoldPending = false;
      const list = feedList();
      if (list) refold(list);
    }, 0);
  }

  // Before app.js's own handler (capture): the rows are placed, then times refreshed.
  document.addEventListener("htmx:load", (event) => {
    const el = event.detail.elt;
    if (!(el instanceof Element)) return;
    if (el.id === "feed") { feedReplaced(); return; }
    const boxes = el.matches("ol.incoming") ? [el] : Array.from(el.querySelectorAll("ol.incoming"));
    boxes.forEach(incoming);
    // An older page: its rows join the folds of the rows above.
    if (el.parentElement && el.parentElement.id === "feed-list" && el.matches("li.event")) {
      scheduleRefold();
    }
  }, true);

  document.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    if (target.closest("#feed-new")) { release(); return; }
    const toggle = target.closest("ol.feed button.fold-toggle");
    if (toggle) {
      const members = document.getElementById(toggle.getAttribute("aria-controls"));
      const open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
      const said = toggle.querySelector(".visually-hidden");
      if (said) said.textContent = " identical events: " + (open ? "hide them" : "show them");
      if (members) members.hidden = !open;
      return;
    }
    const more = target.closest("#feed-list button.more");
    if (more) {
      const row = more.closest("li.event");
      const open = !row.classList.contains("open");
      row.classList.toggle("open", open);
      more.setAttribute("aria-expanded", open ? "true" : "false");
    }
  });
})();
