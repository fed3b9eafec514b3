"""Kubeconfig users that get their credentials by running a command.

A kubeconfig's `exec:` plugin, and the `cmd-path` of a `gcp` auth-provider, are commands
the official client runs as soon as the kubeconfig is loaded: with the server's account,
its files and its environment. agentwatch loads kubeconfigs an admin names by path, so by
default it refuses those users (when an agent is given the kubeconfig, and again each
time its client is built, since the file may change). The operator setting
AGENTWATCH_KUBECONFIG_ALLOW_EXEC turns the refusal off.

Only the user of the context that would be used is looked at (the named context, else
the current-context), as the client itself does; several files separated by ':' merge as
the client merges them (the first entry of a name wins).
"""

from __future__ import annotations

import os
from typing import Any

import yaml

SETTING = "AGENTWATCH_KUBECONFIG_ALLOW_EXEC"


def _documents(path: str) -> list[dict[str, Any]]:
    documents = []
    for one in path.split(os.pathsep):
        if not one:
            continue
        try:
            with open(os.path.expanduser(one), encoding="utf-8") as handle:
                document = yaml.safe_load(handle)
        except Exception:  # missing or unreadable: the client's own load says why
            continue
        if isinstance(document, dict):
            documents.append(document)
    return documents


def _named(documents: list[dict[str, Any]], section: str, name: str) -> dict[str, Any]:
    for document in documents:
        for entry in document.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                body = entry.get(section[:-1])  # contexts -> context, users -> user
                return body if isinstance(body, dict) else {}
    return {}


def command_user(path: str, context: str | None) -> str | None:
    """Why loading the kubeconfig at `path` with `context` would run a command, naming the
    kubeconfig user; None when it would not (or when the file cannot be read, which the
    client reports when it loads it)."""
    documents = _documents(path)
    if not documents:
        return None
    context_name = context or documents[0].get("current-context")
    if not isinstance(context_name, str) or not context_name:
        return None
    user_name = _named(documents, "contexts", context_name).get("user")
    if not isinstance(user_name, str):
        return None
    user = _named(documents, "users", user_name)
    if user.get("exec") is not None:
        how = "an exec plugin"
    elif isinstance(user.get("auth-provider"), dict) and \
            "cmd-path" in (user["auth-provider"].get("config") or {}):
        how = "an auth-provider cmd-path"
    else:
        return None
    return (f"kubeconfig user {user_name!r} (context {context_name!r}) gets its credentials "
            f"by running a command ({how}); agentwatch runs no kubeconfig commands unless "
            f"the operator sets {SETTING}=true")
