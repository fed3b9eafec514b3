// cluster/watch/: every watch of the page over one WebSocket (agentwatch.watch.v1,
// docs/watch-protocol.md), or over a few HTTP streams when WebSockets fail; whether each
// watch is live, and the badge and banner that say so (see docs/ui.md).
// badge.js: the connection badge (#watch-badge). It names the cluster view's transport:
// Live (WebSocket), Live (HTTP streaming), Reconnecting, Disconnected; Connecting before
// the first answer.

export class Badge {
  constructor(el) {
    this.el = el;
    this.hint = document.getElementById("watch-hint");
  }

  show(state, label, title) {
    if (!this.el) return;
    const shown = state + "\n" + label + "\n" + title;
    if (shown === this.shown) return;  // asked after every message: touch the DOM on change only
    this.shown = shown;
    this.el.dataset.state = state;
    this.el.title = title;
    this.el.querySelector(".label").textContent = label;
    this.el.setAttribute("aria-label", "Cluster view: " + label + ". " + title);
    // The agent's "Connected" in the header measures its own calls to agentwatch, not this
    // view: when the two would read as a contradiction, say that they measure different things.
    if (this.hint) {
      const agentConnected = document.querySelector("#agent-status .status-connected") !== null;
      this.hint.hidden = !agentConnected || (state !== "disconnected" && state !== "reconnecting");
    }
  }

  // A click on a disconnected (or reconnecting) badge calls `reconnect`.
  onReconnect(reconnect) {
    if (!this.el || this.el.tagName !== "BUTTON") return;
    this.el.addEventListener("click", () => {
      if (["disconnected", "reconnecting"].includes(this.el.dataset.state)) reconnect();
    });
  }
}
