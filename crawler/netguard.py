"""Which addresses the crawler may connect to, plugged into aiohttp's connector.

Pages and redirects are written by strangers, and a crawler inside a company
network or a cloud VM must not become their way in (server-side request
forgery: a link to http://169.254.169.254/ or http://10.0.0.5/admin). The rule:

- A public address may always be connected to.
- A non-public one (loopback, private, link-local, shared/CGNAT, multicast,
  unspecified, reserved, documentation; in IPv6 as well, and IPv6 forms that
  embed such an IPv4 address: IPv4-mapped, IPv4-compatible, 6to4, NAT64) only if
  a named host leads to it: a seed given as that address, or a seed's host name
  that resolved to it the first time it was looked up in this run.
- Only that named host's own name leads there. Another name never leads to a
  non-public address, whatever it resolves to, now or later (DNS rebinding).

The check is on the address actually connected to, in the two places aiohttp
offers: `GuardedResolver` filters every DNS answer by host name, and the
connector's socket factory refuses, before connect(), any socket address that
no named host leads to (IP-literal URLs never reach a resolver). A refusal is a
`BlockedAddress`, which aiohttp hands back as a connection error.

"Named hosts" are the seeds' hosts; a proxy the user names belongs there too,
since the crawler connects to the proxy and the proxy to the target.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
from collections.abc import Iterable, Sequence
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

from crawler.urls import canonical_hostname

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# Addresses whose answer a guard remembers (the kind, or None for "may connect"):
# deciding anew took 10-70 us a connection (ipaddress's parse and its network tests).
_REMEMBERED_ADDRESSES = 4096


class BlockedAddress(OSError):
    """A connection the guard refused: `address` is not public and no named host leads to it."""

    def __init__(self, host: str, address: str, kind: str) -> None:
        super().__init__(f"{host} is at {address}, a {kind} address; not connecting")
        self.host, self.address, self.kind = host, address, kind


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, if it embeds one."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):  # not "::" or "::1"
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def non_public_kind(address: str | IPAddress) -> str | None:
    """None if `address` is public; otherwise what it is ("loopback", "private", ...)."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if ip.version == 6:
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return non_public_kind(embedded)
        if ip in _LOCAL_NAT64:
            return "private"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.version == 4 and ip in _CGNAT:
        return "shared (CGNAT)"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    return None if ip.is_global else "non-public"


@functools.lru_cache(maxsize=_REMEMBERED_ADDRESSES)
def _kind_of_text(address: str) -> str | None:
    return non_public_kind(address)


def _bare_host(url: str) -> str:
    """The host as aiohttp resolves it: no port, no IPv6 brackets."""
    return URL(url).raw_host or ""


class AddressGuard:
    """The rule above, for one crawl: which (host, address) pairs may be connected to."""

    def __init__(self, named_urls: Iterable[str]) -> None:
        self._named = {_bare_host(url) for url in named_urls}
        self._pinned: dict[str, frozenset[str]] = {}
        self._allowed: set[IPAddress] = set()
        self._decided: dict[str, str | None] = {}  # by socket address: check_socket's answer
        self._warned = False
        for host in self._named:
            try:
                self._allowed.add(ipaddress.ip_address(host))
            except ValueError:
                continue  # a name: pinned when first resolved

    def filter(self, host: str, results: list[ResolveResult]) -> list[ResolveResult]:
        """The answers for `host` it may connect to; BlockedAddress if there are none."""
        if host in self._named and host not in self._pinned:
            self._pinned[host] = frozenset(r["host"] for r in results)
            self._allowed.update(ipaddress.ip_address(r["host"]) for r in results)
            self._decided.clear()
        pinned = self._pinned.get(host, frozenset())
        kept = [r for r in results if r["host"] in pinned or _kind_of_text(r["host"]) is None]
        if not kept and results:
            address = results[0]["host"]
            self.refuse(host, address, non_public_kind(address) or "non-public")
        return kept

    def check_socket(self, address: str) -> None:
        """Raise BlockedAddress unless `address` is public or a named host's."""
        try:
            kind = self._decided[address]
        except KeyError:
            ip = ipaddress.ip_address(address)
            kind = None if ip in self._allowed else non_public_kind(ip)
            if len(self._decided) >= _REMEMBERED_ADDRESSES:
                self._decided.clear()
            self._decided[address] = kind
        if kind is not None:
            self.refuse(address, address, kind)

    def check_proxied(self, host: str) -> None:
        """Through a proxy, which resolves and connects for us: raise BlockedAddress if the
        URL's `host` is itself a non-public address no named host leads to, or a name
        under `localhost`, which RFC 6761 keeps on loopback. Other names are the proxy's
        to resolve, and it alone sees where they lead."""
        if host in self._named:
            return
        name = host.lower().rstrip(".")
        if name == "localhost" or name.endswith(".localhost"):
            self.refuse(host, "127.0.0.1", "loopback")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return
        self.check_socket(host)

    def refuse(self, host: str, address: str, kind: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "not connecting to %s (%s), a %s address no seed names; such URLs get "
                "error blocked_address (--allow-private-addresses lifts this guard)",
                host,
                address,
                kind,
            )
        raise BlockedAddress(host, address, kind)

    def socket_factory(self, addr_info: Any) -> socket.socket:
        """aiohttp's socket factory: a socket for `addr_info`, if its address may be used."""
        family, kind, proto, _, sockaddr = addr_info
        self.check_socket(sockaddr[0])
        return socket.socket(family=family, type=kind, proto=proto)


class GuardedResolver(AbstractResolver):
    """A resolver whose answers pass through an `AddressGuard`."""

    def __init__(self, inner: AbstractResolver, guard: AddressGuard) -> None:
        self._inner = inner
        self._guard = guard

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return self._guard.filter(host, await self._inner.resolve(host, port, family))

    async def close(self) -> None:
        await self._inner.close()


def parse_resolve(entry: str) -> tuple[str, int | None, str]:
    """ "HOST:PORT:ADDR" or "HOST:ADDR" -> (host, port or None, address); ValueError if bad."""
    host, _, rest = entry.partition(":")
    port_text, colon, address = rest.partition(":")
    port: int | None = None
    if colon and port_text.isdigit():
        port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError(f"port {port} out of range")
    else:
        address = rest
    address = address.removeprefix("[").removesuffix("]")
    if not host or not address:
        raise ValueError("expected HOST:PORT:ADDR or HOST:ADDR")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(f"{address!r} is not an IP address") from None
    name = canonical_hostname(host)  # as the crawl's URLs name it: an IDN in Punycode
    if name is None:
        raise ValueError(f"{host!r} is not a host name")
    return name.rstrip("."), port, address


class OverrideResolver(AbstractResolver):
    """Answers --resolve entries itself (like curl's), and asks `inner` about other names."""

    def __init__(self, entries: Sequence[str], inner: AbstractResolver) -> None:
        self._inner = inner
        self._table: dict[tuple[str, int | None], str] = {}
        for entry in entries:
            host, port, address = parse_resolve(entry)
            self._table[host, port] = address

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        name = host.lower().rstrip(".")
        address = self._table.get((name, port)) or self._table.get((name, None))
        if address is None:
            return await self._inner.resolve(host, port, family)
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        await self._inner.close()


def connector_options(guard: AddressGuard | None, resolve: Sequence[str] = ()) -> dict[str, Any]:
    """Keyword arguments for aiohttp.TCPConnector: the guard, --resolve entries, or nothing."""
    if guard is None and not resolve:
        return {}
    resolver: AbstractResolver = DefaultResolver()
    if resolve:
        resolver = OverrideResolver(resolve, resolver)
    if guard is None:
        return {"resolver": resolver}
    return {
        "resolver": GuardedResolver(resolver, guard),
        "socket_factory": guard.socket_factory,
    }
