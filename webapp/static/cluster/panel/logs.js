// cluster/panel/: the side panel of one object: its tabs, live summary, events and
// relations, pod logs and actions (see docs/panel.md and docs/ui.md).
// logs.js: the Logs tab: a bounded buffer of log lines fed by server-sent events, drawn
// once a frame, searchable, pausable, saved as a file.

import { saveText } from "../../lib/save-text.js";

const LOG_LIMIT = 5000;          // lines kept in the browser per log view
const SEARCH_DEBOUNCE = 120;

export class LogView {
  constructor(section, url, pod) {
    this.section = section;
    this.form = section.querySelector("form.logs-controls");
    this.pre = section.querySelector("pre.logs");
    this.empty = section.querySelector(".logs-empty");
    this.status = section.querySelector(".logs-status");
    this.stopButton = section.querySelector(".logs-stop");
    this.pauseButton = section.querySelector(".logs-pause");
    this.startButton = section.querySelector(".logs-start");
    this.downloadButton = section.querySelector(".logs-download");
    this.search = section.querySelector('input[name="search"]');
    this.only = section.querySelector('input[name="only"]');
    this.matchesLabel = section.querySelector(".logs-matches");
    this.prevButton = section.querySelector(".logs-prev");
    this.nextButton = section.querySelector(".logs-next");
    this.url = section.dataset.logsUrl || url;
    this.pod = pod;
    this.lines = [];       // {container, text}: the last LOG_LIMIT lines, shown or not
    this.pending = [];     // lines not drawn yet
    this.paused = false;   // paused: keep reading into the buffer, stop drawing
    this.source = null;
    this.started = false;
    this.streaming = false;
    this.frame = 0;
    this.query = "";
    this.matches = [];     // <mark> elements of the search, in order
    this.current = -1;
    this.notes = [];       // containers that could not be read
    this.form.addEventListener("submit", (event) => { event.preventDefault(); this.start(); });
    for (const field of this.form.querySelectorAll("select, input")) {
      if (field.name === "wrap") field.addEventListener("change", () => this.pre.classList.toggle("wrap", field.checked));
      else field.addEventListener("change", () => { if (this.started) this.start(); });
    }
    this.stopButton.addEventListener("click", () => this.finish("Stopped. Read again to follow the log."));
    this.pauseButton.addEventListener("click", () => this.setPaused(!this.paused));
    this.startButton.addEventListener("click", () => this.start());
    this.downloadButton.addEventListener("click", () => saveText(
      this.lines.map((l) => this.prefix(l) + l.text).join("\n") + "\n", this.downloadButton.dataset.filename));
    let timer = 0;
    this.search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.setQuery(this.search.value), SEARCH_DEBOUNCE);
    });
    this.search.addEventListener("keydown", (event) => {
      if (event.key !== "Enter") return;
      event.preventDefault();
      clearTimeout(timer);
      if (this.search.value !== this.query) this.setQuery(this.search.value);
      this.step(event.shiftKey ? -1 : 1);
    });
    this.prevButton.addEventListener("click", () => this.step(-1));
    this.nextButton.addEventListener("click", () => this.step(1));
    this.only.addEventListener("change", () => { this.redraw(); this.showMatches(); });
  }

  // Whether a line is drawn: with "Only matching lines", those holding the search.
  shown(line) {
    return !(this.only.checked && this.query) || line.text.toLowerCase().includes(this.query);
  }

  settings() {
    const data = new FormData(this.form);
    const container = data.get("container") || "";
    const multiple = this.form.querySelector('select[name="container"]').options.length > 1;
    const common = {
      namespace: this.pod.namespace, container, tailLines: data.get("tailLines") || "",
      follow: String(data.has("follow")), timestamps: String(data.has("timestamps")),
      previous: String(data.has("previous")),
    };
    // A workload's log: every pod of it, each line naming its pod.
    const workload = this.section.dataset.workload ? JSON.parse(this.section.dataset.workload) : null;
    if (workload) {
      return { container, all: true, pods: true, follow: data.has("follow"),
        query: new URLSearchParams({ ...common, ...workload }) };
    }
    return {
      container, all: !container && multiple, follow: data.has("follow"),
      query: new URLSearchParams({
        ...common, pod: this.pod.name, allContainers: String(!container && multiple),
      }),
    };
  }

  start() {
    this.close();
    const settings = this.settings();
    this.started = true;
    this.all = settings.all;
    this.lines = [];
    this.pending = [];
    this.notes = [];
    this.pre.textContent = "";
    this.matches = [];
    this.current = -1;
    this.showMatches();
    this.setPaused(false);
    this.say("Connecting to the log of " + (settings.pods ? "every pod" : settings.all ? "every container" : settings.container || "the pod") + "…");
    this.showEmpty("Waiting for the log…");
    const source = new EventSource(this.url + "?" + settings.query.toString());
    this.source = source;
    this.streaming = true;
    this.buttons();
    source.onmessage = (message) => {
      let item;
      try { item = JSON.parse(message.data); } catch (err) { return; }
      if (item.type === "line") this.push(item.pod || item.container || null, item.line);
      else if (item.type === "notice") { this.notes.push((item.pod || item.container) + ": " + item.message); this.describe(settings); }
      else if (item.type === "end") this.finish(settings.follow ? "The log stream ended." : "End of the log.");
      else if (item.type === "error") this.finish((item.error && item.error.message) || "Cannot read the logs.", true);
    };
    source.onopen = () => this.describe(settings);
    source.onerror = () => {
      // No automatic reconnect: it would replay the tail and repeat lines.
      if (this.source === source) this.finish("The log stream was interrupted. Read again to resume.", true);
    };
  }

  // What the status line and the empty state say while the log is open.
  describe(settings) {
    if (!this.streaming) return;
    const notes = this.notes.length ? " Not read: " + this.notes.join("; ") + "." : "";
    this.say((settings.follow ? "Following the log" + (settings.pods ? " of every pod" : settings.all ? " of every container" : "") + "." : "Reading the log…") + notes);
    if (!this.lines.length) this.showEmpty(settings.follow ? "No log lines yet. New lines appear here as they are written." : "Reading…");
  }

  close() {
    if (this.source) { this.source.close(); this.source = null; }
    this.streaming = false;
  }

  // The stream is over (ended, failed, stopped): nothing to pause any more.
  finish(message, failed) {
    this.close();
    if (this.paused) this.setPaused(false);
    if (!this.lines.length) this.showEmpty(failed ? "No log lines." : "This log is empty.");
    this.buttons();
    const notes = this.notes.length ? " Not read: " + this.notes.join("; ") + "." : "";
    this.say(message + notes, failed);
  }

  buttons() {
    this.stopButton.hidden = !this.streaming;
    this.pauseButton.hidden = !this.streaming;
    this.startButton.hidden = this.streaming;
    this.downloadButton.disabled = !this.lines.length;
  }

  say(text, failed) {
    this.status.textContent = text;
    this.status.classList.toggle("error-text", Boolean(failed));
  }

  showEmpty(text) {
    this.empty.textContent = text;
    this.empty.hidden = false;
    this.pre.hidden = true;
  }

  prefix(line) { return line.container && this.all ? "[" + line.container + "] " : ""; }

  push(container, text) {
    const line = { container, text };
    this.lines.push(line);
    if (this.lines.length > LOG_LIMIT) this.lines.splice(0, this.lines.length - LOG_LIMIT);
    if (this.lines.length === 1) { this.empty.hidden = true; this.pre.hidden = false; this.downloadButton.disabled = false; }
    if (this.paused) return;
    this.pending.push(line);
    if (this.pending.length > LOG_LIMIT) this.pending.splice(0, this.pending.length - LOG_LIMIT);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
  }

  atBottom() { return this.pre.scrollHeight - this.pre.scrollTop - this.pre.clientHeight < 24; }

  // One <span class="line"> per line; the search's matches in <mark>.
  lineElement(line) {
    const span = document.createElement("span");
    span.className = "line";
    const prefix = this.prefix(line);
    if (prefix) {
      const tag = document.createElement("span");
      tag.className = "log-container";
      tag.textContent = prefix;
      span.append(tag);
    }
    const text = line.text;
    if (!this.query) {
      span.append(text + "\n");
      return span;
    }
    const lower = text.toLowerCase();
    let at = 0;
    for (let found = lower.indexOf(this.query); found !== -1; found = lower.indexOf(this.query, at)) {
      if (found > at) span.append(text.slice(at, found));
      const mark = document.createElement("mark");
      mark.textContent = text.slice(found, found + this.query.length);
      span.append(mark);
      this.matches.push(mark);
      at = found + this.query.length;
    }
    span.append(text.slice(at) + "\n");
    return span;
  }

  draw() {
    this.frame = 0;
    const follow = this.atBottom();
    const fragment = document.createDocumentFragment();
    for (const line of this.pending) if (this.shown(line)) fragment.append(this.lineElement(line));
    this.pending = [];
    this.pre.append(fragment);
    let extra = this.pre.childNodes.length - LOG_LIMIT;
    while (extra-- > 0) this.pre.firstChild.remove();
    if (this.query) { this.matches = this.matches.filter((m) => m.isConnected); this.showMatches(); }
    if (follow) this.pre.scrollTop = this.pre.scrollHeight;  // only while at the bottom
  }

  redraw() {
    this.pre.textContent = "";
    this.matches = [];
    this.pending = this.lines.slice();
    this.draw();
  }

  setQuery(text) {
    this.query = text.toLowerCase();
    this.current = -1;
    const top = this.pre.scrollTop;
    this.redraw();
    this.pre.scrollTop = top;
    this.showMatches();
    if (this.matches.length) this.step(1);
  }

  showMatches() {
    const count = this.matches.length;
    this.matchesLabel.textContent = !this.query ? "" : count ? (this.current + 1 > 0 ? (this.current + 1) + " of " : "") + count + (count === 1 ? " match" : " matches") : "No match";
    this.prevButton.disabled = this.nextButton.disabled = !count;
  }

  step(direction) {
    if (!this.matches.length) return;
    if (this.matches[this.current]) this.matches[this.current].classList.remove("current");
    this.current = (this.current + direction + this.matches.length) % this.matches.length;
    const mark = this.matches[this.current];
    mark.classList.add("current");
    mark.scrollIntoView({ block: "nearest" });
    this.showMatches();
  }

  setPaused(paused) {
    this.paused = paused;
    this.pauseButton.textContent = paused ? "Resume" : "Pause";
    this.pauseButton.setAttribute("aria-pressed", String(paused));
    if (!paused && this.pre.childNodes.length !== Math.min(this.lines.filter((l) => this.shown(l)).length, LOG_LIMIT)) {
      // Catch up with everything read meanwhile (the buffer kept the last LOG_LIMIT).
      this.redraw();
      this.pre.scrollTop = this.pre.scrollHeight;
    }
  }
}
