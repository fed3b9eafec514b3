// lib/: modules shared by the page scripts (app.js, notify.js, editor.js, cluster/).
// confirm-dialog.js: the page's one confirmation dialog (#confirm-dialog, base.html).

// Asks `text`; the confirming button says what it does (`label`: "Delete pod", not
// "Confirm"). Resolves to whether it was confirmed. Without <dialog>, the browser asks.
export function confirmDialog(text, label) {
  const dialog = document.getElementById("confirm-dialog");
  if (!dialog || typeof dialog.showModal !== "function") return Promise.resolve(window.confirm(text));
  dialog.querySelector(".confirm-message").textContent = text;
  dialog.querySelector(".confirm-ok").textContent = label || "Confirm";
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
  });
}
