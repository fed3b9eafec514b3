// cluster/panel/: the side panel of one object (see docs/panel.md and docs/ui.md).
// terminal.js: the Shell tab of a pod: xterm.js over the exec socket (agentwatch.exec.v1,
// docs/operate.md "A shell in a container"). Binary messages carry a channel byte as
// Kubernetes' do: 0 what is typed and pasted, 4 the terminal's size (sent on start and on
// every resize, which follows the panel); 1 and 2 come back as output. JSON text says
// started, exit (with the code) or error. A closed session stays closed: Connect starts a
// new one. Ctrl+Shift+C copies the selection, Ctrl+Shift+V (or the browser's paste) pastes.

import { csrfToken } from "../../lib/csrf.js";
import { FitAddon } from "../../vendor/xterm-addon-fit-0.11.0.min.js";
import { Terminal } from "../../vendor/xterm-6.0.0.min.js";

const PROTOCOL = "agentwatch.exec.v1";
const TICKET_PREFIX = "agentwatch.ticket.";
const STDIN = 0, STDOUT = 1, STDERR = 2, RESIZE = 4;
const STYLES = ["../../vendor/xterm-6.0.0.css", "./terminal.css"];
const encoder = new TextEncoder();

// xterm writes its theme and cell sizes into <style> elements; the page's policy admits
// those carrying the nonce the server gave the page's script (vendor/VERSIONS.md).
let styled = false;
function allowStyles() {
  if (styled) return;
  styled = true;
  for (const href of STYLES) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = new URL(href, import.meta.url).href;
    document.head.appendChild(link);
  }
  const tag = Array.from(document.scripts).find((s) => s.src.endsWith("/cluster/main.js"));
  const nonce = (tag && tag.nonce) || "";
  if (!nonce) return;
  const create = document.createElement;
  document.createElement = function (name, options) {
    const element = create.call(this, name, options);
    if (String(name).toLowerCase() === "style") element.nonce = nonce;
    return element;
  };
}

function frame(channel, bytes) {
  const out = new Uint8Array(bytes.length + 1);
  out[0] = channel;
  out.set(bytes, 1);
  return out;
}

export class TerminalView {
  constructor(section) {
    this.section = section;
    this.form = section.querySelector("form.terminal-controls");
    this.status = section.querySelector(".terminal-status");
    this.screen = section.querySelector(".terminal-screen");
    this.connectButton = section.querySelector(".terminal-connect");
    this.closeButton = section.querySelector(".terminal-close");
    this.socket = null;
    this.term = null;
    this.fit = null;
    this.observer = null;
    this.form.addEventListener("submit", (event) => { event.preventDefault(); this.connect(); });
    this.closeButton.addEventListener("click", () => this.end("Closed."));
  }

  say(text, state) {
    this.status.textContent = text;
    this.section.dataset.state = state;
  }

  // The terminal, made once and cleared for each session.
  ensureTerminal() {
    if (this.term) { this.term.reset(); return; }
    allowStyles();
    this.term = new Terminal({ cursorBlink: true, convertEol: false, scrollback: 2000,
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace", fontSize: 13 });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(this.screen);
    this.term.onData((data) => this.send(frame(STDIN, encoder.encode(data))));
    this.term.onResize(({ cols, rows }) => this.sendSize(cols, rows));
    this.term.attachCustomKeyEventHandler((event) => this.clipboard(event));
    this.observer = new ResizeObserver(() => this.refit());
    this.observer.observe(this.screen);
  }

  // Ctrl+Shift+C and Ctrl+Shift+V: Ctrl+C stays the terminal's interrupt.
  clipboard(event) {
    if (event.type !== "keydown" || !event.ctrlKey || !event.shiftKey) return true;
    const key = event.key.toLowerCase();
    if (key === "c") {
      const text = this.term.getSelection();
      if (text && navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
      return false;
    }
    if (key === "v" && navigator.clipboard && navigator.clipboard.readText) {
      navigator.clipboard.readText().then((text) => this.term.paste(text)).catch(() => {});
      return false;
    }
    return true;
  }

  refit() {
    if (!this.term || this.screen.offsetParent === null) return;  // hidden: no size
    try { this.fit.fit(); } catch { /* not laid out yet */ }
  }

  sendSize(cols, rows) {
    this.send(frame(RESIZE, encoder.encode(JSON.stringify({ Width: cols, Height: rows }))));
  }

  send(bytes) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(bytes);
  }

  async connect() {
    this.end(null);
    this.ensureTerminal();
    this.refit();
    const data = new FormData(this.form);
    this.say("Connecting…", "connecting");
    this.connectButton.disabled = true;
    let ticket;
    try {
      const response = await fetch(this.section.dataset.ticketUrl, {
        method: "POST", headers: { "X-CSRF-Token": csrfToken() } });
      const body = await response.json();
      if (!response.ok) throw new Error((body.error && body.error.message) || "HTTP " + response.status);
      ticket = body.ticket;
    } catch (err) {
      this.connectButton.disabled = false;
      this.say("Cannot connect: " + err.message, "error");
      return;
    }
    const query = new URLSearchParams({
      namespace: this.section.dataset.namespace, pod: this.section.dataset.pod,
      container: data.get("container") || "", command: data.get("command") || "sh" });
    const url = new URL(this.section.dataset.socketPath, location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    url.search = query.toString();
    const socket = new WebSocket(url.href, [PROTOCOL, TICKET_PREFIX + ticket]);
    socket.binaryType = "arraybuffer";
    this.socket = socket;
    this.section.removeAttribute("data-exit-code");
    socket.addEventListener("message", (event) => this.receive(socket, event.data));
    socket.addEventListener("close", (event) => this.closed(socket, event));
    this.closeButton.hidden = false;
  }

  receive(socket, data) {
    if (socket !== this.socket) return;
    if (typeof data !== "string") {
      const bytes = new Uint8Array(data);
      if (bytes[0] === STDOUT || bytes[0] === STDERR) this.term.write(bytes.subarray(1));
      return;
    }
    let message;
    try { message = JSON.parse(data); } catch { return; }
    if (message.type === "started") {
      this.say(`Connected to ${message.container || "the pod's container"}: ${message.command.join(" ")}`, "open");
      this.sendSize(this.term.cols, this.term.rows);
      this.term.focus();
    } else if (message.type === "exit") {
      const code = message.exitCode;
      if (code !== null && code !== undefined) this.section.dataset.exitCode = String(code);
      this.said = {
        exited: code === null || code === undefined ? "The command ended: " + (message.message || "no exit code") : `Exited with code ${code}.`,
        idle: message.message || "Closed: idle.",
        ended: "Closed: your sign-in or access ended.",
        broken: "The connection to the cluster was lost.",
      }[message.reason] || "Closed.";
    } else if (message.type === "error") {
      this.said = message.message;
      this.saidState = "error";
    }
  }

  closed(socket, event) {
    if (socket !== this.socket) return;
    this.socket = null;
    this.connectButton.disabled = false;
    this.closeButton.hidden = true;
    const said = this.said || (event.code === 1000 ? "Closed." : `Closed: ${event.reason || "the connection ended"} (${event.code}).`);
    this.say(said, this.saidState || (event.code === 1000 ? "closed" : "error"));
    this.said = null;
    this.saidState = null;
  }

  // Ends the session, if any (no reconnect); `text`: what the status then says.
  end(text) {
    const socket = this.socket;
    this.socket = null;
    if (socket) socket.close(1000, "closed");
    this.connectButton.disabled = false;
    this.closeButton.hidden = true;
    this.said = null;
    this.saidState = null;
    if (text) this.say(text, "closed");
  }

  // The panel closes: the session ends and the terminal goes.
  close() {
    this.end(null);
    if (this.observer) this.observer.disconnect();
    if (this.term) this.term.dispose();
    this.term = null;
  }
}
