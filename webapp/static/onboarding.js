// The page after creating an agent is the answer to the form's POST, the only place its
// first token is shown. The address bar then names the agent's Tokens tab: a reload
// shows that tab (the token is not shown again) rather than posting the form twice.
"use strict";

(function () {
  const page = document.querySelector("[data-replace-url]");
  if (page && window.history && history.replaceState) {
    history.replaceState(null, "", page.dataset.replaceUrl);
  }
})();
