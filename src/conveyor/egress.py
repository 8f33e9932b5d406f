"""The operator's egress policy: which URLs a tenant may make Conveyor reach.

A tenant gives URLs through the server (an S3 endpoint, a registry, a git remote, a prober target);
Conveyor then connects to them from inside the operator's network. So every such URL is checked
here first: its host is resolved and **every** address it resolves to must be public — loopback,
link-local, private, shared (CGNAT), multicast, reserved and unspecified ranges are refused —
unless the operator allows the host (a name, an address or a CIDR range) with
``--egress-allow HOST,...`` on ``conveyor serve`` and ``conveyor worker``, or
``CONVEYOR_EGRESS_ALLOW``. Embedded use (``connect("sqlite:///...")`` in the operator's own code) is
the operator's own and is not checked: callers pass ``policy=None`` there.

>>> policy = EgressPolicy.parse("127.0.0.1,minio.internal")
>>> check_url("http://127.0.0.1:9000", policy)          # allowed explicitly
>>> check_url("http://10.0.0.5/", policy)
Traceback (most recent call last):
EgressRefused: ... 10.0.0.5 is in a private range ...

The check resolves the name when it is made; the connection resolves it again later, so a name
whose records change in between (DNS rebinding) is not caught here. Operators who need that give
addresses, or allow only the hosts tenants may use.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from conveyor.errors import ConveyorError

ENVIRONMENT_VARIABLE = "CONVEYOR_EGRESS_ALLOW"
SCHEMES = frozenset({"http", "https"})

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], list[str]]


class EgressRefused(ConveyorError):
    """A tenant's URL that the operator's egress policy does not let Conveyor reach."""

    code = 10060
    status = 403


@dataclasses.dataclass(frozen=True)
class EgressPolicy:
    """Hosts (lower-case names or addresses) and networks that pass even when not public."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, text: str | Iterable[str]) -> EgressPolicy:
        """A policy from ``"host,10.0.0.0/8,[::1]"`` (or a list of such entries); a bad entry is an
        ``InvalidRequest``-style error naming it."""
        entries = text.split(",") if isinstance(text, str) else [e for item in text for e in item.split(",")]
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower().strip("[]")
            if not entry:
                continue
            if "/" in entry:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    raise ValueError(f"egress allow-list entry {raw.strip()!r} is not a valid CIDR range") from None
            elif any(c.isspace() for c in entry) or any(c in entry for c in "@?#"):
                raise ValueError(f"egress allow-list entry {raw.strip()!r} is not a host name or address")
            else:
                hosts.add(entry)
        return cls(frozenset(hosts), tuple(networks))

    @classmethod
    def from_environment(cls, extra: Iterable[str] = ()) -> EgressPolicy:
        """The policy of ``$CONVEYOR_EGRESS_ALLOW`` plus ``extra`` entries (the command line's)."""
        return cls.parse([os.environ.get(ENVIRONMENT_VARIABLE, ""), *extra])

    def allows_host(self, host: str) -> bool:
        return host.lower() in self.hosts

    def allows_address(self, address: IPAddress) -> bool:
        return str(address) in self.hosts or any(address in network for network in self.networks)


def resolve(host: str) -> list[str]:
    """Every address ``host`` resolves to (an address resolves to itself)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise EgressRefused(f"cannot resolve host {host!r} to check it against the egress policy: {exc}") from None
    return sorted({str(info[4][0]) for info in infos})


def check_url(url: str, policy: EgressPolicy | None, *, resolver: Resolver = resolve) -> None:
    """Refuse ``url`` (:class:`EgressRefused`) unless ``policy`` lets Conveyor reach it; ``None``
    (embedded use) checks nothing. Only ``http`` and ``https`` URLs with a host are accepted."""
    if policy is None:
        return
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise EgressRefused(f"URL {_shown(url)!r}: scheme {parts.scheme!r} is not allowed; use http or https")
    host = (parts.hostname or "").lower()
    if not host:
        raise EgressRefused(f"URL {_shown(url)!r} has no host")
    if policy.allows_host(host):
        return
    for text in resolver(host):
        address = ipaddress.ip_address(text.split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        problem = _non_public(address)
        if problem is not None and not policy.allows_address(address):
            raise EgressRefused(
                f"URL {_shown(url)!r}: host {host!r} resolves to {address}, which is in a {problem} range; "
                f"the operator may allow it with --egress-allow {host} (or {ENVIRONMENT_VARIABLE})"
            )


def _non_public(address: IPAddress) -> str | None:
    """The kind of range ``address`` is in when that is not the public internet, else None."""
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "shared (carrier-grade NAT)"
    if address.is_private:
        return "private"
    if address.is_reserved or not address.is_global:
        return "reserved"
    return None


_SHARED = ipaddress.ip_network("100.64.0.0/10")


def _shown(url: str) -> str:
    """``url`` without any user name or password it carries: those are secrets."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc += f":{parts.port}"
    return parts._replace(netloc=netloc).geturl()
