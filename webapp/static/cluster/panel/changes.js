// The panel's Changes tab (webapp/changes, docs/changes.md): the object's recorded changes,
// drawn by the server, loaded each time the tab is shown (a change is recorded once it
// settles, so a later look may find a newer one).

export async function loadChanges(panel) {
  const box = panel.querySelector("#tabpanel-changes .changes-box");
  if (!box) return;
  try {
    const response = await fetch(panel.dataset.changesUrl, { headers: { "HX-Request": "true" } });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const html = await response.text();
    if (panel.isConnected) box.innerHTML = html;
    document.dispatchEvent(new CustomEvent("htmx:load", { detail: { elt: box } }));  // relative times
  } catch (err) {
    if (panel.isConnected) box.textContent = "Cannot load the changes: " + err.message;
  }
}
