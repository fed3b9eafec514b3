"""CLI: serve a simulated cluster until interrupted.

    python -m simkube --port 8001 --kubeconfig /tmp/sim.kubeconfig --demo --churn

Faults on demand, by signal (``kill -HUP <pid>``):
  SIGHUP   replace the cluster behind the same address (resourceVersions restart lower,
           new pods; open connections are cut), as when a dev cluster is recreated
  SIGUSR1  outage: connection refused for --outage-seconds, then serve again
  SIGUSR2  cut every open watch and log stream
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable

from .cluster import SimCluster
from .demo import Churn, seed_demo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simkube", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8001)
    ap.add_argument("--kubeconfig", help="write a kubeconfig for this server here")
    ap.add_argument("--context", default="sim")
    ap.add_argument("--token", help="require this bearer token")
    ap.add_argument("--demo", action="store_true", help="seed demo namespaces and workloads")
    ap.add_argument("--churn", action="store_true", help="keep the demo changing (implies --demo)")
    ap.add_argument("--churn-rate", type=float, default=2.0, help="churn actions per second")
    ap.add_argument("--log-rate", type=float, default=20.0, help="churn log lines per second")
    ap.add_argument("--event-ttl", type=float, default=3600.0,
                    help="seconds an Event is kept after it was last seen (kube-apiserver's "
                         "--event-ttl)")
    ap.add_argument("--gitops-per-minute", type=float, default=1.0,
                    help="new Git revisions and chart bumps per minute (each one makes "
                         "agentwatch record a few events); 0: part of the churn rate")
    ap.add_argument("--history-size", type=int, default=1000)
    ap.add_argument("--bookmark-interval", type=float, default=5.0)
    ap.add_argument("--block-timeout", type=float, default=3.0,
                    help="how long a read at a too new resourceVersion waits before its 504")
    ap.add_argument("--outage-seconds", type=float, default=10.0)
    args = ap.parse_args(argv)

    cluster = SimCluster(history_size=args.history_size,
                         bookmark_interval=args.bookmark_interval, token=args.token,
                         block_timeout=args.block_timeout)
    server = cluster.serve(args.host, args.port)
    if args.kubeconfig:
        cluster.write_kubeconfig(args.kubeconfig, context=args.context)
    churn = None
    seeded = args.demo or args.churn
    if seeded:
        demo = seed_demo(cluster)
        if args.churn:
            churn = Churn(cluster, demo, rate=args.churn_rate, log_rate=args.log_rate,
                          gitops_per_minute=args.gitops_per_minute or None,
                          event_ttl=args.event_ttl or None).start()
    print(f"simkube serving {server.url}"
          + (f" (kubeconfig {args.kubeconfig})" if args.kubeconfig else ""), flush=True)

    done = threading.Event()
    requests: list[str] = []  # signal handlers only note the request; the loop acts
    wake = threading.Event()

    def note(what: str) -> None:
        requests.append(what)
        wake.set()

    def end(*_: object) -> None:
        done.set()
        wake.set()

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGHUP, lambda *_: note("replace"))
    signal.signal(signal.SIGUSR1, lambda *_: note("outage"))
    signal.signal(signal.SIGUSR2, lambda *_: note("cut"))
    try:
        while not done.is_set():
            wake.wait(0.5)
            wake.clear()
            while requests:
                what = requests.pop(0)
                if what == "replace":
                    # Churn goes on: the new demo has the same deployments, other pods.
                    rv = cluster.replace(_reseed(cluster.replacements + 1) if seeded else None)
                    print(f"simkube replaced: resourceVersion now {rv}", flush=True)
                elif what == "outage":
                    server.outage(args.outage_seconds)
                    print(f"simkube down for {args.outage_seconds:g} s", flush=True)
                else:
                    print(f"simkube cut {server.cut_streams()} streams", flush=True)
    except KeyboardInterrupt:
        pass
    if churn is not None:
        churn.stop()
    cluster.close()
    return 0


def _reseed(seed: int) -> Callable[[SimCluster], object]:
    return lambda fresh: seed_demo(fresh, seed=seed)


if __name__ == "__main__":
    sys.exit(main())
