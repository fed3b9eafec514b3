// cluster/panel/: the side panel of one object: its tabs, live summary, events and
// relations, pod logs and actions (see docs/panel.md and docs/ui.md).
// address.js: the open panel and its tab in the page's address (`panel=`, `tab=`), so
// reload, back/forward and a pasted link bring it back.

// The address's panel state: {ref, tab} (ref null when no panel is open).
export function addressState() {
  const params = new URLSearchParams(location.search);
  return { ref: params.get("panel"), tab: params.get("tab") || "overview" };
}

// The page's address with the panel's keys set (or removed); other keys (the list's
// kind, namespace, filter, sort) are left as they are. Slashes stay readable.
export function addressWith(ref, tab) {
  const params = new URLSearchParams(location.search);
  if (ref) params.set("panel", ref); else params.delete("panel");
  if (ref && tab && tab !== "overview") params.set("tab", tab); else params.delete("tab");
  const query = params.toString().replace(/%2F/g, "/");
  return location.pathname + (query ? "?" + query : "") + location.hash;
}
