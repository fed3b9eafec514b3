// cluster/watch/: every watch of the page over one WebSocket (agentwatch.watch.v1,
// docs/watch-protocol.md), or over a few HTTP streams when WebSockets fail; whether each
// watch is live, and the badge and banner that say so (see docs/ui.md).
// socket.js: opening the page's WebSocket: a one-use ticket, then the socket, whose
// subprotocols carry both.

import { csrfToken } from "../../lib/csrf.js";

const PROTOCOL = "agentwatch.watch.v1";
const TICKET_PREFIX = "agentwatch.ticket.";

async function ticket(url) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { "X-CSRF-Token": csrfToken(), "Accept": "application/json" },
  });
  if (!response.ok) throw new Error("ticket refused (HTTP " + response.status + ")");
  return (await response.json()).ticket;
}

function socketURL(path) {
  const url = new URL(path, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  url.host = location.host;
  return url.href;
}

// `urls`: {ticket, socket}. `onOpen(ws)` gets the open socket, and handles its end from
// then on; `onFail(event)` hears why it did not open ({code, reason}, as a close event).
// Only while `current()` holds: a newer attempt supersedes this one.
export async function openSocket(urls, current, onOpen, onFail) {
  let value;
  try { value = await ticket(urls.ticket); } catch (err) {
    if (current()) onFail({ code: 0, reason: "cannot get a ticket: " + err.message });
    return;
  }
  if (!current()) return;
  let ws;
  try { ws = new WebSocket(socketURL(urls.socket), [PROTOCOL, TICKET_PREFIX + value]); }
  catch (err) { onFail({ code: 0, reason: String(err) }); return; }
  ws.onopen = () => {
    ws.onclose = null;  // from here on, whoever uses the socket handles its end
    if (current()) onOpen(ws); else ws.close(1000);
  };
  ws.onclose = (event) => { if (current()) onFail(event); };
}

// Why the socket closed, in words for the badge and the banner.
export function describeClose(event) {
  const reasons = {
    1000: "closed", 1001: "the server is going away", 1006: "the connection was lost",
    4400: "the server refused a message", 4401: "the ticket was refused",
    4403: "access refused", 4404: "unknown agent", 4429: "too slow to read updates",
  };
  const why = event.reason || reasons[event.code] || "closed";
  return "WebSocket closed (" + event.code + "): " + why;
}
