// cluster/: the Cluster tab, as native modules (main.js wires them; see docs/ui.md).
// fragment.js: HTML the server rendered (a row, a part of the panel) as nodes not yet in
// the page.

export function fragmentOf(html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  return template.content;
}
