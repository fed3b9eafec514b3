"""Where a webhook may go: http(s) URLs whose host resolves to public addresses only.

Hooks are configured by users but requested by the server, so a URL could reach what only
the server can: the cloud metadata service, a database on localhost, the pod network.
Private, loopback, link-local, multicast, reserved and unspecified addresses (IPv4 and
IPv6, and IPv4 hidden inside IPv6) are refused unless AGENTWATCH_WEBHOOK_ALLOWLIST permits
them.
The check runs when a hook is created and again before every request, and the request
then connects to exactly the address that was checked (see sender.py), so a DNS answer
that changes between the check and the connection (rebinding) cannot redirect it.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, quote, urlsplit

import idna

from ..errors import Invalid

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_URL_LENGTH = 2048
# Spaces and control characters (C0, DEL, C1): never part of a URL, and CR/LF would split
# the request line.
_UNSAFE = re.compile(r"[\x00-\x20\x7f-\x9f]")
# What stays as it is in a path or query; everything else (non-ASCII included, as UTF-8)
# is percent-encoded. "%" stays when it starts an escape, so encoding twice changes nothing.
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = _PATH_SAFE + "?"
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
# NAT64's well-known prefix carries an IPv4 address in its last 32 bits.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Refused(Exception):
    """The URL may not be requested; the message says why."""


@dataclass(frozen=True)
class Target:
    """A parsed hook URL."""

    scheme: str
    host: str  # without brackets for IPv6 literals, lower case
    port: int
    path: str  # path and query, at least "/", ASCII (percent-encoded)

    @property
    def url(self) -> str:
        """The URL as it is stored and requested: ASCII host, encoded path, no fragment."""
        return f"{self.scheme}://{self.host_header}{self.path}"

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(frozen=True)
class Allowlist:
    networks: tuple[IPNetwork, ...] = ()
    hosts: tuple[str, ...] = ()  # exact names, or ".example.com" for any name below it

    @classmethod
    def parse(cls, raw: str | list[str] | tuple[str, ...] | None) -> Allowlist:
        """From config: CIDRs, addresses and host names, comma or space separated."""
        if not raw:
            return cls()
        items = raw.replace(",", " ").split() if isinstance(raw, str) else list(raw)
        networks: list[IPNetwork] = []
        hosts: list[str] = []
        for item in items:
            try:
                networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
            except ValueError:
                name = item.strip().lower().rstrip(".")
                hosts.append("." + name[2:] if name.startswith("*.") else name)
        return cls(tuple(networks), tuple(hosts))

    def allows_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return any(host == h or (h.startswith(".") and host.endswith(h)) for h in self.hosts)

    def allows_address(self, address: IPAddress) -> bool:
        return any(address.version == n.version and address in n for n in self.networks)


def _invalid(message: str) -> Invalid:
    return Invalid(message, code="invalid_url", field="url")


def parse_url(url: str) -> Target:
    """Syntax only: http or https, a host, no credentials; the host in ASCII (IDNA) and
    the path and query percent-encoded, so that what is accepted can always be requested.
    Raises Invalid."""
    url = (url or "").strip()
    if not url:
        raise _invalid("The URL is required")
    if len(url) > MAX_URL_LENGTH:
        raise _invalid(f"The URL is longer than {MAX_URL_LENGTH} characters")
    if _UNSAFE.search(url):
        raise _invalid("The URL must not contain spaces, line breaks or other control "
                       "characters")
    try:
        parts: SplitResult = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _invalid(f"The URL is malformed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise _invalid("The URL must start with http:// or https://")
    if parts.username is not None or parts.password is not None:
        # They would travel in clear in the hook list; the secret authenticates instead.
        raise _invalid("The URL must not contain a user name or password")
    host = _ascii_host(parts.hostname or "")
    path = _encoded(parts.path or "/", _PATH_SAFE)
    if parts.query:
        path += "?" + _encoded(parts.query, _QUERY_SAFE)
    return Target(scheme, host, port or (443 if scheme == "https" else 80), path)


def _ascii_host(host: str) -> str:
    """Lower case; an internationalised name in its IDNA (punycode) form, as DNS, TLS and
    the Host header need it."""
    host = host.lower()
    if not host:
        raise _invalid("The URL has no host")
    if host.isascii():
        return host
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise _invalid(f"The URL's host {host!r} is not a valid domain name: {exc}") from None


def _encoded(text: str, safe: str) -> str:
    return quote(_STRAY_PERCENT.sub("%25", text), safe=safe)


def normalize(url: str) -> str:
    """The URL as it will be requested (see parse_url). Raises Invalid."""
    return parse_url(url).url


def refusal(address: IPAddress) -> str | None:
    """Why an address is refused (None: it is a public address)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address.teredo:
            embedded = address.teredo[1]
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            inner = refusal(embedded)
            if inner:
                return f"{inner}, {embedded} embedded"
    for attribute, label in (("is_unspecified", "unspecified"), ("is_loopback", "loopback"),
                             ("is_link_local", "link-local"), ("is_multicast", "multicast"),
                             ("is_private", "private"), ("is_reserved", "reserved")):
        if getattr(address, attribute):
            return label
    if not address.is_global:
        # Shared (carrier NAT), documentation and benchmarking ranges, and the like.
        return "not publicly routable"
    return None


def _normalized(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def _resolution_error(exc: BaseException) -> str:
    """What a failed lookup means, in words (the resolver's text without "[Errno -2]")."""
    if isinstance(exc, socket.gaierror):
        return {socket.EAI_NONAME: "no such host",
                socket.EAI_AGAIN: "the DNS server did not answer (try again later)",
                getattr(socket, "EAI_NODATA", -5): "the host has no address"}.get(
            exc.errno or 0, str(exc.strerror or "lookup failed").lower())
    if isinstance(exc, UnicodeError):
        return "the name cannot be written in DNS form"
    return str(getattr(exc, "strerror", None) or exc)


def _getaddrinfo(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def resolve(target: Target, allowlist: Allowlist) -> list[IPAddress]:
    """The addresses a request to this target may connect to, in resolver order
    (IPv4-mapped IPv6 addresses as plain IPv4).

    Addresses that are refused are dropped (we never connect to them); if none is left
    the target is refused as a whole. Raises Refused.
    """
    try:
        literal: IPAddress | None = ipaddress.ip_address(target.host)
    except ValueError:
        literal = None
    if literal is not None:
        found = [literal]
    else:
        try:
            found = [ipaddress.ip_address(a.split("%", 1)[0])
                     for a in _getaddrinfo(target.host, target.port)]
        except (OSError, UnicodeError) as exc:
            raise Refused(f"cannot resolve {target.host}: {_resolution_error(exc)}") from None
        if not found:
            raise Refused(f"{target.host} has no address")
    if literal is None and allowlist.allows_host(target.host):
        return found
    allowed: list[IPAddress] = []
    reasons: list[str] = []
    for address in found:
        plain = _normalized(address)
        why = refusal(address)
        if why is None or allowlist.allows_address(plain):
            allowed.append(plain)
        else:
            reasons.append(f"{address} ({why})")
    if not allowed:
        where = (f"{reasons[0]} is" if literal is not None
                 else f"{target.host} resolves to {', '.join(reasons)}:")
        raise Refused(f"{where} not allowed unless AGENTWATCH_WEBHOOK_ALLOWLIST permits it")
    return allowed


def check(url: str, allowlist: Allowlist) -> Target:
    """At creation: the URL parses and its host resolves to an allowed address."""
    target = parse_url(url)
    try:
        resolve(target, allowlist)
    except Refused as exc:
        raise Invalid(f"This URL is refused: {exc}", code="url_refused", field="url") from None
    return target


def display(url: str) -> str:
    """The URL with path and query hidden: they often carry a token (e.g. chat webhooks)."""
    try:
        target = parse_url(url)
    except Invalid:
        return url[:40] + "…"
    shown = f"{target.scheme}://{target.host_header}/"
    return shown + "…" if target.path != "/" else shown
