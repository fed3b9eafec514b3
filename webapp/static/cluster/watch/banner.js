// cluster/watch/: every watch of the page over one WebSocket (agentwatch.watch.v1,
// docs/watch-protocol.md), or over a few HTTP streams when WebSockets fail; whether each
// watch is live, and the badge and banner that say so (see docs/ui.md).
// banner.js: the page's one banner (#cluster-banner): what is wrong and when the next try
// is, once for the whole page (not once per table).

export class Banner {
  constructor(el) {
    this.el = el;
    this.message = el ? el.querySelector(".banner-message") : null;
    this.retry = el ? el.querySelector(".banner-retry") : null;
  }

  // `retryAt`: local time of the next try, or null when not known.
  show(message, retryAt) {
    if (!this.el) return;
    let retry = "";
    if (retryAt !== null) {
      const left = Math.ceil((retryAt - Date.now()) / 1000);
      retry = left > 0 ? " — retrying in " + left + " s" : " — retrying now";
    }
    if (this.message.textContent !== message) this.message.textContent = message;
    if (this.retry.textContent !== retry) this.retry.textContent = retry;
    this.el.hidden = false;
  }

  hide() { if (this.el && !this.el.hidden) this.el.hidden = true; }
}
