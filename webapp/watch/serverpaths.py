"""Error text without the server's file paths.

A kubeconfig is a file on the server that names more files (certificates, keys, token
files), and the Kubernetes client's errors quote them: "Invalid kube-config file. Expected
key current-context in /etc/agentwatch/prod.kubeconfig", "File does not exist:
/etc/agentwatch/certs/ca.crt". Viewers may not learn where these are (docs/security.md,
"Roles"), and every cluster error a page, a stream or a JSON answer shows is a KubeError's
message, shared by everyone who watches the same thing: so the message is cleaned where the
error is made, for everyone. Maintainers see the kubeconfig's path where they manage it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

KUBECONFIG = "the agent's kubeconfig"
A_FILE = "a file on the server"

# An absolute or home-relative path standing on its own: not inside a URL
# ("https://host:6443/api"), a word ("kubeconfig/contexts") or a relative path.
_PATH = re.compile(r"(?<![\w.~/:@%-])~?/[^\s'\"(),;]*")


def without_paths(text: str, kubeconfig: str | None = None) -> str:
    """`text` (a kubeconfig's load error) with the kubeconfig's paths named as such and
    any other path standing on its own replaced: such errors quote only files."""
    for path in sorted(_parts(kubeconfig), key=len, reverse=True):
        text = text.replace(path, KUBECONFIG)
    return _PATH.sub(A_FILE, text)


def without_files(text: str, files: Iterable[str | None]) -> str:
    """`text` (a transport error, which also holds URL paths) with these files replaced."""
    for path in sorted((f for f in files if f), key=len, reverse=True):
        text = text.replace(path, A_FILE)
    return text


def _parts(kubeconfig: str | None) -> list[str]:
    """The files of a KUBECONFIG-style value (several joined by ':'), as given and as the
    client expands them."""
    found: list[str] = []
    for one in (kubeconfig or "").split(os.pathsep):
        if one:
            found += [one, os.path.expanduser(one), os.path.abspath(os.path.expanduser(one))]
    return found
