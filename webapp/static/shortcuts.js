// agentwatch keyboard shortcuts, driven by data attributes so every page takes part
// (docs/ui.md, "Keyboard"):
//   ?      the shortcuts dialog (#shortcuts-dialog)        /      focus the page's [data-filter]
//   j / k  next / previous [data-row]                      Enter  open the selected row
//   Esc    close: the menu, else the last visible [data-close] (dialogs close themselves)
//   g x    follow the element with data-shortcut="g x" (g h agents, g a activity, g c cluster)
"use strict";

(function () {
  const SELECTED = "row-selected";
  const PREFIX_MS = 1500;  // how long "g" waits for its second key
  let prefix = null;
  let prefixTimer = null;
  let selectedKey = null;  // the data-row value of the selection, kept across HTMX swaps

  function visible(el) {
    return el.checkVisibility ? el.checkVisibility() : el.offsetParent !== null;
  }

  function typing(el) {
    return el instanceof HTMLElement && (el.isContentEditable
      || el.matches("input:not([type=checkbox]):not([type=radio]):not([type=button]):not([type=submit]), textarea, select"));
  }

  function modalOpen() {
    return Array.from(document.querySelectorAll("dialog[open]")).some((d) => d.matches(":modal"));
  }

  // --- rows ---------------------------------------------------------------------------
  function rows() {
    return Array.from(document.querySelectorAll("[data-row]")).filter(visible);
  }

  function current(list) {
    const active = document.activeElement;
    const holding = active && active.closest ? active.closest("[data-row]") : null;
    if (holding && list.includes(holding)) return holding;
    return list.find((row) => row.classList.contains(SELECTED)) || null;
  }

  function select(row) {
    for (const other of document.querySelectorAll("[data-row]." + SELECTED)) {
      other.classList.remove(SELECTED);
      other.removeAttribute("aria-current");
    }
    row.classList.add(SELECTED);
    row.setAttribute("aria-current", "true");
    selectedKey = row.getAttribute("data-row") || null;
    if (!row.hasAttribute("tabindex")) row.setAttribute("tabindex", "-1");
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    const list = rows();
    if (!list.length) return false;
    const at = list.indexOf(current(list));
    const next = at < 0 ? (step > 0 ? 0 : list.length - 1)
      : Math.min(list.length - 1, Math.max(0, at + step));
    select(list[next]);
    return true;
  }

  // Enter: data-href, else the row itself if it is a link, else its [data-row-link] or its
  // first link, else a click on the row (pages that open rows on click, e.g. a side panel).
  function open(row) {
    const href = row.getAttribute("data-href");
    if (href) { window.location.assign(href); return; }
    if (row.matches("a[href]")) { row.click(); return; }
    const link = row.querySelector("[data-row-link]") || row.querySelector("a[href]");
    (link || row).click();
  }

  // A click on a row with data-href opens it too (not when the click was on a control).
  document.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target : null;
    const row = target && target.closest("[data-row][data-href]");
    if (!row || target.closest("a, button, input, select, textarea, label, summary, form")) return;
    if (window.getSelection && String(window.getSelection()).length) return;  // selecting text
    window.location.assign(row.getAttribute("data-href"));
  });

  // A swap (HTMX polling) replaces rows: keep the same one selected.
  document.addEventListener("htmx:afterSettle", () => {
    if (selectedKey === null) return;
    const row = rows().find((r) => r.getAttribute("data-row") === selectedKey);
    if (!row || row.classList.contains(SELECTED)) return;
    const hadFocus = document.activeElement === document.body || !document.activeElement;
    row.classList.add(SELECTED);
    row.setAttribute("aria-current", "true");
    if (!row.hasAttribute("tabindex")) row.setAttribute("tabindex", "-1");
    if (hadFocus) row.focus({ preventScroll: true });
  });

  // --- the rest -----------------------------------------------------------------------
  function focusFilter() {
    const filter = Array.from(document.querySelectorAll("[data-filter]")).find(visible);
    if (!filter) return false;
    filter.focus();
    if (filter.select) filter.select();
    return true;
  }

  function showShortcuts() {
    const dialog = document.getElementById("shortcuts-dialog");
    if (!dialog || dialog.open) return false;
    dialog.showModal();
    return true;
  }

  function closeSomething() {
    const menu = document.querySelector(".topbar.menu-open");
    if (menu) { setMenu(menu, false); return true; }
    const closers = Array.from(document.querySelectorAll("[data-close]")).filter(visible);
    const last = closers[closers.length - 1];
    if (last) { last.click(); return true; }
    const selected = document.querySelector("[data-row]." + SELECTED);
    if (selected) {
      selected.classList.remove(SELECTED);
      selected.removeAttribute("aria-current");
      selectedKey = null;
      return true;
    }
    return false;
  }

  function follow(keys) {
    const target = Array.from(document.querySelectorAll('[data-shortcut="' + keys + '"]')).find(
      (el) => el.isConnected);
    if (!target) return false;
    target.click();
    return true;
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (event.key === "Escape") {
      if (typing(target)) {
        if (target.matches("[data-filter]")) target.blur();
        return;
      }
      if (modalOpen()) return;  // the browser closes a modal dialog itself
      if (closeSomething()) event.preventDefault();
      return;
    }
    if (typing(target) || modalOpen()) return;
    if (prefix) {
      const keys = prefix + " " + event.key;
      prefix = null;
      clearTimeout(prefixTimer);
      if (follow(keys)) event.preventDefault();
      return;
    }
    let done = false;
    switch (event.key) {
      case "?": done = showShortcuts(); break;
      case "/": done = focusFilter(); break;
      case "j": done = move(1); break;
      case "k": done = move(-1); break;
      case "g":
        prefix = "g";
        prefixTimer = setTimeout(() => { prefix = null; }, PREFIX_MS);
        done = true;
        break;
      case "Enter": {
        // Only a selected row that holds the focus (or the page itself): Enter on a link
        // or a button does what it always does.
        const row = target instanceof Element && target.matches("[data-row]") ? target
          : (target === document.body ? document.querySelector("[data-row]." + SELECTED) : null);
        if (row) { open(row); done = true; }
        break;
      }
      default: break;
    }
    if (done) event.preventDefault();
  });

  // --- the compact menu of narrow screens ---------------------------------------------
  function setMenu(bar, open) {
    bar.classList.toggle("menu-open", open);
    const button = bar.querySelector("[data-menu-toggle]");
    if (button) button.setAttribute("aria-expanded", open ? "true" : "false");
    if (!open && button && bar.contains(document.activeElement)) button.focus();
  }

  document.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    const toggle = target.closest("[data-menu-toggle]");
    if (toggle) {
      const bar = toggle.closest(".topbar");
      setMenu(bar, !bar.classList.contains("menu-open"));
      return;
    }
    if (target.closest("[data-shortcuts-open]")) { showShortcuts(); return; }
    const open = document.querySelector(".topbar.menu-open");
    if (open && !open.contains(target)) setMenu(open, false);
  });
})();
