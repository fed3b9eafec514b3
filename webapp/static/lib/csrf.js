// lib/: modules shared by the page scripts (app.js, notify.js, editor.js, cluster/).
// csrf.js: the session's CSRF token, which every request that changes something carries
// (base.html puts it in <meta name="csrf-token">).

export function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.getAttribute("content") : "";
}
