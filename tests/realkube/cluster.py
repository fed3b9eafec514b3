"""A real control plane on loopback: etcd and kube-apiserver, started from the binaries that
``tests/realkube/build.sh`` builds, with certificates, static tokens, RBAC and the Flux CRDs.

There is no kubelet, scheduler or controller-manager: pods stay Pending until a test writes their
status through the status subresource, nothing garbage-collects, and pod logs are not served
(the simulator covers logs).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import yaml

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "simkube" / "crds"
BIN_ENV = "AGENTWATCH_REALKUBE_BIN"
CACHE_ENV = "AGENTWATCH_REALKUBE_CACHE"
START_TIMEOUT = 120.0


@dataclass(frozen=True)
class Identity:
    """One static-token user: the kubeconfig context of the same name authenticates as it."""

    name: str
    user: str
    groups: tuple[str, ...]


ADMIN = Identity("admin", "admin", ("system:masters",))
VIEWER = Identity("viewer", "viewer", ("agentwatch-viewers",))
AGENT = Identity("agent", "system:serviceaccount:agentwatch:agent",
                 ("system:serviceaccounts", "system:serviceaccounts:agentwatch"))
IDENTITIES = (ADMIN, VIEWER, AGENT)

FLUX_RESOURCES = ["kustomizations", "helmreleases", "gitrepositories"]
FLUX_GROUPS = ["kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io", "source.toolkit.fluxcd.io"]
READ = ["get", "list", "watch"]
WORKLOADS = ["deployments", "replicasets", "statefulsets", "daemonsets"]
SCALABLE = ["deployments", "replicasets", "statefulsets"]

# What the dashboard reads and does (SPEC section 2), and impersonation for `access_as: user`.
RBAC: list[dict[str, Any]] = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "agentwatch-viewer"},
     "rules": [
         {"apiGroups": [""], "resources": ["pods", "pods/log", "services", "events", "namespaces"],
          "verbs": READ},
         {"apiGroups": FLUX_GROUPS, "resources": FLUX_RESOURCES, "verbs": READ},
     ]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "agentwatch-agent"},
     "rules": [
         {"apiGroups": [""], "resources": ["pods", "pods/log", "services", "events", "namespaces"],
          "verbs": READ},
         {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
         {"apiGroups": FLUX_GROUPS, "resources": FLUX_RESOURCES, "verbs": [*READ, "patch"]},
         # Workloads: read for the relations, restart (patch), scale, trigger (create a Job).
         {"apiGroups": ["apps"], "resources": WORKLOADS, "verbs": READ},
         {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"],
          "verbs": ["patch"]},
         {"apiGroups": ["apps"], "resources": [f"{r}/scale" for r in SCALABLE],
          "verbs": ["get", "patch"]},
         {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": READ},
         {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
         {"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]},
     ]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "agentwatch-viewer"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                 "name": "agentwatch-viewer"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                   "name": VIEWER.user}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "agentwatch-agent"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                 "name": "agentwatch-agent"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                   "name": AGENT.user}]},
]


# What the tests check requests against: who asked (and as whom), which verb, which namespace,
# with which query. Only the kinds agentwatch reads and acts on; Metadata level (no bodies).
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "resources": [
            {"group": "", "resources": ["pods", "pods/status", "events"]},
            *({"group": group} for group in FLUX_GROUPS)]},
        {"level": "None"},
    ],
}


class NotBuilt(RuntimeError):
    """The binaries are not there: the message says how to build them."""


def find_binaries() -> Path:
    """The directory holding ``kube-apiserver`` and ``etcd``: $AGENTWATCH_REALKUBE_BIN, else the
    newest build in the cache that build.sh fills."""
    explicit = os.environ.get(BIN_ENV)
    candidates = [Path(explicit)] if explicit else sorted(
        Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "agentwatch-realkube")).glob(
            "k8s-*-etcd-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for directory in candidates:
        if all(os.access(directory / name, os.X_OK) for name in ("kube-apiserver", "etcd")):
            return directory
    where = f"{BIN_ENV}={explicit}" if explicit else "the build cache"
    raise NotBuilt(f"kube-apiserver and etcd not found in {where}: "
                   "run `bash tests/realkube/build.sh` (needs Go)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = IP:127.0.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default
"""


def make_certificates(directory: Path) -> None:
    """A throwaway CA, a serving certificate for 127.0.0.1/localhost signed by it, and the
    service-account signing key pair."""
    (directory / "openssl.cnf").write_text(OPENSSL_CONFIG)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=agentwatch-realkube-ca", "-config", "openssl.cnf", "-extensions", "ca",
             cwd=directory)
    _openssl("req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=kube-apiserver", "-config", "openssl.cnf", cwd=directory)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-out", "server.crt",
             "-extfile", "openssl.cnf", "-extensions", "server", cwd=directory)
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", "sa.key", cwd=directory)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)


def _die_with_parent() -> None:
    """Linux: the child is killed when the test process dies, even by SIGKILL, so no apiserver
    outlives an interrupted run (its data is throwaway: no graceful shutdown needed)."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class RealCluster:
    """etcd + kube-apiserver in ``workdir``; ``start()`` returns once both serve and the RBAC and
    CRDs are in place; ``stop()`` ends both processes."""

    def __init__(self, bin_dir: Path, workdir: Path) -> None:
        self.bin_dir = bin_dir
        self.workdir = workdir
        self.etcd_port = free_port()
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self.ca_file = workdir / "ca.crt"
        self.audit_log = workdir / "audit.log"
        self.tokens = {i.name: base64.b32encode(os.urandom(20)).decode().lower()
                       for i in IDENTITIES}
        self._procs: list[subprocess.Popen[bytes]] = []
        self.timings: dict[str, float] = {}

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> RealCluster:
        started = time.monotonic()
        make_certificates(self.workdir)
        self._write_token_file()
        (self.workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        self._start_etcd()
        self._start_apiserver()
        self._wait_ready()
        self.timings["ready"] = time.monotonic() - started
        for identity in IDENTITIES:
            self.write_kubeconfig(identity)
        self.apply(RBAC)
        self.apply_crds()
        self.timings["bootstrapped"] = time.monotonic() - started
        return self

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._procs.clear()

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("wb")
        proc = subprocess.Popen([str(self.bin_dir / name), *args], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_parent)
        log.close()
        self._procs.append(proc)
        return proc

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.workdir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() \
            else ""

    def _write_token_file(self) -> None:
        # token,user,uid,"group1,group2"
        rows = [f'{self.tokens[i.name]},{i.user},{i.name},"{",".join(i.groups)}"'
                for i in IDENTITIES]
        (self.workdir / "tokens.csv").write_text("\n".join(rows) + "\n")

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{free_port()}"
        self._spawn("etcd", [
            "--name=realkube", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=realkube={peer}",
            # Test data: losing it on a crash costs nothing, and fsync dominates write latency.
            "--unsafe-no-fsync", "--log-level=warn",
        ])
        self._wait(lambda: self._etcd_healthy(), "etcd", "etcd")

    def _start_apiserver(self) -> None:
        w = self.workdir
        self._spawn("kube-apiserver", [
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}", f"--cert-dir={w}",
            f"--tls-cert-file={w / 'server.crt'}", f"--tls-private-key-file={w / 'server.key'}",
            f"--client-ca-file={w / 'ca.crt'}",
            f"--token-auth-file={w / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={w / 'sa.pub'}",
            f"--service-account-signing-key-file={w / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            # No controller-manager creates the `default` service account that this admission
            # plugin demands of every new pod.
            "--disable-admission-plugins=ServiceAccount",
            # Only the tests compact etcd, so 410 Gone happens when a test asks for it.
            "--etcd-compaction-interval=0",
            # Nothing reconciles the `kubernetes` Service's endpoints here.
            "--endpoint-reconciler-type=none",
            # ConfigMaps and Events bypass the watch cache, so a test can see what etcd itself
            # answers for a compacted revision (the cache keeps serving its own window of
            # history): ConfigMaps for the client, Events for the relay, which watches them.
            "--watch-cache-sizes=configmaps#0,events#0",
            # Written before each request returns (the log backend blocks by default), so a
            # test reads what it just caused.
            f"--audit-policy-file={w / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}",
            "--profiling=false",
        ])

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as resp:
                return bool(json.load(resp).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _wait_ready(self) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_file))

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{self.server}/readyz", context=context,
                                            timeout=5) as resp:
                    return resp.status == 200
            except (OSError, urllib.error.HTTPError):
                return False

        self._wait(ready, "kube-apiserver /readyz", "kube-apiserver")

    def _wait(self, check: Any, what: str, log: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if check():
                return
            if any(p.poll() is not None for p in self._procs):
                break
            time.sleep(0.2)
        raise RuntimeError(f"{what} did not come up; last lines of {log}.log:\n"
                           f"{self.log_tail(log)}")

    # --- clients --------------------------------------------------------------------------

    def kubeconfig_path(self, identity: Identity | str = ADMIN) -> Path:
        name = identity if isinstance(identity, str) else identity.name
        return self.workdir / f"{name}.kubeconfig"

    def write_kubeconfig(self, identity: Identity) -> Path:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": identity.name,
            "clusters": [{"name": "realkube", "cluster": {
                "server": self.server, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": identity.name, "user": {"token": self.tokens[identity.name]}}],
            "contexts": [{"name": identity.name, "context": {
                "cluster": "realkube", "user": identity.name}}],
        }
        path = self.kubeconfig_path(identity)
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def api_client(self, identity: Identity | str = ADMIN) -> kubernetes.client.ApiClient:
        return kubernetes.config.new_client_from_config(
            config_file=str(self.kubeconfig_path(identity)))

    # --- objects --------------------------------------------------------------------------

    def apply(self, objects: Iterable[dict[str, Any]]) -> None:
        """Create each object as the admin (the cluster is new: nothing exists yet)."""
        with self.api_client(ADMIN) as api:
            dynamic = kubernetes.dynamic.DynamicClient(api)
            for obj in objects:
                resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
                namespace = obj["metadata"].get("namespace")
                resource.create(body=obj, namespace=namespace)

    def apply_crds(self) -> None:
        crds = [doc for path in sorted(CRD_DIR.glob("*.yaml"))
                for doc in yaml.safe_load_all(path.read_text()) if doc]
        self.apply(crds)
        with self.api_client(ADMIN) as api:
            ext = kubernetes.client.ApiextensionsV1Api(api)
            custom = kubernetes.client.CustomObjectsApi(api)
            for crd in crds:
                name, spec = crd["metadata"]["name"], crd["spec"]

                def served(name: str = name, spec: dict[str, Any] = spec) -> bool:
                    conditions = ext.read_custom_resource_definition(name).status.conditions or []
                    if not any(c.type == "Established" and c.status == "True"
                               for c in conditions):
                        return False
                    try:  # established is not yet served: the handler lags a little
                        custom.list_cluster_custom_object(spec["group"],
                                                          spec["versions"][0]["name"],
                                                          spec["names"]["plural"], limit=1)
                    except kubernetes.client.ApiException:
                        return False
                    return True

                self._wait(served, f"CRD {name}", "kube-apiserver")

    def audit(self) -> list[dict[str, Any]]:
        """Every audit event so far (see ``AUDIT_POLICY``), oldest first."""
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines()
                if line.strip()]

    # --- etcd -----------------------------------------------------------------------------

    def _etcd(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """etcd's v3 JSON gateway (served on the client URL)."""
        request = urllib.request.Request(f"{self.etcd_url}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            return dict(json.load(resp))

    def etcd_revision(self) -> int:
        """etcd's current revision: the newest resourceVersion the API server can have seen."""
        reply = self._etcd("/v3/kv/range", {"key": base64.b64encode(b"/").decode(),
                                            "limit": 1})
        return int(reply["header"]["revision"])

    def compact(self, revision: int | None = None) -> int:
        """Compact etcd's history up to ``revision`` (default: the current one), so reads and
        watches from an older resourceVersion get 410 Gone."""
        revision = revision or self.etcd_revision()
        self._etcd("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision


def remove_workdir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
