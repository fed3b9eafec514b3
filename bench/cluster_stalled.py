"""Goal 2 (stalled subscriber): the fan-out run of cluster_fanout.py, plus one subscriber that
stops reading right after its WebSocket handshake and `watch` message (a raw TCP socket that
never reads again). Reported: how long until the server cuts it off (goal <= 5 s), and the
other subscribers' relay p99 vs a run without it in the same rig (goal: within 10 %). In
the baseline runs that subscriber reads everything and the same kernel sampling runs, so
the two kinds of run differ only by the stall.

    .venv/bin/python bench/cluster_stalled.py             # 200 subs, 500/s, 20 s; runs
                                                          # baseline, stalled (x --repeat)
    .venv/bin/python bench/cluster_stalled.py --small     # 20 subs, 100/s, 5 s
    options: those of cluster_fanout.py, and --repeat N (alternating pairs, default 1)

"Cut off" is read from the kernel (/proc/net/tcp, sampled every 20 ms from the first
emitted event): the server-side socket of the stalled connection leaves ESTABLISHED
(shutdown/close) or loses its owner (inode 0: the server closed the descriptor). The time
at which the buffers were full (the stalled socket's receive queue stopped growing while
the server still had bytes queued) is reported too, so the server's own reaction time
(cut-off minus buffers full) is visible. Afterwards the stalled socket is drained to see
what it got last (a 4429 close frame, or nothing).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import Rig, header  # noqa: E402
from cluster_fanout import fanout_run, options, prepare  # noqa: E402
from common import log, write_result  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    import argparse

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--repeat", type=int, default=1)
    known, rest = pre.parse_known_args(argv)
    args = options(rest, __doc__)
    info = header("cluster stalled subscriber")
    runs: list[dict[str, Any]] = []
    with Rig(threads=args.threads, keep=args.keep, webapp=args.webapp) as rig:
        names = prepare(rig, args)
        seq = 0
        count = int(args.rate * args.seconds)
        for i in range(known.repeat):
            for stalled in (False, True):
                label = f"{'stalled' if stalled else 'baseline'}-{i + 1}"
                runs.append(fanout_run(rig, args, "fanout", names, seq, stalled, label,
                                       extra_reader=not stalled))
                seq += count
    base = [r for r in runs if "stalled" not in r]
    with_stall = [r for r in runs if "stalled" in r]
    base_p99 = sorted(r["relay_ms"]["p99"] for r in base)
    stall_p99 = sorted(r["relay_ms"]["p99"] for r in with_stall)
    cut = [r["stalled"]["cut_after_s"] for r in with_stall]
    out: dict[str, Any] = {
        "machine": info, "runs": runs,
        "baseline_p99_ms": base_p99, "stalled_run_p99_ms": stall_p99,
        "p99_change": (stall_p99[len(stall_p99) // 2] / base_p99[len(base_p99) // 2] - 1)
        if base_p99 and stall_p99 else None,
        "cut_after_s": cut,
    }
    out["goals"] = {
        "cut_within_5s": all(c is not None and c <= 5.0 for c in cut),
        "others_p99_within_10pct": out["p99_change"] is not None and out["p99_change"] <= 0.10,
    }
    log(f"baseline p99 {base_p99} ms; with a stalled subscriber {stall_p99} ms "
        f"(change {out['p99_change']:+.1%}); cut off after {cut} s")
    log(f"goals: {out['goals']}")
    write_result("cluster_stalled", out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
