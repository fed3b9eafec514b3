"""Configuration: defaults, then ``instance/config.py``, then ``AGENTWATCH_*`` variables."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from flask import Flask

DEFAULTS: dict[str, Any] = {
    "DISCONNECT_AFTER_SECONDS": 600,
    "RETENTION_DAYS": 7,
    # An agent call updates its token's last use at most this often: status stays
    # exact to within this many seconds while heartbeats cost no write each.
    "TOKEN_TOUCH_SECONDS": 30,
    "MAX_BATCH_EVENTS": 1000,
    "MAX_CONTENT_LENGTH": 4 * 1024 * 1024,
    # Agents' clocks drift; a little future is tolerated, more is refused.
    "CLOCK_SKEW_SECONDS": 300,
    "PAGE_SIZE": 50,
    "POLL_SECONDS": 2,
    "TIMEZONE": "UTC",
    "SCHEDULER_ENABLED": True,
    "SCHEDULER_TICK_SECONDS": 30,
    "SCHEDULER_LEASE_SECONDS": 90,
    "PRUNE_BATCH_SIZE": 5000,
    "DEMO": False,
    # One line per request on stderr (webapp/accesslog.py).
    "ACCESS_LOG": True,
    "SESSION_COOKIE_HTTPONLY": True,
    "SESSION_COOKIE_SAMESITE": "Lax",
    # How many reverse proxies in front set X-Forwarded-* (0: none, trust nothing).
    "TRUSTED_PROXIES": 0,
    # Kubeconfig users whose credentials come from a command (`exec:` plugins, auth-provider
    # `cmd-path`) are refused unless this is on: loading them runs that command here.
    "KUBECONFIG_ALLOW_EXEC": False,
    # Login throttling (webapp/throttle.py): after this many failed password checks of an
    # account, or from one client address, it is locked for LOGIN_LOCKOUT_SECONDS, twice as
    # long at each further failure, up to LOGIN_LOCKOUT_MAX_SECONDS (also how long failures
    # are remembered).
    "LOGIN_MAX_FAILURES": 5,
    "LOGIN_MAX_FAILURES_PER_ADDRESS": 20,
    "LOGIN_LOCKOUT_SECONDS": 30,
    "LOGIN_LOCKOUT_MAX_SECONDS": 900,
    # Ingestion quotas per agent token (webapp/quotas.py, docs/security.md "Ingestion
    # quotas"); 0 turns one off. Events per minute: a whole batch (MAX_BATCH_EVENTS) must
    # fit at once, and a fleet of pods costs no more than one pod (repeats are free), so a
    # real agent or a busy pipeline (a few events per commit, each step, each sync) stays far
    # below 1000 a minute; a flood of eight full batches in a second gets one through.
    # Bytes per day: a busy agent stores a few MB of events a day (a few hundred bytes
    # each); 64 MiB is ten times that and sixteen full 4 MiB bodies, and bounds what one
    # token can make the database hold over the retention to 7 x 64 MiB, where a flood
    # unlimited wrote 190 GB an hour.
    "TOKEN_EVENTS_PER_MINUTE": 1000,
    "TOKEN_BYTES_PER_DAY": 64 * 1024 * 1024,
    # Notifications (webapp/notify): the nav's unread count polls this often; agents'
    # rules of importance are cached this long per process.
    "NOTIFY_POLL_SECONDS": 5,
    "NOTIFY_RULES_CACHE_SECONDS": 10,
    # At most NOTIFY_MAX_PER_AGENT important events of one agent become notifications of
    # their own within NOTIFY_WINDOW_SECONDS; the rest of that window is one folded
    # notification ("and 97 more from prod"): a flood is one item, one line of a mail and
    # one browser notification, not a hundred. 0: no limit.
    "NOTIFY_MAX_PER_AGENT": 10,
    "NOTIFY_WINDOW_SECONDS": 600,
    # Email of important events; no SMTP_HOST: no email. SMTP_PORT 0: 25, 587 or 465 by
    # SMTP_SECURITY (none / starttls / ssl). SMTP_CA_FILE: trust a private relay's CA.
    "SMTP_HOST": "",
    "SMTP_PORT": 0,
    "SMTP_SECURITY": "starttls",
    "SMTP_USERNAME": "",
    "SMTP_PASSWORD": "",
    "SMTP_TIMEOUT": 30,
    "SMTP_CA_FILE": "",
    "MAIL_FROM": "agentwatch@localhost",
    # A user's mail waits until their oldest unmailed event is this old: a burst is one mail.
    "EMAIL_BATCH_SECONDS": 60,
    "EMAIL_MAX_EVENTS": 50,
    # Where people open agentwatch: the links in mails, and the address the agent's manifest
    # dials (the page warns while it is one a pod cannot reach).
    "BASE_URL": "http://localhost:8000",
    # The agent's image in the manifests agentwatch generates: built from this repository's
    # Dockerfile and pushed where the clusters pull from (docs/agent.md, "The image"); the
    # page warns while it names no registry.
    "AGENT_IMAGE": "",
    # Webhooks (webapp/hooks). Private, loopback and link-local targets are refused unless
    # listed here: CIDRs or host names ("*.corp.example" for a whole domain), comma or
    # space separated, e.g. "127.0.0.1/32, hooks.internal".
    "WEBHOOK_ALLOWLIST": "",
    "WEBHOOK_CONNECT_TIMEOUT_SECONDS": 5,
    "WEBHOOK_TIMEOUT_SECONDS": 10,
    # Attempts per delivery; retries wait BACKOFF, 2x, 4x … up to BACKOFF_MAX (with jitter).
    "WEBHOOK_MAX_ATTEMPTS": 8,
    "WEBHOOK_BACKOFF_SECONDS": 30,
    "WEBHOOK_BACKOFF_MAX_SECONDS": 3600,
    # A hook is disabled after this many deliveries in a row gave up.
    "WEBHOOK_DISABLE_AFTER": 5,
    # Requests in flight at once, across all hooks, and at most this many per hook.
    "WEBHOOK_CONCURRENCY": 32,
    "WEBHOOK_CONCURRENCY_PER_HOOK": 16,
    # "Send test" and "Redeliver" send from the page's request, each holding its thread up
    # to WEBHOOK_TIMEOUT_SECONDS: at most this many at once per server process.
    "WEBHOOK_MAX_SENDS_NOW": 4,
    # A claimed delivery is someone else's to retry after this long (at-least-once).
    "WEBHOOK_CLAIM_SECONDS": 60,
    # How often the sender looks for due deliveries when it has nothing to do.
    "WEBHOOK_POLL_SECONDS": 1,
    # Trust a private CA for https receivers ("" : the system's trust store).
    "WEBHOOK_CA_FILE": "",
    # Where the lease holder sends: "process" (a child process, so sending never competes
    # with requests for the interpreter lock) or "thread" (inside the server process).
    "WEBHOOK_SENDER": "process",
    # The live relay's limits per user and server process (docs/security.md, "Limits"):
    # open WebSockets, open long-lived streams (watch fallback, log follow), distinct
    # upstream watches (a page render's too).
    "MAX_SOCKETS_PER_USER": 8,
    "MAX_STREAMS_PER_USER": 8,  # a page in fallback uses up to 3, logs one each
    # A workload's log reads at most this many of its pods (the newest) at once.
    "MAX_LOG_PODS": 10,
    "MAX_WATCHES_PER_USER": 64,
    # Messages queued for one page's connection (a reader that falls this far behind is
    # cut off, 4429); a list larger than the room left is not followed live (413).
    "WATCH_QUEUE_LIMIT": 5000,
    # Rows one page's window on a list may hold (it grows as the list is scrolled).
    "WATCH_VIEW_MAX_ROWS": 5000,
    # Resource usage (docs/operate.md, "Resource usage"): metrics.k8s.io is read every
    # USAGE_POLL_SECONDS while a page shows it (one poll per agent, identity and
    # namespaces), until no page asked for USAGE_IDLE_SECONDS; at most USAGE_MAX_POLLS
    # polls per server process, USAGE_MAX_PODS pods each; a pod's panel keeps the last
    # USAGE_HISTORY_SECONDS of samples, for at most USAGE_MAX_FOLLOWED pods per poll. Each
    # read waits at most USAGE_READ_SECONDS for the cluster; a page's first answer waits at
    # most USAGE_FIRST_READ_SECONDS for a new poll's first read; the pods' specs (requests,
    # limits) are read again every USAGE_SPEC_EVERY reads when no pod is new.
    "USAGE_POLL_SECONDS": 15,
    "USAGE_IDLE_SECONDS": 45,
    "USAGE_MAX_POLLS": 32,
    # Polls one user's requests may have started (joining a running one is free), so that
    # nobody fills USAGE_MAX_POLLS for everyone (with namespaces that do not exist, say).
    "USAGE_MAX_POLLS_PER_USER": 8,
    "USAGE_MAX_PODS": 20000,
    "USAGE_HISTORY_SECONDS": 900,
    "USAGE_MAX_FOLLOWED": 200,
    "USAGE_READ_SECONDS": 30,
    "USAGE_FIRST_READ_SECONDS": 10,
    "USAGE_SPEC_EVERY": 20,
    # A shell in a container (docs/operate.md, "A shell in a container"): a session with
    # no keystroke and no output for EXEC_IDLE_SECONDS ends; a user holds at most
    # EXEC_MAX_PER_USER sessions and a server process EXEC_MAX_SESSIONS; the API server
    # (or the agent) must accept the exec within EXEC_CONNECT_SECONDS; a command is at
    # most EXEC_MAX_COMMAND_BYTES. EXEC_DIRECT_AGENTS names the agents reached with the
    # server's own kubeconfig whose clusters allow exec (comma-separated; none by default:
    # for tunneled agents, the agent's --allow-exec says so).
    "EXEC_IDLE_SECONDS": 900,
    "EXEC_MAX_PER_USER": 3,
    "EXEC_MAX_SESSIONS": 64,
    "EXEC_CONNECT_SECONDS": 30,
    "EXEC_MAX_COMMAND_BYTES": 1024,
    "EXEC_DIRECT_AGENTS": "",
    # The Agents list's cluster health (failing pods, failed Flux objects) is counted over
    # shared watches kept this long after the list last asked (watch/summaries.py).
    "SUMMARY_KEEP_SECONDS": 300,
    # The fleet home (fleet/home.py): its page refreshes every FLEET_REFRESH_SECONDS and waits
    # at most FLEET_WAIT_SECONDS for counts just started; an agent has at most
    # FLEET_MAX_LABELS labels (set by admins). FLEET_THREADS agents' clusters are read side
    # by side for one page.
    "FLEET_REFRESH_SECONDS": 15,
    "FLEET_WAIT_SECONDS": 2,
    "FLEET_MAX_LABELS": 10,
    "FLEET_THREADS": 8,
    # A cluster's version (/version) is read again after this long.
    "FLEET_VERSION_SECONDS": 600,
    # Each cluster's last known state (per identity) is written to the database at most this
    # often, so that a restart keeps it (fleet/last_known.py).
    "FLEET_SAVE_SECONDS": 60,
    # The search palette's index (search/): names, kinds, namespaces and labels per agent,
    # listed again every SEARCH_REFRESH_SECONDS while searched, dropped SEARCH_KEEP_SECONDS
    # after the last search; at most SEARCH_MAX_OBJECTS per agent and SEARCH_MAX_INDEXES
    # (agent, identity) indexes; SEARCH_MAX_RESULTS results per query, ranked among the first
    # SEARCH_MAX_CANDIDATES matches found (exact names first, then names starting with it).
    "SEARCH_REFRESH_SECONDS": 60,
    "SEARCH_KEEP_SECONDS": 600,
    "SEARCH_MAX_OBJECTS": 100000,
    "SEARCH_MAX_INDEXES": 64,
    "SEARCH_MAX_RESULTS": 30,
    "SEARCH_MAX_CANDIDATES": 5000,
    # A search waits at most this long for an agent's first listing (later ones never wait).
    "SEARCH_FIRST_WAIT_SECONDS": 1,
    # Queries are cut at SEARCH_MAX_QUERY_CHARS; SEARCH_RECENT objects opened from the palette
    # are remembered per person (in memory) and ranked first among equals.
    "SEARCH_MAX_QUERY_CHARS": 200,
    "SEARCH_RECENT": 20,
    # A kind someone may not list cluster-wide (granted some namespaces) is listed namespace
    # by namespace: at most this many such LISTs per listing of their index.
    "SEARCH_MAX_NAMESPACED_LISTS": 2000,
    # An agent's open tunnels per server process (its replicas each hold one or two).
    "MAX_TUNNELS_PER_AGENT": 8,
    # Long-lived connections (WebSockets, tunnels, streams) of all users and agents per
    # server process: each holds a thread of its own, outside the request pool.
    "MAX_LIVE_CONNECTIONS": 1000,
    # The server model (serving/worker.py; docs/security.md, "Server model"). Each worker
    # reads a request whole before a thread takes it: its head within REQUEST_HEAD_SECONDS,
    # all of it within REQUEST_SECONDS, the head at most MAX_REQUEST_HEAD_BYTES. One client
    # address may have MAX_READING_PER_ADDRESS requests and MAX_BUFFERED_BYTES_PER_ADDRESS
    # bytes being read at once. A thread's blocking write (or read) waits at most
    # SOCKET_TIMEOUT_SECONDS for a client. A worker holds at most MAX_CONNECTIONS
    # connections; at the limit its oldest idle or half-sent ones make room.
    "REQUEST_HEAD_SECONDS": 10,
    "REQUEST_SECONDS": 30,
    "MAX_REQUEST_HEAD_BYTES": 65536,
    "MAX_READING_PER_ADDRESS": 32,
    "MAX_BUFFERED_BYTES_PER_ADDRESS": 32 * 1024 * 1024,
    "SOCKET_TIMEOUT_SECONDS": 30,
    "MAX_CONNECTIONS": 4096,
    # An open WebSocket or stream re-checks its user's sign-in and access this often.
    "RECHECK_SECONDS": 5,
    # Where the other server processes (workers, replicas) reach this one's tunnel
    # endpoint (webapp/tunnel/proxy.py): loopback serves the workers of one host; a
    # replica's own address (with a fixed port) serves several hosts.
    "TUNNEL_PEER_ADDRESS": "127.0.0.1",
    "TUNNEL_PEER_PORT": 0,
    # Between replicas on several hosts the forwarding endpoint speaks TLS once a
    # certificate and key are given (PEM files); forwarding checks the other replica's
    # certificate against TUNNEL_PEER_TLS_CA and the name TUNNEL_PEER_TLS_NAME (default:
    # the address it dials). Loopback between the workers of one host stays plain.
    "TUNNEL_PEER_TLS_CERT": "",
    "TUNNEL_PEER_TLS_KEY": "",
    "TUNNEL_PEER_TLS_CA": "",
    "TUNNEL_PEER_TLS_NAME": "",
    # The forwarding endpoint holds a thread per connection: at most this many at once
    # (beyond: refused at once), and a request must arrive whole within this many
    # seconds of the connection or of the previous answer (an idle socket is closed).
    "TUNNEL_ENDPOINT_MAX_CONNECTIONS": 1024,
    "TUNNEL_ENDPOINT_REQUEST_SECONDS": 10,
    # What an agent (or a cluster reached directly) answers is bounded (docs/security.md,
    # "Answers from an agent"); the defaults are well above what a real cluster sends. A
    # whole answer: a LIST page of 500 pods with managedFields is ~1.5 MB, a big
    # cluster's discovery a few MB.
    "ANSWER_MAX_BYTES": 32 * 1024 * 1024,
    "ANSWER_SECONDS": 120,  # the API server itself ends a request after 60 s
    "ANSWER_HEAD_SECONDS": 30,  # from the request to the answer's status (tunnel)
    # One watch event or log line (the API server takes at most 3 MiB of JSON per
    # object), and how long a line may take once it started (a quiet watch is fine).
    "ANSWER_LINE_MAX_BYTES": 4 * 1024 * 1024,
    # A followed log's lines read from the cluster and not yet taken by the page (at most
    # 20,000 lines; one line always fits): a page that stops reading holds no more.
    "LOG_MAX_QUEUED_BYTES": 8 * 1024 * 1024,
    "ANSWER_LINE_SECONDS": 60,
    # One tunnel WebSocket message (a frame of the protocol, at most 64 KiB): whole
    # within this many seconds of its first byte, in at most this many WebSocket frames
    # (control frames between its fragments count: an agent never fragments).
    "TUNNEL_MESSAGE_SECONDS": 30,
    "TUNNEL_MESSAGE_MAX_FRAMES": 64,
    # Answer bytes one tunnel connection may make the server hold, received and not yet
    # read, across all its streams (each stream's window is 1 MiB): beyond, the streams
    # holding the most are reset.
    "TUNNEL_MAX_BUFFERED_BYTES": 64 * 1024 * 1024,
    # Edit and apply (docs/operate.md, "Edit and apply"): the largest manifest a person may
    # apply (the agent forwards at most 1 MiB), and how many changed fields an apply's
    # Activity event lists (the rest are counted, not listed), and how much of a changed
    # text it keeps (a file held in a ConfigMap is cut, its length said).
    "MAX_MANIFEST_BYTES": 512 * 1024,
    "MAX_APPLY_DIFF_ENTRIES": 200,
    "MAX_APPLY_DIFF_VALUE_CHARS": 1024,
    # Node care (docs/operate.md, "Node care"): a drain retries evictions a disruption
    # budget refuses every DRAIN_RETRY_SECONDS until DRAIN_TIMEOUT_SECONDS, then stops
    # and says which pods blocked (the node stays cordoned); at most DRAIN_MAX_PODS pods
    # per node and MAX_DRAINS drains at once per server process.
    "DRAIN_TIMEOUT_SECONDS": 120,
    "DRAIN_RETRY_SECONDS": 5,
    "DRAIN_MAX_PODS": 1000,
    "MAX_DRAINS": 4,
    # What changed (docs/changes.md): changes of one object within CHANGES_SETTLE_SECONDS
    # of each other fold into one (at most CHANGES_SETTLE_MAX_SECONDS in all); a value
    # longer than CHANGES_MAX_VALUE_BYTES is summarised, a change keeps at most
    # CHANGES_MAX_DIFF_ENTRIES paths and CHANGES_MAX_DIFF_BYTES of them; the recorder
    # queues at most CHANGES_QUEUE_LIMIT watch events and follows at most
    # CHANGES_MAX_OBJECTS objects per kind and agent.
    "CHANGES_SETTLE_SECONDS": 10,
    "CHANGES_SETTLE_MAX_SECONDS": 60,
    "CHANGES_MAX_VALUE_BYTES": 512,
    "CHANGES_MAX_DIFF_ENTRIES": 50,
    "CHANGES_MAX_DIFF_BYTES": 8192,
    "CHANGES_QUEUE_LIMIT": 20000,
    "CHANGES_MAX_OBJECTS": 20000,
    # A changed Deployment, StatefulSet or DaemonSet's pods are looked at (each run of the
    # `changes` job) for CHANGES_FAILURE_WINDOW_SECONDS after its change, at most
    # CHANGES_FAILURE_MAX_WORKLOADS per run and agent: a failing one ends the change's story.
    "CHANGES_FAILURE_WINDOW_SECONDS": 600,
    "CHANGES_FAILURE_MAX_WORKLOADS": 20,
    # Sign-in (docs/identity.md). LOCAL_LOGIN false: no user name and password sign-in
    # (providers only). OIDC_* of the providers are read by webapp/oidc/settings.py. A
    # session signed in through a provider is checked with it again this often (its role
    # follows the person's groups); each call to a provider waits at most
    # OIDC_TIMEOUT_SECONDS; a person with more groups than OIDC_MAX_GROUPS is refused.
    "LOCAL_LOGIN": True,
    "OIDC_RECHECK_SECONDS": 300,
    "OIDC_TIMEOUT_SECONDS": 10,
    "OIDC_MAX_GROUPS": 200,
    # Before every name `access_as: user` impersonates, user and group alike; the agent
    # must be started with the same --impersonate-prefix.
    "IMPERSONATE_PREFIX": "agentwatch:",
    # A personal API token lasts PERSONAL_TOKEN_DAYS unless its maker chose otherwise, and
    # never more than PERSONAL_TOKEN_MAX_DAYS.
    "PERSONAL_TOKEN_DAYS": 90,
    "PERSONAL_TOKEN_MAX_DAYS": 365,
    # The audit log of identity (/audit): entries are kept AUDIT_RETENTION_DAYS; the page
    # shows the newest AUDIT_PAGE_SIZE.
    "AUDIT_RETENTION_DAYS": 365,
    "AUDIT_PAGE_SIZE": 200,
}

# Environment variables read as integers; any other AGENTWATCH_* is taken as text.
_INT_KEYS = {
    "DISCONNECT_AFTER_SECONDS", "RETENTION_DAYS", "TOKEN_TOUCH_SECONDS", "MAX_BATCH_EVENTS",
    "MAX_CONTENT_LENGTH", "CLOCK_SKEW_SECONDS", "PAGE_SIZE", "POLL_SECONDS",
    "SCHEDULER_TICK_SECONDS", "SCHEDULER_LEASE_SECONDS", "PRUNE_BATCH_SIZE", "TRUSTED_PROXIES",
    "NOTIFY_POLL_SECONDS", "NOTIFY_RULES_CACHE_SECONDS", "SMTP_PORT", "SMTP_TIMEOUT",
    "EMAIL_BATCH_SECONDS", "EMAIL_MAX_EVENTS",
    "WEBHOOK_CONNECT_TIMEOUT_SECONDS", "WEBHOOK_TIMEOUT_SECONDS", "WEBHOOK_MAX_ATTEMPTS",
    "WEBHOOK_BACKOFF_SECONDS", "WEBHOOK_BACKOFF_MAX_SECONDS", "WEBHOOK_DISABLE_AFTER",
    "WEBHOOK_CONCURRENCY", "WEBHOOK_CONCURRENCY_PER_HOOK", "WEBHOOK_CLAIM_SECONDS",
    "WEBHOOK_POLL_SECONDS", "WEBHOOK_MAX_SENDS_NOW",
    "LOGIN_MAX_FAILURES", "LOGIN_MAX_FAILURES_PER_ADDRESS", "LOGIN_LOCKOUT_SECONDS",
    "LOGIN_LOCKOUT_MAX_SECONDS", "TUNNEL_PEER_PORT",
    "MAX_SOCKETS_PER_USER", "MAX_STREAMS_PER_USER", "MAX_WATCHES_PER_USER", "WATCH_QUEUE_LIMIT",
    "WATCH_VIEW_MAX_ROWS", "SUMMARY_KEEP_SECONDS",
    "FLEET_REFRESH_SECONDS", "FLEET_WAIT_SECONDS", "FLEET_MAX_LABELS", "FLEET_THREADS",
    "SEARCH_REFRESH_SECONDS", "SEARCH_KEEP_SECONDS", "SEARCH_MAX_OBJECTS", "SEARCH_MAX_INDEXES",
    "SEARCH_MAX_RESULTS", "SEARCH_MAX_CANDIDATES", "SEARCH_FIRST_WAIT_SECONDS",
    "SEARCH_MAX_QUERY_CHARS", "SEARCH_RECENT", "FLEET_VERSION_SECONDS",
    "SEARCH_MAX_NAMESPACED_LISTS", "FLEET_SAVE_SECONDS",
    "MAX_LOG_PODS",
    "EXEC_IDLE_SECONDS", "EXEC_MAX_PER_USER", "EXEC_MAX_SESSIONS", "EXEC_CONNECT_SECONDS",
    "EXEC_MAX_COMMAND_BYTES",
    "USAGE_POLL_SECONDS", "USAGE_IDLE_SECONDS", "USAGE_MAX_POLLS", "USAGE_MAX_PODS",
    "USAGE_MAX_POLLS_PER_USER",
    "USAGE_HISTORY_SECONDS", "USAGE_MAX_FOLLOWED", "USAGE_READ_SECONDS",
    "USAGE_FIRST_READ_SECONDS", "USAGE_SPEC_EVERY",
    "MAX_TUNNELS_PER_AGENT", "MAX_LIVE_CONNECTIONS", "REQUEST_HEAD_SECONDS", "REQUEST_SECONDS",
    "MAX_REQUEST_HEAD_BYTES", "MAX_READING_PER_ADDRESS", "MAX_BUFFERED_BYTES_PER_ADDRESS",
    "SOCKET_TIMEOUT_SECONDS", "MAX_CONNECTIONS",
    "TOKEN_EVENTS_PER_MINUTE", "TOKEN_BYTES_PER_DAY", "NOTIFY_MAX_PER_AGENT",
    "NOTIFY_WINDOW_SECONDS",
    "TUNNEL_ENDPOINT_MAX_CONNECTIONS", "TUNNEL_ENDPOINT_REQUEST_SECONDS",
    "ANSWER_MAX_BYTES", "ANSWER_SECONDS", "ANSWER_HEAD_SECONDS", "ANSWER_LINE_MAX_BYTES",
    "LOG_MAX_QUEUED_BYTES",
    "ANSWER_LINE_SECONDS", "TUNNEL_MESSAGE_SECONDS", "TUNNEL_MESSAGE_MAX_FRAMES",
    "TUNNEL_MAX_BUFFERED_BYTES", "MAX_MANIFEST_BYTES", "MAX_APPLY_DIFF_ENTRIES",
    "MAX_APPLY_DIFF_VALUE_CHARS",
    "OIDC_RECHECK_SECONDS", "OIDC_TIMEOUT_SECONDS", "OIDC_MAX_GROUPS",
    "PERSONAL_TOKEN_DAYS", "PERSONAL_TOKEN_MAX_DAYS",
    "AUDIT_RETENTION_DAYS", "AUDIT_PAGE_SIZE",
    "DRAIN_TIMEOUT_SECONDS", "DRAIN_RETRY_SECONDS", "DRAIN_MAX_PODS", "MAX_DRAINS",
    "CHANGES_SETTLE_SECONDS", "CHANGES_SETTLE_MAX_SECONDS", "CHANGES_MAX_VALUE_BYTES",
    "CHANGES_MAX_DIFF_ENTRIES", "CHANGES_MAX_DIFF_BYTES", "CHANGES_QUEUE_LIMIT",
    "CHANGES_MAX_OBJECTS", "CHANGES_FAILURE_WINDOW_SECONDS", "CHANGES_FAILURE_MAX_WORKLOADS",
}
# Environment variables that take one of a few words.
_CHOICE_KEYS = {"SMTP_SECURITY": ("none", "starttls", "ssl"),
                "WEBHOOK_SENDER": ("process", "thread")}
_BOOL_KEYS = {"AUTO_MIGRATE", "SCHEDULER_ENABLED", "DEMO", "SESSION_COOKIE_SECURE",
              "KUBECONFIG_ALLOW_EXEC", "ACCESS_LOG", "LOCAL_LOGIN"}


def instance_path() -> str:
    return os.path.abspath(os.environ.get("AGENTWATCH_INSTANCE_PATH", "instance"))


def load(app: Flask, test_config: dict[str, Any] | None) -> None:
    app.config.from_mapping(DEFAULTS)
    app.config["DATABASE_URL"] = "sqlite:///" + os.path.join(app.instance_path, "agentwatch.db")
    app.config.from_pyfile("config.py", silent=True)
    app.config.update(_from_environment())
    if test_config is not None:
        app.config.update(test_config)
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = _persistent_secret_key(Path(app.instance_path))


def _from_environment() -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, raw in os.environ.items():
        if not name.startswith("AGENTWATCH_") or name == "AGENTWATCH_INSTANCE_PATH":
            continue
        key = name.removeprefix("AGENTWATCH_")
        if key in _INT_KEYS:
            try:
                values[key] = int(raw)
            except ValueError as exc:
                raise SystemExit(f"{name} must be an integer, got {raw!r}") from exc
        elif key in _BOOL_KEYS:
            values[key] = raw.strip().lower() in {"1", "true", "yes", "on"}
        elif key in _CHOICE_KEYS:
            values[key] = raw.strip().lower()
            if values[key] not in _CHOICE_KEYS[key]:
                raise SystemExit(f"{name} must be one of {', '.join(_CHOICE_KEYS[key])}, "
                                 f"got {raw!r}")
        else:
            values[key] = raw
    return values


def private_folder(path: str) -> None:
    """The instance folder (database, secret key) is its owner's alone: created 0700, and
    an existing one readable by others is narrowed when we own it."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    try:
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o700)
    except OSError:
        pass  # not ours (a mounted volume): its owner decides


def _persistent_secret_key(folder: Path) -> str:
    """One key per installation, so sessions survive restarts and are shared by workers."""
    private_folder(str(folder))
    path = folder / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    key = secrets.token_hex(32)
    # O_EXCL: when two workers start together, one writes and the other reads its key.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key
