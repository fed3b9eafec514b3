"""Shared helpers for the benchmarks: a real `agentwatch serve` on a free loopback port in a
temporary instance folder, a small keep-alive HTTP client with cookies, login, fast data
generation straight into a migrated SQLite database, and statistics.

Only the standard library and what the project's venv already has (the `webapp` package
itself, SQLAlchemy through it) are used.
"""

from __future__ import annotations

import html
import http.client
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
BIN = Path(sys.executable).parent
AGENTWATCH = str(BIN / "agentwatch")
HOST = "127.0.0.1"

USER = "bench"
PASSWORD = "bench-password-123"

# The columns the app writes for an event, in this order everywhere below.
EVENT_COLUMNS = ("agent_id", "type", "category", "level", "happened_at", "recorded_at",
                 "user_name", "token_id", "token_name", "commit_sha", "project", "message",
                 "link", "details", "dedupe_key")


def log(*parts: Any) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *parts, flush=True)


def clean_environ() -> dict[str, str]:
    """The environment without any AGENTWATCH_* the caller's shell may carry."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENTWATCH_")}


def drop_agentwatch_env() -> None:
    """For in-process apps: configuration comes from the benchmark only."""
    for key in [k for k in os.environ if k.startswith("AGENTWATCH_")]:
        del os.environ[key]


def utcnow() -> datetime:
    """Naive UTC, as the app stores times."""
    return datetime.now(UTC).replace(tzinfo=None)


def sql_time(value: datetime) -> str:
    """The text SQLAlchemy's SQLite DateTime stores: always with microseconds."""
    return value.isoformat(" ", "microseconds")


def iso_z(value: datetime) -> str:
    return value.isoformat("T", "microseconds") + "Z"


# --- machine ------------------------------------------------------------------------------

def machine_info() -> dict[str, str]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for name in ("flask", "sqlalchemy", "gunicorn", "werkzeug"):
        try:
            from importlib.metadata import version
            versions[name] = version(name)
        except Exception:  # noqa: BLE001 - informative only
            versions[name] = "?"
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "webapp"],
                               capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        head, dirty = "?", ""
    return {
        "commit": head + ("+uncommitted webapp changes" if dirty else ""),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        **versions,
    }


def print_machine() -> dict[str, str]:
    info = machine_info()
    log("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    return info


# --- CPU accounting: is somebody else using the machine? -----------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_busy_seconds() -> float:
    """CPU seconds all processes have used (from /proc/stat), for differences."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return float("nan")
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / _TICK


def pressure_seconds(resource: str) -> float:
    """Pressure stall information: total seconds some task waited for `resource` (cpu, io)."""
    try:
        for line in Path(f"/proc/pressure/{resource}").read_text().splitlines():
            if line.startswith("some"):
                return int(line.rsplit("total=", 1)[1]) / 1e6
    except (OSError, ValueError, IndexError):
        pass
    return float("nan")


def process_tree_seconds(root: int) -> float:
    """CPU seconds used by a process and its live descendants."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        times[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    total = 0.0
    for pid, seconds in times.items():
        p = pid
        while p > 1:
            if p == root:
                total += seconds
                break
            p = parents.get(p, 0)
    return total


def own_seconds() -> float:
    """CPU seconds of this process plus its waited-for children (client processes)."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class CpuWindow:
    """CPU used during a window, in cores: the server, this benchmark (clients), and
    everything else on the machine (other people's work competes for the same 2 cores)."""

    def __init__(self, server_pid: int | None = None) -> None:
        self.server_pid = server_pid
        self.start()

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.machine0 = machine_busy_seconds()
        self.own0 = own_seconds()
        self.server0 = process_tree_seconds(self.server_pid) if self.server_pid else 0.0
        self.cpu_stall0 = pressure_seconds("cpu")
        self.io_stall0 = pressure_seconds("io")

    def stop(self) -> dict[str, float]:
        wall = time.monotonic() - self.t0
        machine = machine_busy_seconds() - self.machine0
        own = own_seconds() - self.own0
        server = (process_tree_seconds(self.server_pid) - self.server0) if self.server_pid \
            else 0.0
        return {"seconds": wall, "machine_cores": machine / wall,
                "server_cores": server / wall, "bench_cores": own / wall,
                "other_cores": max(0.0, (machine - server - own) / wall),
                # Share of the time some runnable task waited for a CPU / for I/O (PSI).
                "cpu_pressure": (pressure_seconds("cpu") - self.cpu_stall0) / wall,
                "io_pressure": (pressure_seconds("io") - self.io_stall0) / wall}


def fmt_cpu(cpu: dict[str, float]) -> str:
    return (f"CPU over {cpu['seconds']:.1f} s, in cores: machine {cpu['machine_cores']:.2f} = "
            f"server {cpu['server_cores']:.2f} + benchmark clients {cpu['bench_cores']:.2f} + "
            f"other processes {cpu['other_cores']:.2f}; CPU pressure "
            f"{cpu.get('cpu_pressure', float('nan')):.0%}, I/O pressure "
            f"{cpu.get('io_pressure', float('nan')):.0%}")


def wait_quiet(max_wait: float, threshold: float = 0.25, window: float = 3.0) -> float:
    """Wait (at most max_wait s) until the machine is nearly idle for `window` seconds;
    returns the busy cores of the last window (other people's work, since ours is idle)."""
    deadline = time.monotonic() + max_wait
    busy = float("nan")
    while True:
        before = machine_busy_seconds()
        time.sleep(window)
        busy = (machine_busy_seconds() - before) / window
        if busy <= threshold or time.monotonic() >= deadline:
            break
        log(f"machine busy ({busy:.2f} cores used by other processes); waiting to measure")
    return busy


# --- instance, CLI and server -------------------------------------------------------------

class Instance:
    """A temporary instance folder (removed on exit unless kept)."""

    def __init__(self, path: str | None = None, keep: bool = False, prefix: str = "aw-bench-"):
        self.created = path is None
        self.path = path or tempfile.mkdtemp(prefix=prefix)
        os.makedirs(self.path, exist_ok=True)
        self.keep = keep or not self.created

    @property
    def db_path(self) -> str:
        return os.path.join(self.path, "agentwatch.db")

    @property
    def db_url(self) -> str:
        return "sqlite:///" + self.db_path

    def env(self, **extra: str) -> dict[str, str]:
        env = clean_environ()
        env["AGENTWATCH_INSTANCE_PATH"] = self.path
        env["AGENTWATCH_SCHEDULER_ENABLED"] = "false"
        env.update(extra)
        return env

    def cli(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run `agentwatch ARGS` against this instance; its stdout."""
        result = subprocess.run([AGENTWATCH, *args], env=env or self.env(), capture_output=True,
                                text=True, check=False, cwd=self.path)
        if result.returncode != 0:
            raise RuntimeError(f"agentwatch {' '.join(args)} failed ({result.returncode}):\n"
                               f"{result.stdout}\n{result.stderr}")
        return result.stdout

    def create_user(self, name: str = USER, password: str = PASSWORD) -> None:
        self.cli("users", "create", name, "--role", "admin",
                 env=self.env(AGENTWATCH_PASSWORD=password))

    def cleanup(self) -> None:
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            log(f"kept instance folder {self.path}")

    def __enter__(self) -> Instance:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.cleanup()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class Server:
    """`agentwatch serve` on a free loopback port; stopped (by its own pid) on exit."""

    def __init__(self, instance: Instance, workers: int = 1, threads: int = 64,
                 env: dict[str, str] | None = None) -> None:
        self.instance = instance
        self.workers = workers
        self.threads = threads
        self.env = env or instance.env()
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = os.path.join(instance.path, "server.log")

    def start(self, timeout: float = 60) -> Server:
        self.port = free_port()
        logfile = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the server
        self.proc = subprocess.Popen(
            [AGENTWATCH, "serve", "--host", HOST, "--port", str(self.port),
             "--workers", str(self.workers), "--threads", str(self.threads)],
            env=self.env, stdout=logfile, stderr=subprocess.STDOUT, cwd=self.instance.path,
            start_new_session=True)
        logfile.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early; see {self.log_path}:\n"
                                   + Path(self.log_path).read_text()[-3000:])
            try:
                conn = http.client.HTTPConnection(HOST, self.port, timeout=2)
                conn.request("GET", "/login")
                conn.getresponse().read()
                conn.close()
                log(f"agentwatch serve ready on {HOST}:{self.port} "
                    f"(workers={self.workers}, threads={self.threads}, pid={self.proc.pid})")
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("server did not start in time")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        # The gunicorn master is our child and leads its own session: signal that group only.
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


# --- HTTP ---------------------------------------------------------------------------------

class HttpError(RuntimeError):
    pass


class Client:
    """One keep-alive connection, a cookie jar, reconnect when the server closed it."""

    def __init__(self, port: int, cookies: dict[str, str] | None = None,
                 timeout: float = 30) -> None:
        self.port = port
        self.timeout = timeout
        self.cookies: dict[str, str] = dict(cookies or {})
        self.conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)
            self.conn.connect()
            self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes, Any]:
        hdrs = dict(headers or {})
        if self.cookies:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        for attempt in (1, 2):
            conn = self._connect()
            try:
                conn.request(method, path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest, http.client.ResponseNotReady):
                # Keep-alive connection closed by the server while idle: reconnect once.
                self.close()
                if attempt == 2:
                    raise
                continue
            for raw in resp.headers.get_all("Set-Cookie") or []:
                pair = raw.split(";", 1)[0]
                if "=" in pair:
                    name, value = pair.split("=", 1)
                    self.cookies[name.strip()] = value.strip()
            if resp.will_close:
                self.close()
            return resp.status, data, resp.headers
        raise AssertionError("unreachable")

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, Any]:
        return self.request("GET", path, headers=headers)

    def post_json(self, path: str, body: bytes, token: str) -> tuple[int, bytes, Any]:
        return self.request("POST", path, body=body, headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {token}"})


_CSRF_INPUT = re.compile(r'name="csrf_token"\s+value="([^"]+)"')
_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)"')


def csrf_from(page: str) -> str:
    match = _CSRF_INPUT.search(page) or _CSRF_META.search(page)
    if not match:
        raise HttpError("no csrf token on the login page")
    return html.unescape(match.group(1))


def login(client: Client, user: str = USER, password: str = PASSWORD) -> None:
    status, body, _ = client.get("/login")
    if status != 200:
        raise HttpError(f"GET /login answered {status}")
    token = csrf_from(body.decode())
    form = urlencode({"username": user, "password": password, "csrf_token": token}).encode()
    status, body, _ = client.request("POST", "/login", body=form, headers={
        "Content-Type": "application/x-www-form-urlencoded"})
    if status != 302:
        raise HttpError(f"login failed: {status} {body[:300]!r}")


def login_test_client(client: Any, user: str = USER, password: str = PASSWORD) -> None:
    """The same login through Flask's test client (in-process measurements)."""
    resp = client.get("/login")
    token = csrf_from(resp.get_data(as_text=True))
    resp = client.post("/login", data={"username": user, "password": password,
                                       "csrf_token": token})
    if resp.status_code != 302:
        raise HttpError(f"login failed: {resp.status_code}")


_POLLER = re.compile(r'id="activity-poller"[^>]*hx-get="([^"]+)"', re.S)


def poll_url_from(fragment: str) -> str:
    """The live poller's URL (after=<latest id>&status=<key>) from a rendered feed."""
    match = _POLLER.search(fragment)
    if not match:
        raise HttpError("no activity poller in the feed fragment")
    return html.unescape(match.group(1))


# --- statistics ---------------------------------------------------------------------------

def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(1, int(-(-pct * len(sorted_values) // 100)))  # ceil
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_summary(seconds: Iterable[float]) -> dict[str, float]:
    """Milliseconds: count, mean, p50, p95, p99, max."""
    values = sorted(v * 1000 for v in seconds)
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "mean": sum(values) / len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": values[-1],
    }


def fmt_latency(summary: dict[str, float]) -> str:
    if not summary.get("count"):
        return "n=0"
    return (f"n={summary['count']:.0f} mean={summary['mean']:.2f} p50={summary['p50']:.2f} "
            f"p95={summary['p95']:.2f} p99={summary['p99']:.2f} max={summary['max']:.2f} ms")


def write_result(name: str, result: dict[str, Any], path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(result, indent=2, default=str) + "\n")
        log(f"{name}: results written to {path}")


# --- schema and data ----------------------------------------------------------------------

def migrate_db(db_path: str) -> None:
    """Create the schema exactly as the app does: its Alembic migrations."""
    from webapp import db as app_db
    from webapp import migrate

    engine = app_db.make_engine("sqlite:///" + db_path)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()


def connect(db_path: str) -> sqlite3.Connection:
    """A raw sqlite3 connection with the app's pragmas (webapp/db.py _sqlite_pragmas)."""
    conn = sqlite3.connect(db_path, isolation_level=None, timeout=30)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON",
                   "busy_timeout=30000", "cache_size=-65536", "temp_store=MEMORY"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def insert_agents(conn: sqlite3.Connection, count: int, now: datetime,
                  prefix: str = "agent", big: str | None = None) -> list[tuple[int, str]]:
    """Agents named prefix-00001…; the first one may get a special name. Not connected for
    two days (a stable status, so the poll's status key does not change under the test)."""
    names = [f"{prefix}-{i:05d}" for i in range(1, count + 1)]
    if big:
        names[0] = big
    last = sql_time(now - timedelta(days=2))
    created = sql_time(now - timedelta(days=30))
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO agents (name, kubeconfig_path, kube_context, in_cluster, created_at, "
        "last_contact_at, connection_state) VALUES (?, NULL, NULL, 0, ?, ?, 'disconnected')",
        [(n, created, last) for n in names])
    conn.execute("COMMIT")
    rows = conn.execute("SELECT id, name FROM agents ORDER BY id").fetchall()
    wanted = set(names)
    return [(i, n) for i, n in rows if n in wanted]


# Relative frequency of each type in generated activity: mostly GitOps and configuration
# commits, some failures and warnings, connection flaps, a few token and cluster actions.
TYPE_WEIGHTS = {
    "gitops_commit_received": 20, "gitops_sync_succeeded": 18, "config_commit_received": 14,
    "gitops_sync_failed": 4, "gitops_manifest_invalid": 3, "config_invalid": 3,
    "config_deprecated_feature": 5, "gitops_deprecated_api": 5,
    "agent_connected": 9, "agent_disconnected": 9, "token_first_used": 2,
    "token_created": 2, "token_revoked": 1, "cluster_action": 5,
}
PROJECTS = ["platform/infra", "payments/api", "search/indexer", "web/frontend", "data/etl"]
MESSAGES = {
    "gitops_sync_failed": "apply failed: Post \"https://10.0.0.1:6443/apis/apps/v1/namespaces/"
                          "prod/deployments\": context deadline exceeded",
    "gitops_manifest_invalid": "deployment.yaml:14: spec.template.spec.containers[0].image: "
                               "Required value",
    "config_invalid": "config.yaml line 7: unknown key 'gitops.projectz'",
    "config_deprecated_feature": "'ci_access.groups' is deprecated; use 'ci_access.projects'",
    "gitops_deprecated_api": "policy/v1beta1 PodDisruptionBudget is removed in 1.25",
    "cluster_action": "deleted pod prod/web-7d9f8c6b5-x2x9q",
}
LINKS = {
    "config_deprecated_feature": "https://docs.example.com/agent/config#ci-access",
    "gitops_deprecated_api": "https://kubernetes.io/docs/reference/using-api/deprecation-guide/",
}


@dataclass
class Segment:
    """`count` events spread uniformly over [start, end)."""
    count: int
    start: datetime
    end: datetime


@dataclass
class GeneratedData:
    agents: list[tuple[int, str]]
    big_agent: tuple[int, str] | None
    events: int
    seconds: float
    by_type: dict[str, int] = field(default_factory=dict)


def event_rows(segments: Sequence[Segment], agent_ids: Sequence[int], big_agent_id: int | None,
               big_share: float, seed: int = 7) -> Iterator[tuple[Any, ...]]:
    """Rows (EVENT_COLUMNS order) sorted by happened_at, so ids grow with time as when the
    app records live. Valid category/level per type from webapp.events.CATALOG; commit-scoped
    types carry a unique commit (and dedupe_key exactly as the app builds it)."""
    from webapp import events as catalog

    rng = random.Random(seed)
    stamps: list[float] = []
    for seg in segments:
        lo = seg.start.replace(tzinfo=UTC).timestamp()
        span = seg.end.replace(tzinfo=UTC).timestamp() - lo
        stamps.extend(lo + rng.random() * span for _ in range(seg.count))
    stamps.sort()
    total = len(stamps)
    others = [a for a in agent_ids if a != big_agent_id]
    owners: list[int] = []
    big_count = int(round(total * big_share)) if big_agent_id is not None else 0
    owners.extend([big_agent_id] * big_count if big_agent_id is not None else [])
    rest = total - big_count
    for i in range(rest):
        owners.append(others[i % len(others)])
    rng.shuffle(owners)
    type_names = list(TYPE_WEIGHTS)
    types = rng.choices(type_names, weights=[TYPE_WEIGHTS[t] for t in type_names], k=total)
    specs = {name: catalog.CATALOG[name] for name in type_names}
    epoch = datetime(1970, 1, 1)
    getrandbits = rng.getrandbits
    for stamp, owner, type_name in zip(stamps, owners, types, strict=True):
        spec = specs[type_name]
        happened = epoch + timedelta(microseconds=int(stamp * 1_000_000))
        recorded = happened + timedelta(microseconds=getrandbits(21))  # up to ~2 s later
        commit = project = message = link = user = token_name = dedupe = None
        token_id = None
        details = "null"  # what SQLAlchemy's JSON type stores for None
        if spec.commit_scoped:
            commit = f"{getrandbits(160):040x}"
            if spec.category == "gitops":
                project = PROJECTS[getrandbits(8) % len(PROJECTS)]
            dedupe = catalog.dedupe_key(type_name, commit, project)
            token_id, token_name = 1, "agent-token"
        elif spec.category in ("token", "connection"):
            token_id, token_name = 1, "agent-token"
        if type_name in ("token_created", "token_revoked", "cluster_action"):
            user = "alice"
        if type_name == "cluster_action":
            details = '{"result": "ok", "kind": "Pod", "namespace": "prod"}'
        message = MESSAGES.get(type_name)
        link = LINKS.get(type_name)
        yield (owner, type_name, spec.category, spec.level, sql_time(happened),
               sql_time(recorded), user, token_id, token_name, commit, project, message, link,
               details, dedupe)


def bulk_load_events(db_path: str, rows: Iterable[tuple[Any, ...]], chunk: int = 50_000) -> int:
    """Fast load: drop the events table's secondary indexes, insert, then recreate them with
    the very SQL the migration created them with (so the schema ends up identical)."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-262144")
    conn.execute("PRAGMA temp_store=MEMORY")
    indexes = conn.execute("SELECT name, sql FROM sqlite_master WHERE type='index' AND "
                           "tbl_name='events' AND sql IS NOT NULL").fetchall()
    for name, _ in indexes:
        conn.execute(f"DROP INDEX {name}")
    sql = (f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES "
           f"({', '.join('?' * len(EVENT_COLUMNS))})")
    total = 0
    batch: list[tuple[Any, ...]] = []
    conn.execute("BEGIN")
    for row in rows:
        batch.append(row)
        if len(batch) >= chunk:
            conn.executemany(sql, batch)
            total += len(batch)
            batch.clear()
    if batch:
        conn.executemany(sql, batch)
        total += len(batch)
    conn.execute("COMMIT")
    for _, index_sql in indexes:
        conn.execute(index_sql)
    # The hourly counts the recorder keeps beside the events (webapp/histogram.py).
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'event_counts'").fetchone():
        hour = "substr(happened_at, 1, 13) || ':00:00.000000'"
        conn.execute("DELETE FROM event_counts")
        conn.execute(f"INSERT INTO event_counts (agent_id, hour, level, count) SELECT "
                     f"agent_id, {hour}, level, count(*) FROM events GROUP BY 1, 2, 3")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return total


def generate(db_path: str, segments: Sequence[Segment], agents: int, big_share: float,
             big_name: str = "big-agent", now: datetime | None = None) -> GeneratedData:
    """Agents plus events into a migrated database (migrating it first if needed)."""
    started = time.perf_counter()
    if not os.path.exists(db_path):
        migrate_db(db_path)
    now = now or utcnow()
    conn = connect(db_path)
    agent_rows = insert_agents(conn, agents, now, big=big_name if big_share > 0 else None)
    conn.close()
    big = agent_rows[0] if big_share > 0 else None
    count = bulk_load_events(db_path, event_rows(
        segments, [a for a, _ in agent_rows], big[0] if big else None, big_share))
    elapsed = time.perf_counter() - started
    conn = sqlite3.connect(db_path)
    by_type = dict(conn.execute("SELECT type, count(*) FROM events GROUP BY type").fetchall())
    conn.close()
    return GeneratedData(agent_rows, big, count, elapsed, by_type)


def explain(db_path: str, sql: str, params: Sequence[Any]) -> list[str]:
    """EXPLAIN QUERY PLAN, one line per step, indented like the sqlite3 shell."""
    conn = sqlite3.connect(db_path)
    rows = conn.execute("EXPLAIN QUERY PLAN " + sql, tuple(params)).fetchall()
    conn.close()
    depth: dict[int, int] = {0: -1}
    lines = []
    for node, parent, _, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        lines.append("  " * depth[node] + detail)
    return lines
