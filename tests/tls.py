"""Certificates of a private CA (openssl, as an in-house PKI makes them), and a
TLS front that terminates TLS and relays each connection to a plain port (as an ingress
before agentwatch does)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import threading
from pathlib import Path


def certificates(folder: Path, name: str = "IP:127.0.0.1") -> dict[str, Path]:
    """A CA (`ca`) and a server certificate (`cert`, `key`) it signed for `name` (its
    subjectAltName: `IP:127.0.0.1`, `DNS:receiver.test`)."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=agentwatch test CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", f"/CN={name.split(':', 1)[1]}")
    (folder / "san.ext").write_text(f"subjectAltName={name}\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    return {"ca": folder / "ca.pem", "cert": folder / "server.pem", "key": folder / "server.key"}


def server_context(certs: dict[str, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs["cert"], certs["key"])
    return context


class TlsFront:
    """https://127.0.0.1:`port` in front of http://127.0.0.1:`backend`."""

    def __init__(self, certs: dict[str, Path], backend: int) -> None:
        self.context = server_context(certs)
        self.backend = backend
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True, name="tls-front").start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            secure = self.context.wrap_socket(client, server_side=True)
            backend = socket.create_connection(("127.0.0.1", self.backend))
        except OSError:  # a client that refused our certificate, or a stop
            client.close()
            return
        back = threading.Thread(target=_pump, args=(backend, secure), daemon=True)
        back.start()
        _pump(secure, backend)
        back.join(5)
        secure.close()
        backend.close()

    def stop(self) -> None:
        self.stopped = True
        self.listener.close()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
