// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// rows.js: a row's key and what its HTML says, read without building the row where
// possible (a snapshot brings thousands).

import { fragmentOf } from "../fragment.js";

// The key a row carries in data-key: the object's uid, else namespace/name.
export function objectKey(obj) {
  const meta = (obj && obj.metadata) || {};
  return meta.uid || (meta.namespace || "") + "/" + (meta.name || "");
}

const ENTITIES = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&#39;": "'", "&#34;": '"', "&quot;": '"' };

// A row's text for the filter (what the server's filter reads: its cells' text).
export function rowText(html) {
  return html.replace(/<[^>]*>/g, "\n").replace(/&(amp|lt|gt|#39|#34|quot);/g, (m) => ENTITIES[m]).toLowerCase();
}

// Whether the row is marked as needing attention (its opening tag says so).
export function rowAttention(html) {
  const head = html.slice(0, html.indexOf(">") + 1);
  return / data-attention[\s>]/.test(head);
}

// The keyed rows of a rendered fragment.
export function rowsOf(html) {
  return Array.from(fragmentOf(html).children).filter((el) => el.tagName === "TR" && el.dataset.key);
}
