// agentwatch's colour theme: the system's (prefers-color-scheme) unless the person chose
// one with the toggle; the choice is kept per browser. Loaded without `defer`, in <head>,
// so the chosen theme applies before the first paint (no flash of the other one).
"use strict";

(function () {
  const KEY = "agentwatch-theme";
  const root = document.documentElement;
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");

  function stored() {
    try {
      const value = localStorage.getItem(KEY);
      return value === "light" || value === "dark" ? value : null;
    } catch (err) {
      return null;  // storage refused (privacy mode): follow the system
    }
  }

  function store(value) {
    try {
      if (value) localStorage.setItem(KEY, value); else localStorage.removeItem(KEY);
    } catch (err) { /* the choice lasts this page only */ }
  }

  function effective() {
    return stored() || (systemDark.matches ? "dark" : "light");
  }

  function apply() {
    const choice = stored();
    if (choice) root.dataset.theme = choice; else delete root.dataset.theme;
    for (const button of document.querySelectorAll("[data-theme-toggle]")) {
      const dark = effective() === "dark";
      button.setAttribute("aria-pressed", dark ? "true" : "false");
      button.title = dark ? "Dark theme (click for light)" : "Light theme (click for dark)";
    }
  }

  // <button data-theme-toggle aria-pressed>: switches to the other theme. Choosing the
  // system's own theme forgets the choice, so the page follows the system again.
  document.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("[data-theme-toggle]") : null;
    if (!button) return;
    const next = effective() === "dark" ? "light" : "dark";
    store(next === (systemDark.matches ? "dark" : "light") ? null : next);
    apply();
  });

  // Another tab changed the choice, or the system switched: follow.
  window.addEventListener("storage", (event) => { if (event.key === KEY) apply(); });
  systemDark.addEventListener("change", apply);

  root.classList.add("js");
  apply();
  document.addEventListener("DOMContentLoaded", apply);
})();
