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
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from crawler.config import ConfigError, Settings, proxy_problem, redact_url
from crawler.cookies import CookieJar, read_cookies_file
from crawler.fetch import ACCEPT_ENCODING

DEFAULT_ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"
SOCKS_DEFAULT_PORT = 1080


class Proxy(NamedTuple):
    """What aiohttp needs to send one request through an HTTP(S) proxy."""

    url: URL | None
    headers: Mapping[str, str] | None


DIRECT = Proxy(None, None)
Route = Callable[[str], Proxy]


def _direct(_url: str) -> Proxy:
    return DIRECT


def _parse_proxy(url: str, label: str) -> tuple[URL, Mapping[str, str] | None]:
    """The proxy's URL without credentials, and the header that carries them."""
    problem = proxy_problem(url)
    if problem:
        raise ConfigError(f"{label} {problem}, got {redact_url(url)!r}")
    parsed = URL(url.rstrip("/"))
    bare = parsed.with_user(None)
    if parsed.user is None:
        return bare, None
    auth = aiohttp.BasicAuth(parsed.user, parsed.password or "")
    return bare, {"Proxy-Authorization": auth.encode()}


def _environment_variable(environ: Mapping[str, str], name: str) -> str:
    lower = name.lower()
    return environ[lower] if lower in environ else environ.get(name, "")


def _environment_route(environ: Mapping[str, str]) -> Route:
    """The proxy per URL from HTTP_PROXY, HTTPS_PROXY and NO_PROXY."""
    by_scheme: dict[str, Proxy] = {}
    for scheme in ("http", "https"):
        name = f"{scheme.upper()}_PROXY"
        url = _environment_variable(environ, name)
        if not url:
            continue
        label = f"{name} in the environment"
        if url.partition("://")[0].lower() not in ("http", "https"):
            raise ConfigError(
                f"{label}: only an http:// or https:// proxy; give others with --proxy"
            )
        by_scheme[scheme] = Proxy(*_parse_proxy(url, label))
    if not by_scheme:
        return _direct
    no_proxy = {"no": _environment_variable(environ, "NO_PROXY")}
    bypass = urllib.request.proxy_bypass_environment

    def route(url: str) -> Proxy:
        proxy = by_scheme.get(url.partition(":")[0])
        if proxy is None or (no_proxy["no"] and bypass(URL(url).raw_authority, no_proxy)):
            return DIRECT
        return proxy

    return route


def make_connector(settings: Settings) -> aiohttp.TCPConnector:
    """The connector every request goes out by: direct, or through --proxy if it is SOCKS."""
    options: dict[str, Any] = {"limit": 0, "limit_per_host": 0, "ttl_dns_cache": 300}
    proxy = settings.proxy
    if proxy is None or not proxy.lower().startswith("socks5"):
        return aiohttp.TCPConnector(**options)
    from aiohttp_socks import ProxyConnector, ProxyType

    parsed = URL(proxy.rstrip("/"))
    return ProxyConnector(
        host=parsed.raw_host,
        port=parsed.explicit_port or SOCKS_DEFAULT_PORT,
        proxy_type=ProxyType.SOCKS5,
        username=parsed.user,
        password=parsed.password,
        rdns=parsed.scheme.lower() == "socks5h",  # socks5h: the proxy resolves host names
        **options,
    )


class Client:
    """The crawl's HTTP client: what every request carries and which way it goes."""

    def __init__(self, settings: Settings, environ: Mapping[str, str] = os.environ) -> None:
        self._settings = settings
        self._file_cookies = (
            read_cookies_file(settings.cookies) if isinstance(settings.cookies, str) else []
        )
        self._route = _direct
        if settings.proxy is None:
            self._route = _environment_route(environ)
        elif not settings.proxy.lower().startswith("socks5"):
            fixed = Proxy(*_parse_proxy(settings.proxy, "--proxy"))
            self._route = lambda _url: fixed
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
            connector=make_connector(settings),
            headers=headers,
            auto_decompress=False,
            cookie_jar=self.cookie_jar or aiohttp.DummyCookieJar(),
            trust_env=False,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._session.close()

    def get(self, url: str, timeout: aiohttp.ClientTimeout) -> Any:
        """One GET of `url`, redirects not followed: `async with client.get(...) as response`."""
        proxy = self._route(url)
        return self._session.get(
            url,
            allow_redirects=False,
            timeout=timeout,
            proxy=proxy.url,
            proxy_headers=proxy.headers,
        )
