"""Shared plumbing of the live-cluster benchmarks (bench/cluster_*.py).

* `SimProcess`: a `simkube.SimCluster` served from its **own process** (its own
  GIL, so 200 WebSocket readers and the relay cannot starve it), driven over a pipe:
  create pods, emit MODIFIED events at a fixed rate (each carrying its sequence number and
  emit time in the annotation `bench.agentwatch/stamp` = "<seq>:<time_ns>", stamped inside
  the store's lock, i.e. when the event is created), generate logs, read request counters,
  expire the watch history, change pods spread over many namespaces (`revise_start`,
  bench/cluster_scale.py); for the soak, churn a namespace's pods (adds, changes,
  deletions, paused on demand), inject the simulator's faults (SOAK_FAULTS) and return the
  pods as they are (uid -> name, resourceVersion).
* `Rig`: a temporary instance, an admin user with a personal token, the simulator, an agent
  connected to it, and a real `agentwatch serve` (gunicorn gthread) on loopback.
* `WsConn`: a lean WebSocket client on a raw socket (handshake with
  `Authorization: Bearer`, subprotocol `agentwatch.watch.v1`; frames parsed in place, the
  stamp found with one bytes search, no JSON decoding), so the measured latency is the
  server's, not a slow client's.
* CPU accounting per process (/proc/PID/stat) and RSS (/proc/PID/status).

bench/common.py (someone else's) provides the instance folder, the server process, the HTTP
client, login and percentiles; they are imported, not copied.
"""

from __future__ import annotations

import base64
import contextlib
import json
import multiprocessing as mp
import os
import select
import socket
import struct
import sys
import threading
import time
import traceback
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    HOST,
    Client,
    Instance,
    Server,
    log,
    machine_info,
    percentile,
)

ANNOTATION = "bench.agentwatch/stamp"
MARK = b'"bench.agentwatch/stamp":"'
SUBPROTOCOL = "agentwatch.watch.v1"
AGENT = "sim"
PAGE_SIZE = 100  # webapp.watch.listing.PAGE_SIZE: the rows of a list's first HTML
CTX = mp.get_context("spawn")
TICK = os.sysconf("SC_CLK_TCK")


# --- processes: CPU and memory ------------------------------------------------------------

def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one process (all its threads)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / TICK


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def thread_count(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


class CpuMeter:
    """CPU of named processes over a window, in cores; plus the whole machine."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start()

    @staticmethod
    def _machine() -> float:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = values[3] + values[4]
        return (sum(values[:8]) - idle) / TICK

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.m0 = self._machine()
        self.c0 = {name: proc_cpu(pid) for name, pid in self.pids.items()}

    def stop(self) -> dict[str, float]:
        wall = time.monotonic() - self.t0
        out = {name: (proc_cpu(pid) - self.c0[name]) / wall for name, pid in self.pids.items()}
        machine = (self._machine() - self.m0) / wall
        out["machine"] = machine
        out["other"] = max(0.0, machine - sum(v for k, v in out.items() if k != "machine"))
        out["seconds"] = wall
        return out


def fmt_cpu(cpu: dict[str, float]) -> str:
    parts = [f"{k} {v:.2f}" for k, v in cpu.items() if k not in ("seconds", "machine")]
    return (f"CPU over {cpu['seconds']:.1f} s in cores (of {os.cpu_count()}): machine "
            f"{cpu['machine']:.2f} = " + " + ".join(parts))


# --- statistics ---------------------------------------------------------------------------

def summary_ms(values_us: Iterable[float]) -> dict[str, float]:
    data = sorted(values_us)
    if not data:
        return {"count": 0}
    return {"count": len(data), "mean": sum(data) / len(data) / 1000,
            "p50": percentile(data, 50) / 1000, "p90": percentile(data, 90) / 1000,
            "p99": percentile(data, 99) / 1000, "p999": percentile(data, 99.9) / 1000,
            "max": data[-1] / 1000}


def fmt_ms(s: dict[str, float]) -> str:
    if not s.get("count"):
        return "n=0"
    return (f"n={s['count']:.0f} p50={s['p50']:.2f} p90={s['p90']:.2f} p99={s['p99']:.2f} "
            f"p99.9={s['p999']:.2f} max={s['max']:.2f} ms")


# --- the simulator in its own process -----------------------------------------------------

class _SimHandlers:
    """Runs in the simulator process; every public method is a pipe command."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self._emitter: threading.Thread | None = None
        self._emit_result: dict[str, Any] = {}
        self._gens: list[Any] = []
        self._churn: Any = None  # _Churn, once churn_prepare ran

    def ping(self) -> str:
        return "pong"

    def add_pods(self, namespace: str, names: list[str], events: bool = False) -> int:
        for name in names:
            self.cluster.add_pod(namespace, name, ["app"], events=events,
                                 labels={"app": name.rsplit("-", 1)[0]})
        return len(names)

    def resource_version(self) -> str:
        return str(self.cluster.resource_version)

    def enable_metrics(self) -> None:
        """metrics.k8s.io on, as if metrics-server were installed (bench/usage_render.py)."""
        self.cluster.metrics.enable()

    def stats(self) -> dict[str, Any]:
        """Counters by (verb, resource, user-agent): the relay and the direct watcher use
        different user agents, so the relay's upstream requests are told apart."""
        counts: dict[str, int] = {}
        for rec in list(self.cluster.stats.requests):
            ua = rec.headers.get("user-agent", "")
            who = "direct" if ua.startswith("bench-direct") else "relay"
            key = f"{who}:{rec.verb}:{rec.resource}"
            counts[key] = counts.get(key, 0) + 1
        snap = self.cluster.stats.snapshot()
        return {"by_client": counts, "open_watches": snap.get("open_watches", {}),
                "lists_pods": self.cluster.stats.lists("pods"),
                "watches_pods": self.cluster.stats.watches("pods")}

    def reset_stats(self) -> None:
        self.cluster.stats.reset()

    def patch_stamp(self, namespace: str, name: str, seq: int) -> str:
        pod = self.cluster.update("pods", name, _stamper(seq), namespace=namespace)
        return str(pod["metadata"]["resourceVersion"])

    # events at a fixed rate, from a thread of this process
    def emit_start(self, namespace: str, names: list[str], rate: float, count: int,
                   first_seq: int = 0) -> None:
        self._emit_result = {}

        def run() -> None:
            lateness = array("d")
            t0 = time.monotonic()
            for i in range(count):
                target = t0 + i / rate
                delay = target - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                else:
                    lateness.append(-delay)
                name = names[i % len(names)]
                self.cluster.update("pods", name, _stamper(first_seq + i), namespace=namespace)
            took = time.monotonic() - t0
            late = sorted(lateness)
            self._emit_result = {
                "emitted": count, "seconds": took, "rate": count / took if took else 0,
                "late_events": len(late),
                "late_p99_ms": percentile(late, 99) * 1000 if late else 0.0,
                "late_max_ms": late[-1] * 1000 if late else 0.0}

        self._emitter = threading.Thread(target=run, daemon=True, name="bench-emitter")
        self._emitter.start()

    def emit_wait(self, timeout: float) -> dict[str, Any]:
        assert self._emitter is not None
        self._emitter.join(timeout)
        return self._emit_result

    def revise_start(self, targets: list[tuple[str, str]], rate: float, count: int) -> None:
        """Like emit_start, over pods of many namespaces: change `count` pods at `rate`
        per second from a thread, cycling over `targets` ((namespace, name), in the order
        given). Each change is a pod's label (`_reviser`); every second one its status
        too. `emit_wait` returns how it went."""
        self._emit_result = {}

        def run() -> None:
            lateness = array("d")
            t0 = time.monotonic()
            for i in range(count):
                delay = t0 + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                else:
                    lateness.append(-delay)
                namespace, name = targets[i % len(targets)]
                self.cluster.update("pods", name, _reviser(i), namespace=namespace)
            took = time.monotonic() - t0
            late = sorted(lateness)
            self._emit_result = {
                "emitted": count, "seconds": took, "rate": count / took if took else 0,
                "late_events": len(late),
                "late_p99_ms": percentile(late, 99) * 1000 if late else 0.0,
                "late_max_ms": late[-1] * 1000 if late else 0.0}

        self._emitter = threading.Thread(target=run, daemon=True, name="bench-reviser")
        self._emitter.start()

    def generate_logs(self, namespace: str, pod: str, container: str, rate: float) -> None:
        self._gens.append(self.cluster.generate_logs(namespace, pod, container, rate, seed=1))

    def stop_logs(self) -> int:
        emitted = 0
        for gen in self._gens:
            gen.stop()
            emitted += gen.emitted
        self._gens.clear()
        return emitted

    def expire_history(self) -> str:
        self.cluster.expire_history()
        return str(self.cluster.resource_version)

    def change_then_expire(self, namespace: str, modify: list[str], add: list[str],
                           delete: list[str]) -> dict[str, Any]:
        """Change objects and expire the watch history in ONE hold of the store's lock:
        an open watch never sees these changes as events, only the in-stream 410, so a
        relist must find exactly this difference."""
        from simkube.pods import build_pod, build_status
        from simkube.resources import PODS
        from simkube.util import json_copy, new_uid

        store = self.cluster.store
        with store.cond:
            for name in modify:
                cur = store._objects["pods"][(namespace, name)]
                new = json_copy(cur.obj)
                new["metadata"].setdefault("annotations", {})[ANNOTATION] = \
                    f"-1:{time.time_ns()}"
                new["metadata"]["resourceVersion"] = store._next_rv()
                store._objects["pods"][(namespace, name)] = type(cur)(new)
            for name in add:
                pod = build_pod(namespace, name, containers=["app"], labels={"app": "added"},
                                node="sim-worker")
                pod["metadata"]["uid"] = new_uid()
                pod["status"] = build_status(pod, {"app": "Running"})
                store._create_locked(PODS, pod, namespace)
            for name in delete:
                del store._objects["pods"][(namespace, name)]
            store._history.clear()
            store._rv += 1
            store._floor = store._rv
            store._epoch += 1
            store.cond.notify_all()
            rv = store._rv
        return {"resourceVersion": str(rv)}

    def list_names(self, namespace: str) -> list[str]:
        return [p["metadata"]["name"] for p in self.cluster.list("pods", namespace)]

    # --- the soak (bench/cluster_soak.py): churn, faults, the truth ----------------------

    def churn_prepare(self, namespace: str, initial: int, rate: float, low: int, high: int,
                      seed: int = 1) -> int:
        """Create `initial` pods; from `churn_resume` on, add, change and delete pods at
        `rate` per second from a thread, keeping between `low` and `high` of them."""
        self._churn = _Churn(self.cluster, namespace, rate, low, high, seed)
        self._churn.populate(self.cluster, initial)
        return len(self._churn.names)

    def churn_pause(self) -> dict[str, Any]:
        """Stop changing (returns once no change is in progress): the state is still."""
        return self._churn.pause()

    def churn_resume(self) -> None:
        self._churn.resume()

    def churn_stop(self) -> dict[str, Any]:
        return self._churn.stop()

    def pod_versions(self, namespace: str) -> dict[str, tuple[str, int]]:
        """uid -> (name, resourceVersion) of the namespace's pods: what a mirror must hold."""
        return {p["metadata"]["uid"]: (p["metadata"]["name"],
                                       int(p["metadata"]["resourceVersion"]))
                for p in self.cluster.list("pods", namespace)}

    def fault(self, kind: str, outage_seconds: float = 2.0) -> dict[str, Any]:
        """Inject one fault of SOAK_FAULTS; returns what it did and the churn's next seq."""
        cluster = self.cluster
        server = cluster._servers[-1]
        # Where the fault starts: the next change's number, and the time.
        out: dict[str, Any] = {"kind": kind, "seq": self._churn.seq, "at": time.time()}
        if kind == "cut_streams":
            out["cut"] = server.cut_streams()
        elif kind == "cut_connections":
            out["cut"] = server.cut_connections()
        elif kind == "expire_watches":
            cluster.expire_watches()
        elif kind == "expire_history":
            out["hidden"] = self._churn.hidden_changes_then_expire()
        elif kind in ("watch_410", "watch_504"):
            cluster.faults.fail_next("watch", int(kind[-3:]), resource="pods")
        elif kind == "outage":
            server.outage(outage_seconds)
        elif kind in ("replace", "replace_graceful"):
            out["pods"] = self._churn.replace(graceful=kind == "replace_graceful")
        else:
            raise ValueError(f"unknown fault {kind!r}")
        out["resourceVersion"] = cluster.resource_version
        return out

    def faults_pending(self, clear: bool = False) -> int:
        """Injected request failures not answered yet (cleared with `clear`)."""
        pending = self.cluster.faults.pending()
        if clear:
            self.cluster.faults.clear()
        return int(pending)

    def pod_requests(self, since: float) -> dict[str, Any]:
        """Pod LIST and WATCH requests the simulator answered since `since` (time.time()),
        as (time, what, the churn's next sequence number then): "relist" (a full list),
        "list_page" (its next page), "version_check" (a one-item list asking the current
        version) or "watch" (refused ones too)."""
        now = time.time()
        out = []
        for rec in list(self.cluster.stats.requests):
            if rec.at <= since or rec.resource != "pods" or rec.verb not in ("list", "watch"):
                continue
            if rec.verb == "list":
                what = "version_check" if rec.query.get("limit") == "1" else (
                    "list_page" if rec.query.get("continue") else "relist")
            else:
                what = "watch"
            out.append((rec.at, what, self._churn.seq_at(rec.at) if self._churn else 0))
        return {"requests": out, "until": now}


SOAK_FAULTS = ("cut_streams", "expire_watches", "watch_410", "outage", "cut_connections",
               "expire_history", "watch_504", "replace", "replace_graceful")


class _Churn:
    """Changes to one namespace's pods at a fixed rate, from a thread of the simulator
    process: additions (some under a recently deleted name: a new uid), changes and
    deletions, the pod count kept between `low` and `high`. Additions and changes carry
    the next sequence number in ANNOTATION ("<seq>:<time_ns>"); deletions carry none."""

    def __init__(self, cluster: Any, namespace: str, rate: float, low: int, high: int,
                 seed: int) -> None:
        import random

        self.cluster = cluster
        self.namespace = namespace
        self.rate = rate
        self.low, self.high = low, high
        self.rng = random.Random(seed)
        self.lock = threading.Lock()  # held for each change, and by pause/replace
        self.active = threading.Event()
        self.stopping = threading.Event()
        self.names: list[str] = []
        self.gone: list[str] = []  # recently deleted names, to add again
        self.next_id = 0
        self.seq = 0
        self.times = array("d")  # times[seq]: when change `seq` was made (time.time())
        self.counts = {"added": 0, "modified": 0, "deleted": 0, "readded": 0, "failed": 0}
        self.late = 0
        self.slow: list[tuple[int, int]] = []  # (seq, ms) of changes that took > 100 ms
        self.thread = threading.Thread(target=self._run, daemon=True, name="bench-churn")

    def populate(self, cluster: Any, count: int) -> None:
        for _ in range(count):
            name = self._new_name()
            cluster.add_pod(self.namespace, name, ["app"], events=False,
                            labels={"app": "soak"})
            self.names.append(name)

    def _new_name(self) -> str:
        self.next_id += 1
        return f"soak-{self.next_id}"

    def pause(self) -> dict[str, Any]:
        self.active.clear()
        with self.lock:
            return {"seq": self.seq, "pods": len(self.names)}

    def resume(self) -> None:
        self.active.set()
        if not self.thread.is_alive():
            self.thread.start()

    def stop(self) -> dict[str, Any]:
        self.stopping.set()
        self.active.set()
        if self.thread.is_alive():
            self.thread.join(5)
        return {**self.counts, "seq": self.seq, "late": self.late, "pods": len(self.names),
                "slow_changes": self.slow}

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stopping.is_set():
            if not self.active.is_set():
                self.active.wait()
                next_at = time.monotonic()
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -interval:
                self.late += 1
                next_at = time.monotonic()  # do not burst to catch up
            next_at += interval
            with self.lock:
                if self.active.is_set() and not self.stopping.is_set():
                    try:
                        t_step = time.monotonic()
                        self._step()
                        took = time.monotonic() - t_step
                        if took > 0.1 and len(self.slow) < 50:
                            self.slow.append((self.seq - 1, round(took * 1000)))
                    except Exception:  # noqa: BLE001 - counted; the names are re-read
                        self.counts["failed"] += 1
                        self._reload()

    def _next_seq(self) -> int:
        self.times.append(time.time())
        self.seq += 1
        return self.seq - 1

    def seq_at(self, at: float) -> int:
        """The next sequence number at time `at`."""
        import bisect

        return bisect.bisect_right(self.times, at)

    def _step(self) -> None:
        n = len(self.names)
        r = self.rng.random()
        if n <= self.low or (n < self.high and r < 0.15):
            readd = bool(self.gone) and self.rng.random() < 0.3
            name = self.gone.pop(self.rng.randrange(len(self.gone))) if readd \
                else self._new_name()
            self.cluster.add_pod(self.namespace, name, ["app"], events=False,
                                 labels={"app": "soak"},
                                 annotations={ANNOTATION: f"{self._next_seq()}:{time.time_ns()}"})
            self.names.append(name)
            self.counts["readded" if readd else "added"] += 1
        elif n >= self.high or r < 0.30:
            name = self._take(self.rng.randrange(n))
            self.cluster.delete("pods", name, namespace=self.namespace, grace_period=0)
            self.gone.append(name)
            del self.gone[:-50]
            self.counts["deleted"] += 1
        else:
            name = self.names[self.rng.randrange(n)]
            self.cluster.update("pods", name, _stamper(self._next_seq()),
                                namespace=self.namespace)
            self.counts["modified"] += 1

    def _take(self, i: int) -> str:
        """Remove names[i] in O(1) (order does not matter)."""
        name = self.names[i]
        self.names[i] = self.names[-1]
        self.names.pop()
        return name

    def _reload(self) -> None:
        self.names = [p["metadata"]["name"] for p in self.cluster.list("pods", self.namespace)]
        self.gone = [g for g in self.gone if g not in set(self.names)]

    def hidden_changes_then_expire(self) -> dict[str, int]:
        """Change 3 pods, delete 2, add 2 and expire the watch history in ONE hold of the
        store's lock: no watch event tells of them, only a relist finds them."""
        from simkube.pods import build_pod, build_status
        from simkube.resources import PODS

        def changes(w: Any) -> None:
            for name in self.rng.sample(self.names, 3):
                w.update(PODS, self.namespace, name, lambda o: _label(o, "hidden", "1"))
            for _ in range(2):
                name = self._take(self.rng.randrange(len(self.names)))
                w.remove(PODS, self.namespace, name)
                self.gone.append(name)
            for _ in range(2):
                pod = build_pod(self.namespace, self._new_name(), containers=["app"],
                                labels={"app": "soak"})
                pod["status"] = build_status(pod, {"app": "Running"})
                w.put(PODS, pod)
                self.names.append(pod["metadata"]["name"])

        with self.lock:
            self.cluster.expire_history(changes)
        return {"modified": 3, "deleted": 2, "added": 2}

    def replace(self, graceful: bool) -> int:
        """The cluster recreated behind the same address with the same pod names (new
        uids, resourceVersions from 1 again)."""
        with self.lock:
            names = list(self.names)

            def populate(fresh: Any) -> None:
                for name in names:
                    fresh.add_pod(self.namespace, name, ["app"], events=False,
                                  labels={"app": "soak"})

            self.cluster.replace(populate, graceful=graceful)
            self._reload()
            return len(self.names)


def _label(obj: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})[key] = value
    return obj


def _stamper(seq: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def change(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"].setdefault("annotations", {})[ANNOTATION] = f"{seq}:{time.time_ns()}"
        return obj
    return change


REV_LABEL = "bench.agentwatch/rev"


def _reviser(seq: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Change `seq` of a pod (revise_start): its label REV_LABEL becomes `seq`; an even
    change also restarts its first container (RESTARTS + 1, the status as a kubelet
    reports it), and every tenth flips that container between Running and
    CrashLoopBackOff (the pod needs attention, or no longer: a list's counts move)."""
    from simkube.pods import build_status, state_of_container

    def change(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"].setdefault("labels", {})[REV_LABEL] = str(seq)
        if seq % 2 == 0:
            old = obj.get("status") or {}
            first = (old.get("containerStatuses") or [{}])[0]
            state = state_of_container(first) or "Running"
            if seq % 10 == 0:
                state = "Running" if state == "CrashLoopBackOff" else "CrashLoopBackOff"
            name = obj["spec"]["containers"][0]["name"]
            obj["status"] = build_status(obj, {name: state},
                                         restarts={name: int(first.get("restartCount", 0)) + 1},
                                         old=old)
        return obj
    return change


def _sim_main(conn: Any, kubeconfig: str, history_size: int, bookmark_interval: float) -> None:
    from simkube import SimCluster

    cluster = SimCluster(history_size=history_size, bookmark_interval=bookmark_interval)
    server = cluster.serve(HOST, 0)
    cluster.write_kubeconfig(kubeconfig)
    handlers = _SimHandlers(cluster)
    conn.send(("ready", server.url))
    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                break
            if msg[0] == "stop":
                break
            try:
                conn.send(("ok", getattr(handlers, msg[0])(*msg[1], **msg[2])))
            except Exception:  # noqa: BLE001 - reported to the parent
                conn.send(("err", traceback.format_exc()))
    finally:
        with contextlib.suppress(Exception):
            handlers.stop_logs()
        cluster.close()


class SimProcess:
    def __init__(self, kubeconfig: str, history_size: int = 1000,
                 bookmark_interval: float = 5.0) -> None:
        self.kubeconfig = kubeconfig
        self._conn, child = CTX.Pipe()
        self._lock = threading.Lock()
        self.proc = CTX.Process(target=_sim_main, daemon=True, name="simkube",
                                args=(child, kubeconfig, history_size, bookmark_interval))
        self.proc.start()
        kind, self.url = self._conn.recv()
        assert kind == "ready"

    @property
    def pid(self) -> int:
        assert self.proc.pid is not None
        return self.proc.pid

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._conn.send((name, args, kwargs))
            kind, value = self._conn.recv()
        if kind != "ok":
            raise RuntimeError(f"simulator {name} failed:\n{value}")
        return value

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.send(("stop",))
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5)


# --- the whole rig ------------------------------------------------------------------------

class Rig:
    """Instance + user/token + simulator + agent + `agentwatch serve`."""

    def __init__(self, threads: int = 300, config: str = "", history_size: int = 1000,
                 bookmark_interval: float = 5.0, keep: bool = False,
                 webapp: str | None = None, workers: int = 1) -> None:
        self.instance = Instance(keep=keep, prefix="aw-cluster-bench-")
        # One user's token plays every browser of a run: its per-user caps are lifted
        # (the process's cap on long-lived connections, threads minus reserved, stays).
        Path(self.instance.path, "config.py").write_text(
            "MAX_SOCKETS_PER_USER = 100_000\nMAX_STREAMS_PER_USER = 100_000\n"
            "MAX_WATCHES_PER_USER = 100_000\n" + config)
        self.instance.create_user()
        out = self.instance.cli("users", "token", "bench")
        self.token = out.strip().splitlines()[-1].strip()
        self.kubeconfig = os.path.join(self.instance.path, "sim.kubeconfig")
        self.sim = SimProcess(self.kubeconfig, history_size, bookmark_interval)
        self.instance.cli("agents", "create", AGENT, "--kubeconfig", self.kubeconfig)
        # `webapp`: a folder holding a scratch copy of the package (to try a fix without
        # touching the repository); only the server runs it.
        env = self.instance.env(**({"PYTHONPATH": webapp} if webapp else {}))
        self.server = Server(self.instance, workers=workers, threads=threads, env=env).start()
        if webapp:
            log(f"server runs the webapp package from {webapp}")
        self.port = self.server.port
        self.master_pid = self.server.proc.pid if self.server.proc else 0
        self.worker_pids = self._workers(workers)
        self.worker_pid = self.worker_pids[0]
        log(f"simulator {self.sim.url} pid={self.sim.pid}; server worker pids={self.worker_pids}")

    def restart_server(self) -> None:
        """A fresh server process on the same instance and simulator (cold caches)."""
        env = self.server.env
        threads, workers = self.server.threads, self.server.workers
        self.server.stop()
        self.server = Server(self.instance, workers=workers, threads=threads, env=env).start()
        self.port = self.server.port
        self.master_pid = self.server.proc.pid if self.server.proc else 0
        self.worker_pids = self._workers(workers)
        self.worker_pid = self.worker_pids[0]

    def touch_token(self) -> None:
        """Use the personal token once before a burst of handshakes. Until fab1a73 the
        concurrent first uses raced in SQLite (users.authenticate_token upgraded a read
        transaction: "database is locked", and the 500 page went into the upgraded
        socket); fixed since (200 concurrent first uses: no failure), kept as a warm-up."""
        client = Client(self.port)
        status, body, _ = client.get("/api/v1/agents",
                                     headers={"Authorization": f"Bearer {self.token}"})
        client.close()
        if status != 200:
            raise RuntimeError(f"token check answered {status}: {body[:200]!r}")

    def _workers(self, count: int) -> list[int]:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            kids = children(self.master_pid)
            if len(kids) >= count:
                return sorted(kids)
            time.sleep(0.1)
        raise RuntimeError(f"{count} gunicorn workers not found")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.server.stop()
        with contextlib.suppress(Exception):
            self.sim.stop()
        self.instance.cleanup()

    def __enter__(self) -> Rig:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


# --- a lean WebSocket client --------------------------------------------------------------

class HandshakeError(RuntimeError):
    pass


def _mask(payload: bytes, key: bytes) -> bytes:
    if not payload:
        return b""
    n = len(payload)
    k = int.from_bytes((key * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(payload, "big") ^ k).to_bytes(n, "big")


def client_frame(payload: bytes, opcode: int = 0x1) -> bytes:
    key = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + key + _mask(payload, key)


def watch_message(watch_id: str, namespace: str, resource: str = "pods",
                  table: bool = False) -> bytes:
    """`table`: the kind's Table, as the Cluster tab's lists watch it."""
    params = {"group": "", "version": "v1", "resource": resource, "namespace": namespace}
    if table:
        params["as"] = "Table"
    return json.dumps({"type": "watch", "watchId": watch_id, "watchParams": params}).encode()


class WsConn:
    """One WebSocket on a raw socket. `buf` holds unparsed bytes."""

    def __init__(self, port: int, token: str, agent: str = AGENT, timeout: float = 30,
                 rcvbuf: int | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET /agents/{agent}/watch HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                   f"Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\n"
                   f"Authorization: Bearer {token}\r\n\r\n")
        self.sock.sendall(request.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise HandshakeError(f"closed during handshake: {data!r}")
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise HandshakeError(head.decode(errors="replace"))
        self.buf = bytearray(rest)
        self.local_port = self.sock.getsockname()[1]
        self.close_code: int | None = None

    def send(self, payload: bytes, opcode: int = 0x1) -> None:
        self.sock.sendall(client_frame(payload, opcode))

    def fileno(self) -> int:
        return self.sock.fileno()

    def frames(self) -> list[tuple[int, int, int]]:
        """Complete frames in `buf` as (opcode, start, end) of their payloads; the caller
        reads them from `buf` and then calls `consume(last_end)`."""
        buf = self.buf
        n = len(buf)
        pos = 0
        out = []
        while n - pos >= 2:
            b1 = buf[pos + 1]
            length = b1 & 0x7F
            head = 2
            if length == 126:
                if n - pos < 4:
                    break
                length = (buf[pos + 2] << 8) | buf[pos + 3]
                head = 4
            elif length == 127:
                if n - pos < 10:
                    break
                length = int.from_bytes(buf[pos + 2:pos + 10], "big")
                head = 10
            end = pos + head + length
            if end > n:
                break
            out.append((buf[pos] & 0x0F, pos + head, end))
            pos = end
        return out

    def consume(self, upto: int) -> None:
        if upto:
            del self.buf[:upto]

    def recv_into_buf(self, size: int = 262144) -> int:
        chunk = self.sock.recv(size)
        if chunk:
            self.buf += chunk
        return len(chunk)

    def read_messages(self, timeout: float,
                      until: Callable[[list[bytes]], bool] | None = None) -> list[bytes]:
        """Blocking helper for low-rate use: complete messages received within `timeout`
        (sooner once `until(messages)` is true, or the connection closed)."""
        deadline = time.monotonic() + timeout
        out: list[bytes] = []
        while True:
            last = 0
            for opcode, start, end in self.frames():
                if opcode == 0x8:
                    self.close_code = int.from_bytes(self.buf[start:start + 2], "big") \
                        if end - start >= 2 else 1005
                elif opcode == 0x9:
                    with contextlib.suppress(OSError):  # the server may be gone already
                        self.send(bytes(self.buf[start:end]), 0xA)
                elif opcode in (0x1, 0x2):
                    out.append(bytes(self.buf[start:end]))
                last = end
            self.consume(last)
            if self.close_code is not None or (until is not None and until(out)):
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            ready, _, _ = select.select([self.sock], [], [], left)
            try:
                got = self.recv_into_buf() if ready else -1
            except OSError:  # reset: whatever was buffered has been parsed above
                got = 0
            if got == 0:
                self.close_code = self.close_code or 1006
                return out

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def parse_stamp(buf: bytearray | bytes, start: int, end: int) -> tuple[int, int] | None:
    i = buf.find(MARK, start, end)
    if i < 0:
        return None
    i += len(MARK)
    j = buf.find(b'"', i, end)
    seq, _, emitted = bytes(buf[i:j]).partition(b":")
    return int(seq), int(emitted)


# --- /proc/net/tcp: what the kernel knows about a connection -------------------------------

TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def tcp_entry(local_port: int, remote_port: int) -> dict[str, Any] | None:
    """The socket 127.0.0.1:local_port <-> 127.0.0.1:remote_port: state, queues, inode
    (0 once no process holds it any more)."""
    want_local = f"0100007F:{local_port:04X}"
    want_remote = f"0100007F:{remote_port:04X}"
    with open("/proc/net/tcp") as handle:
        next(handle)
        for line in handle:
            parts = line.split()
            if parts[1] == want_local and parts[2] == want_remote:
                tx, rx = parts[4].split(":")
                return {"state": TCP_STATES.get(parts[3], parts[3]), "tx_queue": int(tx, 16),
                        "rx_queue": int(rx, 16), "inode": int(parts[9])}
    return None


def header(title: str) -> dict[str, str]:
    info = machine_info()
    log(f"{title}: nproc={info['nproc']} cpu={info['cpu']} python={info['python']}")
    return info


# --- fan-out subscribers, in their own processes ------------------------------------------

# The kernel's receive timestamp of a read (Linux; not exported by the socket module).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("qq")


class _Sub:
    __slots__ = ("conn", "expected", "missing", "dups", "count", "lat", "lat_socket",
                 "close_code", "synced", "others")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.expected = 0
        self.missing = 0
        self.dups = 0  # duplicated or out of order
        self.count = 0
        self.lat = array("l")  # microseconds, emit -> received
        self.lat_socket = array("l")  # emit -> the bytes reached the socket (--socket-time)
        self.close_code: int | None = None
        self.synced = False
        self.others: list[bytes] = []

    def event(self, seq: int, lat_us: int, socket_lat_us: int | None = None) -> None:
        if seq == self.expected:
            self.expected += 1
        elif seq > self.expected:
            self.missing += seq - self.expected
            self.expected = seq + 1
        else:
            self.dups += 1
        self.count += 1
        self.lat.append(lat_us)
        if socket_lat_us is not None:
            self.lat_socket.append(socket_lat_us)

    def result(self) -> dict[str, Any]:
        return {"count": self.count, "expected_next": self.expected, "missing": self.missing,
                "dups": self.dups, "close_code": self.close_code, "synced": self.synced,
                "others": [o[:200].decode(errors="replace") for o in self.others[:3]],
                "lat": self.lat.tobytes(), "lat_socket": self.lat_socket.tobytes()}


def _cpu_self() -> float:
    import resource
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fanout_clients_main(conn: Any, port: int, token: str, n: int, namespace: str,
                        mode: str, first_seq: int = 0, socket_time: bool = False,
                        batch_policy: bool = False) -> None:
    """A process of `n` subscribers: connect, watch, wait for `synced`, then record every
    stamped event until told to stop.

    `socket_time`: also note when each read's bytes reached the socket (the kernel's receive
    timestamp), which leaves out the wait for this process to get to that socket.
    `batch_policy`: run under SCHED_BATCH. The server's writes wake these processes, and
    the kernel tends to run a woken process on the writer's CPU, preempting the writer;
    browsers on other machines cannot do that. Batch tasks do not preempt on wake-up."""
    try:
        if batch_policy:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        if mode == "raw":
            _raw_clients(conn, port, token, n, namespace, first_seq, socket_time)
        else:
            _simple_clients(conn, port, token, n, namespace, first_seq)
    except Exception:  # noqa: BLE001 - reported to the parent
        conn.send(("err", traceback.format_exc()))


def _handle_text(sub: _Sub, buf: bytearray | bytes, start: int, end: int, now_ns: int,
                 socket_ns: int = 0) -> None:
    stamp = parse_stamp(buf, start, end)
    if stamp is not None:
        if sub.synced:
            sub.event(stamp[0], (now_ns - stamp[1]) // 1000,
                      (socket_ns - stamp[1]) // 1000 if socket_ns else None)
        return
    if buf.startswith(b'{"type":"synced"', start):
        sub.synced = True
    elif not buf.startswith(b'{"type":"event"', start):
        sub.others.append(bytes(buf[start:end]))


def _socket_time(ancillary: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return sec * 1_000_000_000 + nsec
    return 0


def _raw_clients(conn: Any, port: int, token: str, n: int, namespace: str,
                 first_seq: int, socket_time: bool = False) -> None:
    subs = []
    ancillary_size = socket.CMSG_SPACE(_TIMESPEC.size)
    for _ in range(n):
        ws = WsConn(port, token)
        if socket_time:
            ws.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        ws.sock.setblocking(False)
        subs.append(_Sub(ws))
        subs[-1].expected = first_seq
    for i, sub in enumerate(subs):
        sub.conn.send(watch_message(f"pods-{i}", namespace))
    by_fd = {sub.conn.fileno(): sub for sub in subs}
    poller = select.epoll()
    for fd in by_fd:
        poller.register(fd, select.EPOLLIN)
    state = {"running": False, "first_seq": 0}
    busy = 0.0
    idle = 0.0
    full_reads = 0
    reads = 0
    cpu0 = 0.0
    t_go = 0.0
    ready_sent = False
    deadline = time.monotonic() + 120
    while True:
        t_wait = time.monotonic()
        events = poller.poll(0.05)
        t_ready = time.monotonic()
        if state["running"]:
            idle += t_ready - t_wait
        for fd, _ in events:
            sub = by_fd[fd]
            ws = sub.conn
            socket_ns = 0
            try:
                if socket_time:
                    # A read spanning several messages gets the time of its last bytes:
                    # earlier messages in it are counted late, never early.
                    chunk, ancillary, _, _ = ws.sock.recvmsg(262144, ancillary_size)
                    socket_ns = _socket_time(ancillary)
                else:
                    chunk = ws.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            now_ns = time.time_ns()
            if not chunk:
                poller.unregister(fd)
                if sub.close_code is None:
                    sub.close_code = 1006
                continue
            reads += 1
            if len(chunk) == 262144:
                full_reads += 1
            ws.buf += chunk
            last = 0
            buf = ws.buf
            for opcode, start, end in ws.frames():
                if opcode == 0x1:
                    _handle_text(sub, buf, start, end, now_ns, socket_ns)
                elif opcode == 0x8:
                    sub.close_code = int.from_bytes(buf[start:start + 2], "big") \
                        if end - start >= 2 else 1005
                elif opcode == 0x9:
                    with contextlib.suppress(OSError):
                        ws.sock.send(client_frame(bytes(buf[start:end]), 0xA))
                last = end
            ws.consume(last)
        if state["running"]:
            busy += time.monotonic() - t_ready
        if not ready_sent and all(s.synced for s in subs):
            conn.send(("ready", {"subscribers": n}))
            ready_sent = True
        if not ready_sent and time.monotonic() > deadline:
            conn.send(("err", f"only {sum(s.synced for s in subs)}/{n} synced; others: "
                              f"{[s.others[:1] for s in subs if s.others][:3]}"))
            return
        if conn.poll():
            msg = conn.recv()
            if msg[0] == "go":
                state["running"] = True
                cpu0 = _cpu_self()
                t_go = time.monotonic()
            elif msg[0] == "stop":
                wall = time.monotonic() - t_go
                cpu = _cpu_self() - cpu0
                conn.send(("done", {
                    "subs": [s.result() for s in subs], "cpu_cores": cpu / wall,
                    "busy_fraction": busy / max(busy + idle, 1e-9), "reads": reads,
                    "full_reads": full_reads, "wall": wall}))
                for sub in subs:
                    sub.conn.close()
                return


def _simple_clients(conn: Any, port: int, token: str, n: int, namespace: str,
                    first_seq: int) -> None:
    """The same with simple_websocket.Client: one reader thread per subscriber (plus the
    library's own socket thread), as a script using that library would do it."""
    import simple_websocket

    subs = []
    for _ in range(n):
        ws = simple_websocket.Client.connect(
            f"ws://{HOST}:{port}/agents/{AGENT}/watch", subprotocols=[SUBPROTOCOL],
            headers={"Authorization": f"Bearer {token}"}, receive_bytes=65536)
        subs.append(_Sub(ws))
        subs[-1].expected = first_seq
    stop = threading.Event()

    def reader(i: int, sub: _Sub) -> None:
        ws = sub.conn
        ws.send(watch_message(f"pods-{i}", namespace).decode())
        while not stop.is_set():
            try:
                data = ws.receive(timeout=0.2)
            except simple_websocket.ConnectionClosed as exc:
                sub.close_code = getattr(exc, "reason", 1006)
                return
            if data is None:
                continue
            now_ns = time.time_ns()
            raw = data.encode() if isinstance(data, str) else data
            _handle_text(sub, raw, 0, len(raw), now_ns)

    threads = [threading.Thread(target=reader, args=(i, s), daemon=True)
               for i, s in enumerate(subs)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while not all(s.synced for s in subs):
        if time.monotonic() > deadline:
            conn.send(("err", f"only {sum(s.synced for s in subs)}/{n} synced"))
            return
        time.sleep(0.05)
    conn.send(("ready", {"subscribers": n}))
    msg = conn.recv()
    assert msg[0] == "go"
    cpu0 = _cpu_self()
    t_go = time.monotonic()
    msg = conn.recv()
    assert msg[0] == "stop"
    wall = time.monotonic() - t_go
    cpu = _cpu_self() - cpu0
    stop.set()
    for t in threads:
        t.join(2)
    conn.send(("done", {"subs": [s.result() for s in subs], "cpu_cores": cpu / wall,
                        "busy_fraction": float("nan"), "reads": 0, "full_reads": 0,
                        "wall": wall}))
    for sub in subs:
        with contextlib.suppress(Exception):
            sub.conn.close()


def direct_watch_main(conn: Any, kubeconfig: str, namespace: str) -> None:
    """The reference: the official client watching the simulator directly
    (`Watch().stream(list_namespaced_pod, deserialize=False)`: JSON-decoded events, no
    models - the same decoding the relay's upstream side does)."""
    try:
        import kubernetes

        api = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        api.user_agent = "bench-direct/1"
        v1 = kubernetes.client.CoreV1Api(api)
        listed = v1.list_namespaced_pod(namespace, _preload_content=False)
        rv = json.loads(listed.data)["metadata"]["resourceVersion"]  # type: ignore[attr-defined]
        lat = array("l")
        seqs = array("l")
        stop = threading.Event()
        watch = kubernetes.watch.Watch()

        def run() -> None:
            for event in watch.stream(v1.list_namespaced_pod, namespace, resource_version=rv,
                                      timeout_seconds=3600, deserialize=False):
                now_ns = time.time_ns()
                annotations = event["object"]["metadata"].get("annotations") or {}
                stamp = annotations.get(ANNOTATION)
                if stamp and event["type"] == "MODIFIED":
                    seq, _, emitted = stamp.partition(":")
                    seqs.append(int(seq))
                    lat.append((now_ns - int(emitted)) // 1000)
                if stop.is_set():
                    return

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        conn.send(("ready", {}))
        msg = conn.recv()
        assert msg[0] == "go"
        cpu0 = _cpu_self()
        t_go = time.monotonic()
        msg = conn.recv()
        assert msg[0] == "stop"
        wall = time.monotonic() - t_go
        conn.send(("done", {"lat": lat.tobytes(), "seqs": seqs.tobytes(),
                            "cpu_cores": (_cpu_self() - cpu0) / wall}))
        stop.set()
        watch.stop()
    except Exception:  # noqa: BLE001
        conn.send(("err", traceback.format_exc()))


class Child:
    """A spawned helper process with a pipe."""

    def __init__(self, target: Callable[..., None], *args: Any, name: str = "child") -> None:
        self.conn, child = CTX.Pipe()
        self.proc = CTX.Process(target=target, args=(child, *args), daemon=True, name=name)
        self.proc.start()

    @property
    def pid(self) -> int:
        assert self.proc.pid is not None
        return self.proc.pid

    def expect(self, kind: str, timeout: float = 120) -> Any:
        if not self.conn.poll(timeout):
            raise RuntimeError(f"{self.proc.name}: no {kind!r} within {timeout} s")
        got, value = self.conn.recv()
        if got != kind:
            raise RuntimeError(f"{self.proc.name}: expected {kind!r}, got {got!r}: {value}")
        return value

    def send(self, *msg: Any) -> None:
        self.conn.send(msg)

    def stop(self) -> None:
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5)
