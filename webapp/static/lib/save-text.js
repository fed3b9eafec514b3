// lib/: modules shared by the page scripts (app.js, notify.js, editor.js, cluster/).
// save-text.js: a text the page holds (a manifest, a log) saved as a file.

export function saveText(text, filename, type) {
  const url = URL.createObjectURL(new Blob([text], { type: type || "text/plain" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
