// cluster/panel/: the side panel of one object: its tabs, live summary, events and
// relations, pod logs and actions (see docs/panel.md and docs/ui.md).
// summary.js: the panel's summary: the object's table row, as a list of its cells, filled
// again from each row its watch brings.

import { refreshAges } from "../ages.js";
import { fragmentOf } from "../fragment.js";

export class Summary {
  constructor(dl) {
    this.dl = dl;
  }

  fill(html) {
    if (!this.dl || !html) return;
    const row = fragmentOf(html.trim()).firstElementChild;
    if (!row) return;
    for (const cell of row.querySelectorAll("td[data-col]")) {
      const dd = this.dl.querySelector('dd[data-col="' + cell.dataset.col + '"]');
      if (dd) dd.replaceChildren(...cell.childNodes);
    }
    refreshAges(this.dl);
  }
}
