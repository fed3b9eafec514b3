"""Edit and apply, and create from YAML, on the Cluster tab: a manifest a person wrote,
tried as a server-side dry run whose diff the page shows, then applied with server-side
apply as field manager `agentwatch`, each apply recorded in Activity with its diff.

`server_side` checks the manifest, runs the dry run and the apply and records them, `diff`
says what an edit changes (the editable object, `{path, old, new}` entries, a unified diff
of the YAML), `routes` answers the page (on the live overview's blueprint, watch/routes.py).
"""
