"""What one pass of the WebSocket sender costs next to bare send() calls.

200 loopback TCP connections, read by 2 processes with epoll (the fan-out benchmark's reader
layout). Every 2 ms (500 passes/s) one 2,000-byte message goes to each connection, alternately
with a bare loop of `socket.send` and through the app's own `Outbox` and the sender's
per-socket write (`Connection.flush`, called in this thread). Pass durations are reported.

    .venv/bin/python bench/sender_pass.py
    options: --connections N --size BYTES --passes N
"""

from __future__ import annotations

import argparse
import multiprocessing
import select
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import fmt_ms, summary_ms  # noqa: E402

from webapp.watch.outbox import Outbox  # noqa: E402
from webapp.watch.owned import OwnedSocket  # noqa: E402
from webapp.watch.sender import Connection  # noqa: E402

GAP_SECONDS = 0.002


def _reader(port: int, count: int) -> None:
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    poller = select.epoll()
    by_fd = {}
    for sock in socks:
        sock.setblocking(False)
        poller.register(sock.fileno(), select.EPOLLIN)
        by_fd[sock.fileno()] = sock
    while by_fd:
        for fd, _ in poller.poll(1.0):
            try:
                if not by_fd[fd].recv(262144):
                    poller.unregister(fd)
                    del by_fd[fd]
            except BlockingIOError:
                continue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--size", type=int, default=2000)
    ap.add_argument("--passes", type=int, default=2000)
    args = ap.parse_args()

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    port = listener.getsockname()[1]
    half = args.connections // 2
    readers = [multiprocessing.Process(target=_reader, args=(port, n))
               for n in (half, args.connections - half)]
    for r in readers:
        r.start()
    conns = [listener.accept()[0] for _ in range(args.connections)]
    data = b"x" * args.size

    wrapped: list[Any] = []
    for sock in conns:
        outbox = Outbox(5000, positions=False)
        conn = Connection(OwnedSocket(sock), outbox)
        outbox.on_ready = lambda: None  # this thread writes, not the sender thread
        wrapped.append(conn)
    # The two kinds of pass alternate, so both see the same machine.
    bare: list[float] = []
    flushed: list[float] = []
    for _ in range(args.passes):
        t0 = time.perf_counter()
        for sock in conns:
            sock.send(data, socket.MSG_DONTWAIT)
        bare.append(time.perf_counter() - t0)
        time.sleep(GAP_SECONDS)
        for conn in wrapped:
            conn.outbox.send(data)
        t0 = time.perf_counter()
        for conn in wrapped:
            conn.flush()
        flushed.append(time.perf_counter() - t0)
        time.sleep(GAP_SECONDS)

    print(f"{args.connections} connections, {args.size} B, {1 / GAP_SECONDS:.0f} passes/s")
    for name, seconds in (("bare send() loop", bare), ("Connection.flush", flushed)):
        print(f"{name}: pass {fmt_ms(summary_ms(s * 1e6 for s in seconds))}")
    for sock in conns:
        sock.close()
    for r in readers:
        r.join(10)


if __name__ == "__main__":
    main()
