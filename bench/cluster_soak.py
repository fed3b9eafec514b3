"""Soak: the live-cluster relay through 30 minutes of faults. 200 WebSocket subscribers
watch the pods of one namespace while the simulator adds, changes and deletes pods at
100 changes/s (the pod count kept between 80 and 170); every 10 s one fault, in turn:

    cut_streams       watch streams cut without their final chunk
    expire_watches    an in-stream 410 on every open watch
    watch_410         the next watch request answers HTTP 410
    outage            connection refused for 2 s (go_down, come_back)
    cut_connections   every connection cut, idle pooled ones too
    expire_history    3 pods changed, 2 deleted, 2 added without any watch event, then
                      the history expired (410): only a relist can find them
    watch_504         the next watch request answers 504 "Too large resource version"
    replace           the cluster recreated with lower resourceVersions, the same pod
                      names with new uids; connections cut
    replace_graceful  the same, but open watches end cleanly (the silent watch)

8 s after each fault the changes pause and every subscriber's mirror (uid ->
resourceVersion, built only from the messages it got) is compared with the simulator's
pods. Goals: divergence after convergence 0, messages lost 0, the server worker's RSS flat
within 10 % (from the end of the warm-up to the end).

    .venv/bin/python bench/cluster_soak.py             # 200 subscribers, 30 min (~32 min)
    .venv/bin/python bench/cluster_soak.py --small     # 20 subscribers, 2 min
    options: --minutes M --subscribers N --rate R --interval S --json PATH --keep

What is checked, per subscriber (2 processes reading raw sockets with epoll):
* ordering sanity of every event: no ADDED for a uid it has, no MODIFIED or DELETED for
  one it lacks, no MODIFIED at a resourceVersion not above the one it has, no ADDED
  while another uid still holds the name (a relist sends deletions first);
* at each checkpoint: the mirror equals the simulator's pods within `--settle` s of the
  pause (converged), or later but within `--extra` s more (late), or not (diverged);
  the subscribers' streams are identical (count and CRC of every event): none lost or
  duplicated one the others got;
* every change carries a sequence number: between faults (from the end of a checkpoint
  to the next fault) a gap or a step back in the sequence is a live event lost or
  reordered (a relist after a fault legitimately skips and reorders).
The instance's config sets `WATCH_TIMING = {"watch_timeout": (4, 6)}`: streams also end
cleanly between faults (the relay resumes without a relist), and a refused watch request
(watch_410, watch_504) comes within the cycle. The simulator sends bookmarks every 1 s.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import select
import sys
import time
import traceback
import zlib
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import (  # noqa: E402
    ANNOTATION,
    SOAK_FAULTS,
    Child,
    CpuMeter,
    Rig,
    WsConn,
    client_frame,
    fmt_cpu,
    fmt_ms,
    header,
    rss_kib,
    summary_ms,
    thread_count,
    watch_message,
)
from common import log, wait_quiet, write_result  # noqa: E402

NAMESPACE = "soak"
WATCH_ID = "pods"
PREFIX = b'{"type":"event","watchId":"' + WATCH_ID.encode() + b'","event":{"type":"'
METADATA = b'"metadata":'
DECODER = json.JSONDecoder()


def options(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="20 subscribers, 2 minutes")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--subscribers", type=int, default=200)
    ap.add_argument("--procs", type=int, default=2, help="subscriber processes")
    ap.add_argument("--rate", type=float, default=100.0, help="changes per second")
    ap.add_argument("--pods", type=int, default=125, help="pods at the start")
    ap.add_argument("--low", type=int, default=80, help="fewest pods the churn keeps")
    ap.add_argument("--high", type=int, default=170, help="most pods the churn keeps")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between faults")
    ap.add_argument("--check-after", type=float, default=8.0,
                    help="seconds after a fault when the changes pause for a checkpoint")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="a mirror equal to the cluster within this long is converged")
    ap.add_argument("--extra", type=float, default=6.0,
                    help="then wait this much longer for the others (late, or diverged)")
    ap.add_argument("--outage", type=float, default=2.0, help="seconds the cluster is down")
    ap.add_argument("--warmup", type=float, default=120.0,
                    help="seconds of faults before the RSS baseline is taken")
    ap.add_argument("--watch-timeout", type=int, nargs=2, default=(4, 6),
                    metavar=("LOW", "HIGH"), help="the relay's watch timeoutSeconds")
    ap.add_argument("--witnesses", type=int, default=1,
                    help="subscribers per process that also keep every sequence number "
                         "and latency")
    ap.add_argument("--threads", type=int, default=300, help="server threads")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the result here too")
    ap.add_argument("--keep", action="store_true", help="keep the instance folder (logs)")
    ap.add_argument("--webapp", help="run the server from this folder's webapp/ package")
    ap.add_argument("--quiet-wait", type=float, default=120.0,
                    help="wait up to this long for other processes to leave the CPUs idle")
    args = ap.parse_args(argv)
    if args.small:
        args.subscribers, args.minutes, args.warmup = 20, 2.0, 30.0
    if args.check_after + args.settle >= args.interval:
        ap.error("--check-after + --settle must leave time before the next fault")
    return args


# --- the subscribers (their own processes) ------------------------------------------------

class Mirror:
    """One subscriber: the pods it knows from its messages, and what looked wrong."""

    def __init__(self, ws: WsConn, witness: bool) -> None:
        self.ws = ws
        self.witness = witness
        self.objects: dict[str, tuple[str, int]] = {}  # uid -> (name, resourceVersion)
        self.by_name: dict[str, str] = {}
        self.count = 0  # events received
        self.crc = 0  # over (type, uid, resourceVersion) of every event, in order
        self.last_seq = -1  # highest change sequence number seen
        self.gaps: list[tuple[int, int]] = []  # (last seen, next seen) when it skipped
        self.backs: list[tuple[int, int]] = []  # (last seen, older one) when it stepped back
        # Witness only: every sequence number, the highest one seen before it, its latency.
        self.seqs = array("l")
        self.positions = array("l")
        self.lat = array("l")
        self.violations: Counter[str] = Counter()
        self.examples: list[str] = []
        self.errors = self.synced = self.resets = 0
        self.others: list[bytes] = []
        self.close_code: int | None = None

    @property
    def open(self) -> bool:
        return self.close_code is None

    def text(self, buf: bytearray, start: int, end: int, now_ns: int) -> None:
        if buf.startswith(PREFIX, start):
            k0 = start + len(PREFIX)
            k1 = buf.find(b'"', k0, end)
            at = buf.find(METADATA, k1, end) + len(METADATA)
            meta, _ = DECODER.raw_decode(bytes(buf[at:end]).decode())
            self.event(bytes(buf[k0:k1]), meta, now_ns)
        elif buf.startswith(b'{"type":"synced"', start):
            self.synced += 1
        elif buf.startswith(b'{"type":"error"', start):
            self.errors += 1
        elif buf.startswith(b'{"type":"reset"', start):
            self.resets += 1
            self.objects.clear()
            self.by_name.clear()
        elif buf.startswith(b'{"type":"event"', start):  # not our watchId, or unexpected
            self.violation("unparsed_event", bytes(buf[start:start + 120]).decode())
        else:
            self.others.append(bytes(buf[start:min(end, start + 300)]))

    def violation(self, what: str, detail: str) -> None:
        self.violations[what] += 1
        if len(self.examples) < 5:
            self.examples.append(f"{what}: {detail}")

    def event(self, kind: bytes, meta: dict[str, Any], now_ns: int) -> None:
        uid, name = meta["uid"], meta["name"]
        rv = int(meta["resourceVersion"])
        self.count += 1
        self.crc = zlib.crc32(b"%s %s %d;" % (kind, uid.encode(), rv), self.crc)
        objects = self.objects
        if kind == b"DELETED":
            if objects.pop(uid, None) is None:
                self.violation("deleted_unknown", f"{name} {uid} rv {rv}")
            if self.by_name.get(name) == uid:
                del self.by_name[name]
            return
        prev = objects.get(uid)
        if kind == b"ADDED":
            if prev is not None:
                self.violation("added_twice", f"{name} {uid} rv {prev[1]} -> {rv}")
        elif prev is None:
            self.violation("modified_unknown", f"{name} {uid} rv {rv}")
        elif rv <= prev[1]:
            self.violation("version_backwards", f"{name} {uid} rv {prev[1]} -> {rv}")
        holder = self.by_name.get(name)
        if holder is not None and holder != uid:
            self.violation("name_clash", f"{name}: {holder} still held when {uid} came")
        objects[uid] = (name, rv)
        self.by_name[name] = uid
        stamp = (meta.get("annotations") or {}).get(ANNOTATION)
        if stamp:
            seq_text, _, emitted = stamp.partition(":")
            self.sequence(int(seq_text), now_ns - int(emitted))

    def sequence(self, seq: int, lat_ns: int) -> None:
        last = self.last_seq
        if seq == last + 1:
            self.last_seq = seq
        elif seq > last:
            self.gaps.append((last, seq))
            self.last_seq = seq
        else:
            self.backs.append((last, seq))
        if self.witness:
            self.seqs.append(seq)
            self.positions.append(last)
            self.lat.append(lat_ns // 1000)

    def differences(self, truth: dict[str, tuple[str, int]]) -> dict[str, Any]:
        mine = self.objects
        missing = [truth[u][0] for u in truth.keys() - mine.keys()]
        extra = [mine[u][0] for u in mine.keys() - truth.keys()]
        stale = [f"{truth[u][0]} {mine[u][1]}!={truth[u][1]}"
                 for u in truth.keys() & mine.keys() if truth[u] != mine[u]]
        return {"missing": len(missing), "extra": len(extra), "stale": len(stale),
                "examples": (missing[:2] + extra[:2] + stale[:2])}


class Check:
    """A checkpoint in progress: who equals the truth, and when."""

    def __init__(self, mirrors: list[Mirror], truth: dict[str, tuple[str, int]],
                 settle: float, extra: float) -> None:
        self.truth = truth
        self.t0 = time.monotonic()
        self.settle = settle
        self.end_at = self.t0 + settle + extra
        self.pending = {i for i, m in enumerate(mirrors) if m.open}
        self.took: list[float] = []

    def progress(self, mirrors: list[Mirror]) -> bool:
        now = time.monotonic()
        for i in list(self.pending):
            if mirrors[i].objects == self.truth:
                self.took.append(now - self.t0)
                self.pending.discard(i)
            elif not mirrors[i].open:
                self.pending.discard(i)  # counted as closed
        return not self.pending or now >= self.end_at

    def result(self, mirrors: list[Mirror]) -> dict[str, Any]:
        took = sorted(self.took)
        return {"converged": len(took), "late": sum(t > self.settle for t in took),
                "took_max_ms": took[-1] * 1000 if took else 0.0,
                "diverged": [{"subscriber": i, **mirrors[i].differences(self.truth)}
                             for i in sorted(self.pending)],
                **totals(mirrors)}


def totals(mirrors: list[Mirror]) -> dict[str, Any]:
    violations: Counter[str] = Counter()
    for m in mirrors:
        violations.update(m.violations)
    return {"open": sum(m.open for m in mirrors),
            "close_codes": dict(Counter(str(m.close_code) for m in mirrors if not m.open)),
            "streams": Counter((m.count, m.crc) for m in mirrors if m.open),
            "errors": sum(m.errors for m in mirrors), "synced": sum(m.synced for m in mirrors),
            "resets": sum(m.resets for m in mirrors), "violations": dict(violations),
            "examples": [e for m in mirrors for e in m.examples][:5],
            "others": [o.decode(errors="replace") for m in mirrors for o in m.others][:3]}


def soak_subscribers_main(conn: Any, port: int, token: str, n: int, witnesses: int) -> None:
    try:
        _subscribers(conn, port, token, n, witnesses)
    except Exception:  # noqa: BLE001 - reported to the parent
        conn.send(("err", traceback.format_exc()))


def _read(m: Mirror) -> bool:
    """Read what the socket has and apply every complete message; False once closed."""
    ws = m.ws
    try:
        chunk = ws.sock.recv(262144)
    except BlockingIOError:
        return True
    except OSError:
        chunk = b""
    if not chunk:
        if m.close_code is None:
            m.close_code = 1006
        return False
    now_ns = time.time_ns()
    ws.buf += chunk
    buf = ws.buf
    last = 0
    for opcode, start, end in ws.frames():
        if opcode == 0x1:
            m.text(buf, start, end, now_ns)
        elif opcode == 0x8:
            m.close_code = int.from_bytes(buf[start:start + 2], "big") \
                if end - start >= 2 else 1005
        elif opcode == 0x9:
            with contextlib.suppress(OSError):
                ws.sock.send(client_frame(bytes(buf[start:end]), 0xA))
        last = end
    ws.consume(last)
    return True


def _subscribers(conn: Any, port: int, token: str, n: int, witnesses: int) -> None:
    mirrors = []
    for i in range(n):
        ws = WsConn(port, token)
        ws.sock.setblocking(False)
        mirrors.append(Mirror(ws, witness=i < witnesses))
    for m in mirrors:
        m.ws.send(watch_message(WATCH_ID, NAMESPACE))
    by_fd = {m.ws.fileno(): m for m in mirrors}
    poller = select.epoll()
    for fd in by_fd:
        poller.register(fd, select.EPOLLIN)
    ready = False
    deadline = time.monotonic() + 180
    check: Check | None = None
    while True:
        for fd, _ in poller.poll(0.02):
            if not _read(by_fd[fd]):
                poller.unregister(fd)
        if not ready:
            if all(m.synced for m in mirrors):
                conn.send(("ready", {"subscribers": n, "pods": len(mirrors[0].objects)}))
                ready = True
            elif time.monotonic() > deadline:
                conn.send(("err", f"only {sum(bool(m.synced) for m in mirrors)}/{n} synced; "
                                  f"others: {[m.others[:1] for m in mirrors if m.others][:3]}"))
                return
        if check is not None and check.progress(mirrors):
            conn.send(("checked", check.result(mirrors)))
            check = None
        if conn.poll():
            msg = conn.recv()
            if msg[0] == "check":
                check = Check(mirrors, msg[1], msg[2], msg[3])
                if check.progress(mirrors):  # most are equal already
                    conn.send(("checked", check.result(mirrors)))
                    check = None
            elif msg[0] == "stop":
                witness = [m for m in mirrors if m.witness]
                conn.send(("done", {
                    **totals(mirrors),
                    "gaps": [len(m.gaps) for m in mirrors],
                    "backs": [len(m.backs) for m in mirrors],
                    "witnesses": [{"gaps": m.gaps, "backs": m.backs, "seqs": m.seqs.tobytes(),
                                   "positions": m.positions.tobytes(),
                                   "lat": m.lat.tobytes()} for m in witness]}))
                for m in mirrors:
                    m.ws.close()
                return


# --- the run ------------------------------------------------------------------------------

def sleep_until(t: float) -> None:
    delay = t - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def fd_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def merge_checks(parts: list[dict[str, Any]]) -> dict[str, Any]:
    streams: Counter[tuple[int, int]] = Counter()
    violations: Counter[str] = Counter()
    close_codes: Counter[str] = Counter()
    for p in parts:
        streams.update(p["streams"])
        violations.update(p["violations"])
        close_codes.update(p["close_codes"])
    common = streams.most_common(1)[0][1] if streams else 0
    return {
        "converged": sum(p["converged"] for p in parts),
        "late": sum(p["late"] for p in parts),
        "took_max_ms": max(p["took_max_ms"] for p in parts),
        "diverged": [d for p in parts for d in p["diverged"]],
        "open": sum(p["open"] for p in parts), "close_codes": dict(close_codes),
        "streams_differing": sum(streams.values()) - common,
        "events_per_subscriber": streams.most_common(1)[0][0][0] if streams else 0,
        "errors": sum(p["errors"] for p in parts), "synced": sum(p["synced"] for p in parts),
        "resets": sum(p["resets"] for p in parts), "violations": dict(violations),
        "examples": [e for p in parts for e in p["examples"]][:5],
        "others": [o for p in parts for o in p["others"]][:3],
    }


def run_cycle(rig: Rig, args: argparse.Namespace, clients: list[Child], kind: str,
              fault_at: float, since: float, previous: dict[str, Any]) -> dict[str, Any]:
    """One fault, then a checkpoint with the changes paused."""
    sleep_until(fault_at)
    fault = rig.sim.call("fault", kind, args.outage)
    sleep_until(fault_at + args.check_after)
    not_taken = rig.sim.call("faults_pending", True)
    paused = rig.sim.call("churn_pause")
    truth = rig.sim.call("pod_versions", NAMESPACE)
    for c in clients:
        c.send("check", truth, args.settle, args.extra)
    check = merge_checks([c.expect("checked", args.settle + args.extra + 60) for c in clients])
    requests = rig.sim.call("pod_requests", since)
    rig.sim.call("churn_resume")
    # Counters are cumulative in the subscribers: this cycle's share.
    for key in ("errors", "synced", "resets"):
        check[f"{key}_new"] = check[key] - previous.get(key, 0)
    new_violations = {k: v - previous.get("violations", {}).get(k, 0)
                      for k, v in check["violations"].items()}
    check["violations_new"] = {k: v for k, v in new_violations.items() if v}
    counts: Counter[str] = Counter()
    relist_seqs = []
    for at, what, seq in requests["requests"]:
        if what == "relist" and at < fault["at"]:
            what = "relist_before_fault"  # between the last checkpoint and this fault
        elif what == "relist":
            relist_seqs.append(seq)
        counts[what] += 1
    # The changes a relist may send as a difference (skipping and reordering sequence
    # numbers): from the fault to the last relist after it (the pause if none).
    window = (fault["seq"], max(relist_seqs, default=paused["seq"]))
    return {"kind": kind, "fault": fault, "not_taken": not_taken, "paused": paused,
            "window": window, "pods": len(truth), "check": check, "requests": dict(counts),
            "timeline": [(round(at - fault["at"], 3), what, seq - fault["seq"])
                         for at, what, seq in requests["requests"]],
            "until": requests["until"], "rss_kib": rss_kib(rig.worker_pid),
            "threads": thread_count(rig.worker_pid), "fds": fd_count(rig.worker_pid)}


def in_window(low: int, high: int, windows: list[tuple[int, int]], margin: int) -> bool:
    """Sequence numbers low..high lie within a fault's window, widened by `margin` at both
    ends (changes in flight when the fault hit, or when the relist read the list)."""
    return any(start - margin <= low and high <= end + margin for start, end in windows)


def slope_per_10min(samples: list[tuple[float, int]]) -> float:
    """Least-squares RSS growth, KiB per 10 minutes."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mt = sum(t for t, _ in samples) / n
    mr = sum(r for _, r in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    if not var:
        return 0.0
    return sum((t - mt) * (r - mr) for t, r in samples) / var * 600


def analyse(args: argparse.Namespace, cycles: list[dict[str, Any]], final: list[dict[str, Any]],
            rss: dict[str, Any]) -> dict[str, Any]:
    windows = [c["window"] for c in cycles]
    margin = int(args.rate)  # ~1 s of changes in flight when a fault hits
    gaps_total = sum(sum(f["gaps"]) for f in final)
    backs_total = sum(sum(f["backs"]) for f in final)
    unexplained_gaps: list[tuple[int, int]] = []
    unexplained_backs: list[tuple[int, int]] = []
    live_lat = array("l")
    all_lat = array("l")
    slow: list[tuple[int, int]] = []  # live events later than 1 s: (seq, ms)
    starts = [c["fault"]["seq"] for c in cycles]
    per_cycle: list[array[int]] = [array("l") for _ in range(len(cycles) + 1)]
    for f in final:
        for w in f["witnesses"]:
            # A skip from `last` to `seq` must lie within a window; a step back (a relist
            # sends each changed pod's latest state, in no order) must happen there.
            unexplained_gaps += [(last, seq) for last, seq in w["gaps"]
                                 if not in_window(last, seq, windows, margin)]
            unexplained_backs += [(last, seq) for last, seq in w["backs"]
                                  if not in_window(last, last, windows, margin)]
            seqs, positions, lat = array("l"), array("l"), array("l")
            seqs.frombytes(w["seqs"])
            positions.frombytes(w["positions"])
            lat.frombytes(w["lat"])
            all_lat.extend(lat)
            # Live: it arrived outside every fault's window (where it arrived, not when it
            # was made: a relist re-sends a pod's last state, stamped when it was changed).
            inside = bytearray(max(positions, default=0) + 2)  # index: position + 1
            for start, end in windows:
                for p in range(max(0, start - margin), min(end + margin + 1, len(inside) - 1)):
                    inside[p + 1] = 1
            for s, p, v in zip(seqs, positions, lat, strict=True):
                if not inside[p + 1]:
                    live_lat.append(v)
                    per_cycle[bisect.bisect_right(starts, p)].append(v)  # 0: before the first
                    if v > 1_000_000:
                        slow.append((s, v // 1000))
    lost_live = sum(b - a - 1 for a, b in unexplained_gaps)
    by_kind: dict[str, dict[str, Any]] = {}
    for c in cycles:
        k = by_kind.setdefault(c["kind"], {"faults": 0, "relists": [], "version_checks": 0,
                                           "watches": 0, "relists_before_fault": 0, "late": 0,
                                           "diverged": 0, "took_max_ms": 0.0, "not_taken": 0,
                                           "errors_sent": 0, "synced_sent": 0})
        req = c["requests"]
        k["faults"] += 1
        k["relists"].append(req.get("relist", 0))
        k["version_checks"] += req.get("version_check", 0)
        k["watches"] += req.get("watch", 0)
        k["relists_before_fault"] += req.get("relist_before_fault", 0)
        k["late"] += c["check"]["late"]
        k["diverged"] += len(c["check"]["diverged"])
        k["took_max_ms"] = max(k["took_max_ms"], c["check"]["took_max_ms"])
        k["not_taken"] += c["not_taken"]
        k["errors_sent"] += c["check"]["errors_new"]
        k["synced_sent"] += c["check"]["synced_new"]
    for k in by_kind.values():
        k["relists_per_fault"] = f"{min(k['relists'])}-{max(k['relists'])}" \
            if min(k["relists"]) != max(k["relists"]) else str(k["relists"][0])
    diverged = sum(len(c["check"]["diverged"]) for c in cycles)
    wrong_objects = sum(d["missing"] + d["extra"] + d["stale"]
                        for c in cycles for d in c["check"]["diverged"])
    streams_differing = max((c["check"]["streams_differing"] for c in cycles), default=0)
    last = final_totals(final)
    violations = last["violations"]
    closed = sum(last["close_codes"].values())
    return {
        "faults": len(cycles), "by_kind": by_kind,
        "divergence": {"subscriber_checkpoints_diverged": diverged,
                       "late_converged": sum(c["check"]["late"] for c in cycles),
                       "converged_within_settle": sum(c["check"]["converged"] - c["check"]["late"]
                                                      for c in cycles),
                       "examples": [d for c in cycles for d in c["check"]["diverged"]][:5]},
        "lost": {"objects_never_converged": wrong_objects, "live_events_missed": lost_live,
                 "unexplained_gaps": unexplained_gaps[:10],
                 "live_steps_back": len(unexplained_backs),
                 "unexplained_backs": unexplained_backs[:10],
                 "streams_differing_max": streams_differing, "subscribers_closed": closed,
                 "close_codes": last["close_codes"],
                 "gaps_all_subscribers": gaps_total, "backs_all_subscribers": backs_total},
        "ordering_violations": violations, "violation_examples": last["examples"],
        "latency_live_ms": summary_ms(live_lat), "latency_all_ms": summary_ms(all_lat),
        "slow_live_events": [(s, ms, after_fault(s, cycles)) for s, ms in sorted(slow)[:20]],
        "latency_live_by_load": by_load(cycles, per_cycle[1:]),
        "rss": rss,
    }


def by_load(cycles: list[dict[str, Any]], per_cycle: list[array[int]]) -> dict[str, Any]:
    """Live latency of the cycles (a fault to the next) while other processes used less
    than half a core, and the rest; and of the first and the last third of the run."""
    for c, lat in zip(cycles, per_cycle, strict=True):
        c["live_ms"] = summary_ms(lat)
    third = max(1, len(cycles) // 3)
    groups = {"other_below_0.5": [i for i, c in enumerate(cycles) if c["cpu"]["other"] < 0.5],
              "other_from_0.5": [i for i, c in enumerate(cycles) if c["cpu"]["other"] >= 0.5],
              "first_third": list(range(third)),
              "last_third": list(range(len(cycles) - third, len(cycles)))}
    out = {}
    for name, indexes in groups.items():
        merged = array("l")
        for i in indexes:
            merged.extend(per_cycle[i])
        out[name] = {"cycles": len(indexes), "other_cores": sum(
            cycles[i]["cpu"]["other"] for i in indexes) / len(indexes) if indexes else 0.0,
            **summary_ms(merged)}
    return out


def after_fault(seq: int, cycles: list[dict[str, Any]]) -> str:
    """Which fault a change came after, and how far into its cycle (in changes)."""
    before = [c for c in cycles if c["fault"]["seq"] <= seq]
    if not before:
        return "before the first fault"
    c = before[-1]
    return (f"{c['kind']} at {c['t']:.0f} s: fault +{seq - c['fault']['seq']}, window "
            f"{c['window'][0]}-{c['window'][1]}, pause {c['paused']['seq']}")


def final_totals(final: list[dict[str, Any]]) -> dict[str, Any]:
    violations: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for f in final:
        violations.update(f["violations"])
        codes.update(f["close_codes"])
    return {"violations": dict(violations), "close_codes": dict(codes),
            "examples": [e for f in final for e in f["examples"]][:5]}


def rss_summary(cycles: list[dict[str, Any]], warmup: float,
                subscribed_kib: int) -> dict[str, Any]:
    samples = [(c["t"], c["rss_kib"]) for c in cycles]
    after = [(t, r) for t, r in samples if t >= warmup] or samples[-1:]
    base = after[0][1]
    end = samples[-1][1]
    return {"subscribed_kib": subscribed_kib, "baseline_kib": base, "baseline_at_s": after[0][0],
            "end_kib": end, "max_kib": max(r for _, r in samples),
            "growth_pct": (end - base) / base * 100 if base else float("nan"),
            "slope_kib_per_10min": slope_per_10min(after),
            "threads": [cycles[0]["threads"], cycles[-1]["threads"]],
            "fds": [cycles[0]["fds"], cycles[-1]["fds"]],
            "samples": samples}


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    info = header("cluster soak")
    low, high = args.watch_timeout
    config = f'WATCH_TIMING = {{"watch_timeout": ({low}, {high})}}\n'
    with Rig(threads=args.threads, config=config, bookmark_interval=1.0, keep=args.keep,
             webapp=args.webapp) as rig:
        pods = rig.sim.call("churn_prepare", NAMESPACE, args.pods, args.rate, args.low,
                            args.high, args.seed)
        rig.touch_token()
        per = [args.subscribers // args.procs + (1 if i < args.subscribers % args.procs else 0)
               for i in range(args.procs)]
        clients = [Child(soak_subscribers_main, rig.port, rig.token, n, args.witnesses,
                         name=f"subscribers-{i}") for i, n in enumerate(per) if n]
        t_connect = time.monotonic()
        for c in clients:
            c.expect("ready", 240)
        log(f"{args.subscribers} subscribers synced on {pods} pods in "
            f"{time.monotonic() - t_connect:.1f} s ({len(clients)} processes)")
        others = wait_quiet(args.quiet_wait, threshold=0.35)
        log(f"other load before the run: {others:.2f} cores")
        pids = {"server": rig.worker_pid, "simulator": rig.sim.pid}
        for i, c in enumerate(clients):
            pids[f"subscribers{i}"] = c.pid
        subscribed_kib = rss_kib(rig.worker_pid)
        meter = CpuMeter(pids)
        since = time.time()
        rig.sim.call("churn_resume")
        t0 = time.monotonic()
        end = t0 + args.minutes * 60
        cycles: list[dict[str, Any]] = []
        previous: dict[str, Any] = {"synced": args.subscribers}  # the first `synced`s
        fault_at = t0 + args.interval
        while fault_at + args.check_after + args.settle <= end:
            kind = SOAK_FAULTS[len(cycles) % len(SOAK_FAULTS)]
            cycle_meter = CpuMeter(pids)
            cycle = run_cycle(rig, args, clients, kind, fault_at, since, previous)
            cycle["cpu"] = {k: round(v, 3) for k, v in cycle_meter.stop().items()}
            since = cycle.pop("until")
            cycle["t"] = round(time.monotonic() - t0, 1)
            cycles.append(cycle)
            previous = cycle["check"]
            ch = cycle["check"]
            log(f"[{cycle['t']:7.1f} s] {kind:16} relists {cycle['requests'].get('relist', 0)} "
                f"requests {cycle['requests']} | converged {ch['converged']}/{ch['open']} "
                f"(late {ch['late']}, diverged {len(ch['diverged'])}, max "
                f"{ch['took_max_ms']:.0f} ms) streams differ {ch['streams_differing']} | "
                f"pods {cycle['pods']} | errors/synced sent {ch['errors_new']}/"
                f"{ch['synced_new']} | RSS {cycle['rss_kib'] / 1024:.1f} MiB, threads "
                f"{cycle['threads']}, fds {cycle['fds']} | other load {cycle['cpu']['other']:.2f}"
                + (f" | NOT TAKEN {cycle['not_taken']}" if cycle["not_taken"] else "")
                + (f" | violations {ch['violations_new']}" if ch["violations_new"] else "")
                + (f" | diverged {ch['diverged'][:2]}" if ch["diverged"] else ""))
            fault_at = max(fault_at + args.interval, time.monotonic())
        cpu = meter.stop()
        churn = rig.sim.call("churn_stop")
        for c in clients:
            c.send("stop")
        final = [c.expect("done", 120) for c in clients]
        for c in clients:
            c.stop()
        sim_rss = rss_kib(rig.sim.pid)
    if not cycles:
        raise SystemExit("no fault fitted in the run: give more --minutes")
    rss = rss_summary(cycles, args.warmup, subscribed_kib)
    out = analyse(args, cycles, final, rss)
    wall = cpu["seconds"]
    out.update({
        "machine": info, "subscribers": args.subscribers, "minutes": args.minutes,
        "rate": args.rate, "interval": args.interval, "watch_timeout": [low, high],
        "churn": {**churn, "per_second": (churn["seq"] + churn["deleted"]) / wall},
        "cpu": cpu, "other_load_before": others, "simulator_rss_kib": sim_rss,
        "cycles": cycles,
    })
    report(out)
    write_result("cluster_soak", out, args.json)
    return 0


def report(out: dict[str, Any]) -> None:
    log("--- summary ---")
    churn = out["churn"]
    log(f"{out['faults']} faults over {out['cpu']['seconds'] / 60:.1f} min; churn "
        f"{churn['per_second']:.1f} changes/s while running (added {churn['added']}, "
        f"re-added under a deleted name {churn['readded']}, modified {churn['modified']}, "
        f"deleted {churn['deleted']}, failed {churn['failed']}, late {churn['late']})")
    log("fault kind        faults  relists/fault  version checks  watches  "
        "late  diverged  slowest  errors/synced sent")
    for kind, k in out["by_kind"].items():
        log(f"{kind:17} {k['faults']:6}  {k['relists_per_fault']:>13}  {k['version_checks']:14}"
            f"  {k['watches']:7}  {k['late']:4}  {k['diverged']:8}  "
            f"{k['took_max_ms']:5.0f} ms  {k['errors_sent']}/{k['synced_sent']}"
            + (f"  (not taken: {k['not_taken']})" if k["not_taken"] else "")
            + (f"  (relists with no fault: {k['relists_before_fault']})"
               if k["relists_before_fault"] else ""))
    d, lost, rss = out["divergence"], out["lost"], out["rss"]
    log(f"divergence after convergence: {d['subscriber_checkpoints_diverged']} subscriber "
        f"checkpoints (converged within the settle time: {d['converged_within_settle']}, "
        f"late: {d['late_converged']})")
    log(f"lost: objects wrong after convergence (missing, extra or stale, summed over "
        f"subscriber checkpoints) {lost['objects_never_converged']}, live events missed "
        f"{lost['live_events_missed']}, live steps back "
        f"{lost['live_steps_back']}, streams differing {lost['streams_differing_max']}, "
        f"subscribers closed {lost['subscribers_closed']} {lost['close_codes']}")
    log(f"ordering violations: {out['ordering_violations'] or 'none'} "
        f"{out['violation_examples'] or ''}")
    log(f"relay latency of live events {fmt_ms(out['latency_live_ms'])}")
    log(f"relay latency incl. relists   {fmt_ms(out['latency_all_ms'])}")
    for name, g in out["latency_live_by_load"].items():
        log(f"  live, {name:16} ({g['cycles']} cycles, other load {g['other_cores']:.2f}): "
            f"{fmt_ms(g)}")
    if out["slow_live_events"]:
        log(f"live events later than 1 s (seq, ms, after): {out['slow_live_events'][:5]}")
    log(f"server worker RSS: subscribed {rss['subscribed_kib'] / 1024:.1f} MiB, after warm-up "
        f"({rss['baseline_at_s']:.0f} s) {rss['baseline_kib'] / 1024:.1f} MiB, end "
        f"{rss['end_kib'] / 1024:.1f} MiB, max {rss['max_kib'] / 1024:.1f} MiB: growth "
        f"{rss['growth_pct']:+.1f} % (trend {rss['slope_kib_per_10min'] / 1024:+.2f} MiB per "
        f"10 min); threads {rss['threads']}, fds {rss['fds']}")
    log(fmt_cpu(out["cpu"]) + f"; other load before the run {out['other_load_before']:.2f}")
    out["goals"] = {
        "divergence_after_convergence_0": d["subscriber_checkpoints_diverged"] == 0,
        "messages_lost_0": not (lost["objects_never_converged"] or lost["live_events_missed"]
                                or lost["streams_differing_max"] or lost["subscribers_closed"]),
        "rss_flat_within_10pct": abs(rss["growth_pct"]) <= 10.0,
        "ordering_sane": not out["ordering_violations"],
    }
    log(f"goals: {out['goals']}")


if __name__ == "__main__":
    sys.exit(main())
