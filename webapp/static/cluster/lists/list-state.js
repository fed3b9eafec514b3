// cluster/lists/: the page's lists and what feeds them: tables patched by key, the paged
// lists, the workloads' counts, the list's state in the address (see docs/ui.md).
// list-state.js: the page's list state, as its URL holds it: filter and sort change here
// without a reload (the URL follows, so reload, back and links keep them); kind,
// namespaces and the label selector are the page's watches, changed by navigating.

export class ListState {
  constructor(form) {
    this.form = form;
    this.tables = [];
    const url = new URL(location.href);
    this.q = url.searchParams.get("q") || "";
    this.sort = url.searchParams.get("sort") || "";
    this.dir = url.searchParams.get("dir") === "desc" ? "desc" : "asc";
    this.attention = ["1", "true"].includes(url.searchParams.get("attention"));
    this.watched = this.watchedOf(url);
    this.timer = 0;
    const filter = form && form.querySelector("[data-filter]");
    if (filter) {
      filter.addEventListener("input", () => {
        clearTimeout(this.timer);
        this.timer = setTimeout(() => this.setFilter(filter.value), 250);
      });
    }
    window.addEventListener("popstate", () => this.restore());
  }

  // What the page's watches are made of: another value is another page.
  watchedOf(url) {
    return JSON.stringify(["kind", "namespace", "selector", "attention"].map((name) => url.searchParams.getAll(name)));
  }

  // Asked for every event: split once per filter text.
  words() {
    if (this.wordsOf !== this.q) { this.wordsOf = this.q; this.wordList = this.q.toLowerCase().split(/\s+/).filter(Boolean); }
    return this.wordList;
  }

  filtering() { return this.words().length > 0 || this.attention; }

  params() { return [["q", this.q], ["sort", this.sort], ["dir", this.sort && this.dir === "desc" ? "desc" : ""]]; }

  writeURL(push) {
    const url = new URL(location.href);
    for (const [name, value] of this.params()) {
      if (value) url.searchParams.set(name, value); else url.searchParams.delete(name);
    }
    if (url.href === location.href) return;
    if (push) history.pushState(null, "", url); else history.replaceState(history.state, "", url);
  }

  // The form's hidden fields follow, so Apply keeps the sort.
  writeForm() {
    if (!this.form) return;
    for (const name of ["sort", "dir"]) {
      let input = this.form.querySelector('input[type="hidden"][name="' + name + '"]');
      const value = name === "sort" ? this.sort : (this.sort ? this.dir : "");
      if (!value) { if (input) input.remove(); continue; }
      if (!input) {
        input = document.createElement("input");
        input.type = "hidden";
        input.name = name;
        this.form.prepend(input);
      }
      input.value = value;
    }
  }

  setFilter(text) {
    const q = text.trim();
    if (q === this.q) return;
    this.q = q;
    this.writeURL(false);
    for (const table of this.tables) table.reload();
  }

  sortBy(col) {
    if (this.sort === col) this.dir = this.dir === "asc" ? "desc" : "asc";
    else { this.sort = col; this.dir = "asc"; }
    this.writeURL(true);
    this.applySort();
  }

  applySort() {
    this.writeForm();
    for (const table of this.tables) { table.showSort(this.sort, this.dir); table.reload(); }
  }

  // Back or forward: the sort and the filter of that entry; another list is another page.
  restore() {
    const url = new URL(location.href);
    if (this.watchedOf(url) !== this.watched) { location.replace(url.href); return; }
    const q = url.searchParams.get("q") || "";
    const sort = url.searchParams.get("sort") || "";
    const dir = url.searchParams.get("dir") === "desc" ? "desc" : "asc";
    if (q === this.q && sort === this.sort && dir === this.dir) return;  // the panel's entry
    this.q = q;
    this.sort = sort;
    this.dir = dir;
    const filter = this.form && this.form.querySelector("[data-filter]");
    if (filter) filter.value = this.q;
    this.applySort();
  }
}
