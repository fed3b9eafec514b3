"""Node care on the Cluster tab: cordon, uncordon and drain a node, as `kubectl cordon` and
`kubectl drain --ignore-daemonsets` do, for maintainers and admins; each attempt recorded in
Activity.

`care` cordons and uncordons and says who may, `drain` plans and runs a drain (evictions
that respect PodDisruptionBudgets), `drain_jobs` runs drains in threads whose progress a
request streams, `routes` answers the page (on the live overview's blueprint,
watch/routes.py). The Nodes list's allocatable columns are the list's, in
watch/node_columns.py.
"""
