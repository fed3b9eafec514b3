"""What changed: every change of the desired state of the kinds an agent's configuration
names, recorded continuously as `object_changed` Activity events (docs/changes.md).

`tracked` says which part of an object is its desired state, `diff` compares two of them
in a bounded form, `managers` names who made a change from the object's managedFields,
`recorder` follows the hub's shared watches and records, `job` keeps it in step with the
configurations, `story` and `queries` read the changes back for pages.
"""
