"""A crawl's cookies: aiohttp's jar, started from a Netscape cookies.txt file.

The Netscape format is what curl, wget and browser extensions export: one cookie a
line, seven tab-separated fields (domain, include-subdomains flag, path, secure flag,
expiry as a Unix time with 0 for a session cookie, name, value), `#HttpOnly_` before
the domain of an HttpOnly cookie, and `#` comments.

The jar accepts cookies from IP hosts (aiohttp's `unsafe=True`), as browsers do:
such a cookie goes back only to the same address. A crawl of http://127.0.0.1:8080
logs in as one of example.com would.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.cookies import BaseCookie, CookieError, Morsel
from pathlib import Path
from typing import Any

import aiohttp
from yarl import URL

from crawler.config import ConfigError

_HTTP_ONLY_PREFIX = "#HttpOnly_"
_FLAGS = {"TRUE": True, "FALSE": False}


@dataclass(frozen=True, slots=True)
class FileCookie:
    """One line of a cookies.txt file."""

    domain: str
    include_subdomains: bool
    path: str
    secure: bool
    expires: int  # Unix time; 0 for a session cookie
    name: str
    value: str
    http_only: bool


# 9999-12-31T23:59:59Z: a later expiry (some exporters write milliseconds, or a huge
# number for "never") is taken as this, which the Expires attribute can still say.
LAST_EXPIRY = 253402300799


def read_cookies_file(path: str) -> list[FileCookie]:
    """The unexpired cookies of a Netscape cookies.txt; ConfigError naming a bad line."""
    try:
        text = Path(path).read_text("utf-8-sig")  # a BOM, as some exporters write
    except FileNotFoundError:
        raise ConfigError(f"cookies file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"cookies file {path} is a directory") from None
    except OSError as exc:
        raise ConfigError(f"cannot read cookies file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"cookies file {path} is not UTF-8 text") from None
    now = time.time()
    cookies = []
    for number, line in enumerate(text.splitlines(), 1):
        cookie = _parse_line(line)
        if cookie is None:
            continue
        if isinstance(cookie, str):  # the value may be a secret: name the line, not its text
            raise ConfigError(f"{path}:{number}: not a Netscape cookies.txt line: {cookie}")
        if cookie.expires == 0 or cookie.expires > now:
            cookies.append(cookie)
    return cookies


def _parse_line(line: str) -> FileCookie | str | None:
    """The cookie on `line`, None for a comment or blank line, or what is wrong with it."""
    http_only = line.startswith(_HTTP_ONLY_PREFIX)
    if http_only:
        line = line[len(_HTTP_ONLY_PREFIX) :]
    elif not line.strip() or line.startswith("#"):
        return None
    fields = line.split("\t")
    if len(fields) == 6:  # some exporters drop the tab before an empty value
        fields.append("")
    if len(fields) != 7:
        return f"expected 7 tab-separated fields, found {len(fields)}"
    domain, subdomains, path, secure, expires, name, value = fields
    if subdomains.upper() not in _FLAGS or secure.upper() not in _FLAGS:
        return "the 2nd and 4th fields must be TRUE or FALSE"
    if not expires.strip().isdigit():
        return "the 5th field (expiry) must be a Unix time"
    if not domain or not name:
        return "the domain and the name must not be empty"
    try:
        Morsel[str]().set(name, value, value)
    except CookieError:
        return "the name is not a valid cookie name"
    return FileCookie(
        domain=domain.lstrip(".").lower(),
        include_subdomains=_FLAGS[subdomains.upper()],
        path=path or "/",
        secure=_FLAGS[secure.upper()],
        expires=min(int(expires), LAST_EXPIRY),
        name=name,
        value=value,
        http_only=http_only,
    )


class CookieJar(aiohttp.CookieJar):
    """aiohttp's jar, which also tells whether it changed since it was last saved."""

    def __init__(self, cookies: Sequence[FileCookie] = ()) -> None:
        super().__init__(unsafe=True)
        for cookie in cookies:
            self._add(cookie)
        self.changed = bool(cookies)

    def update_cookies(self, cookies: Any, response_url: URL = URL()) -> None:  # noqa: B008
        self.changed = True
        super().update_cookies(cookies, response_url)

    def update_cookies_from_headers(self, headers: Sequence[str], response_url: URL) -> None:
        self.changed = True
        super().update_cookies_from_headers(headers, response_url)

    def filter_cookies(self, request_url: URL = URL()) -> BaseCookie[str]:  # noqa: B008
        """The cookies for a request to `request_url`; at once, empty, when the jar holds
        none for its host or the host's parent domains.

        aiohttp matches every (domain, path) pair the URL could have a cookie under,
        and builds and copies morsels: 5-15 us a request once the jar holds any
        cookie, when most requests of a crawl go to hosts that set none. Its count
        of cookies per domain answers first (a cookie that expired still counts:
        aiohttp's own path then decides).
        """
        counts = self._domain_counts
        if counts and "" not in counts:  # "": a cookie for every host
            name = request_url.raw_host or ""
            while name not in counts:
                dot = name.find(".")
                if dot < 0:
                    return BaseCookie()
                name = name[dot + 1 :]
        return super().filter_cookies(request_url)

    def save_atomically(self, path: Path) -> None:
        """Write the jar to `path` (readable by the user only), never leaving half a file."""
        temporary = path.with_name(path.name + ".tmp")
        self.save(temporary)
        temporary.replace(path)
        self.changed = False

    def _add(self, cookie: FileCookie) -> None:
        morsel: Morsel[str] = Morsel()
        morsel.set(cookie.name, cookie.value, cookie.value)
        # Without a Domain attribute, the jar keeps a cookie for its host only.
        morsel["domain"] = cookie.domain if cookie.include_subdomains else ""
        morsel["path"] = cookie.path
        morsel["secure"] = cookie.secure
        morsel["httponly"] = cookie.http_only
        if cookie.expires:
            morsel["expires"] = email.utils.formatdate(cookie.expires, usegmt=True)
        super().update_cookies(
            [(cookie.name, morsel)], URL.build(scheme="https", host=cookie.domain)
        )
