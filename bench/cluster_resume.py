"""Goal 5 (stream timeouts and 410 Gone): with a short server-side watch timeout
(`WATCH_TIMING = {"watch_timeout": (2, 2)}` in the benchmark instance's config.py: every
upstream watch stream ends after 2 s, as API servers end theirs after minutes), events are
created continuously; the simulator's counters must show no relist across the timeouts (one
LIST in all, one WATCH per stream) and a WebSocket subscriber must get every event once, in
order. Then `expire_history()`: exactly one relist, and the subscriber gets exactly the
difference.

    .venv/bin/python bench/cluster_resume.py              # 50 events/s for 12 s (~6 timeouts)
    .venv/bin/python bench/cluster_resume.py --small      # 20 events/s for 6 s
    options: --rate R --seconds S --json PATH --keep --webapp DIR

The difference is made deterministic: the simulator modifies 3 pods, adds 2, deletes 2
and expires its watch history in ONE hold of its store lock (the open watch never sees
those changes as events, only the in-stream 410), so a correct relay must relist once and
send exactly 3 MODIFIED + 2 ADDED + 2 DELETED - nothing for the 13 unchanged pods. The
subscriber also keeps a mirror of the namespace (name -> resourceVersion) from the messages
it gets, compared with the simulator's list at the end. Bookmarks every 1 s (simulator).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import ANNOTATION, Rig, WsConn, header, watch_message  # noqa: E402
from common import log, write_result  # noqa: E402

NAMESPACE = "resume"


class Mirror:
    """What the subscriber knows, from the messages alone."""

    def __init__(self) -> None:
        self.objects: dict[str, str] = {}
        self.seqs: list[int] = []
        self.events: list[tuple[str, str]] = []
        self.other: list[dict[str, Any]] = []

    def feed(self, raw_messages: list[bytes]) -> None:
        for raw in raw_messages:
            msg = json.loads(raw)
            if msg.get("type") != "event":
                self.other.append(msg)
                continue
            kind = msg["event"]["type"]
            meta = msg["event"]["object"]["metadata"]
            name = meta["name"]
            self.events.append((kind, name))
            if kind == "DELETED":
                self.objects.pop(name, None)
            else:
                self.objects[name] = meta["resourceVersion"]
            stamp = (meta.get("annotations") or {}).get(ANNOTATION)
            if kind == "MODIFIED" and stamp and not stamp.startswith("-1:"):
                self.seqs.append(int(stamp.split(":")[0]))


def relay_counts(stats: dict[str, Any]) -> tuple[int, int]:
    by = stats["by_client"]
    return by.get("relay:list:pods", 0), by.get("relay:watch:pods", 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="20 events/s for 6 s")
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--pods", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--webapp", help="run the server from this folder's webapp/ package")
    args = ap.parse_args(argv)
    if args.small:
        args.rate, args.seconds = 20.0, 6.0
    info = header("cluster watch timeouts and 410")
    config = 'WATCH_TIMING = {"watch_timeout": (2, 2)}\n'
    names = [f"svc-{i:02d}" for i in range(args.pods)]
    with Rig(threads=64, config=config, bookmark_interval=1.0, keep=args.keep,
             webapp=args.webapp) as rig:
        rig.sim.call("add_pods", NAMESPACE, names)
        rig.sim.call("reset_stats")
        rig.touch_token()
        ws = WsConn(rig.port, rig.token)
        ws.send(watch_message("pods", NAMESPACE))
        mirror = Mirror()
        mirror.feed(ws.read_messages(30, until=lambda out: bool(out) and out[-1].startswith(
            b'{"type":"synced"')))
        initial = len(mirror.objects)
        s0 = rig.sim.call("stats")
        log(f"subscribed: {initial} pods, simulator counters {s0['by_client']}")

        # --- phase 1: several stream timeouts while events keep coming ------------------
        count = int(args.rate * args.seconds)
        rig.sim.call("emit_start", NAMESPACE, names, args.rate, count, 0)
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.seconds + 3:
            mirror.feed(ws.read_messages(0.5))
        emitted = rig.sim.call("emit_wait", 30)
        mirror.feed(ws.read_messages(2))
        s1 = rig.sim.call("stats")
        lists1, watches1 = relay_counts(s1)
        seqs_ok = mirror.seqs == list(range(count))
        phase1 = {"events": count, "emitter": emitted, "received": len(mirror.seqs),
                  "in_order_complete": seqs_ok,
                  "missing": len(set(range(count)) - set(mirror.seqs)),
                  "duplicates": len(mirror.seqs) - len(set(mirror.seqs)),
                  "relay_lists": lists1, "relay_watches": watches1,
                  "other_messages": mirror.other[:5]}
        log(f"phase 1: {count} events over {args.seconds:.0f} s with 2 s watch streams: "
            f"received {len(mirror.seqs)} (in order, complete: {seqs_ok}); relay LISTs "
            f"{lists1}, WATCH streams {watches1}")

        # --- phase 2: history expired (410) with a known difference ---------------------
        modify, add, delete = names[:3], ["new-a", "new-b"], names[-2:]
        before_events = len(mirror.events)
        rig.sim.call("change_then_expire", NAMESPACE, modify, add, delete)
        t_410 = time.monotonic()
        got: list[tuple[str, str]] = []
        while time.monotonic() - t_410 < 5:
            mirror.feed(ws.read_messages(0.5))
            got = mirror.events[before_events:]
            if len(got) >= 7:
                mirror.feed(ws.read_messages(2))  # anything extra would show up now
                got = mirror.events[before_events:]
                break
        s2 = rig.sim.call("stats")
        lists2, watches2 = relay_counts(s2)
        expected = sorted([("MODIFIED", n) for n in modify] + [("ADDED", n) for n in add]
                          + [("DELETED", n) for n in delete])
        exact = sorted(got) == expected
        log(f"phase 2: after expire_history the subscriber got {len(got)} events "
            f"{sorted(got)}; exact difference: {exact}; relay LISTs {lists1} -> {lists2}")

        # --- phase 3: the relay watches on from the relist -------------------------------
        more = int(args.rate * 4)
        seq_before = len(mirror.seqs)
        rig.sim.call("emit_start", NAMESPACE, names[3:10], args.rate, more, count)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 6:
            mirror.feed(ws.read_messages(0.5))
        rig.sim.call("emit_wait", 30)
        mirror.feed(ws.read_messages(1))
        s3 = rig.sim.call("stats")
        lists3, watches3 = relay_counts(s3)
        after_seqs = mirror.seqs[seq_before:]
        truth = dict.fromkeys(rig.sim.call("list_names", NAMESPACE))
        mirror_ok = sorted(mirror.objects) == sorted(truth)
        log(f"phase 3: {len(after_seqs)}/{more} further events in order: "
            f"{after_seqs == list(range(count, count + more))}; relay LISTs {lists3}; "
            f"mirror == simulator: {mirror_ok}")
        ws.close()
    out = {"machine": info, "phase1": phase1,
           "phase2": {"got": sorted(got), "expected": expected, "exact": exact,
                      "relay_lists_before": lists1, "relay_lists_after": lists2,
                      "relay_watches_after": watches2},
           "phase3": {"events": more, "received_in_order": after_seqs == list(
               range(count, count + more)), "relay_lists": lists3, "relay_watches": watches3,
               "mirror_matches_simulator": mirror_ok}}
    out["goals"] = {
        "no_relist_across_timeouts": lists1 == 1 and watches1 >= args.seconds / 2.5,
        "no_missed_event": seqs_ok,
        "one_relist_after_410": lists2 == lists1 + 1 and lists3 == lists2,
        "exact_difference": exact and mirror_ok,
    }
    log(f"goals: {out['goals']}")
    write_result("cluster_resume", out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
