// cluster/panel/: the side panel of one object: its tabs, live summary, events and
// relations, pod logs and actions (see docs/panel.md and docs/ui.md).
// details.js: the part the server renders (labels, annotations, the manifest), fetched
// again until it shows the version of the object the panel's watch saw last.

import { fragmentOf } from "../fragment.js";
import { syncActions } from "./actions.js";

const REFRESH_DELAY = 500;  // ms: at most one fetch this often

// The resourceVersion the panel's details were rendered from.
function shownVersion(panel) {
  const details = panel.querySelector(".panel-details [data-resource-version]");
  return details ? details.dataset.resourceVersion : null;
}

// One per open panel; close() when the panel goes.
export class Details {
  constructor(panel) {
    this.panel = panel;
    this.latestVersion = null;  // the object's resourceVersion, as the panel's watch last saw it
    this.timer = null;
    this.fetches = 0;           // number of the latest fetch: older answers are dropped
  }

  // The watch saw the object at `version` (null: it was deleted).
  saw(version) {
    this.latestVersion = version;
    if (version && version !== shownVersion(this.panel)) this.refresh();
  }

  // A change seen during a fetch fetches again, and a failed fetch is tried again twice.
  refresh(failures = 0) {
    if (this.timer) return;
    const panel = this.panel;
    this.timer = setTimeout(async () => {
      this.timer = null;
      const fetchNumber = ++this.fetches;
      const wanted = this.latestVersion;
      const current = () => fetchNumber === this.fetches && panel.isConnected;
      let failed = false;
      try {
        const response = await fetch(panel.dataset.detailsUrl, { headers: { "HX-Request": "true" } });
        const html = await response.text();
        if (!current()) return;  // a later fetch owns the section
        if (response.ok) {
          const fragment = fragmentOf(html);
          const manifest = fragment.querySelector('template[data-part="manifest"]');
          if (manifest) {
            panel.querySelector("#panel-manifest").textContent = manifest.content.textContent;
            manifest.remove();
          }
          panel.querySelector(".panel-details").replaceChildren(fragment);
          syncActions(panel);
        } else failed = response.status >= 500;
      } catch (err) {
        failed = true;
      }
      if (!current() || !this.latestVersion || this.latestVersion === shownVersion(panel)) return;
      if (failed) { if (failures < 2) this.refresh(failures + 1); }
      else if (this.latestVersion !== wanted) this.refresh();  // changed meanwhile
    }, REFRESH_DELAY);
  }

  // An answer still on its way is for a panel that is gone.
  close() {
    this.fetches++;
    clearTimeout(this.timer);
    this.timer = null;
    this.latestVersion = null;
  }
}
