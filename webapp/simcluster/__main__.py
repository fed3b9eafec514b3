"""CLI: serve a simulated cluster until interrupted.

    python -m webapp.simcluster --port 8001 --kubeconfig /tmp/sim.kubeconfig --demo --churn
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .cluster import SimCluster
from .demo import Churn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m webapp.simcluster", description=__doc__,
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
    ap.add_argument("--history-size", type=int, default=1000)
    ap.add_argument("--bookmark-interval", type=float, default=5.0)
    args = ap.parse_args(argv)

    cluster = SimCluster(history_size=args.history_size,
                         bookmark_interval=args.bookmark_interval, token=args.token)
    server = cluster.serve(args.host, args.port)
    if args.kubeconfig:
        cluster.write_kubeconfig(args.kubeconfig, context=args.context)
    churn = None
    if args.demo or args.churn:
        demo = cluster.seed_demo()
        if args.churn:
            churn = Churn(cluster, demo, rate=args.churn_rate, log_rate=args.log_rate).start()
    print(f"simcluster serving {server.url}"
          + (f" (kubeconfig {args.kubeconfig})" if args.kubeconfig else ""), flush=True)

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    if churn is not None:
        churn.stop()
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
