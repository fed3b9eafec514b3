"""Who takes the CPU from a process's busiest thread: a sched_switch trace (Linux tracefs,
run as root) of the thread that used the most CPU over one second.

While `bench/cluster_fanout.py` runs (its log names the server worker's pid):

    sudo .venv/bin/python bench/sched_trace.py PID --seconds 2

For the thread, it reports each time it left the CPU: preempted (still runnable: who
took over, and for how long) or asleep (waiting for the GIL, a lock, I/O or a timer).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import fmt_ms, summary_ms  # noqa: E402

TRACING = Path("/sys/kernel/tracing")
SWITCH = re.compile(r"\s([\d.]+): sched_switch: prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ "
                    r"prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+) next_prio=(\d+)")


def busiest_thread(pid: int) -> int:
    def cpu() -> dict[int, int]:
        out = {}
        for tid in os.listdir(f"/proc/{pid}/task"):
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            out[int(tid)] = int(fields[11]) + int(fields[12])
        return out
    before = cpu()
    time.sleep(1)
    after = cpu()
    return max(after, key=lambda t: after[t] - before.get(t, 0))


def describe(tid: int, owner: int) -> str:
    """`tid` with its process: `[self]` for the traced process, else the process id."""
    try:
        status = Path(f"/proc/{tid}/status").read_text()
    except OSError:
        return str(tid)
    tgid = int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("Tgid:")))
    return f"{tid} [self]" if tgid == owner else f"{tid} [pid {tgid}]"


def record(seconds: float) -> list[str]:
    if not (TRACING / "trace").exists():
        os.system(f"mount -t tracefs nodev {TRACING}")  # noqa: S605 - fixed command
    (TRACING / "tracing_on").write_text("0")
    (TRACING / "trace").write_text("")
    (TRACING / "buffer_size_kb").write_text("16384")
    (TRACING / "set_event").write_text("sched:sched_switch")
    (TRACING / "tracing_on").write_text("1")
    time.sleep(seconds)
    (TRACING / "tracing_on").write_text("0")
    lines = (TRACING / "trace").read_text().splitlines()
    (TRACING / "set_event").write_text("")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pid", type=int)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    tid = busiest_thread(args.pid)
    lines = record(args.seconds)
    by: Counter[str] = Counter()
    off: dict[str, list[float]] = {"preempted": [], "asleep": []}
    left: tuple[float, str] | None = None
    for line in lines:
        m = SWITCH.search(line)
        if not m:
            continue
        ts, _, prev_pid, state, next_comm, next_pid, next_prio = m.groups()
        if int(prev_pid) == tid:
            kind = "preempted" if state.startswith("R") else "asleep"
            if kind == "preempted":
                by[f"{next_comm} {describe(int(next_pid), args.pid)} (prio {next_prio})"] += 1
            left = (float(ts), kind)
        elif int(next_pid) == tid and left is not None:
            off[left[1]].append(float(ts) - left[0])
            left = None
    print(f"thread {tid} of {args.pid}, {args.seconds:.0f} s of sched_switch")
    for kind, spans in off.items():
        print(f"  {kind:9}: {fmt_ms(summary_ms(t * 1e6 for t in spans))}, "
              f"total {sum(spans) * 1e3:.1f} ms")
    print("  preempted by: " + ", ".join(f"{who} x{n}" for who, n in by.most_common(6)))


if __name__ == "__main__":
    main()
