"""How cost grows with the list: the Cluster tab's all-namespaces Pods list at 1,000, 5,000,
20,000 and 100,000 pods, what the server and the page pay for it, and kube-web-view's page
of the same pods.

    .venv/bin/python bench/cluster_scale.py               # 1k, 5k, 20k, 100k pods (~35 min)
    .venv/bin/python bench/cluster_scale.py --sizes 1000 --minutes 0.5 --rounds 1  # quick
    options: --sizes N,N --minutes SPEC --rounds N --rate R --change-seconds S
             --namespaces N --no-kwv --no-browser --kwv PATH --kwv-timeout S --max-load L
             --load-wait S --webapp DIR --chromium PATH --json PATH --keep --real
    AGENTWATCH_REALKUBE_BIN=... .venv/bin/python bench/cluster_scale.py --real \
        --sizes 1000,5000,20000     # steps 1-2 on a real kube-apiserver (~12 min)

`--minutes SPEC`: the browser's minutes live at each size, "2,20000=10" (the default: 10
minutes at 20,000 pods, 2 at the others). `--webapp DIR`: the server runs the `webapp/`
package of DIR (e.g. `git archive HEAD webapp | tar -x -C DIR`: the committed code while
the working tree changes); the simulator and the CLI run the working tree's.

Each size gets its own rig (bench/cluster_common.py Rig: a temporary instance, the
simulator in its own process, `agentwatch serve` with one gunicorn worker): N pods spread
over `--namespaces` (50) namespaces ns-00..ns-49, pod p named app-<p // 50> in ns-<p % 50>.
The page is GET /agents/sim/cluster?kind=pods (every namespace), the Cluster tab's Pods
list. Before each phase the 1-minute load average is read; above `--max-load` (2.5) the
script waits a minute at a time, up to `--load-wait` s (900); the load measured at is
recorded.

  1. First render, `--rounds` (3) rounds in alternating order, each side a fresh process:
     agentwatch: a fresh `agentwatch serve`, sign in, the first (cold) GET of the page
     timed to the last byte (wall, the worker's CPU, HTML bytes, rows); then the page's
     WebSocket, subscribed as static/cluster/main.js does: the page's HTML declares its
     watches (`data-watches` of each `section.k8s-section` list and each `[data-summary]`
     of the workloads' strip); each list is a `watch` with its params (`"as": "Table"`) and
     a `view` {namespaces: [], sort: null, dir: "asc", q: "", attention: false, numeric:
     false, limit: 100}, each strip item one with the view {namespaces: [], limit: 0}, in
     main.js's order (lists, then the strip). Bytes until live: every byte the socket
     receives after the handshake's 101 (frames, headers included) until each watch said
     `synced`. kube-web-view 21.2.0: a fresh process on the simulator's kubeconfig,
     /health, then GET /clusters/sim/namespaces/_all/pods (its every-namespace list)
     timed to the last byte within `--kwv-timeout` (300 s): wall, its CPU, HTML bytes,
     pods in the HTML, its peak RSS (VmHWM). On both sides the simulator's CPU over the
     request too (its answers to the LISTs: part of the wall time). kube-web-view has no
     live updates. Medians of the rounds.
  2. Live, a fresh server: a warm-up page of the empty namespace `default` (discovery,
     clients, templates), worker VmRSS; the page and its WebSocket until synced, 2 s, VmRSS
     again: the growth is what holding the list live costs. 10 s idle (the worker's CPU
     and the socket's bytes), then the simulator changes pods at `--rate` (100) per second
     for `--change-seconds` (20), spread over every pod (change i: pod (i * 7919) mod N,
     so consecutive changes fall in different namespaces and each pod is changed once per
     N changes): each sets a label, every second one restarts the pod's container
     (RESTARTS moves), every tenth flips it between Running and CrashLoopBackOff (needs
     attention: the counts move); bench/cluster_common.py `revise_start`. The worker's CPU
     over the changes (1.5 s after the last included) per change, the socket's bytes per
     second and its messages by type; how many changes touched the 100 rows shown.
  3. Browser: Debian's Chromium (/usr/bin/chromium, headless, Playwright; signed in with
     the session cookie of a login over HTTP) opens the page on that server (the list's
     watch kept by step 2's socket, closed once the page is live: a warm page, as a
     dashboard's); once the badge says live and 2 s more, the JS heap (CDP
     Performance.getMetrics JSHeapUsedSize, after HeapProfiler.collectGarbage; also before
     it); the changes run at `--rate` for `--minutes`, the heap sampled every 30 s; at the
     end the heap again, before and after a collection, the rows in the list and the frames
     the page's WebSocket received.

`--real`: steps 1 and 2 against a real kube-apiserver + etcd (bench/realkube_common.py
RealRig, the binaries of tests/realkube/build.sh; the agent reads as its service account)
instead of the simulator; no kube-web-view, no browser. One control plane for every size:
the pods of each size added to the last's, made as bench/hub_memory.py makes them
(realkube_common.workload_pod: named as a Deployment's, two containers, owner, Running
status from the manager kubelet), spread over `--namespaces` namespaces shop-00..;
WATCH_QUEUE_LIMIT = 4 x the largest size, as hub_memory.py sets it. The "simulator" CPU
is the kube-apiserver's (etcd's not counted). The changes of step 2: the admin's client,
16 threads of this process, merge-patching the label `bench.agentwatch/rev` of pod
(i * 7919) mod N at `--rate` for `--change-seconds` (one MODIFIED each; no restart, no
phase flip, unlike the simulator's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import statistics
import sys
import threading
import time
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import (  # noqa: E402
    AGENT,
    PAGE_SIZE,
    Rig,
    WsConn,
    client_frame,
    header,
    proc_cpu,
    rss_kib,
)
from common import Client, log, login, write_result  # noqa: E402
from dashboard_browser import CHROMIUM_ARGS  # noqa: E402
from dashboard_kwv import KWV_DEFAULT, KubeWebView  # noqa: E402

PAGE = f"/agents/{AGENT}/cluster?kind=pods"
WARM_UP = f"/agents/{AGENT}/cluster?kind=pods&namespace=default"
KWV_PAGE = "/clusters/sim/namespaces/_all/pods"
STRIDE = 7919  # a prime: (i * STRIDE) mod N visits every pod when N has no such factor
HTML_GOAL = 300_000  # the first HTML, and the HTML plus the socket until live
RATIO_GOAL = 0.2  # our first render against kube-web-view's, at 20,000 pods
ROWS = "section.k8s-section tbody.rows > tr"
HEAP_SAMPLE_SECONDS = 30


# --- the pods -----------------------------------------------------------------------------

def pod_of(p: int, namespaces: int) -> tuple[str, str]:
    return f"ns-{p % namespaces:02d}", f"app-{p // namespaces:05d}"


def populate(rig: Rig, pods: int, namespaces: int) -> float:
    t0 = time.perf_counter()
    for k in range(namespaces):
        names = [pod_of(p, namespaces)[1] for p in range(k, pods, namespaces)]
        for start in range(0, len(names), 2000):
            rig.sim.call("add_pods", f"ns-{k:02d}", names[start:start + 2000])
    return time.perf_counter() - t0


def every_pod(pods: int, namespaces: int) -> list[tuple[str, str]]:
    """The simulator's pods, pod p at index p."""
    return [pod_of(p, namespaces) for p in range(pods)]


def spread(every: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Change i's pod: (i * STRIDE) mod N, consecutive ones in different namespaces."""
    return [every[(i * STRIDE) % len(every)] for i in range(len(every))]


def shown_first(every: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The rows the list shows at first: kubectl's order (namespace, then name)."""
    return set(sorted(every)[:PAGE_SIZE])


def in_window(targets: list[tuple[str, str]], shown: set[tuple[str, str]], count: int) -> int:
    return sum(1 for i in range(count) if targets[i % len(targets)] in shown)


# --- the machine --------------------------------------------------------------------------

def wait_for_load(max_load: float, max_wait: float) -> list[float]:
    """The load average once its 1-minute value is at most `max_load` (or after
    `max_wait` s): other people's work shares the 2 cores."""
    deadline = time.monotonic() + max_wait
    while True:
        load = list(os.getloadavg())
        if load[0] <= max_load or time.monotonic() >= deadline:
            log(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
                + ("" if load[0] <= max_load else f" (still above {max_load}: measuring)"))
            return load
        log(f"load average {load[0]:.2f} > {max_load}: waiting a minute")
        time.sleep(60)


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


# --- the page's watches and its WebSocket -------------------------------------------------

class _Watches(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.lists: list[list[dict[str, Any]]] = []
        self.strip: list[list[dict[str, Any]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if attr.get("data-watches") is None:
            return
        watches = json.loads(attr["data-watches"] or "[]")
        if tag == "section" and "k8s-section" in (attr.get("class") or "").split():
            self.lists.append(watches)
        elif "data-summary" in attr:
            self.strip.append(watches)


def view_of(watches: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """main.js viewOf: a list's watches as one view (namespaces when several)."""
    namespaces = [w["namespace"] for w in watches if w.get("namespace")]
    if len(namespaces) < 2:
        return watches[0], []
    params = {k: v for k, v in watches[0].items() if k != "namespace"}
    return params, namespaces


def page_watches(body: bytes) -> list[dict[str, Any]]:
    """The watch messages the page sends (main.js watchLists; list-table.js viewSpec;
    the strip's tallies), in its order: the lists, then the strip."""
    parser = _Watches()
    parser.feed(body.decode())
    out = []
    for watches in parser.lists:
        if watches:
            params, namespaces = view_of(watches)
            out.append((params, {"namespaces": namespaces, "sort": None, "dir": "asc", "q": "",
                                 "attention": False, "numeric": False, "limit": PAGE_SIZE}))
    for watches in parser.strip:
        if watches:
            params, namespaces = view_of(watches)
            out.append((params, {"namespaces": namespaces, "limit": 0}))
    return [{"type": "watch", "watchId": f"w{i + 1}", "watchParams": params, "view": view}
            for i, (params, view) in enumerate(out)]


class PageSocket:
    """The page's WebSocket (a personal token instead of the page's ticket: the same
    messages): subscribes the page's watches and counts every byte and message."""

    def __init__(self, port: int, token: str, messages: list[dict[str, Any]]) -> None:
        self.ws = WsConn(port, token, timeout=60)
        self.ids = [m["watchId"] for m in messages]
        self.lists = {m["watchId"] for m in messages if m["view"].get("limit")}
        self.bytes = len(self.ws.buf)  # frames received after the 101, headers included
        self.types: Counter[str] = Counter()
        self.type_bytes: Counter[str] = Counter()
        self.synced: set[str] = set()
        self.errors: list[Any] = []
        self.shown: dict[str, list[str]] = {}  # a list's rows, as the page shows them
        self.totals: dict[str, int] = {}
        self.close_code: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for message in messages:
            self.ws.send(json.dumps(message, separators=(",", ":")).encode())

    def live(self) -> bool:
        return all(i in self.synced for i in self.ids)

    def pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.ws.sock], [], [], timeout)
        if ready:
            try:
                got = self.ws.recv_into_buf()
            except OSError:
                got = 0
            if got == 0:
                self.close_code = self.close_code or 1006
                self._stop.set()
                return
            self.bytes += got
        last = 0
        buf = self.ws.buf
        for opcode, start, end in self.ws.frames():
            last = end
            if opcode == 0x8:
                self.close_code = int.from_bytes(buf[start:start + 2], "big") \
                    if end - start >= 2 else 1005
            elif opcode == 0x9:
                with contextlib.suppress(OSError):
                    self.ws.sock.sendall(client_frame(bytes(buf[start:end]), 0xA))
            elif opcode == 0x1:
                self._message(json.loads(bytes(buf[start:end])), end - start)
        self.ws.consume(last)

    def _message(self, msg: dict[str, Any], size: int) -> None:
        kind = msg.get("type", "?")
        self.types[kind] += 1
        self.type_bytes[kind] += size
        wid = msg.get("watchId", "")
        if kind == "synced":
            self.synced.add(wid)
        elif kind == "error":
            self.errors.append(msg)
        if "total" in msg:
            self.totals[wid] = msg["total"]
        if kind == "window":
            self.shown[wid] = [key for key, _ in msg["rows"]]
        elif kind == "rows":
            drop = set(msg["drop"])
            shown = [key for key in self.shown.get(wid, []) if key not in drop]
            for index, key, _ in msg["put"]:
                shown.insert(index, key)
            self.shown[wid] = shown

    def until_live(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.live() and self.close_code is None and time.monotonic() < deadline:
            self.pump(min(0.5, max(0.0, deadline - time.monotonic())))
        return self.live()

    def follow(self) -> None:
        """Read in a thread from now on (while the simulator changes pods)."""
        def run() -> None:
            while not self._stop.is_set():
                self.pump(0.2)
        self._thread = threading.Thread(target=run, daemon=True, name="page-socket")
        self._thread.start()

    def counters(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "types": dict(self.types),
                "type_bytes": dict(self.type_bytes)}

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        self.ws.close()


def delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    return {"bytes": after["bytes"] - before["bytes"],
            "types": {k: v - before["types"].get(k, 0) for k, v in after["types"].items()
                      if v - before["types"].get(k, 0)},
            "type_bytes": {k: v - before["type_bytes"].get(k, 0)
                           for k, v in after["type_bytes"].items()
                           if v - before["type_bytes"].get(k, 0)}}


# --- 1. first render ----------------------------------------------------------------------

def timed_get(client: Client, path: str, pid: int) -> tuple[dict[str, Any], bytes]:
    c0 = proc_cpu(pid)
    t0 = time.perf_counter()
    status, body, _ = client.get(path)
    wall = time.perf_counter() - t0
    return {"ms": wall * 1000, "server_cpu_ms": (proc_cpu(pid) - c0) * 1000,
            "status": status, "bytes": len(body)}, body


def total_of(body: bytes) -> int | None:
    at = body.find(b'data-total="')
    if at < 0:
        return None
    end = body.find(b'"', at + 12)
    return int(body[at + 12:end])


def agentwatch_round(rig: Rig) -> dict[str, Any]:
    """A fresh server: its first page, then the page's socket until every view is live."""
    rig.restart_server()
    rig.touch_token()
    client = Client(rig.port, timeout=300)
    login(client)
    s0 = proc_cpu(rig.sim.pid)
    first, body = timed_get(client, PAGE, rig.worker_pid)
    first["simulator_cpu_ms"] = (proc_cpu(rig.sim.pid) - s0) * 1000
    client.close()
    first["rows"] = body.count(b'<tr id="pods-')
    first["total"] = total_of(body)
    messages = page_watches(body)
    c0 = proc_cpu(rig.worker_pid)
    t0 = time.perf_counter()
    sock = PageSocket(rig.port, rig.token, messages)
    live = sock.until_live(300)
    until_live = {"live": live, "ms": (time.perf_counter() - t0) * 1000,
                  "server_cpu_ms": (proc_cpu(rig.worker_pid) - c0) * 1000,
                  "watches": len(messages), **sock.counters(), "errors": sock.errors[:3],
                  "rows_shown": {w: len(sock.shown.get(w, [])) for w in sock.lists},
                  "totals": sock.totals}
    sock.close()
    return {"first": first, "until_live": until_live,
            "html_plus_socket_bytes": first["bytes"] + until_live["bytes"],
            "view_messages": messages}


def kwv_round(exe: str, kubeconfig: str, logfile: str, timeout: float,
              sim_pid: int) -> dict[str, Any]:
    kwv = KubeWebView(exe, kubeconfig, logfile)
    try:
        client = Client(kwv.port, timeout=timeout)
        c0 = proc_cpu(kwv.proc.pid)
        s0 = proc_cpu(sim_pid)
        t0 = time.perf_counter()
        try:
            status, body, _ = client.get(KWV_PAGE)
        except OSError as exc:  # the timeout, or the process gone
            return {"error": f"{type(exc).__name__}: {exc}",
                    "ms": (time.perf_counter() - t0) * 1000,
                    "server_cpu_ms": (proc_cpu(kwv.proc.pid) - c0) * 1000,
                    "simulator_cpu_ms": (proc_cpu(sim_pid) - s0) * 1000,
                    "peak_rss_mib": peak_rss_kib(kwv.proc.pid) / 1024}
        wall = time.perf_counter() - t0
        client.close()
        pods = set(_kwv_pods(body))
        return {"ms": wall * 1000, "server_cpu_ms": (proc_cpu(kwv.proc.pid) - c0) * 1000,
                "simulator_cpu_ms": (proc_cpu(sim_pid) - s0) * 1000,
                "status": status, "bytes": len(body), "pods_in_html": len(pods),
                "peak_rss_mib": peak_rss_kib(kwv.proc.pid) / 1024}
    finally:
        kwv.stop()


def _kwv_pods(body: bytes) -> list[bytes]:
    """The pods a kube-web-view page links: /namespaces/<ns>/pods/<name>."""
    out = []
    at = 0
    marker = b"/namespaces/ns-"
    while (at := body.find(marker, at)) >= 0:
        end = body.find(b'"', at)
        link = body[at:end]
        if b"/pods/" in link:
            out.append(link)
        at = end
    return out


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def first_renders(rig: Rig, args: argparse.Namespace) -> dict[str, Any]:
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    kwv_log = os.path.join(rig.instance.path, "kube-web-view.log")
    for i in range(args.rounds):
        order = ["agentwatch", "kube-web-view"] if i % 2 == 0 else \
            ["kube-web-view", "agentwatch"]
        for who in order:
            if who == "agentwatch":
                r = agentwatch_round(rig)
                ours.append(r)
                f, u = r["first"], r["until_live"]
                log(f"round {i + 1} agentwatch: first render {f['status']} {f['ms']:.0f} ms "
                    f"(CPU {f['server_cpu_ms']:.0f} ms, simulator "
                    f"{f['simulator_cpu_ms']:.0f} ms), {f['bytes'] / 1000:.1f} KB, "
                    f"{f['rows']} rows of {f['total']}; socket live={u['live']} in "
                    f"{u['ms']:.0f} ms (CPU {u['server_cpu_ms']:.0f} ms), "
                    f"{u['bytes'] / 1000:.1f} KB, {u['types']}; HTML + socket "
                    f"{r['html_plus_socket_bytes'] / 1000:.1f} KB")
            elif not args.no_kwv and not any("error" in t for t in theirs):
                r = kwv_round(args.kwv, rig.kubeconfig, kwv_log, args.kwv_timeout,
                              rig.sim.pid)
                theirs.append(r)
                if "error" in r:
                    log(f"round {i + 1} kube-web-view: FAILED after {r['ms'] / 1000:.0f} s "
                        f"(CPU {r['server_cpu_ms'] / 1000:.0f} s, peak RSS "
                        f"{r['peak_rss_mib']:.0f} MiB): {r['error']}")
                else:
                    log(f"round {i + 1} kube-web-view: {r['status']} {r['ms']:.0f} ms "
                        f"(CPU {r['server_cpu_ms']:.0f} ms, simulator "
                        f"{r['simulator_cpu_ms']:.0f} ms), {r['bytes'] / 1000:.1f} KB, "
                        f"{r['pods_in_html']} pods, peak RSS {r['peak_rss_mib']:.0f} MiB")
    out: dict[str, Any] = {
        "agentwatch": [{k: v for k, v in r.items() if k != "view_messages"} for r in ours],
        "kube_web_view": theirs,
        "view_messages": ours[0]["view_messages"] if ours else [],
        "median": {
            "first_ms": med([r["first"]["ms"] for r in ours]),
            "first_cpu_ms": med([r["first"]["server_cpu_ms"] for r in ours]),
            "first_simulator_cpu_ms": med([r["first"]["simulator_cpu_ms"] for r in ours]),
            "first_bytes": med([r["first"]["bytes"] for r in ours]),
            "until_live_bytes": med([r["until_live"]["bytes"] for r in ours]),
            "until_live_ms": med([r["until_live"]["ms"] for r in ours]),
            "html_plus_socket_bytes": med([r["html_plus_socket_bytes"] for r in ours]),
        }}
    done = [t for t in theirs if "error" not in t and t.get("status") == 200]
    if done:
        out["median"].update({
            "kwv_ms": med([t["ms"] for t in done]),
            "kwv_cpu_ms": med([t["server_cpu_ms"] for t in done]),
            "kwv_simulator_cpu_ms": med([t["simulator_cpu_ms"] for t in done]),
            "kwv_bytes": med([t["bytes"] for t in done]),
            "kwv_peak_rss_mib": med([t["peak_rss_mib"] for t in done])})
        out["median"]["ratio_wall"] = out["median"]["first_ms"] / out["median"]["kwv_ms"]
        out["median"]["ratio_cpu"] = (out["median"]["first_cpu_ms"]
                                      / out["median"]["kwv_cpu_ms"])
    m = out["median"]
    log("medians: agentwatch first render {:.0f} ms (CPU {:.0f} ms), HTML {:.1f} KB, socket "
        "until live {:.1f} KB; kube-web-view {}".format(
            m["first_ms"], m["first_cpu_ms"], m["first_bytes"] / 1000,
            m["until_live_bytes"] / 1000,
            f"{m['kwv_ms']:.0f} ms (CPU {m['kwv_cpu_ms']:.0f} ms), {m['kwv_bytes'] / 1000:.0f} "
            f"KB; ratio wall {m['ratio_wall']:.3f}, CPU {m['ratio_cpu']:.3f}"
            if "kwv_ms" in m else "not measured" if args.no_kwv else "failed"))
    return out


# --- 2. live: memory, CPU per change, the socket's bytes ----------------------------------

def live_server(rig: Rig, every: list[tuple[str, str]], rate: float,
                seconds: float) -> tuple[dict[str, Any], PageSocket]:
    pods = len(every)
    rig.restart_server()
    rig.touch_token()
    pid = rig.worker_pid
    client = Client(rig.port, timeout=300)
    login(client)
    client.get(WARM_UP)
    time.sleep(1)
    rss0 = rss_kib(pid)
    render, body = timed_get(client, PAGE, pid)
    client.close()
    sock = PageSocket(rig.port, rig.token, page_watches(body))
    if not sock.until_live(300):
        raise RuntimeError(f"the page's socket did not go live: {sock.errors[:3]}")
    time.sleep(2)
    rss1 = rss_kib(pid)
    growth = (rss1 - rss0) / 1024
    log(f"[live] worker RSS {rss0 / 1024:.1f} -> {rss1 / 1024:.1f} MiB (+{growth:.1f} MiB, "
        f"{(rss1 - rss0) * 1024 / pods:.0f} B per pod); page {render['ms']:.0f} ms")
    sock.follow()
    # Idle: what the worker and the socket do with nothing changing.
    idle_s = 10.0
    c0, b0, t0 = proc_cpu(pid), sock.counters(), time.monotonic()
    time.sleep(idle_s)
    idle = {"seconds": time.monotonic() - t0, "cpu_s": proc_cpu(pid) - c0,
            **delta(sock.counters(), b0)}
    targets = spread(every)
    count = int(rate * seconds)
    shown = in_window(targets, shown_first(every), count)
    c0, b0, t0 = proc_cpu(pid), sock.counters(), time.monotonic()
    rig.sim.call("revise_start", targets, rate, count)
    emitted = rig.sim.call("emit_wait", seconds + 120)
    time.sleep(1.5)  # the last counts (at most one a second) and rows
    wall = time.monotonic() - t0
    cpu = proc_cpu(pid) - c0
    during = delta(sock.counters(), b0)
    rss2 = rss_kib(pid)
    idle_rate = idle["cpu_s"] / idle["seconds"]
    out = {
        "rss_before_kib": rss0, "rss_live_kib": rss1, "rss_growth_mib": growth,
        "rss_per_pod_bytes": (rss1 - rss0) * 1024 / pods,
        "rss_growth_mib_per_10k_pods": growth * 10_000 / pods, "rss_after_changes_kib": rss2,
        "render": render, "idle": idle, "emitted": emitted, "changes": count,
        "changes_to_rows_shown": shown, "seconds": wall, "cpu_s": cpu,
        "cpu_per_change_us": cpu / count * 1e6,
        "cpu_per_change_net_of_idle_us": (cpu - idle_rate * wall) / count * 1e6,
        "socket": during, "socket_bytes_per_s": during["bytes"] / wall,
        "rows_shown": {w: len(sock.shown.get(w, [])) for w in sock.lists},
        "errors": sock.errors[:3], "close_code": sock.close_code}
    log(f"[live] idle {idle['seconds']:.0f} s: worker CPU {idle_rate * 1000:.1f} ms/s, socket "
        f"{idle['bytes']} B {idle['types']}")
    log(f"[live] {count} changes at {emitted.get('rate', 0):.1f}/s ({shown} to the rows "
        f"shown): worker CPU {cpu:.2f} s = {out['cpu_per_change_us']:.0f} us per change "
        f"({out['cpu_per_change_net_of_idle_us']:.0f} net of idle); socket "
        f"{out['socket_bytes_per_s']:.0f} B/s, {during['types']} "
        f"{ {k: round(v / 1000, 1) for k, v in during['type_bytes'].items()} } KB; rows shown "
        f"{out['rows_shown']}; RSS {rss2 / 1024:.1f} MiB")
    return out, sock


# --- 3. the browser -----------------------------------------------------------------------

def heap(cdp: Any, collect: bool) -> dict[str, float]:
    if collect:
        cdp.send("HeapProfiler.collectGarbage")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {"used_mib": metrics["JSHeapUsedSize"] / 2**20,
            "total_mib": metrics["JSHeapTotalSize"] / 2**20,
            "nodes": metrics.get("Nodes", 0), "listeners": metrics.get("JSEventListeners", 0)}


def browser_phase(browser: Any, rig: Rig, pods: int, namespaces: int, rate: float,
                  minutes: float, sock: PageSocket) -> dict[str, Any]:
    """`sock`: the live phase's socket, closed once the browser's page is live (the page
    alone follows the changes)."""
    client = Client(rig.port)
    login(client)
    client.close()
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_cookies([{"name": k, "value": v, "url": f"http://127.0.0.1:{rig.port}/"}
                         for k, v in client.cookies.items()])
    page = context.new_page()
    frames = {"n": 0, "bytes": 0}

    def on_socket(ws: Any) -> None:
        def count(payload: Any) -> None:
            frames["n"] += 1
            frames["bytes"] += len(payload)
        ws.on("framereceived", count)

    page.on("websocket", on_socket)
    t0 = time.perf_counter()
    page.goto(f"http://127.0.0.1:{rig.port}{PAGE}", wait_until="load", timeout=300_000)
    page.wait_for_selector("#watch-badge[data-state=connected]", timeout=300_000)
    page.wait_for_selector(ROWS, timeout=300_000)
    loaded = time.perf_counter() - t0
    sock.close()
    page.wait_for_timeout(2000)
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    start_raw = heap(cdp, False)
    start = heap(cdp, True)
    frames_before = dict(frames)
    count = int(rate * minutes * 60)
    targets = spread(every_pod(pods, namespaces))
    cpu0 = proc_cpu(rig.worker_pid)
    t_go = time.monotonic()
    rig.sim.call("revise_start", targets, rate, count)
    samples = []
    end_at = t_go + count / rate
    while time.monotonic() < end_at:
        page.wait_for_timeout(min(HEAP_SAMPLE_SECONDS, max(0.0, end_at - time.monotonic()))
                              * 1000)
        samples.append((round(time.monotonic() - t_go), round(heap(cdp, False)["used_mib"], 2)))
    emitted = rig.sim.call("emit_wait", 120)
    page.wait_for_timeout(2000)
    wall = time.monotonic() - t_go
    end_raw = heap(cdp, False)
    end = heap(cdp, True)
    state = page.evaluate(
        "(sel) => ({rows: document.querySelectorAll(sel).length, badge: "
        "document.getElementById('watch-badge').dataset.state, count: "
        "(document.querySelector('section.k8s-section .count') || {}).textContent})",
        ROWS)
    context.close()
    out = {"minutes": minutes, "changes": count, "emitted": emitted, "load_s": loaded,
           "heap_start": start, "heap_start_before_gc": start_raw, "heap_end": end,
           "heap_end_before_gc": end_raw, "samples_used_mib": samples, "page": state,
           "frames": frames["n"] - frames_before["n"],
           "frame_bytes": frames["bytes"] - frames_before["bytes"], "seconds": wall,
           "server_cpu_per_change_us": (proc_cpu(rig.worker_pid) - cpu0) / count * 1e6}
    log(f"[browser] {minutes:g} min at {emitted.get('rate', 0):.1f}/s: JS heap (after a "
        f"collection) {start['used_mib']:.2f} -> {end['used_mib']:.2f} MiB (before it "
        f"{start_raw['used_mib']:.2f} -> {end_raw['used_mib']:.2f}); DOM nodes "
        f"{start['nodes']:.0f} -> {end['nodes']:.0f}; {out['frames']} frames, "
        f"{out['frame_bytes'] / wall:.0f} B/s; page {state}; samples {samples}")
    return out


# --- the run ------------------------------------------------------------------------------

def minutes_for(spec: str, size: int) -> float:
    """"2,20000=10": 10 minutes at 20,000 pods, 2 at the others."""
    default = 0.0
    for part in spec.split(","):
        if "=" in part:
            n, m = part.split("=", 1)
            if int(n) == size:
                return float(m)
        elif part.strip():
            default = float(part)
    return default


def one_size(pods: int, args: argparse.Namespace, browser: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"pods": pods, "namespaces": args.namespaces}
    log(f"=== {pods} pods over {args.namespaces} namespaces ===")
    with Rig(threads=64, keep=args.keep, webapp=args.webapp) as rig:
        out["populate_s"] = populate(rig, pods, args.namespaces)
        log(f"{pods} pods created in the simulator in {out['populate_s']:.1f} s")
        out["load_first_render"] = wait_for_load(args.max_load, args.load_wait)
        out["first_render"] = first_renders(rig, args)
        out["load_live"] = wait_for_load(args.max_load, args.load_wait)
        out["live"], sock = live_server(rig, every_pod(pods, args.namespaces), args.rate,
                                        args.change_seconds)
        try:
            minutes = minutes_for(args.minutes, pods)
            if browser is not None and minutes > 0:
                # The socket keeps the list's watch (and its cache) while the load is
                # waited for: the browser's page is a warm one, as a dashboard's is.
                out["load_browser"] = wait_for_load(args.max_load, args.load_wait)
                out["browser"] = browser_phase(browser, rig, pods, args.namespaces,
                                               args.rate, minutes, sock)
        finally:
            sock.close()
    return out


# --- the real kube-apiserver tier (--real) ---------------------------------------------

LABEL = "bench.agentwatch/rev"


def real_driver(real: Any) -> Any:
    """realkube_common's ApiDriver plus the simulator's `revise_start` / `emit_wait`, done
    through the API as the admin: change i merge-patches pod targets[i]'s label
    `bench.agentwatch/rev` = i, due at t0 + i / rate, from 16 threads of this process
    (the schedule does not wait for answers)."""
    from concurrent.futures import ThreadPoolExecutor

    import kubernetes
    from realkube_common import MERGE_PATCH, ApiDriver, api_client, drained

    class Driver(ApiDriver):
        _emitting: threading.Thread | None = None
        _emitted: dict[str, Any] = {}

        def revise_start(self, targets: list[tuple[str, str]], rate: float,
                         count: int) -> None:
            threads = 16
            api = api_client(self.kubeconfig, "bench-emitter/1")
            api.configuration.connection_pool_maxsize = threads
            v1 = kubernetes.client.CoreV1Api(api)
            namespace, name = targets[0]
            with ThreadPoolExecutor(threads) as pool:  # warm the pool's TLS connections
                list(pool.map(lambda _: drained(v1.read_namespaced_pod(
                    name, namespace, _preload_content=False)), range(threads)))
            seqs = iter(range(count))
            lock = threading.Lock()
            late: list[float] = []
            errors: list[str] = []
            finished = [0.0]
            t0 = time.time() + 0.1

            def run() -> None:
                while True:
                    with lock:
                        seq = next(seqs, None)
                    if seq is None:
                        return
                    delay = t0 + seq / rate - time.time()
                    if delay > 0:
                        time.sleep(delay)
                    else:
                        late.append(-delay)
                    ns, pod = targets[seq % len(targets)]
                    try:
                        drained(v1.patch_namespaced_pod(
                            pod, ns, {"metadata": {"labels": {LABEL: str(seq)}}},
                            _content_type=MERGE_PATCH, _preload_content=False))
                    except Exception as exc:  # noqa: BLE001 - counted and reported
                        errors.append(f"{seq}: {exc}"[:300])
                    finished[0] = max(finished[0], time.time())

            def emit() -> None:
                workers = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
                for w in workers:
                    w.start()
                for w in workers:
                    w.join()
                api.close()
                took = max(finished[0] - t0, 1e-9)
                self._emitted = {"sent": count - len(errors), "errors": len(errors),
                                 "first_errors": errors[:3], "seconds": took,
                                 "rate": (count - len(errors)) / took, "late": len(late),
                                 "late_max_ms": max(late, default=0.0) * 1000}

            self._emitting = threading.Thread(target=emit, daemon=True, name="emitter")
            self._emitting.start()

        def emit_wait(self, timeout: float) -> dict[str, Any]:
            if self._emitting is not None:
                self._emitting.join(timeout)
            return self._emitted

    return Driver(real)


def real_sizes(sizes: list[int], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every size on one real control plane: the pods of the next size added to those of
    the last (bench/hub_memory.py's pods: realkube_common.workload_pod, named as a
    Deployment's, Running), then steps 1 and 2 on fresh servers."""
    from hub_memory import pod_names
    from realkube_common import RealRig, create_workload_pods

    names = pod_names(max(sizes), args.namespaces, 10)
    results = []
    config = f"WATCH_QUEUE_LIMIT = {max(4 * max(sizes), 5000)}\n"
    with RealRig(threads=64, keep=args.keep, webapp=args.webapp, config=config) as rig:
        rig.sim.close()
        rig.sim = real_driver(rig.real)
        for namespace in sorted({ns for ns, _ in names}):
            rig.sim.call("ensure_namespace", namespace)
        made = 0
        for pods in sorted(sizes):
            out: dict[str, Any] = {"pods": pods, "namespaces": args.namespaces}
            log(f"=== {pods} pods over {args.namespaces} namespaces (real kube-apiserver) ===")
            out["created"] = create_workload_pods(rig.admin_kubeconfig, names[made:pods])
            made = pods
            log(f"{out['created']['created']} pods created and set Running in "
                f"{out['created']['seconds']:.1f} s")
            out["load_first_render"] = wait_for_load(args.max_load, args.load_wait)
            out["first_render"] = first_renders(rig, args)
            out["load_live"] = wait_for_load(args.max_load, args.load_wait)
            out["live"], sock = live_server(rig, names[:pods], args.rate, args.change_seconds)
            sock.close()
            results.append(out)
            log("\n" + real_table(results))
    return results


def real_table(results: list[dict[str, Any]]) -> str:
    lines = ["| pods | first render wall / CPU | kube-apiserver CPU over it | first HTML | "
             "bytes until live (HTML + socket) | server RSS growth live | CPU per change | "
             "socket at 100 changes/s |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        m = r["first_render"]["median"]
        live = r["live"]
        lines.append(
            f"| {r['pods']:,} | {m['first_ms']:,.0f} / {m['first_cpu_ms']:,.0f} ms | "
            f"{m['first_simulator_cpu_ms']:,.0f} ms | {m['first_bytes'] / 1000:.0f} KB | "
            f"{m['html_plus_socket_bytes'] / 1000:.0f} KB ({m['first_bytes'] / 1000:.0f} + "
            f"{m['until_live_bytes'] / 1000:.0f}) | {live['rss_growth_mib']:.1f} MiB "
            f"({live['rss_per_pod_bytes'] / 1000:.1f} KB/pod) | "
            f"{live['cpu_per_change_us']:.0f} µs | {live['socket_bytes_per_s']:,.0f} B/s |")
    return "\n".join(lines)


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| pods | first render wall / CPU | first HTML | bytes until live (HTML + "
             "socket) | server RSS growth | CPU per change | socket at 100 changes/s | "
             "browser heap start -> end | kube-web-view first render wall / CPU | its HTML |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        m = r["first_render"]["median"]
        live = r["live"]
        b = r.get("browser")
        heap_text = (f"{b['heap_start']['used_mib']:.1f} -> {b['heap_end']['used_mib']:.1f} "
                     f"MiB ({b['minutes']:g} min)") if b else "-"
        kwv = (f"{m['kwv_ms']:,.0f} / {m['kwv_cpu_ms']:,.0f} ms",
               f"{m['kwv_bytes'] / 1000:,.0f} KB") if "kwv_ms" in m else ("-", "-")
        failed = [t for t in r["first_render"]["kube_web_view"] if "error" in t]
        if failed:
            kwv = (f"failed after {failed[0]['ms'] / 1000:.0f} s", "-")
        lines.append(
            f"| {r['pods']:,} | {m['first_ms']:,.0f} / {m['first_cpu_ms']:,.0f} ms | "
            f"{m['first_bytes'] / 1000:.0f} KB | {m['html_plus_socket_bytes'] / 1000:.0f} KB "
            f"({m['first_bytes'] / 1000:.0f} + {m['until_live_bytes'] / 1000:.0f}) | "
            f"{live['rss_growth_mib']:.1f} MiB ({live['rss_per_pod_bytes'] / 1000:.1f} KB/pod) | "
            f"{live['cpu_per_change_us']:.0f} µs | {live['socket_bytes_per_s']:,.0f} B/s | "
            f"{heap_text} | {kwv[0]} | {kwv[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,5000,20000,100000")
    ap.add_argument("--minutes", default="2,20000=10",
                    help="browser minutes live: a default, and SIZE=MINUTES overrides")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=100)
    ap.add_argument("--change-seconds", type=float, default=20)
    ap.add_argument("--namespaces", type=int, default=50)
    ap.add_argument("--no-kwv", action="store_true")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--kwv", default=KWV_DEFAULT, help="the kube-web-view executable")
    ap.add_argument("--kwv-timeout", type=float, default=300)
    ap.add_argument("--max-load", type=float, default=2.5)
    ap.add_argument("--load-wait", type=float, default=900)
    ap.add_argument("--webapp", help="run the server from this folder's webapp/ package")
    ap.add_argument("--chromium", default=os.environ.get("AGENTWATCH_TEST_CHROMIUM",
                                                         "/usr/bin/chromium"))
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--real", action="store_true",
                    help="a real kube-apiserver + etcd instead of the simulator (steps 1-2)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.real:
        args.no_kwv = args.no_browser = True
    if not args.no_kwv and not os.access(args.kwv, os.X_OK):
        ap.error(f"{args.kwv} not found: install kube-web-view as bench/dashboard_kwv.py says, "
                 "or --no-kwv")
    info = header("how cost grows with the list")
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    results = []
    if args.real:
        results = real_sizes(sizes, args)
        goals = {"first_html_within_300KB": all(
            r["first_render"]["median"]["first_bytes"] <= HTML_GOAL for r in results),
            "html_plus_socket_within_300KB": all(
                r["first_render"]["median"]["html_plus_socket_bytes"] <= HTML_GOAL
                for r in results)}
        log(f"started {started}; goals: {goals}")
        print(real_table(results))
        write_result("cluster_scale_real", {"machine": info, "started": started,
                                            "args": vars(args), "sizes": results,
                                            "goals": goals}, args.json)
        return 0 if all(goals.values()) else 1
    with contextlib.ExitStack() as stack:
        browser = None
        if not args.no_browser:
            from playwright.sync_api import sync_playwright

            pw = stack.enter_context(sync_playwright())
            browser = pw.chromium.launch(executable_path=args.chromium, headless=True,
                                         args=CHROMIUM_ARGS)
            stack.callback(browser.close)
        for pods in sizes:
            results.append(one_size(pods, args, browser))
            log("\n" + table(results))
    ratio = next((r["first_render"]["median"].get("ratio_wall") for r in results
                  if r["pods"] == 20_000), None)
    goals = {
        "first_html_within_300KB": all(r["first_render"]["median"]["first_bytes"] <= HTML_GOAL
                                       for r in results),
        "html_plus_socket_within_300KB": all(
            r["first_render"]["median"]["html_plus_socket_bytes"] <= HTML_GOAL
            for r in results),
        "ratio_at_20000_within_0.2": None if ratio is None else ratio <= RATIO_GOAL}
    log(f"started {started}; goals: {goals}")
    print(table(results))
    write_result("cluster_scale", {"machine": info, "started": started, "args": vars(args),
                                   "sizes": results, "goals": goals}, args.json)
    return 0 if all(v is not False for v in goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
