"""Goal 4 (log follow at 5,000 lines/s): the simulator appends 5,000 lines/s to one
container's log (its LogGenerator: batches every 10 ms); a client follows
GET /agents/sim/cluster/logs?...&follow=true&timestamps=true (SSE, personal token) and
measures each line's lag = receive time - the line's timestamp (the simulator stamps a line
with time.time_ns() when it is appended, i.e. when a follower could first read it). Goal:
lag p99 <= 250 ms, no line lost or reordered (each line carries seq=N). For reference, a
direct `kubernetes` client follow of the same log (read_namespaced_pod_log, follow,
timestamps) runs in the same window.

    .venv/bin/python bench/cluster_logs.py                # 5,000 lines/s for 20 s
    .venv/bin/python bench/cluster_logs.py --small        # 1,000 lines/s for 5 s
    options: --rate R --seconds S --json PATH --keep --webapp DIR

Processes: simulator, `agentwatch serve`, the SSE follower and the direct follower each in
their own process (2 cores shared by all of them).
"""

from __future__ import annotations

import argparse
import calendar
import http.client
import sys
import threading
import time
import traceback
from array import array
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import (  # noqa: E402
    AGENT,
    HOST,
    Child,
    CpuMeter,
    Rig,
    fmt_cpu,
    fmt_ms,
    header,
    summary_ms,
)
from common import log, wait_quiet, write_result  # noqa: E402

NAMESPACE = "logs"
POD = "chatty"
CONTAINER = "app"

_SECONDS: dict[bytes, int] = {}


def stamp_ns(ts: bytes) -> int:
    """RFC3339Nano (`2026-01-02T03:04:05.123456789Z`) to ns since the epoch."""
    head = ts[:19]
    base = _SECONDS.get(head)
    if base is None:
        base = calendar.timegm(time.strptime(head.decode(), "%Y-%m-%dT%H:%M:%S"))
        _SECONDS[head] = base
    frac = ts[20:-1] if len(ts) > 20 else b""
    return base * 1_000_000_000 + (int(frac.ljust(9, b"0")) if frac else 0)


class _Lines:
    """Lag and sequence bookkeeping shared by both followers."""

    def __init__(self) -> None:
        self.lag = array("l")  # microseconds
        self.expected: int | None = None
        self.missing = 0
        self.reordered = 0
        self.count = 0

    def line(self, text: bytes, now_ns: int) -> None:
        ts, _, rest = text.partition(b" ")
        if not ts.endswith(b"Z"):
            return
        self.lag.append((now_ns - stamp_ns(ts)) // 1000)
        self.count += 1
        i = rest.rfind(b"seq=")
        if i >= 0:
            seq = int(rest[i + 4:])
            if self.expected is not None:
                if seq > self.expected:
                    self.missing += seq - self.expected
                elif seq < self.expected:
                    self.reordered += 1
            self.expected = seq + 1

    def result(self) -> dict[str, Any]:
        return {"lag": self.lag.tobytes(), "count": self.count, "missing": self.missing,
                "reordered": self.reordered, "last_seq": (self.expected or 0) - 1}


def sse_follower_main(conn: Any, port: int, token: str) -> None:
    try:
        lines = _Lines()
        http_conn = http.client.HTTPConnection(HOST, port, timeout=60)
        path = (f"/agents/{AGENT}/cluster/logs?namespace={NAMESPACE}&pod={POD}"
                f"&container={CONTAINER}&follow=true&timestamps=true&tailLines=0")
        http_conn.request("GET", path, headers={"Authorization": f"Bearer {token}",
                                                "Accept": "text/event-stream"})
        resp = http_conn.getresponse()
        if resp.status != 200:
            conn.send(("err", f"{resp.status} {resp.read()[:300]!r}"))
            return
        stop = threading.Event()
        errors: list[str] = []
        mark = b'"line":"'

        def run() -> None:
            pending = b""
            while not stop.is_set():
                chunk = resp.read1(1 << 20)
                if not chunk:
                    return
                now_ns = time.time_ns()
                pending += chunk
                *events, pending = pending.split(b"\n\n")
                for event in events:
                    i = event.find(mark)
                    if i >= 0:
                        j = event.rfind(b'"')
                        lines.line(event[i + len(mark):j], now_ns)
                    elif b'"type":"error"' in event or b'"type":"end"' in event:
                        errors.append(event.decode(errors="replace"))

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        conn.send(("ready", {}))
        assert conn.recv()[0] == "stop"
        stop.set()
        conn.send(("done", {**lines.result(), "errors": errors[:3]}))
        http_conn.close()
    except Exception:  # noqa: BLE001
        conn.send(("err", traceback.format_exc()))


def direct_follower_main(conn: Any, kubeconfig: str) -> None:
    try:
        import kubernetes

        api = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        api.user_agent = "bench-direct/1"
        v1 = kubernetes.client.CoreV1Api(api)
        resp = v1.read_namespaced_pod_log(POD, NAMESPACE, container=CONTAINER, follow=True,
                                          timestamps=True, tail_lines=0,
                                          _preload_content=False)
        lines = _Lines()
        stop = threading.Event()

        def run() -> None:
            pending = b""
            for chunk in resp.stream(1 << 20, decode_content=False):  # type: ignore[attr-defined]
                now_ns = time.time_ns()
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for text in complete:
                    lines.line(text, now_ns)
                if stop.is_set():
                    return

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        conn.send(("ready", {}))
        assert conn.recv()[0] == "stop"
        stop.set()
        conn.send(("done", lines.result()))
    except Exception:  # noqa: BLE001
        conn.send(("err", traceback.format_exc()))


def lat_of(res: dict[str, Any]) -> array:
    out = array("l")
    out.frombytes(res["lag"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="1,000 lines/s for 5 s")
    ap.add_argument("--rate", type=float, default=5000.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--quiet-wait", type=float, default=120.0)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--webapp", help="run the server from this folder's webapp/ package")
    args = ap.parse_args(argv)
    if args.small:
        args.rate, args.seconds = 1000.0, 5.0
    info = header("cluster log follow")
    with Rig(threads=64, keep=args.keep, webapp=args.webapp) as rig:
        rig.sim.call("add_pods", NAMESPACE, [POD])
        rig.touch_token()
        sse = Child(sse_follower_main, rig.port, rig.token, name="sse-follower")
        direct = Child(direct_follower_main, rig.kubeconfig, name="direct-follower")
        sse.expect("ready", 60)
        direct.expect("ready", 60)
        time.sleep(1)
        others = wait_quiet(args.quiet_wait, threshold=0.35)
        log(f"other load before the run: {others:.2f} cores")
        meter = CpuMeter({"server": rig.worker_pid, "simulator": rig.sim.pid,
                          "sse_client": sse.pid, "direct_client": direct.pid})
        rig.sim.call("generate_logs", NAMESPACE, POD, CONTAINER, args.rate)
        time.sleep(args.seconds)
        emitted = rig.sim.call("stop_logs")
        time.sleep(2)
        cpu = meter.stop()
        sse.send("stop")
        direct.send("stop")
        sres = sse.expect("done", 60)
        dres = direct.expect("done", 60)
        sse.stop()
        direct.stop()
    relay = summary_ms(lat_of(sres))
    direct_s = summary_ms(lat_of(dres))
    out = {"machine": info, "rate": args.rate, "seconds": args.seconds, "emitted": emitted,
           "sse": {k: v for k, v in sres.items() if k != "lag"} | {"lag_ms": relay},
           "direct": {k: v for k, v in dres.items() if k != "lag"} | {"lag_ms": direct_s},
           "cpu": cpu, "other_load_before": others}
    log(f"emitted {emitted} lines ({emitted / args.seconds:.0f}/s)")
    log(f"SSE relay: {sres['count']} lines, missing {sres['missing']}, reordered "
        f"{sres['reordered']}, lag {fmt_ms(relay)}")
    log(f"direct   : {dres['count']} lines, missing {dres['missing']}, reordered "
        f"{dres['reordered']}, lag {fmt_ms(direct_s)}")
    log(fmt_cpu(cpu))
    out["goals"] = {"lag_p99_within_250ms": relay.get("p99", 1e9) <= 250,
                    "no_line_lost": sres["count"] == emitted and not sres["missing"]
                    and not sres["reordered"]}
    log(f"goals: {out['goals']}")
    write_result("cluster_logs", out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
