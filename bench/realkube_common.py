"""Plumbing of the benchmarks against a real kube-apiserver (bench/realkube_bench.py).

* `RealRig`: bench/cluster_common.py's `Rig` with a real control plane in place of the
  simulator: etcd + kube-apiserver started on loopback by tests/realkube/cluster.py (the
  test tier's own code, imported: certificates, static tokens, RBAC, the Flux CRDs), and
  the agent `sim` whose kubeconfig is the agent service account's (the agent's ClusterRole,
  as installed). `rig.sim` is an `ApiDriver`: the simulator's pipe commands the cluster
  benchmarks use (`add_pods`, `patch_stamp`), done through the API, so bench/cluster_bigns.py's
  steps run unchanged.
* Pods are created in parallel (processes x threads, the official client) and given a
  kubelet's Running status through the status subresource: nothing schedules or runs them.
* `emitter_main`: MODIFIED events at a fixed rate from a process of threads, each patching
  the annotation `bench.agentwatch/stamp` = "<seq>:<time_ns>" (merge patch). The stamp is
  taken just before the request is sent: unlike the simulator's (stamped inside its store
  lock), the latency measured from it includes the write's own path through the API server
  and etcd, the same for the relay and for the direct watch.
* `ordered_clients_main`: bench/cluster_common.py's subscribers, also recording each event's
  sequence number in arrival order. Concurrent writers commit in an order the stamps cannot
  know, so "in order" means "in the order the API server's own watch delivered".
* Who asked the API server for what: its audit log (pods, at Metadata level), by user agent.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import traceback
import uuid
import zlib
from array import array
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
# The test tier's control plane, imported (after bench/, so `common` stays bench's own).
sys.path.append(str(BENCH.parent / "tests"))

import cluster_common  # noqa: E402
from cluster_common import AGENT, ANNOTATION, CTX, Rig, children  # noqa: E402
from common import Instance, Server, log, percentile  # noqa: E402
from realkube.cluster import ADMIN, RealCluster, find_binaries  # noqa: E402
from realkube.cluster import AGENT as AGENT_ACCOUNT  # noqa: E402
from realkube.objects import pod, running_status  # noqa: E402

MERGE_PATCH = "application/merge-patch+json"
# One user's token plays every browser of a run (as in cluster_common.Rig).
LIFTED_CAPS = ("MAX_SOCKETS_PER_USER = 100_000\nMAX_STREAMS_PER_USER = 100_000\n"
               "MAX_WATCHES_PER_USER = 100_000\n")


def drained(response: Any) -> bytes:
    """The body of a `_preload_content=False` response, its connection back in the pool
    (left unread, every request would open a new TLS connection)."""
    data = response.read()
    response.release_conn()
    return bytes(data)


def api_client(kubeconfig: str, user_agent: str) -> Any:
    """The official client from a kubeconfig, naming itself (the audit log tells who asked)."""
    import kubernetes

    api = kubernetes.config.new_client_from_config(config_file=kubeconfig)
    api.user_agent = user_agent
    return api


# --- pods, created in parallel --------------------------------------------------------------

def _create_chunk(kubeconfig: str, namespace: str, names: list[str], threads: int,
                  running: bool) -> tuple[int, int, float]:
    """Create `names` (and give each a Running status) from `threads` threads of this
    process; (created, failed, CPU seconds of this process)."""
    import kubernetes

    cpu0 = time.process_time()
    api = api_client(kubeconfig, "bench-setup/1")
    v1 = kubernetes.client.CoreV1Api(api)
    api.configuration.connection_pool_maxsize = threads

    def one(i_name: tuple[int, str]) -> bool:
        i, name = i_name
        app = name.rsplit("-", 1)[0]
        for attempt in range(3):
            try:
                drained(v1.create_namespaced_pod(
                    namespace, pod(name, {"app": app}, node="bench-node"),
                    _preload_content=False))
                break
            except kubernetes.client.ApiException as exc:
                if exc.status == 409:  # created by a try whose answer got lost
                    break
                if attempt == 2:
                    return False
        if running:
            status = running_status(f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}")
            drained(v1.patch_namespaced_pod_status(name, namespace, status,
                                                   _content_type=MERGE_PATCH,
                                                   _preload_content=False))
        return True

    with ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(one, enumerate(names)))
    api.close()
    return sum(done), len(done) - sum(done), time.process_time() - cpu0


def workload_pod(name: str) -> dict[str, Any]:
    """A pod as a Deployment's ReplicaSet makes it: `name` is `<app>-<hash>-<suffix>`; its
    labels, two containers (ports, env, resources, a probe), its ReplicaSet as controlling
    owner, scheduled on a node."""
    app, template_hash, _ = name.rsplit("-", 2)
    owner = f"{app}-{template_hash}"
    containers = [
        {"name": "app", "image": f"registry.example/shop/{app}:1.24.3",
         "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
         "env": [{"name": "LOG_LEVEL", "value": "info"}],
         "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                       "limits": {"memory": "256Mi"}},
         "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080},
                            "periodSeconds": 10}},
        {"name": "proxy", "image": "registry.example/mesh/proxy:2.1",
         "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "generateName": f"{owner}-",
        "labels": {"app": app, "pod-template-hash": template_hash, "tier": "backend"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                             "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, owner)),
                             "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"containers": containers, "nodeName": f"node-{zlib.crc32(name.encode()) % 20}"}}


def workload_status(ip: str) -> dict[str, Any]:
    """What a kubelet reports for workload_pod once both containers are ready."""
    now = "2026-12-02T12:00:00Z"
    return {"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "192.168.0.10",
        "startTime": now,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                       for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
        "containerStatuses": [{
            "name": container, "image": image, "imageID": "", "ready": True, "started": True,
            "restartCount": 0, "state": {"running": {"startedAt": now}}}
            for container, image in (("app", "registry.example/shop/app:1.24.3"),
                                     ("proxy", "registry.example/mesh/proxy:2.1"))]}}


def _create_workload_chunk(kubeconfig: str, pods: list[tuple[str, str]], threads: int,
                           first: int) -> tuple[int, int, float]:
    """Create workload pods ((namespace, name) each) as the ReplicaSet controller does
    (field manager kube-controller-manager), then write their status as a kubelet
    (manager kubelet, the status subresource): two managedFields entries, as on a real
    cluster. (created, failed, CPU seconds of this process)."""
    import kubernetes

    cpu0 = time.process_time()
    api = api_client(kubeconfig, "bench-setup/1")
    v1 = kubernetes.client.CoreV1Api(api)
    api.configuration.connection_pool_maxsize = threads

    def one(i_pod: tuple[int, tuple[str, str]]) -> bool:
        i, (namespace, name) = i_pod
        for attempt in range(3):
            try:
                drained(v1.create_namespaced_pod(namespace, workload_pod(name),
                                                 field_manager="kube-controller-manager",
                                                 _preload_content=False))
                break
            except kubernetes.client.ApiException as exc:
                if exc.status == 409:  # created by a try whose answer got lost
                    break
                if attempt == 2:
                    return False
        i += first
        drained(v1.patch_namespaced_pod_status(
            name, namespace, workload_status(f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"),
            field_manager="kubelet", _content_type=MERGE_PATCH, _preload_content=False))
        return True

    with ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(one, enumerate(pods)))
    api.close()
    return sum(done), len(done) - sum(done), time.process_time() - cpu0


def create_workload_pods(kubeconfig: str, pods: list[tuple[str, str]], procs: int = 2,
                         threads: int = 8) -> dict[str, Any]:
    """workload_pod for each (namespace, name), Running, from `procs` processes of
    `threads` threads each (the namespaces must exist)."""
    t0 = time.perf_counter()
    chunks = [(pods[i::procs], i * (len(pods) // procs + 1)) for i in range(procs)]
    with CTX.Pool(procs) as pool:
        results = pool.starmap(_create_workload_chunk, [(kubeconfig, c, threads, first)
                                                        for c, first in chunks if c])
    took = time.perf_counter() - t0
    created = sum(r[0] for r in results)
    failed = sum(r[1] for r in results)
    if failed:
        raise RuntimeError(f"{failed} of {len(pods)} pods could not be created")
    return {"created": created, "seconds": took, "per_s": created / took,
            "client_cpu_s": sum(r[2] for r in results)}


def create_pods(kubeconfig: str, namespace: str, names: list[str], procs: int = 2,
                threads: int = 8, running: bool = True) -> dict[str, Any]:
    """Create the pods from `procs` processes of `threads` threads each (one client, its
    connection pool, per process: the client's per-request Python work is what limits
    one process)."""
    t0 = time.perf_counter()
    chunks = [names[i::procs] for i in range(procs)]
    with CTX.Pool(procs) as pool:
        results = pool.starmap(_create_chunk, [(kubeconfig, namespace, c, threads, running)
                                               for c in chunks if c])
    took = time.perf_counter() - t0
    created = sum(r[0] for r in results)
    failed = sum(r[1] for r in results)
    if failed:
        raise RuntimeError(f"{failed} of {len(names)} pods could not be created")
    return {"created": created, "seconds": took, "per_s": created / took,
            "client_cpu_s": sum(r[2] for r in results)}


# --- what the benchmarks ask of "the cluster" -----------------------------------------------

class ApiDriver:
    """The simulator's pipe commands the cluster benchmarks use, done through the real API
    as the admin (so `rig.sim.call(...)` in bench/cluster_bigns.py works unchanged)."""

    def __init__(self, real: RealCluster) -> None:
        self.real = real
        self.kubeconfig = str(real.kubeconfig_path(ADMIN))
        self._api: Any = None
        self._mark = 0

    @property
    def pid(self) -> int:
        return pid_of("kube-apiserver")

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, name)(*args, **kwargs)

    def _v1(self) -> Any:
        import kubernetes

        if self._api is None:
            self._api = api_client(self.kubeconfig, "bench-setup/1")
        return kubernetes.client.CoreV1Api(self._api)

    def ensure_namespace(self, namespace: str) -> None:
        import kubernetes

        try:
            self._v1().create_namespace({"metadata": {"name": namespace}})
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise

    def add_pods(self, namespace: str, names: list[str], events: bool = False) -> int:
        self.ensure_namespace(namespace)
        return int(create_pods(self.kubeconfig, namespace, names)["created"])

    def patch_stamp(self, namespace: str, name: str, seq: int) -> str:
        stamp = {"metadata": {"annotations": {ANNOTATION: f"{seq}:{time.time_ns()}"}}}
        body = drained(self._v1().patch_namespaced_pod(
            name, namespace, stamp, _content_type=MERGE_PATCH, _preload_content=False))
        return str(json.loads(body)["metadata"]["resourceVersion"])

    def list_size(self, namespace: str) -> dict[str, int]:
        """The namespace's pods as one list answers them: bytes, items, and the bytes of
        their managedFields (bookkeeping the simulator does not write)."""
        body = drained(self._v1().list_namespaced_pod(namespace, _preload_content=False))
        items = json.loads(body)["items"]
        managed = sum(len(json.dumps(i["metadata"].get("managedFields", []),
                                     separators=(",", ":"))) for i in items)
        return {"bytes": len(body), "items": len(items), "managed_fields_bytes": managed}

    # who asked for what: the audit log since the last reset_stats
    def reset_stats(self) -> None:
        self._mark = self.real.audit_log.stat().st_size if self.real.audit_log.exists() else 0

    def stats(self, namespace: str | None = None) -> dict[str, Any]:
        """Pod requests (in `namespace`, if given) since reset_stats, as "who:verb:resource"
        -> count, who being direct / emitter / setup (the benchmark's own clients, by user
        agent) or relay (everyone else: the app's client does not rename itself). A list of
        one item (`limit=1`, the relay asking the current version before it resumes a watch)
        counts as "version-check". `relay_open_watches_max`: how many watches of the relay
        were open at once, at most (it renews its stream every 4-6 minutes)."""
        counts: dict[str, int] = {}
        watches: dict[str, list[float]] = {}  # auditID -> [opened, closed]
        seen: set[str] = set()
        with open(self.real.audit_log, "rb") as handle:
            handle.seek(self._mark)
            for line in handle:
                event = json.loads(line)
                ref = event.get("objectRef") or {}
                if namespace and ref.get("namespace") != namespace:
                    continue
                agent = event.get("userAgent", "")
                who = agent.split("/", 1)[0].removeprefix("bench-") \
                    if agent.startswith("bench-") else "relay"
                if who == "relay" and event["verb"] == "watch":
                    span = watches.setdefault(event["auditID"], [_when(
                        event["requestReceivedTimestamp"]), float("inf")])
                    if event["stage"] == "ResponseComplete":
                        span[1] = _when(event["stageTimestamp"])
                if event["auditID"] in seen:  # a watch logs ResponseStarted and -Complete
                    continue
                seen.add(event["auditID"])
                verb = event["verb"]
                if verb == "list" and "limit=1&" in event.get("requestURI", "") + "&":
                    verb = "version-check"
                resource = ref.get("resource", "")
                if ref.get("subresource"):
                    resource += "/" + ref["subresource"]
                key = f"{who}:{verb}:{resource}"
                counts[key] = counts.get(key, 0) + 1
        edges = sorted([(a, 1) for a, _ in watches.values()] +
                       [(b, -1) for _, b in watches.values()])
        open_now = open_max = 0
        for _, step in edges:
            open_now += step
            open_max = max(open_max, open_now)
        return {"by_client": counts, "relay_open_watches_max": open_max}

    def close(self) -> None:
        if self._api is not None:
            self._api.close()


def _when(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def renice(pid: int, value: int) -> int:
    """Set the nice value of every thread of `pid` (Linux niceness is per thread; threads
    created later inherit their creator's); returns how many threads."""
    tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    for tid in tids:
        with contextlib.suppress(ProcessLookupError):
            os.setpriority(os.PRIO_PROCESS, tid, value)
    return len(tids)


def pid_of(command: str, parent: int | None = None) -> int:
    """The child of this process (or of `parent`) running `command`."""
    for pid in children(parent or os.getpid()):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == command:
                return pid
    raise RuntimeError(f"no {command} process found")


class RealRig(Rig):
    """Instance + user/token + a real control plane + agent `sim` (the agent service account's
    kubeconfig) + `agentwatch serve`. Rig's methods (restart_server, touch_token) apply."""

    def __init__(self, threads: int = 300, keep: bool = False,
                 webapp: str | None = None, config: str = "") -> None:
        # Rig's own __init__ would start the simulator: the same steps, a real server.
        self.instance = Instance(keep=keep, prefix="aw-realkube-bench-")
        Path(self.instance.path, "config.py").write_text(LIFTED_CAPS + config)
        self.instance.create_user()
        out = self.instance.cli("users", "token", "bench")
        self.token = out.strip().splitlines()[-1].strip()
        workdir = Path(self.instance.path, "realkube")
        workdir.mkdir()
        self.real = RealCluster(find_binaries(), workdir)
        try:
            self.real.start()
        except BaseException:
            self.real.stop()
            self.instance.cleanup()
            raise
        self.kubeconfig = str(self.real.kubeconfig_path(AGENT_ACCOUNT))
        self.admin_kubeconfig = str(self.real.kubeconfig_path(ADMIN))
        self.sim = ApiDriver(self.real)  # type: ignore[assignment]  # rig.sim.call(...)
        self.instance.cli("agents", "create", AGENT, "--kubeconfig", self.kubeconfig)
        env = self.instance.env(**({"PYTHONPATH": webapp} if webapp else {}))
        self.server = Server(self.instance, threads=threads, env=env).start()
        if webapp:
            log(f"server runs the webapp package from {webapp}")
        self.port = self.server.port
        self.master_pid = self.server.proc.pid if self.server.proc else 0
        self.worker_pid = self._worker()
        self.apiserver_pid = pid_of("kube-apiserver")
        self.etcd_pid = pid_of("etcd")
        log(f"kube-apiserver {self.real.server} pid={self.apiserver_pid} (etcd pid="
            f"{self.etcd_pid}) up in {self.real.timings['bootstrapped']:.1f} s; server worker pid="
            f"{self.worker_pid}; the agent reads as {AGENT_ACCOUNT.user}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.server.stop()
        with contextlib.suppress(Exception):
            self.sim.close()
        with contextlib.suppress(Exception):
            self.real.stop()
        self.instance.cleanup()


# --- MODIFIED events at a fixed rate, from their own process --------------------------------

def emitter_main(conn: Any, kubeconfig: str, namespace: str, names: list[str], rate: float,
                 count: int, first_seq: int, part: int, parts: int, threads: int) -> None:
    """Sequence numbers first_seq + part, + part + parts, ... (this process's share of
    `count`), each due at t0 + (seq - first_seq) / rate, patched onto pod
    names[seq % len(names)] by whichever of `threads` threads is free. The schedule does not
    wait for answers: a slow write delays only its own thread."""
    try:
        import kubernetes

        api = api_client(kubeconfig, "bench-emitter/1")
        api.configuration.connection_pool_maxsize = threads
        v1 = kubernetes.client.CoreV1Api(api)
        # Warm every connection of the pool (TLS handshakes) before the clock starts.
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda _: drained(v1.read_namespaced_pod(
                names[0], namespace, _preload_content=False)), range(threads)))
        conn.send(("ready", {}))
        kind, t0 = conn.recv()
        assert kind == "go"
        seqs = iter(range(first_seq + part, first_seq + count, parts))
        lock = threading.Lock()
        late = array("d")
        took = array("d")
        errors: list[str] = []
        failed = array("l")  # the sequence numbers that were not written
        finished = [0.0]

        def run() -> None:
            while True:
                with lock:
                    seq = next(seqs, None)
                if seq is None:
                    return
                delay = t0 + (seq - first_seq) / rate - time.time()
                if delay > 0:
                    time.sleep(delay)
                else:
                    late.append(-delay)
                body = {"metadata": {"annotations": {ANNOTATION: f"{seq}:{time.time_ns()}"}}}
                start = time.perf_counter()
                try:
                    drained(v1.patch_namespaced_pod(
                        names[seq % len(names)], namespace, body,
                        _content_type=MERGE_PATCH, _preload_content=False))
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    failed.append(seq)
                    errors.append(f"{seq}: {exc}"[:300])
                took.append(time.perf_counter() - start)
                finished[0] = max(finished[0], time.time())

        cpu0 = time.process_time()
        workers = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        cpu = time.process_time() - cpu0
        lates = sorted(late)
        tooks = sorted(took)
        conn.send(("done", {
            "sent": len(took) - len(errors), "errors": len(errors), "first_errors": errors[:3],
            "failed": failed.tobytes(),
            "finished_at": finished[0], "cpu_s": cpu,
            "late_events": len(lates), "late_p99_ms": percentile(lates, 99) * 1000 if lates
            else 0.0, "late_max_ms": lates[-1] * 1000 if lates else 0.0,
            "patch_ms": {"p50": percentile(tooks, 50) * 1000, "p99": percentile(tooks, 99) * 1000,
                         "max": tooks[-1] * 1000} if tooks else {}}))
        api.close()
    except Exception:  # noqa: BLE001 - reported to the parent
        conn.send(("err", traceback.format_exc()))


# --- subscribers that keep the order they saw ----------------------------------------------

class _OrderedSub(cluster_common._Sub):
    """cluster_common's subscriber record, plus every sequence number in arrival order."""

    __slots__ = ("seqs",)

    def __init__(self, conn: Any) -> None:
        super().__init__(conn)
        self.seqs = array("l")

    def event(self, seq: int, lat_us: int, socket_lat_us: int | None = None) -> None:
        self.seqs.append(seq)
        super().event(seq, lat_us, socket_lat_us)

    def result(self) -> dict[str, Any]:
        return {**super().result(), "seqs": self.seqs.tobytes()}


def ordered_clients_main(conn: Any, *args: Any) -> None:
    """cluster_common.fanout_clients_main (the same readers), recording the order too. This
    process is its own: the substitution touches no one else's readers."""
    cluster_common._Sub = _OrderedSub  # type: ignore[misc]
    cluster_common.fanout_clients_main(conn, *args)
