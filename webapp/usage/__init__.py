"""Resource usage on the Cluster tab: CPU and memory columns and a pod's or node's recent
samples, as metrics.k8s.io (metrics-server) reports them (docs/operate.md, "Resource
usage").

`samples` reads metrics, requests and limits into numbers and prints them as `kubectl top`
does, `poll` reads them every USAGE_POLL_SECONDS while a page shows them (one shared poll
per agent, identity and namespaces), `views` sorts a list by them, `routes` answers the
page (its endpoints are on the live overview's blueprint, watch/routes.py).
"""
