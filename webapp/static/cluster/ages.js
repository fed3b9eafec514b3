// cluster/: the Cluster tab, as native modules (main.js wires them; see docs/ui.md).
// ages.js: how old things are, as kubectl prints it, and how long ago a table was live.

// kubectl's duration.HumanDuration.
export function humanDuration(s) {
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
export function refreshAges(scope) {
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
export function agoWords(seconds) {
  seconds = Math.max(0, Math.floor(seconds));
  if (seconds < 60) return seconds + " s";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min";
  if (seconds < 2 * 86400) return Math.floor(seconds / 3600) + " h";
  return Math.floor(seconds / 86400) + " d";
}
