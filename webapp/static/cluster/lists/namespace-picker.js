// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// namespace-picker.js: the namespace picker's checkboxes narrowed to what its search says.

export function namespacePicker(root) {
  const picker = root.querySelector("[data-namespace-picker]");
  if (!picker) return;
  const search = picker.querySelector("[data-namespace-search]");
  if (!search) return;
  search.addEventListener("input", () => {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const item of picker.querySelectorAll(".namespace-options li")) {
      const text = item.textContent.toLowerCase();
      item.hidden = !words.every((word) => text.includes(word));
    }
  });
  search.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    event.preventDefault();  // Enter ticks the one namespace left, it does not submit
    const left = Array.from(picker.querySelectorAll(".namespace-options li")).filter((li) => !li.hidden);
    if (left.length === 1) { const box = left[0].querySelector("input"); box.checked = !box.checked; }
  });
  picker.addEventListener("toggle", () => { if (picker.open) search.focus(); });
}
