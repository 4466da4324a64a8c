"""Settings: defaults < config TOML < flags, validated into one frozen object.

Every setting is one `Option`; the argparse flags, the TOML keys and the
validation all come from the same table, so a key is a flag and a flag is a key.
"""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn, TypedDict

from yarl import URL

from crawler import __version__
from crawler.charset import BOMS, decode_as, guessed_encoding
from crawler.urls import canonicalize, is_host_pattern

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's, for **kwargs, is Python 3.12's


class ConfigError(Exception):
    """A setting the user gave is wrong; the message is fit to print as it is."""


STDOUT = "-"  # as -o: the JSON lines go to standard output
# A worker coroutine is made for each request that may be in flight, before the first
# request: a million took 1.6 GB and 16 s, a hundred million had the process killed.
MAX_CONCURRENCY = 100_000
DEFAULT_USER_AGENT = f"crawler/{__version__} (+https://github.com/crawler-project/crawler#readme)"


_Path = str | os.PathLike[str]
_Strings = str | Sequence[str]  # one string, or several


class SettingsOptions(TypedDict, total=False):
    """What `Settings(...)` takes for each option, as a type checker reads it: more than
    its attribute's type, which is the value checked (a `pathlib.Path` is kept as its
    string, a list as a tuple, a header table as (name, value) pairs)."""

    seeds: _Path | None
    output: _Path | None
    max_depth: int
    max_pages: int
    concurrency: int
    per_host: int
    delay: float
    max_crawl_delay: float
    max_retry_after: float
    timeout: float
    gate_timeout: float
    max_bytes: int
    max_redirects: int
    retries: int
    allow_host: _Strings
    any_host: bool
    include: _Strings
    exclude: _Strings
    max_url_length: int
    max_pages_per_host: int
    max_path_depth: int
    max_query_params: int
    drop_repeating_paths: bool
    allow_private_addresses: bool
    resolve: _Strings
    ignore_certificate_errors: bool
    expected_urls: int
    fp_rate: float
    user_agent: str
    ignore_robots: bool
    sitemaps: bool
    max_sitemaps: int
    since: _Path | None
    since_warc: _Path | None
    fetch_gone: bool
    list_gone: _Path | None
    revisit: _Path | None
    revisit_interval: float
    revisit_min_interval: float
    revisit_max_interval: float
    revisit_inc_rate: float
    revisit_dec_rate: float
    state: _Path | None
    fresh: bool
    force_resume: bool
    redis: str | None
    crawl_id: str | None
    lease_s: float
    drain_timeout: float
    stats: _Path | None
    dashboard: str | int | None
    dashboard_public: bool
    warc: _Path | None
    warc_prefix: str
    warc_max_size: int
    wacz: _Path | None
    text: bool
    extract: bool
    quiet: bool
    uvloop: bool
    header: str | Mapping[str, str] | Sequence[str | tuple[str, str]]
    cookies: bool | _Path
    proxy: str | None
    config: _Path | None


@dataclass(frozen=True)
class Settings:
    """Every setting of a crawl, validated on construction: a bad value raises ConfigError.

    The same rules and messages apply to flags, config files and `Settings(...)`.
    """

    seeds: str | None = None
    output: str | None = None
    max_depth: int = 5
    max_pages: int = 0
    concurrency: int = 16
    per_host: int = 4
    delay: float = 0.0
    max_crawl_delay: float = 30.0
    max_retry_after: float = 120.0
    timeout: float = 30.0
    gate_timeout: float = 10.0
    max_bytes: int = 10 * 1024 * 1024
    max_redirects: int = 10
    retries: int = 2
    allow_host: tuple[str, ...] = ()
    any_host: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_url_length: int = 2083
    max_pages_per_host: int = 0
    max_path_depth: int = 32
    max_query_params: int = 20
    drop_repeating_paths: bool = True
    allow_private_addresses: bool = False
    resolve: tuple[str, ...] = ()
    ignore_certificate_errors: bool = False
    expected_urls: int = 1_000_000
    fp_rate: float = 1e-6
    user_agent: str = DEFAULT_USER_AGENT
    ignore_robots: bool = False
    sitemaps: bool = False
    max_sitemaps: int = 1000
    since: str | None = None
    since_warc: str | None = None
    fetch_gone: bool = False
    list_gone: str | None = None
    revisit: str | None = None
    revisit_interval: float = 86400.0
    revisit_min_interval: float = 3600.0
    revisit_max_interval: float = 30 * 86400.0
    revisit_inc_rate: float = 0.2
    revisit_dec_rate: float = 0.2
    state: str | None = None
    fresh: bool = False
    force_resume: bool = False
    redis: str | None = None
    crawl_id: str | None = None
    lease_s: float = 30.0
    drain_timeout: float = 5.0
    stats: str | None = None
    dashboard: str | None = None
    dashboard_public: bool = False
    warc: str | None = None
    warc_prefix: str = "crawl"
    warc_max_size: int = 2**30
    wacz: str | None = None
    text: bool = False
    extract: bool = False
    quiet: bool = False
    uvloop: bool = False
    header: tuple[tuple[str, str], ...] = ()
    cookies: bool | str = True  # False: no jar; a path: a cookies.txt to start from
    proxy: str | None = field(default=None, repr=False)  # may hold a password
    config: str | None = field(default=None, compare=False)

    if TYPE_CHECKING:  # at run time, the dataclass's; it checks and converts each value

        def __init__(self, **options: Unpack[SettingsOptions]) -> None: ...

    def __new__(cls, *args: Any, **kwargs: Any) -> Settings:
        # Before the dataclass's __init__, whose TypeError would name no option.
        for key in kwargs:
            if key not in _SETTINGS_FIELDS:
                hint = _did_you_mean(key, _SETTINGS_FIELDS, "'{}'")
                raise ConfigError(f"Settings has no option '{key}'{hint}")
        settings = super().__new__(cls)
        # Settings(config=FILE) reads FILE for the options not given, as --config does for
        # the flags not given (it was kept as a name, and the file's settings ignored in
        # silence): __post_init__ needs to know which were given.
        if kwargs:  # not a copy's (copy, pickle), which sets its fields after
            object.__setattr__(settings, "_given", frozenset(kwargs))
        return settings

    def __post_init__(self) -> None:
        given: frozenset[str] = self.__dict__.pop("_given", frozenset())
        if self.config is not None:
            self._read_config(given)
        for option in OPTIONS:
            value = getattr(self, option.name)
            if value is not None or option.name not in _UNSET_BY_DEFAULT:
                checked = _validated(option.name, value, option.name, strict=True)
                object.__setattr__(self, option.name, checked)
        if self.seeds is not None:
            object.__setattr__(self, "seeds", _validated("seeds", self.seeds, "seeds", strict=True))
        if self.fresh and self.state is None:
            raise ConfigError("--fresh only makes sense with --state DIR")
        if self.redis is not None and self.crawl_id is None:
            raise ConfigError("--redis needs --crawl-id ID, the name of the shared crawl")
        if self.crawl_id is not None and self.redis is None:
            raise ConfigError("--crawl-id only makes sense with --redis URL")
        if self.redis is not None and self.state is not None:
            raise ConfigError("--redis and --state are two places for the crawl's state; pick one")
        if self.dashboard is not None and not self.dashboard_public:
            host, _ = dashboard_address(self.dashboard)
            if not is_loopback(host):
                raise ConfigError(
                    f"--dashboard {self.dashboard} is not a loopback address, and the page "
                    "shows the crawl's URLs; add --dashboard-public to serve it there"
                )
        if self.dashboard_public and self.dashboard is None:
            raise ConfigError("--dashboard-public only makes sense with --dashboard [HOST:]PORT")
        if self.since_warc is not None and self.since is None:
            raise ConfigError("--since-warc only makes sense with --since PREV")
        if self.fetch_gone and self.since is None and self.revisit is None:
            raise ConfigError("--fetch-gone only makes sense with --since PREV or --revisit DIR")
        if self.list_gone is not None and (self.since is None or self.revisit is not None):
            raise ConfigError(
                "--list-gone only makes sense with --since PREV (--revisit: use --fetch-gone)"
            )
        if self.list_gone is not None and self.redis is not None:
            raise ConfigError(
                "--list-gone needs a crawl of one process (--redis: use --fetch-gone)"
            )
        if self.since is not None and self.state is not None and _same_path(self.since, self.state):
            raise ConfigError(
                "--since and --state name the same directory; a recrawl needs a new --state DIR"
            )
        if (
            self.since is not None
            and self.output is not None
            and _same_path(self.since, self.output)
        ):
            raise ConfigError(
                "--since and --output name the same file: the recrawl would write over the "
                "crawl it reads; give it a new --output FILE"
            )
        if not self.revisit_min_interval <= self.revisit_max_interval:
            raise ConfigError("--revisit-min-interval must not be above --revisit-max-interval")
        if self.wacz is not None:
            _check_wacz(self)
        if self.per_host > self.concurrency:
            object.__setattr__(self, "per_host", self.concurrency)

    def _read_config(self, given: frozenset[str]) -> None:
        config = self.config
        if not isinstance(config, str | os.PathLike):
            raise ConfigError(f"config must be a path (str or Path), not {type(config).__name__}")
        path = os.fspath(config)
        object.__setattr__(self, "config", path)
        if given.issuperset(_SETTINGS_FIELDS):  # dataclasses.replace() gives them all
            return
        for name, value in read_config_file(path).items():
            if name not in given:
                object.__setattr__(self, name, value)

    @classmethod
    def from_toml(cls, path: _Path) -> Settings:
        """The settings of a TOML config file (its keys are the flags' long names); as
        `Settings(config=path)`, which takes other options beside, over the file's."""
        return cls(config=path)

    def redacted(self) -> Settings:
        """These settings fit to write down: no proxy or Redis password, no secret header
        values."""
        return replace(
            self,
            proxy=redact_url(self.proxy) if self.proxy else self.proxy,
            redis=redact_url(self.redis) if self.redis else self.redis,
            header=tuple(
                (name, "<redacted>" if _SECRET_HEADER.search(name) else value)
                for name, value in self.header
            ),
        )


# The settings that may be None (not given); any other is checked even when None.
_UNSET_BY_DEFAULT = frozenset(f.name for f in fields(Settings) if f.default is None)


def _check_wacz(settings: Settings) -> None:
    if not str(settings.wacz).endswith(".wacz"):
        raise ConfigError(f"--wacz {settings.wacz}: a WACZ file's name must end in .wacz")
    if settings.warc is None:
        raise ConfigError("--wacz needs --warc DIR, where the WARC files it packages are written")
    if settings.redis is not None:
        raise ConfigError(
            "--wacz packages one process's crawl; with --redis, give each process --warc "
            "and package the WARC files afterwards"
        )


@dataclass(frozen=True)
class Option:
    name: str
    kind: str  # "int", "float", "bool", "str", "path", "list", "headers", "cookies", "address"
    help: str
    check: Callable[[Any], str | None] | None = None
    short: str | None = None
    metavar: str | None = None
    group: str = ""  # a key of GROUPS: where --help lists it
    needs: tuple[str, ...] = ()  # options of which one must be set for this one to matter

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _at_least(low: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"must be >= {low:g}"


def _in_range(low: int, high: int) -> Callable[[Any], str | None]:
    return lambda v: _at_least(low)(v) or (None if v <= high else f"must be <= {high:,}")


def _matching(pattern: str, problem: str) -> Callable[[str], str | None]:
    """A check that the whole value matches `pattern`, else says `problem`."""
    compiled = re.compile(pattern, re.DOTALL)
    return lambda v: None if compiled.fullmatch(v) else problem


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


# --revisit's intervals: a page's due date is a date (past 9999 it is none, and every
# page failed with internal_error in rounds that followed each other without end).
MAX_REVISIT_INTERVAL_S = 100 * 365 * 86400


def _interval(v: float) -> str | None:
    if v > MAX_REVISIT_INTERVAL_S:
        return f"must be <= {MAX_REVISIT_INTERVAL_S:,} (100 years)"
    return _positive(v)


def _probability(v: float) -> str | None:
    return None if 0 < v < 1 else "must be between 0 and 1 (exclusive)"


def _regexes(patterns: Sequence[str]) -> str | None:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            return f"has an invalid regular expression {pattern!r}: {exc}"
    return None


def _host_patterns(patterns: Sequence[str]) -> str | None:
    for pattern in patterns:
        if not re.fullmatch(r"(\*\.)?[^\s/*?#@]+", pattern) or not is_host_pattern(pattern):
            return f"has an invalid host {pattern!r} (expected e.g. example.com or *.example.com)"
    return None


def _resolve_entries(entries: Sequence[str]) -> str | None:
    from crawler.netguard import parse_resolve

    for entry in entries:
        try:
            parse_resolve(entry)
        except ValueError as exc:
            return f"has an invalid entry {entry!r}: {exc}"
    return None


# RFC 9110 5.1 and 5.5: a field name is a token; a value has no control characters but tab.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Headers the crawler sets or manages itself, and what to use instead.
_REFUSED_HEADERS = {
    "user-agent": "use --user-agent, which robots.txt rules are matched against",
    "accept-encoding": "the crawler asks only for the encodings it can decode",
    "host": "it comes from each URL",
    "cookie": "use --cookies FILE: its cookies go only to their own domains",
    "proxy-authorization": "give the credentials in the --proxy URL",
    "connection": "the crawler manages its connections",
    "content-length": "the crawler sends GET requests without a body",
    "transfer-encoding": "the crawler sends GET requests without a body",
}
_SECRET_HEADER = re.compile(r"auth|token|key|secret|cookie|session|pass", re.IGNORECASE)
PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def _headers(headers: Sequence[tuple[str, str]]) -> str | None:
    for name, value in headers:
        if not _TOKEN.fullmatch(name):
            return f"has an invalid header name {name!r}"
        if _BAD_VALUE_CHARS.search(value):
            return f"has a control character (CR, LF, ...) in the value of {name!r}"
        if reason := _REFUSED_HEADERS.get(name.lower()):
            return f"cannot set {name}: {reason}"
    return None


def _user_agent_problem(value: str) -> str | None:
    if not value.strip():
        return "must not be empty"
    if _BAD_VALUE_CHARS.search(value):  # it is a header value too
        return "has a control character (CR, LF, ...)"
    return None


def mistyped_field(
    values: Mapping[str, Any],
    types: Mapping[str, type | tuple[type, ...]],
    never_null: Collection[str] = (),
) -> str | None:
    """A field of `types` whose value in `values` (a record, a stats file) is not of its
    type, a bool being no number, or is null though in `never_null`; None if each is as
    a crawl writes it. The walk is over `values`' fields, not `types`': a record holds
    half of them, and a recrawl's index checks each of a previous crawl's records."""
    for name in never_null:
        if values.get(name) is None:
            return name
    for name, value in values.items():
        kind = types.get(name)
        if kind is None or value is None:
            continue
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            return name
    return None


def _same_path(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def redact_url(url: str) -> str:
    """`url` with its password, if any, replaced by ****."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.partition(':')[0]}:****@{host}"


def dashboard_address(value: str) -> tuple[str, int]:
    """--dashboard's [HOST:]PORT as (host, port); HOST is 127.0.0.1 if left out, and an
    IPv6 address is written in brackets, as in a URL ([::1]:8080)."""
    host, colon, port = value.rpartition(":")
    if not colon:
        host = "127.0.0.1"
    host = host.removeprefix("[").removesuffix("]") if host.startswith("[") else host
    if not port.isdigit() or int(port) > 65535 or not host or (":" in host and "[" not in value):
        raise ValueError(value)
    return host, int(port)


def _dashboard_problem(value: str) -> str | None:
    try:
        dashboard_address(value)
    except ValueError:
        return "must be [HOST:]PORT, PORT from 0 (any free one) to 65535"
    return None


def _redis_problem(value: str) -> str | None:
    if not re.fullmatch(r"(rediss?|unix)://.*", value, re.DOTALL):
        return "must be a redis:// URL"
    # redis-py takes a path that is not a number for database 0, not for a mistake
    database = value.partition("://")[2].partition("?")[0].partition("/")[2].strip("/")
    if not value.startswith("unix") and database and not database.isdigit():
        return "must name its database by number (redis://HOST:PORT/0)"
    import redis  # only when --redis is given

    # redis-py checks a URL's port and query options only as it makes a connection, and
    # passes an option it does not know on to it: a TypeError, a traceback mid-start
    try:
        redis.Redis.from_url(value).connection_pool.make_connection()
    except (ValueError, redis.RedisError) as exc:
        return f"is not a URL redis-py takes ({exc})"
    except TypeError:
        return "has a query option redis-py does not know"
    return None


def is_loopback(host: str) -> bool:
    """Is `host` (a name or an address) this machine's loopback, for sure?"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name other than localhost: it may resolve to anything
        return False


def proxy_problem(url: str) -> str | None:
    """What is wrong with a proxy URL, or None."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in PROXY_SCHEMES:
        return "must be a URL starting with http://, https://, socks5:// or socks5h://"
    host_port = rest.rpartition("@")[2].rstrip("/")
    if not host_port or "/" in host_port or "?" in host_port or "#" in host_port:
        return "must be scheme://[user:password@]host[:port], with no path"
    try:
        URL(url)
    except ValueError as exc:  # a port that is no number or out of range, a broken [IPv6]
        return f"has an invalid host or port ({exc})"
    return None


# --help's sections, in order: key -> (title, what its options are for).
GROUPS: dict[str, tuple[str, str]] = {
    "scope": ("what to crawl", "which links are followed, from the seeds"),
    "politeness": ("politeness", "how hard one host is asked, and robots.txt"),
    "limits": ("limits and traps", "where a crawl, a URL or a response is cut short"),
    "output": (
        "output",
        "records, statistics, WARC archives, the dashboard, and what stderr shows",
    ),
    "state": (
        "state and Redis",
        "where the crawl lives, so it survives a crash or is shared, and its visited set",
    ),
    "network": ("network", "headers, cookies, proxy, the address guard, the event loop"),
    "recrawl": (
        "recrawling",
        "a crawl that asks only what changed since a previous one, or keeps a site fresh",
    ),
}

OPTIONS: tuple[Option, ...] = (
    Option(
        "output",
        "path",
        "write JSON lines here instead of stdout",
        short="-o",
        metavar="FILE",
        group="output",
    ),
    Option(
        "max_depth",
        "int",
        "fetch pages up to this many links from a seed (seeds are 0)",
        _at_least(0),
        metavar="N",
        group="scope",
    ),
    Option(
        "max_pages",
        "int",
        "stop after this many records; 0 means no limit",
        _at_least(0),
        metavar="N",
        group="limits",
    ),
    Option(
        "concurrency",
        "int",
        "requests in flight at once, over all hosts",
        _in_range(1, MAX_CONCURRENCY),
        metavar="N",
        group="politeness",
    ),
    Option(
        "per_host",
        "int",
        "requests in flight at once to one host",
        _at_least(1),
        metavar="N",
        group="politeness",
    ),
    Option(
        "delay",
        "float",
        "minimum seconds between the starts of two requests to one host",
        _at_least(0),
        metavar="S",
        group="politeness",
    ),
    Option(
        "max_crawl_delay",
        "float",
        "cap on a robots.txt Crawl-delay, in seconds",
        _at_least(0),
        metavar="S",
        group="politeness",
    ),
    Option(
        "max_retry_after",
        "float",
        "longest Retry-After or backoff to wait for, in seconds; past it the URL fails",
        _at_least(0),
        metavar="S",
        group="politeness",
    ),
    Option(
        "timeout",
        "float",
        "total seconds allowed for one HTTP request",
        _positive,
        metavar="S",
        group="limits",
    ),
    Option(
        "gate_timeout",
        "float",
        "seconds the crawl may sit idle waiting for a slow shallower page before deeper "
        "pages go ahead (their depths may then come from longer paths); 0 waits forever",
        _at_least(0),
        metavar="S",
        group="limits",
    ),
    Option(
        "max_bytes",
        "int",
        "read at most this many body bytes; longer bodies are truncated",
        _at_least(1),
        metavar="N",
        group="limits",
    ),
    Option(
        "max_redirects",
        "int",
        "redirect hops to follow per URL",
        _at_least(0),
        metavar="N",
        group="limits",
    ),
    Option(
        "retries",
        "int",
        "retries after a connection error, timeout, 429, 500, 502, 503 or 504",
        _at_least(0),
        metavar="N",
        group="limits",
    ),
    Option(
        "allow_host",
        "list",
        "also crawl this host; *.example.com matches subdomains (repeatable)",
        _host_patterns,
        metavar="HOST",
        group="scope",
    ),
    Option("any_host", "bool", "crawl every host, not only the seeds' hosts", group="scope"),
    Option(
        "include",
        "list",
        "only follow URLs matching this regex (repeatable)",
        _regexes,
        metavar="REGEX",
        group="scope",
    ),
    Option(
        "exclude",
        "list",
        "never follow URLs matching this regex (repeatable)",
        _regexes,
        metavar="REGEX",
        group="scope",
    ),
    Option(
        "max_url_length",
        "int",
        "drop links longer than this many characters (a trap, counted as url_too_long)",
        _at_least(16),
        metavar="N",
        group="limits",
    ),
    Option(
        "max_pages_per_host",
        "int",
        "at most this many records per host; its further URLs are dropped; 0 means no limit",
        _at_least(0),
        metavar="N",
        group="limits",
    ),
    Option(
        "max_path_depth",
        "int",
        "drop links whose path has more segments than this (a trap); 0 means no limit",
        _at_least(0),
        metavar="N",
        group="limits",
    ),
    Option(
        "max_query_params",
        "int",
        "drop links with more query parameters than this (a trap); 0 means no limit",
        _at_least(0),
        metavar="N",
        group="limits",
    ),
    Option(
        "drop_repeating_paths",
        "bool",
        "drop links whose path repeats a run of segments 3 times in a row (/a/b/a/b/a/b)",
        group="limits",
    ),
    Option(
        "allow_private_addresses",
        "bool",
        "connect to loopback, private and other non-public addresses the seeds do not name",
        group="network",
    ),
    Option(
        "resolve",
        "list",
        "connect to ADDR for HOST (on PORT only, if given), like curl's (repeatable)",
        _resolve_entries,
        metavar="HOST[:PORT]:ADDR",
        group="network",
    ),
    Option(
        "ignore_certificate_errors",
        "bool",
        "accept any TLS certificate (self-signed, expired, another host's), as curl's "
        "--insecure and Chromium's flag of this name do",
        group="network",
    ),
    Option(
        "expected_urls",
        "int",
        "URLs the visited set is sized for before it grows",
        _at_least(1),
        metavar="N",
        group="state",
    ),
    Option(
        "fp_rate",
        "float",
        "target false-positive rate of the visited set",
        _probability,
        metavar="P",
        group="state",
    ),
    Option(
        "user_agent",
        "str",
        "User-Agent header, also matched against robots.txt",
        _user_agent_problem,
        metavar="UA",
        group="politeness",
    ),
    Option("ignore_robots", "bool", "do not fetch or obey robots.txt", group="politeness"),
    Option("sitemaps", "bool", "also crawl the URLs in the seeds' hosts' sitemaps", group="scope"),
    Option(
        "max_sitemaps",
        "int",
        "fetch at most this many sitemap files (with --sitemaps)",
        _at_least(0),
        metavar="N",
        group="limits",
        needs=("sitemaps",),
    ),
    Option(
        "since",
        "path",
        "recrawl from a previous crawl (its JSONL output, or its --state DIR): conditional "
        "requests, a 'changed' field, revisit records for what it archived",
        metavar="PREV",
        group="recrawl",
    ),
    Option(
        "since_warc",
        "path",
        "the previous crawl's --warc DIR, if not the same as this crawl's --warc",
        metavar="DIR",
        group="recrawl",
    ),
    Option(
        "fetch_gone",
        "bool",
        "with --since or --revisit: at the end, also fetch the previous crawl's (or round's) "
        "pages no link reaches now, to tell a 404 or 410 from a page merely unlinked",
        group="recrawl",
    ),
    Option(
        "list_gone",
        "path",
        "with --since: at the end, write the previous crawl's page URLs no link reaches now, "
        "one a line, to FILE (not written if links were left unfollowed)",
        metavar="FILE",
        group="recrawl",
    ),
    Option(
        "revisit",
        "path",
        "keep the site fresh: crawl in rounds without end, each page again when due; "
        "round N writes DIR/round-N.jsonl and recrawls from round N-1 (no -o, no --state; "
        "with --redis, the processes share the rounds, each with its own DIR)",
        metavar="DIR",
        group="recrawl",
    ),
    Option(
        "revisit_interval",
        "float",
        "with --revisit: seconds until a page first seen is due again",
        _interval,
        metavar="S",
        group="recrawl",
        needs=("revisit",),
    ),
    Option(
        "revisit_min_interval",
        "float",
        "with --revisit: the shortest a page's interval may shrink to, in seconds",
        _interval,
        metavar="S",
        group="recrawl",
        needs=("revisit",),
    ),
    Option(
        "revisit_max_interval",
        "float",
        "with --revisit: the longest a page's interval may grow to, in seconds",
        _interval,
        metavar="S",
        group="recrawl",
        needs=("revisit",),
    ),
    Option(
        "revisit_inc_rate",
        "float",
        "with --revisit: a page found unchanged waits this fraction longer next time "
        "(1: twice as long)",
        _positive,
        metavar="R",
        group="recrawl",
        needs=("revisit",),
    ),
    Option(
        "revisit_dec_rate",
        "float",
        "with --revisit: a page found changed waits this fraction less next time",
        _probability,
        metavar="R",
        group="recrawl",
        needs=("revisit",),
    ),
    Option(
        "state",
        "path",
        "keep crawl state here; rerunning with the same DIR resumes",
        metavar="DIR",
        group="state",
    ),
    Option("fresh", "bool", "discard the state in --state DIR and start over", group="state"),
    Option(
        "force_resume",
        "bool",
        "resume even if the crawl's settings changed",
        group="state",
        needs=("state", "revisit"),
    ),
    Option(
        "redis",
        "str",
        "share the crawl with other processes through this Redis (redis://HOST:PORT/DB)",
        _redis_problem,
        metavar="URL",
        group="state",
    ),
    Option(
        "crawl_id",
        "str",
        "name of the shared crawl in Redis; processes with the same one crawl together",
        _matching(r"[A-Za-z0-9._-]{1,64}", "must be 1-64 letters, digits, '.', '_' or '-'"),
        metavar="ID",
        group="state",
    ),
    Option(
        "lease_s",
        "float",
        "a process silent this long is presumed dead and its URLs go to the others",
        _at_least(0.5),
        metavar="S",
        group="state",
        needs=("redis",),
    ),
    Option(
        "drain_timeout",
        "float",
        "seconds in-flight requests get to finish after Ctrl-C",
        _at_least(0),
        metavar="S",
        group="limits",
    ),
    Option(
        "stats",
        "path",
        "write JSON stats here every 10 s and at the end",
        # A file named "-" is not what a user who wrote it meant (stdout holds -o's lines).
        lambda v: (
            "must name a file, not - (the stats are rewritten every 10 s)" if v == STDOUT else None
        ),
        metavar="FILE",
        group="output",
    ),
    Option(
        "dashboard",
        "address",
        "serve a live dashboard and Prometheus /metrics on this [HOST:]PORT "
        "(HOST 127.0.0.1 if left out)",
        _dashboard_problem,
        metavar="[HOST:]PORT",
        group="output",
    ),
    Option(
        "dashboard_public",
        "bool",
        "let --dashboard bind an address other than loopback (the page shows the crawl's URLs)",
        group="output",
    ),
    Option(
        "warc",
        "path",
        "archive every HTTP exchange in WARC/1.1 files in this directory",
        metavar="DIR",
        group="output",
    ),
    Option(
        "warc_prefix",
        "str",
        "WARC file names are PREFIX-TIMESTAMP-SERIAL.warc.gz (--redis adds each process's id)",
        _matching(r"[\w.-]+", "must be letters, digits, . _ or -"),
        metavar="PREFIX",
        group="output",
        needs=("warc",),
    ),
    Option(
        "warc_max_size",
        "int",
        "start a new WARC file before one grows past this many bytes",
        _at_least(1024),
        metavar="BYTES",
        group="output",
        needs=("warc",),
    ),
    Option(
        "text",
        "bool",
        "add each HTML page's visible text and language to its record",
        group="output",
    ),
    Option(
        "extract",
        "bool",
        "add each HTML page's main content (main_text, markdown), metadata, simhash and "
        "near_duplicate_of to its record",
        group="output",
    ),
    Option("quiet", "bool", "no progress display or summary on stderr", group="output"),
    Option(
        "uvloop",
        "bool",
        "run on uvloop's event loop instead of asyncio's, if uvloop is installed "
        "(pip install uvloop)",
        group="network",
    ),
    Option(
        "wacz",
        "path",
        "also package the crawl as a WACZ file (with --warc DIR), made when the crawl ends",
        metavar="FILE",
        group="output",
    ),
    Option(
        "header",
        "headers",
        "send this header on every request (repeatable; a [header] table in TOML)",
        _headers,
        metavar="'NAME: VALUE'",
        group="network",
    ),
    Option(
        "cookies",
        "cookies",
        "start the crawl's cookie jar from the cookies in this Netscape cookies.txt",
        metavar="FILE",
        group="network",
    ),
    Option(
        "proxy",
        "str",
        "send every request through this http://, https://, socks5:// or socks5h:// proxy "
        "(default: HTTP_PROXY, HTTPS_PROXY and NO_PROXY)",
        proxy_problem,
        metavar="URL",
        group="network",
    ),
)

_BY_NAME = {option.name: option for option in OPTIONS}
_TOML_ONLY = {"seeds"}  # the positional argument, also settable in the config file
_SETTINGS_FIELDS = [f.name for f in fields(Settings)]


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are ConfigErrors: one line, exit 2, no usage dump.

    A flag is taken only as spelled in full: were `--max-dep` read as --max-depth, a flag
    added later (`--max-depth-bytes`) would silently change what a saved command means."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_abbrev=False, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)

    def parse_all(self, argv: Sequence[str] | None) -> argparse.Namespace:
        """The arguments, or a ConfigError that names the flag a mistyped one likely meant."""
        namespace, unknown = self.parse_known_args(argv)
        if unknown:
            raise ConfigError(f"unrecognized arguments: {' '.join(unknown)}{self._meant(unknown)}")
        return namespace

    def _meant(self, unknown: Sequence[str]) -> str:
        """' (did you mean --max-depth?)' for a mistyped --max-dpeth among `unknown`, as a
        config file's mistyped key is told its name; else ''."""
        flags = [flag for action in self._actions for flag in action.option_strings]
        mistyped = [argument.partition("=")[0] for argument in unknown if argument.startswith("--")]
        return _did_you_mean(mistyped[0], flags, "{}") if mistyped else ""


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="crawler",
        usage="%(prog)s [options] [SEEDS]",  # the sections below list the options
        description="Crawl from the seed URLs in a file; print one JSON record per page.",
        epilog="crawler report PAGES.jsonl [--stats FILE] [-o FILE] makes an HTML report of "
        "a crawl's records (crawler report --help).",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "seeds", nargs="?", metavar="SEEDS", help="file with one URL per line, or - for stdin"
    )
    parser.add_argument(
        "--config", metavar="FILE", help="TOML file whose keys are these flags' long names"
    )
    parser.add_argument("--version", action="version", version=f"crawler {__version__}")
    sections = {key: parser.add_argument_group(*text) for key, text in GROUPS.items()}
    defaults = Settings()
    for option in OPTIONS:
        section = sections[option.group]
        names = [option.flag] + ([option.short] if option.short else [])
        default = getattr(defaults, option.name)
        help_text = (
            option.help
            if option.kind in ("bool", "list", "headers") or default in (None, "")
            else f"{option.help} (default {default})"
        )
        if option.kind == "bool":
            section.add_argument(
                *names,
                dest=option.name,
                action=argparse.BooleanOptionalAction,
                help=f"{option.help} (default {'on' if default else 'off'})",
            )
        elif option.kind in ("list", "headers"):
            section.add_argument(
                *names, dest=option.name, action="append", metavar=option.metavar, help=help_text
            )
        elif option.kind == "cookies":
            section.add_argument(*names, dest=option.name, metavar=option.metavar, help=option.help)
            section.add_argument(
                "--no-" + option.flag[2:],
                dest=option.name,
                action="store_false",
                help="keep no cookies (default: one cookie jar per crawl)",
            )
        else:
            section.add_argument(*names, dest=option.name, metavar=option.metavar, help=help_text)
    return parser


def _convert(kind: str, raw: Any, strict: bool) -> Any:
    """Turn a flag string or a TOML value into the setting's type, or say what is wrong."""
    if kind in ("path", "cookies") and isinstance(raw, os.PathLike):
        raw = os.fspath(raw)  # a pathlib.Path, as an API user writes one
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        raise ValueError("must be true or false")
    if kind == "list":
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise ValueError("must be a string or a list of strings")
        return tuple(items)
    if kind == "headers":
        return _header_pairs(raw)
    if kind == "cookies":
        if isinstance(raw, bool) or (isinstance(raw, str) and raw):
            return raw
        raise ValueError("must be true, false or the path of a cookies.txt file")
    if kind == "address" and isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)  # a port, as a config file writes one: dashboard = 8080
    if kind in ("str", "path", "address"):
        if not isinstance(raw, str):
            raise ValueError("must be a string")
        if kind == "path" and not raw:
            raise ValueError("must not be empty")
        return raw
    if kind == "int":
        if isinstance(raw, bool) or (strict and not isinstance(raw, int)):
            raise ValueError("must be an integer")
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"must be an integer, got {raw!r}") from None
    if kind == "float":
        if isinstance(raw, bool) or (strict and not isinstance(raw, int | float)):
            raise ValueError("must be a number")
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"must be a number, got {raw!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"must be a finite number, got {raw!r}")
        return value
    raise AssertionError(kind)


def _header_pairs(raw: Any) -> tuple[tuple[str, str], ...]:
    """Headers from a TOML table or a dict, 'Name: value' flags, or (name, value) pairs."""
    if isinstance(raw, dict):
        raw = list(raw.items())
    elif isinstance(raw, str):  # one 'Name: value', as a list option takes one string
        raw = [raw]
    if not isinstance(raw, list | tuple):
        raise ValueError("must be a table of header names and values")
    pairs = []
    for item in raw:
        if isinstance(item, str):
            name, colon, value = item.partition(":")
            if not colon:
                raise ValueError(f"must be 'Name: value', got {item.partition(' ')[0]!r}")
        elif (
            isinstance(item, tuple | list)
            and len(item) == 2
            and all(isinstance(part, str) for part in item)
        ):
            name, value = item
        else:
            raise ValueError('must be a table of strings, like Accept-Language = "en"')
        pairs.append((name.strip(), value.strip()))
    return tuple(pairs)


def _validated(name: str, raw: Any, label: str, strict: bool) -> Any:
    """Check one value, named `label` in a message; `strict`: no strings for numbers."""
    option = _BY_NAME.get(name) or Option(name, "path", "")
    try:
        value = _convert(option.kind, raw, strict)
    except ValueError as exc:
        raise ConfigError(f"{label} {exc}") from None
    problem = option.check(value) if option.check else None
    if problem and option.kind == "headers":  # a header's value may be a secret
        raise ConfigError(f"{label} {problem}")
    if problem:
        shown = list(value) if isinstance(value, tuple) else value
        if isinstance(shown, str):
            shown = redact_url(shown)
        raise ConfigError(f"{label} {problem}, got {shown!r}")
    return value


def _headers_over(
    table: tuple[tuple[str, str], ...], flags: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    """The config file's [header] table with the --header flags over it: a flag wins for
    its header's name, and the table's other headers stay (a --header Accept-Language
    dropped a token the file held)."""
    given = {name.lower() for name, _ in flags}
    return tuple(pair for pair in table if pair[0].lower() not in given) + flags


def read_config_file(path: str) -> dict[str, Any]:
    import tomllib  # only with --config

    try:
        with open(path, "rb") as f:
            data = tomllib.loads(_config_text(f.read()))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}: line {line} is not UTF-8, which TOML files are (save it as UTF-8)"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    values = {}
    for key, raw in data.items():
        if key not in _BY_NAME and key not in _TOML_ONLY and isinstance(raw, dict):
            raise ConfigError(  # [crawler], as in a pyproject.toml
                f"{path}: unknown table [{key}]; the keys go at the top level, with no table"
            )
        if key not in _BY_NAME and key not in _TOML_ONLY:
            hint = _did_you_mean(key.replace("-", "_"), [*_BY_NAME, *_TOML_ONLY], "'{}'")
            raise ConfigError(f"{path}: unknown key '{key}'{hint}")
        values[key] = _validated(key, raw, f"{path}: key '{key}'", strict=True)
    return values


def _config_text(data: bytes) -> str:
    """A config file's text. A byte order mark, as Windows editors write one (Notepad's
    "Unicode" is UTF-16), is no TOML but means no harm; nor is UTF-16 without one."""
    text = _unicode_text(data)
    return data.decode("utf-8") if text is None else text


def load_settings(argv: Sequence[str] | None = None) -> Settings:
    """Defaults, then the --config file, then the flags; raise ConfigError on bad input."""
    args = vars(build_parser().parse_all(argv))
    config_path = args.pop("config", None)
    values: dict[str, Any] = read_config_file(config_path) if config_path else {}
    for name, raw in args.items():
        if name != "seeds":
            raw = _validated(name, raw, _BY_NAME[name].flag, strict=False)
        if name == "header" and name in values:
            raw = _headers_over(values[name], raw)
        values[name] = raw
    settings = Settings(config=config_path, **values)
    if settings.seeds is None:
        raise ConfigError("no seeds file given (usage: crawler SEEDS [options])")
    _check_needed(settings, args)
    if settings.revisit is not None:
        return _revisit_settings(settings)
    if settings.state is not None and settings.output in (None, STDOUT):
        raise ConfigError("--state needs -o FILE: stdout cannot be reconciled after a crash")
    return settings if settings.output else replace(settings, output=STDOUT)


def _check_needed(settings: Settings, flags: Collection[str]) -> None:
    """A flag given that does nothing without an option not set (--warc-prefix without
    --warc: no archive at all, in silence) is refused. A config file's key is not: a file
    may hold the settings of crawls with and without it."""
    for name in flags:
        needs = _BY_NAME[name].needs if name in _BY_NAME else ()
        if needs and not any(getattr(settings, parent) for parent in needs):
            wanted = " or ".join(
                " ".join(filter(None, (_BY_NAME[parent].flag, _BY_NAME[parent].metavar)))
                for parent in needs
            )
            raise ConfigError(f"{_BY_NAME[name].flag} only makes sense with {wanted}")


def _did_you_mean(name: str, known: Sequence[str], spelled: str) -> str:
    """' (did you mean X?)', X the name of `known` closest to the mistyped `name`, as
    `spelled` writes it; '' if none is close."""
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {spelled.format(close[0])}?)" if close else ""


# --revisit with --redis: round N is the shared crawl "ID.rNNNNN" (crawler/state/redis_rounds.py)
_ROUND_SUFFIX_LENGTH = 7


def _revisit_settings(settings: Settings) -> Settings:
    """--revisit DIR: each round's output and state are in DIR (the state in Redis
    with --redis)."""
    for name, given in (("-o", settings.output), ("--state", settings.state)):
        if given is not None:
            raise ConfigError(
                f"--revisit DIR keeps each round's output and state; leave out {name}"
            )
    longest = 64 - _ROUND_SUFFIX_LENGTH
    if settings.crawl_id is not None and len(settings.crawl_id) > longest:
        raise ConfigError(
            f"--crawl-id must be at most {longest} characters with --revisit "
            "(each round's shared crawl adds its number)"
        )
    return settings


def make_directory(path: str, flag: str) -> Path:
    """The directory an option names, made if need be; ConfigError if it cannot be."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"cannot use {flag} {directory}: it is a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot use {flag} {directory}: {exc.strerror}") from None
    return directory


def print_error(message: str) -> None:
    print_stderr(f"crawler: error: {message}")


def print_stderr(text: str) -> None:
    """`text` on stderr, if it can be written there; if not, see silence."""
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        silence(sys.stderr)


def silence(stream: IO[str]) -> None:
    """`stream` cannot be written: its reader went away (`2>&1 | head`), or its disk is
    full (`2>>crawl.log`). What is still written to it, and Python's flush at exit, go to
    /dev/null, so that the command goes on and ends with its own exit code, not with a
    traceback (exit 1) that could not be shown either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)


def read_seeds(path: str, max_url_length: int) -> list[str]:
    """Canonical seed URLs from a file (or stdin for "-"); bad lines, and URLs longer than
    `max_url_length` (as a link would be dropped), are skipped with a warning."""
    name = "stdin" if path == "-" else path
    try:
        data = sys.stdin.buffer.read() if path == "-" else _read_file(path)
    except OSError as exc:
        raise ConfigError(f"cannot read seeds file {path}: {exc.strerror}") from None
    if data.startswith(_GZIP_MAGIC):
        raise ConfigError(f"seeds file {name} is gzip-compressed; give it uncompressed")
    if b"\0" in data and _unicode_text(data) is None:  # each line of it was warned of
        raise ConfigError(f"seeds file {name} is not text (it holds NUL bytes)")
    seeds = []
    told_encoding = False
    lines = list(_seed_lines(data))
    for number, (text, guessed) in enumerate(lines, 1):
        if text is None:
            _warn(f"{name}:{number}: skipped, not UTF-8 text")
            continue
        line = text.strip()
        if not line or line.startswith("#"):
            continue
        if guessed is not None and not told_encoding:
            told_encoding = True
            _warn(
                f"{name}:{number}: not UTF-8; read as {guessed}, as its bytes suggest "
                "(save the file as UTF-8 to be sure)"
            )
        url = canonicalize(line)
        if url is None and (meant := meant_url(line)) is not None:
            _warn(
                f"{name}:{number}: skipped, {redact_url(line[:200])!r} has no scheme; "
                f"did you mean {redact_url(meant)}?"
            )
        elif url is None:
            _warn(
                f"{name}:{number}: skipped, not an absolute http(s) URL: {redact_url(line[:200])!r}"
            )
        elif len(url) > max_url_length:
            _warn(f"{name}:{number}: skipped, {seed_too_long(url, max_url_length)}")
        else:
            if _INNER_WHITESPACE.search(line):  # `URL  # the home page` meant as a comment
                _warn(
                    f"{name}:{number}: {redact_url(line[:200])!r} has whitespace in it, read "
                    f"as {redact_url(url)} "
                    "(as a browser reads it; a comment needs a line of its own)"
                )
            seeds.append(url)
    if not seeds:
        if not any(text is None or text.strip() for text, _ in lines):
            raise ConfigError(f"seeds file {name} is empty")
        raise ConfigError(f"seeds file {name} has no valid http(s) URL")
    return seeds


def _seed_lines(data: bytes) -> Iterator[tuple[str | None, str | None]]:
    """A seeds file's lines as text (None for a line that is none), each with the encoding
    it was guessed to be in, if it was not UTF-8. A byte order mark says the encoding of
    the whole file (PowerShell's `>` writes UTF-16). Other lines that are not UTF-8 are
    read in the legacy encoding their bytes suggest, as browsers read a page that says
    none: a file saved by Notepad on a Chinese Windows is in GBK."""
    unicode = _unicode_text(data)
    if unicode is not None:
        for line in _LINE_BREAK.split(unicode):
            yield line, None
        return
    legacy: str | None = None
    for raw in data.splitlines():
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            legacy = legacy or guessed_encoding(data)
            if legacy == "utf-8":  # a stray line in a UTF-8 file
                yield None, None
            else:
                yield decode_as(raw, legacy), legacy
        else:
            yield text, None


def _unicode_text(data: bytes) -> str | None:
    """A seeds file's text if a byte order mark says its encoding, or if it is UTF-16
    without one (as some tools write it): ASCII text in UTF-16 has a NUL in every other
    byte, after each character in little-endian, before it in big-endian, and a URL is
    ASCII or mostly so (a comment in Chinese has fewer, and a few on the other side:
    一 is U+4E00). None for a file in an ASCII-compatible encoding, or a binary one,
    whose NULs fall on both sides."""
    for bom, encoding in BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, "replace")
    sample = data[:4096]
    even_nuls, odd_nuls = sample[0::2].count(0), sample[1::2].count(0)
    quarter = len(sample) // 8  # a quarter of one side's bytes
    if odd_nuls > quarter and even_nuls * 8 < odd_nuls:
        return data.decode("utf-16-le", "replace")
    if even_nuls > quarter and odd_nuls * 8 < even_nuls:
        return data.decode("utf-16-be", "replace")
    return None


_GZIP_MAGIC = b"\x1f\x8b"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as bytes.splitlines breaks lines
_INNER_WHITESPACE = re.compile(r"\s")  # in a line stripped of it at both ends


def seed_too_long(url: str, max_url_length: int) -> str:
    shown = redact_url(url[:200])
    return f"{len(url):,} characters, past --max-url-length {max_url_length:,}: {shown!r}"


def meant_url(text: str) -> str | None:
    """The URL likely meant by `text` if it lacks a scheme (example.com: https://example.com/).

    Only ever suggested: whether a host serves http or https cannot be told from its name.
    """
    from crawler.urls import canonicalize

    if "://" in text or _OTHER_SCHEME.match(text):
        return None
    return canonicalize(f"https://{text}")


# `mailto:a@b`, `tel:+1...`, `javascript:...` have a scheme, one that is not http(s);
# `example.com:8080/` has a port.
_OTHER_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(?![0-9])")


def _read_file(path: str) -> bytes:
    if not os.path.exists(path):
        raise ConfigError(f"seeds file not found: {redact_url(path)}")
    if os.path.isdir(path):
        raise ConfigError(f"seeds file {path} is a directory")
    with open(path, "rb") as f:
        return f.read()


def _warn(message: str) -> None:
    logging.getLogger("crawler").warning(message)
