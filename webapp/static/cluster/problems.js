// cluster/: the Cluster tab, as native modules (main.js wires them; see docs/ui.md).
// problems.js: what the relay's errors mean for the page, and how the page says them.

// Text of the Python libraries under the relay, never shown as is (the server cleans it
// too; this is the second line of defence).
const LIBRARY_TEXT = /HTTPS?ConnectionPool|Max retries|urllib3|\[Errno|NewConnectionError|Traceback/;

// The server's sentence, or a plain one instead of a library's exception text.
export function readableProblem(error) {
  const text = String((error && (error.message || error.reason)) || "").trim();
  return !text || LIBRARY_TEXT.test(text) ? "Cannot reach the cluster" : text;
}

// Connectivity problems make a table stale; a 403 or a 404 is an answer, shown in its table.
export function isConnectivity(error) {
  const code = Number(error && error.code) || 0;
  return code === 0 || code >= 500;
}

// An ISO time from the server as epoch ms, or null.
export function parseTime(value) {
  const when = typeof value === "string" ? Date.parse(value) : NaN;
  return isNaN(when) ? null : when;
}
