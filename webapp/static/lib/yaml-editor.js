// lib/yaml-editor.js: what the YAML editors share (the Settings tab's configuration,
// editor.js; the Cluster tab's Edit and Create from YAML, cluster/panel/edit.js), over the
// vendored CodeMirror bundle (window.AgentwatchCodeMirror): the style nonce CodeMirror's
// <style> needs under the page's CSP, YAML highlighting, and the page's light or dark theme,
// followed as it changes.

// The page's own theme: <html data-theme="dark|light">, else the system's preference.
export function prefersDark() {
  const chosen = document.documentElement.getAttribute("data-theme");
  if (chosen === "dark" || chosen === "light") return chosen === "dark";
  return window.matchMedia("(prefers-color-scheme: dark)").matches;
}

// The extensions every YAML editor starts with; `darkMode` is a CM.Compartment that
// followTheme() reconfigures.
export function yamlBase(CM, nonce, darkMode) {
  return [
    CM.EditorView.cspNonce.of(nonce),
    darkMode.of(CM.EditorView.darkTheme.of(prefersDark())),
    CM.syntaxHighlighting(CM.classHighlighter),
    CM.yaml(),
    CM.EditorState.tabSize.of(2),
  ];
}

// Follow the theme: the system's preference, and the page's toggle (data-theme).
export function followTheme(CM, view, darkMode) {
  const follow = () => view.dispatch({
    effects: darkMode.reconfigure(CM.EditorView.darkTheme.of(prefersDark())) });
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", follow);
  new MutationObserver(follow).observe(document.documentElement,
    { attributes: true, attributeFilter: ["data-theme"] });
}
