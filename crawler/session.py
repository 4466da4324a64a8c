"""How the crawl reaches the web: one aiohttp session, its connector, headers, cookies, proxy.

`Client(settings)` checks what it needs up front (the cookies file, the proxy, the
proxy environment variables), raising ConfigError; `async with client:` opens the
session for one crawl, with a fresh cookie jar.

The proxy is --proxy for every request; without it, HTTP_PROXY or HTTPS_PROXY by
the URL's scheme unless NO_PROXY names the host, read once from the environment as
curl and requests do (lower-case names first). aiohttp's own `trust_env` stays off:
it would look the environment up in a thread on every request, and send passwords
from ~/.netrc to the hosts named there, which a crawler should not do unasked.

A proxy's credentials go to it as a Proxy-Authorization header (SOCKS: in its
handshake), never inside a URL that aiohttp could put into an exception's message.

The connector connects only where crawler.netguard allows: the seeds and the
proxy are the hosts the user named. Through a proxy, the proxy makes the
connections to the sites, so the guard sees only the connection to the proxy; a
URL's own host is checked before it goes there (AddressGuard.check_proxied), and
under socks5:// the name is resolved here, through the guard (crawler.socks).
"""

from __future__ import annotations

import base64
import functools
import os
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.resolver import DefaultResolver
from multidict import CIMultiDict
from yarl import URL

from crawler.config import ConfigError, Settings, proxy_problem, redact_url
from crawler.cookies import CookieJar, read_cookies_file
from crawler.fetch import ACCEPT_ENCODING, PeerRecordingResponse
from crawler.framing import BrowserFramedResponseHandler
from crawler.netguard import AddressGuard, connector_options
from crawler.urls import origin_of

DEFAULT_ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"
SOCKS_DEFAULT_PORT = 1080
# Idle keep-alive connections kept, per worker. aiohttp keeps each for 15 s however
# many there are: a crawl of 10^5 hosts ran out of file descriptors at 20,000.
IDLE_CONNECTIONS_PER_WORKER = 4
# The longest response header line read; longer is an invalid_response. aiohttp's 8 KB
# refuses pages browsers show (Chrome reads 256 KB of headers): a long Content-Security-
# Policy, Link or Set-Cookie.
MAX_HEADER_FIELD_BYTES = 65536
# aiohttp's 128 fields at most refuse pages browsers show: Chromium counts none, only the
# head's bytes, as crawler.framing does (MAX_HEAD_BYTES).
MAX_HEADER_FIELDS = 16384


class Proxy(NamedTuple):
    """How one request goes through an HTTP(S) proxy, in aiohttp's terms."""

    url: URL | None
    # Credentials go on the request itself when the proxy forwards a plain http:// one,
    # and on the CONNECT when it tunnels https://, never inside the tunnel to the site.
    headers: Mapping[str, str] | None
    connect_headers: Mapping[str, str] | None


DIRECT = Proxy(None, None, None)
Route = Callable[[str], Proxy]


def _direct(_url: str) -> Proxy:
    return DIRECT


def _proxy_for(scheme: str, proxy_url: str, label: str) -> Proxy:
    """The way through `proxy_url` for URLs of `scheme`; its credentials out of the URL."""
    problem = proxy_problem(proxy_url)
    if problem:
        raise ConfigError(f"{label} {problem}, got {redact_url(proxy_url)!r}")
    parsed = URL(proxy_url.rstrip("/"))
    bare = parsed.with_user(None)
    if parsed.user is None:
        return Proxy(bare, None, None)
    credentials = f"{parsed.user}:{parsed.password or ''}".encode()
    auth = {"Proxy-Authorization": "Basic " + base64.b64encode(credentials).decode()}
    return Proxy(bare, auth, None) if scheme == "http" else Proxy(bare, None, auth)


def _environment_variable(environ: Mapping[str, str], name: str) -> str:
    lower = name.lower()
    return environ[lower] if lower in environ else environ.get(name, "")


def _route(settings: Settings, environ: Mapping[str, str]) -> Route:
    """The proxy per URL: --proxy, or HTTP_PROXY, HTTPS_PROXY and NO_PROXY."""
    by_scheme: dict[str, Proxy] = {}
    if settings.proxy is not None:
        if _is_socks(settings.proxy):
            return _direct  # the connector goes through it
        for scheme in ("http", "https"):
            by_scheme[scheme] = _proxy_for(scheme, settings.proxy, "--proxy")
        return lambda url: by_scheme.get(url.partition(":")[0], DIRECT)
    for scheme in ("http", "https"):
        name = f"{scheme.upper()}_PROXY"
        url = _environment_variable(environ, name)
        if not url:
            continue
        label = f"{name} in the environment"
        if url.partition("://")[0].lower() not in ("http", "https"):
            raise ConfigError(f"{label}: only http:// or https:// here; give others with --proxy")
        by_scheme[scheme] = _proxy_for(scheme, url, label)
    if not by_scheme:
        return _direct
    no_proxy = {"no": _environment_variable(environ, "NO_PROXY")}
    # Undocumented, but in urllib.request since Python 2; typeshed leaves it out.
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]

    def route(url: str) -> Proxy:
        proxy = by_scheme.get(url.partition(":")[0])
        if proxy is None or (no_proxy["no"] and bypass(URL(url).raw_authority, no_proxy)):
            return DIRECT
        return proxy

    return route


def _is_socks(proxy: str | None) -> bool:
    return proxy is not None and proxy.lower().startswith("socks5")


def _proxy_urls(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    if settings.proxy is not None:
        return [settings.proxy]
    candidates = (_environment_variable(environ, f"{s.upper()}_PROXY") for s in ("http", "https"))
    return [url for url in candidates if url]


class BoundedPoolConnector(aiohttp.TCPConnector):
    """aiohttp's connector, keeping at most `max_idle` idle connections: past that, the
    one idle longest is closed (aiohttp would keep every host's for its keep-alive time)."""

    def __init__(self, *, max_idle: int, **options: Any) -> None:
        super().__init__(**options)
        handler: type[ResponseHandler] = BrowserFramedResponseHandler
        self._factory = functools.partial(handler, loop=self._loop)
        self._max_idle = max_idle
        # Each connection once, by when it was last released: the first of them that is
        # still idle is the one idle longest. One taken again since is skipped there.
        self._released: OrderedDict[ResponseHandler, Any] = OrderedDict()

    def _release(self, key: Any, protocol: ResponseHandler, *, should_close: bool = False) -> None:
        super()._release(key, protocol, should_close=should_close)
        released = self._released
        released[protocol] = key
        released.move_to_end(protocol)
        while len(released) > self._max_idle:
            old, old_key = released.popitem(last=False)
            idle = self._conns.get(old_key)
            if idle is None:
                continue
            for entry in idle:
                if entry[0] is old:
                    idle.remove(entry)
                    old.close()
                    break
            if not idle:
                del self._conns[old_key]


def make_connector(settings: Settings, guard: AddressGuard | None) -> aiohttp.TCPConnector:
    """The connector every request goes out by: direct, or through --proxy if it is SOCKS.

    `guard`: the address guard, if it is on, which the connector's resolver and
    sockets go through.
    """
    options: dict[str, Any] = {"limit": 0, "limit_per_host": 0, "ttl_dns_cache": 300}
    if settings.ignore_certificate_errors:
        options["ssl"] = False  # aiohttp's word for no verification
    proxy = settings.proxy
    if not _is_socks(proxy):
        options |= connector_options(guard, resolve=settings.resolve)
        max_idle = IDLE_CONNECTIONS_PER_WORKER * settings.concurrency
        return BoundedPoolConnector(max_idle=max_idle, **options)
    from aiohttp_socks import ProxyType

    assert proxy is not None
    parsed = URL(proxy.rstrip("/"))
    assert parsed.raw_host is not None  # proxy_problem() refused a proxy URL without one
    from crawler.socks import SocksConnector

    # socks5h: the proxy resolves host names; socks5: the crawl's guarded resolver does
    resolver = None
    if parsed.scheme.lower() != "socks5h":
        resolver = connector_options(guard, settings.resolve).get("resolver", DefaultResolver())
    return SocksConnector(
        host=parsed.raw_host,
        port=parsed.explicit_port or SOCKS_DEFAULT_PORT,
        proxy_type=ProxyType.SOCKS5,
        username=parsed.user,
        password=parsed.password,
        resolver=resolver,
        **options,
    )


class Client:
    """The crawl's HTTP client: what every request carries and which way it goes."""

    def __init__(
        self,
        settings: Settings,
        seeds: Sequence[str] = (),
        environ: Mapping[str, str] = os.environ,
        authorizations: Mapping[str, str] | None = None,
    ) -> None:
        self._settings = settings
        # Origin -> the Authorization header its seed's user:password make
        # (crawler.credentials): sent to that origin, never elsewhere.
        self._authorizations = authorizations
        self._file_cookies = (
            read_cookies_file(settings.cookies) if isinstance(settings.cookies, str) else []
        )
        self._route = _route(settings, environ)
        proxies = _proxy_urls(settings, environ)
        self._guard = None if settings.allow_private_addresses else AddressGuard([*seeds, *proxies])
        # A proxy connects for us, so a URL is checked before it goes to one.
        self._proxied_guard = self._guard if proxies else None
        self._all_proxied = _is_socks(settings.proxy)
        # Through a proxy, the peer is the proxy: the archive then names no address.
        self._response_class = (
            PeerRecordingResponse if settings.warc and not proxies else aiohttp.ClientResponse
        )
        self.cookie_jar: CookieJar | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        settings = self._settings
        self.cookie_jar = CookieJar(self._file_cookies) if settings.cookies is not False else None
        headers = CIMultiDict({"User-Agent": settings.user_agent, "Accept": DEFAULT_ACCEPT})
        for name, value in settings.header:  # config refuses User-Agent and Accept-Encoding
            headers[name] = value  # replaces, whatever the case
        headers["Accept-Encoding"] = ACCEPT_ENCODING
        self._session = aiohttp.ClientSession(
            connector=make_connector(settings, self._guard),
            headers=headers,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar() if self.cookie_jar is None else self.cookie_jar,
            trust_env=False,
            response_class=self._response_class,
            max_field_size=MAX_HEADER_FIELD_BYTES,
            max_headers=MAX_HEADER_FIELDS,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()

    def get(
        self, url: str, timeout: aiohttp.ClientTimeout, headers: Mapping[str, str] | None = None
    ) -> Any:
        """One GET of `url`, redirects not followed: `async with client.get(...) as response`.

        `headers` are this request's own (a recrawl's validators)."""
        if self._authorizations and (sent := self._authorizations.get(origin_of(url))):
            headers = {**(headers or {}), "Authorization": sent}
        proxy = self._route(url)
        assert self._session is not None, "a Client is used inside `async with`"
        # encoded=True: the request line is the canonical URL byte for byte, as a browser
        # sends it; yarl would otherwise re-escape it ("%7e" to "~", "?a=%2F" to "?a=/").
        target = URL(url, encoded=True)
        if self._proxied_guard is not None and (self._all_proxied or proxy.url is not None):
            self._proxied_guard.check_proxied(target.raw_host or "")
        return self._session.get(
            target,
            allow_redirects=False,
            timeout=timeout,
            headers={**(proxy.headers or {}), **headers} if headers else proxy.headers,
            proxy=proxy.url,
            proxy_headers=proxy.connect_headers,
        )
