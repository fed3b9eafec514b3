"""How much of Secrets the agent reads, as its installer chose (`agentwatch agent --secrets`,
and the manifest's ClusterRole to match):

- `names` (the default): their list or watch as the API server's Table with each row's
  metadata only (name, type, how many keys, age, labels, annotations), or as a
  PartialObjectMetadataList (the search's listing): no `data` reaches the agent. The one
  copy of values metadata can hold, the annotation `kubectl apply` fills with the whole
  Secret, is dropped before anything leaves the agent (watch/redact.py). A Secret's own
  page (its keys) is refused.
- `keys`: also whole Secrets, their values blanked by the agent before anything leaves it
  (watch/redact.py): names, types and keys. The agent's service account can read values.
- `none`: nothing of Secrets; their list says the agent refuses it.

RBAC cannot grant a metadata-only read (list is list): with `names` the agent's check here
is what keeps values out of its memory; `none` also leaves Secrets out of the ClusterRole.
"""

from __future__ import annotations

from enum import StrEnum

from ..search.listing import PARTIAL_ACCEPT
from ..watch.kube import TABLE_ACCEPT
from .allowlist import Action, Target

# The end of the refusal of anything more than metadata: the server's changes recorder
# reads it as "follow this agent's Secrets by their metadata" (changes/recorder.py).
NAMES_ONLY = "(installed with --secrets names)"


class SecretReads(StrEnum):
    NAMES = "names"
    KEYS = "keys"
    NONE = "none"

    def refusal(self, target: Target, accept: str, query: dict[str, str]) -> str | None:
        """Why a request for Secrets is refused under this choice (None: it may go)."""
        if not target.is_secrets or self is SecretReads.KEYS:
            return None
        if self is SecretReads.NONE:
            return "this agent reads no Secrets (installed with --secrets none)"
        metadata_only = target.action is Action.LIST and (
            (accept == TABLE_ACCEPT and query.get("includeObject") == "Metadata")
            # the search's light listing: the same metadata, without the Table around it
            or accept == PARTIAL_ACCEPT)
        if metadata_only:
            return None
        return ("this agent reads Secrets' names only, never their keys or values "
                + NAMES_ONLY)
