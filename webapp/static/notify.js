// agentwatch notifications in the page: browser notifications of new important events
// (opt-in; permission is asked only when the person clicks to turn them on) and marking a
// notification read when it is opened. A module (base.html), for the CSRF token's reader.

import { csrfToken } from "./lib/csrf.js";

const supported = "Notification" in window;

// The nav's poll brings `.notify-new` items for events newer than the page had seen,
// only for people who turned browser notifications on. One tag per event: several open
// tabs show it once.
function notify(item) {
  if (!supported || Notification.permission !== "granted") return;
  try {
    const shown = new Notification(item.dataset.title, {
      body: item.dataset.body, tag: item.dataset.tag,
    });
    shown.onclick = () => {
      window.focus();
      window.location.href = item.dataset.url;
      shown.close();
    };
  } catch (err) {
    // Some browsers show notifications only from a service worker: nothing to do here.
  }
}

document.addEventListener("htmx:load", (event) => {
  const el = event.detail.elt;
  if (!el || !el.querySelectorAll) return;
  const items = el.matches(".notify-new") ? [el] : Array.from(el.querySelectorAll(".notify-new"));
  for (const item of items) {
    notify(item);
    item.remove();
  }
});

function permissionState() {
  const state = document.querySelector("[data-notify-permission-state]");
  if (!state) return;
  const text = !supported ? "This browser cannot show notifications."
    : Notification.permission === "granted" ? "This browser allows agentwatch's notifications."
    : Notification.permission === "denied"
      ? "This browser blocks agentwatch's notifications: allow them in its site settings."
      : "";
  state.textContent = text;
  state.hidden = !text;
}

// "Turn on browser notifications": ask the browser first, store the choice if allowed.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!form.matches || !form.matches("form[data-notify-permission]")) return;
  event.preventDefault();
  if (!supported) { permissionState(); return; }
  Notification.requestPermission().then((permission) => {
    if (permission === "granted") form.submit();
    else permissionState();
  });
});

// Opening an unread notification marks it read (the link still navigates at once).
document.addEventListener("click", (event) => {
  const link = event.target.closest ? event.target.closest("a[data-read-url]") : null;
  if (!link || !navigator.sendBeacon) return;
  const data = new FormData();
  data.append("csrf_token", csrfToken());
  navigator.sendBeacon(link.dataset.readUrl, data);
  link.removeAttribute("data-read-url");
});

document.addEventListener("DOMContentLoaded", permissionState);
