"""Politeness: robots.txt, and the per-host slots that decide what is fetched next.

`Robots` fetches robots.txt once per scheme://host:port (RFC 9309, parsed by
protego) and answers whether a URL may be fetched.

`HostScheduler` hands requests to workers. Each host has its own FIFO (in the
frontier), a cap on requests in flight, and a time before which its next
request may not start: `--delay`, raised by robots.txt Crawl-delay, doubled by
429/503 answers and by Retry-After, counted from the start of its last request
and from the end of each. Hosts that have work sit in a heap ordered
by that time, so a worker always takes from a host that is ready now and never
waits on a throttled host while another one has work.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import random
import re
import sys
import time
import zlib
from collections import OrderedDict, deque
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import unquote_to_bytes

from protego import Protego

from crawler.charset import decode_as, guessed_encoding
from crawler.errors import ErrorKind
from crawler.fetch import Fetcher, Hop
from crawler.frontier import ROBOTS, Frontier, Request
from crawler.sinks import Archive
from crawler.urls import host_of, origin_of

log = logging.getLogger(__name__)

ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309 asks parsers to read at least 500 KiB
ROBOTS_MAX_REDIRECTS = 5
_REDIRECTS_ENDED = frozenset({ErrorKind.TOO_MANY_REDIRECTS, ErrorKind.INVALID_REDIRECT})
UNREACHABLE_HOLD_S = 60.0  # how long an unreachable robots.txt keeps its host disallowed
# Connections to a host that failed in a row (refused, no address, the connect timed
# out, hung up unanswered) before its queued URLs fail without a request, for
# UNREACHABLE_HOLD_S, as Nutch's fetcher.max.exceptions.per.queue does: 50 links to a
# dead host cost 31 s of retries. A page slow to answer is no sign of a dead host.
UNREACHABLE_AFTER = 3
# RFC 9309 2.4: a cached robots.txt SHOULD NOT be used for more than 24 hours; a
# crawl that runs longer (--revisit never ends) fetches it again.
ROBOTS_MAX_AGE_S = 24 * 3600.0
BACKOFF_BASE_S = 0.5
# A request reaches the server a little after it starts, by a varying amount; without
# this margin the server could see two starts a hair closer than the delay.
DELAY_MARGIN_S = 0.01
HOST_FAILURES_LOGGED = 10  # lines of each kind about failing hosts; then one that says so


class HostFailureLog:
    """The log lines about failing hosts, the first HOST_FAILURES_LOGGED of each kind.

    A broad crawl meets thousands of dead hosts: a line or three each buried
    everything else on stderr. Each of their URLs still gets its record with its
    `error`, which the summary and the stats file count; past the limit, one line
    says that the rest go unlogged.
    """

    def __init__(self) -> None:
        self._lines: dict[str, int] = {}

    def log(self, kind: str, level: int, message: str, *args: object) -> None:
        """Log `message` % `args` unless HOST_FAILURES_LOGGED lines of `kind` were."""
        lines = self._lines.get(kind, 0) + 1
        self._lines[kind] = lines
        if lines <= HOST_FAILURES_LOGGED:
            log.log(level, message, *args)
        elif lines == HOST_FAILURES_LOGGED + 1:
            log.log(
                level,
                "more hosts %s: not logged one by one (each URL that fails gets its record "
                "with the error, and the summary counts them)",
                kind,
            )


@dataclass(frozen=True, slots=True)
class RobotsRules:
    # robots.txt as fetched, zlib-compressed: a crawl keeps every host's, and parses again
    # those it no longer holds parsed. None: everything allowed, or everything denied.
    packed: bytes | None = None
    denied: ErrorKind | None = None  # the error of every URL when robots.txt could not be had
    expires_at: float = math.inf  # time.monotonic()
    crawl_delay_s: float = 0.0
    # Read back from a --state directory: the crawl before may have fetched from the
    # host just before it stopped, so its first request waits the Crawl-delay.
    restored: bool = False


ALLOW_ALL = RobotsRules()


class RulesTable(Protocol):
    """Where a crawl keeps its robots.txt rules beyond the process (crawler/state/robots.py)."""

    def get(self, origin: str, agent: str) -> RobotsRules | None:
        """`origin`'s rules for `agent` if kept and fresh, `restored`."""

    def put(self, origin: str, agent: str, rules: RobotsRules) -> None:
        """Keep `origin`'s rules for `agent`, at once: a kill after this does not lose them."""


class SharedRules(Protocol):
    """Where the processes of a shared crawl (--redis) keep robots.txt rules for each
    other (crawler/state/redis.py): a host handed over to another process comes with
    its rules, not with a fetch of robots.txt again."""

    async def get(self, origin: str, agent: str) -> RobotsRules | None:
        """`origin`'s rules for `agent` if another process read them and they are fresh,
        `restored` (that process may have fetched from the host just before)."""

    async def put(self, origin: str, agent: str, rules: RobotsRules) -> None:
        """Share `origin`'s rules for `agent` until they expire."""


_Value = TypeVar("_Value")


class _SizedCache(Generic[_Value]):
    """Values by key, least recently used first, each with the bytes it counts. Past
    `max_items` of them, or past `max_bytes` in all, the least recently used go (the
    newest stays, however big); without `max_items`, none goes."""

    def __init__(self, max_items: int | None = None, max_bytes: int = 0) -> None:
        self._entries: OrderedDict[str, tuple[_Value, int]] = OrderedDict()
        self._bytes = 0
        self._max_items = max_items
        self._max_bytes = max_bytes

    def peek(self, key: str) -> _Value | None:
        """`key`'s value, left where it is in the order."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def get(self, key: str) -> _Value | None:
        """`key`'s value, now the most recently used."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """The bytes counted of the values held."""
        return self._bytes

    def values(self) -> list[_Value]:
        return [value for value, _ in self._entries.values()]

    def put(self, key: str, value: _Value, size: int) -> None:
        entries = self._entries
        replaced = entries.pop(key, None)
        if replaced is not None:
            self._bytes -= replaced[1]
        entries[key] = value, size
        self._bytes += size
        if self._max_items is None:
            return
        while len(entries) > 1 and (
            len(entries) > self._max_items or self._bytes > self._max_bytes
        ):
            _, (_, dropped) = entries.popitem(last=False)
            self._bytes -= dropped


@dataclass(frozen=True, slots=True)
class RobotsFetch:
    """A job for a worker: fetch robots.txt for `origin`, whose host slot it occupies."""

    host: str
    origin: str


@dataclass(frozen=True, slots=True)
class Refused:
    """A job for a worker: record `request`, which robots.txt forbids, then release it."""

    request: Request
    error: ErrorKind


_PRODUCT = re.compile(r"[A-Za-z0-9_-]+")
# A crawler that calls itself Mozilla compatible names itself in a comment after
# "compatible;": "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)".
_COMPATIBLE = re.compile(r"Mozilla/.*?\([^)]*?\bcompatible\s*;\s*([A-Za-z0-9_-]+)", re.I)


def product_token(user_agent: str) -> str:
    """The name robots.txt groups (and X-Robots-Tag) are matched against (RFC 9309 2.2.1:
    the crawler's product token): the User-Agent's first product, or the crawler that a
    "Mozilla/5.0 (compatible; MyBot/1.0; ...)" names after "compatible;"."""
    user_agent = user_agent.strip()
    compatible = _COMPATIBLE.match(user_agent)
    if compatible is not None:
        return compatible.group(1)
    match = _PRODUCT.match(user_agent)
    return match.group(0) if match else user_agent


def backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter: about 0.5 s, 1 s, 2 s, ..."""
    return BACKOFF_BASE_S * 2.0**attempt * random.uniform(0.5, 1.5)


class Robots:
    """robots.txt per origin: fetched once, cached for up to ROBOTS_MAX_AGE_S.

    A parsed robots.txt takes about 1.4 KB (protego's rule objects), so only the
    `MAX_PARSED` origins used most recently stay parsed; the others keep their
    text, compressed, and are parsed again when their host is due. With a `table`
    (--state), the rules are kept there as soon as they are read, so a resumed
    crawl does not fetch them again, and only the `MAX_CACHED` origins used most
    recently keep them in memory: the others' are read back when their host is due.
    With `shared` rules (--redis) likewise, read back in place of a fetch.
    Both are bounded by size as well as by number: a robots.txt may be 500 KiB
    (ROBOTS_MAX_BYTES), and protego keeps about 8 bytes a byte of text (4.5 MiB
    for 547 KiB of Disallow lines, 234 KiB compressed): 2,048 such parsed would
    take 9 GiB, 4,096 compressed 940 MiB.
    """

    MAX_PARSED = 2048
    MAX_PARSED_TEXT_BYTES = 8 * 2**20  # of the texts kept parsed, each PARSED_EXTRA_BYTES more
    PARSED_EXTRA_BYTES = 1024  # what a parsed robots.txt of a line or two takes
    MAX_CACHED = 4096
    MAX_CACHED_PACKED_BYTES = 16 * 2**20

    def __init__(
        self,
        fetcher: Fetcher,
        user_agent: str,
        enabled: bool,
        retries: int,
        archive: Archive | None = None,
        table: RulesTable | None = None,
        shared: SharedRules | None = None,
    ) -> None:
        self._fetcher = fetcher
        self._table = table
        self._shared = shared
        self._bounded = table is not None or shared is not None  # the rules kept elsewhere
        self._archive = archive  # given each fetch's exchanges, with --warc
        self._agent = product_token(user_agent)
        self._enabled = enabled
        self._retries = retries
        # Every origin's rules, or, kept elsewhere too, those used last (each counting
        # its packed text toward MAX_CACHED_PACKED_BYTES).
        self._rules: _SizedCache[RobotsRules] = (
            _SizedCache(self.MAX_CACHED, self.MAX_CACHED_PACKED_BYTES)
            if self._bounded
            else _SizedCache()
        )
        # Each counting its text and PARSED_EXTRA_BYTES toward MAX_PARSED_TEXT_BYTES.
        self._parsed: _SizedCache[Protego] = _SizedCache(
            self.MAX_PARSED, self.MAX_PARSED_TEXT_BYTES
        )
        self._pending: dict[str, asyncio.Future[RobotsRules | None]] = {}
        # Of the origins whose robots.txt is being tried again, not of every one that
        # failed: at 10^5 dead hosts that was 10^5 entries for the crawl's life.
        self._failures: dict[str, int] = {}
        self._failure_log = HostFailureLog()

    def cached(self, origin: str) -> RobotsRules | None:
        """The rules for `origin` if they are known and fresh."""
        if not self._enabled:
            return ALLOW_ALL
        rules = self._recalled(origin)
        if rules is not None and rules.expires_at <= time.monotonic():
            return None
        return rules

    def _recalled(self, origin: str) -> RobotsRules | None:
        """`origin`'s rules, fresh or not: from memory, or else from the table."""
        if not self._bounded:
            return self._rules.peek(origin)
        rules = self._rules.get(origin)
        # Shared rules (no table) are read back by `load`, which may wait.
        if rules is not None or self._table is None:
            return rules
        rules = self._table.get(origin, self._agent)
        if rules is not None:
            self._cache(origin, rules)
        return rules

    def _cache(self, origin: str, rules: RobotsRules) -> None:
        packed_bytes = len(rules.packed) if rules.packed is not None else 0
        self._rules.put(sys.intern(origin), rules, packed_bytes)  # those dropped kept elsewhere

    def refusal(self, rules: RobotsRules, url: str) -> ErrorKind | None:
        """Why `url` may not be fetched under `rules` (a record's error), or None if it may."""
        if rules.denied is not None:
            return rules.denied
        parser = self.parser(origin_of(url), rules)
        if parser is None or parser.can_fetch(_bytes_kept(url), self._agent):
            return None
        return ErrorKind.ROBOTS_DISALLOWED

    def parser(self, origin: str, rules: RobotsRules | None) -> Protego | None:
        """`origin`'s robots.txt parsed, for its `rules`; None if it has no rules."""
        if rules is None or rules.packed is None:
            return None
        kept = self._parsed.get(origin)
        if kept is not None:
            return kept
        text = zlib.decompress(rules.packed).decode()
        return self._keep_parsed(origin, parse_robots(text), len(text))

    def _keep_parsed(self, origin: str, parser: Protego, text_bytes: int) -> Protego:
        self._parsed.put(origin, parser, text_bytes + self.PARSED_EXTRA_BYTES)
        return parser

    async def load(self, origin: str) -> RobotsRules | None:
        """Fetch robots.txt; None if it could not be read and should be tried again later."""
        pending = self._pending.get(origin)
        if pending is not None:
            return await asyncio.shield(pending)
        future = self._pending[origin] = asyncio.get_running_loop().create_future()
        rules = None
        try:
            try:
                rules = await self._shared_or_fetched(origin)
            except Exception:  # a bug: the host's URLs get records saying so, for a while
                log.exception("internal error on %s/robots.txt", origin)
                rules = RobotsRules(
                    denied=ErrorKind.INTERNAL_ERROR,
                    expires_at=time.monotonic() + UNREACHABLE_HOLD_S,
                )
            if rules is not None:
                self._failures.pop(origin, None)
                self._cache(origin, rules)
                if self._table is not None and rules.denied is None:
                    self._table.put(origin, self._agent, rules)
        finally:
            del self._pending[origin]
            future.set_result(rules)
        return rules

    async def _shared_or_fetched(self, origin: str) -> RobotsRules | None:
        """`origin`'s rules as another process read them (--redis), or else fetched,
        and then shared."""
        shared = self._shared
        if shared is None:
            return await self._fetch(origin)
        rules = await shared.get(origin, self._agent)
        if rules is None:
            rules = await self._fetch(origin)
            if rules is not None and rules.denied is None:
                await shared.put(origin, self._agent, rules)
        return rules

    def state(self, origin: str) -> str:
        """What is known of `origin`'s robots.txt, in a word or two (for the dashboard)."""
        if not self._enabled:
            return "ignored"
        if origin in self._pending:
            return "fetching"
        rules = self._recalled(origin)
        if rules is None:
            return "unknown"
        if rules.denied is not None:
            return rules.denied
        if rules.crawl_delay_s:
            return f"Crawl-delay {rules.crawl_delay_s:g} s"
        return "read" if rules.packed is not None else "none"

    def failures(self, origin: str) -> int:
        """Consecutive failed fetches of `origin`'s robots.txt."""
        return self._failures.get(origin, 0)

    async def check(self, url: str, *, final: bool = True) -> ErrorKind | None:
        """`refusal` for `url`, fetching robots.txt first if it is not known yet. Not
        `final`: a robots.txt that failed but has retries left refuses nothing, for the
        host's own line to ask it again (a redirect there is moved to that line)."""
        origin = origin_of(url)
        rules = self.cached(origin) or await self.load(origin)
        if rules is None:  # RFC 9309 has a crawler assume a full disallow meanwhile
            return ErrorKind.ROBOTS_UNREACHABLE if final else None
        return self.refusal(rules, url)

    async def _fetch(self, origin: str) -> RobotsRules | None:
        robots_url = f"{origin}/robots.txt"
        response = await self._fetcher.fetch(robots_url, _follow_any)
        if self._archive is not None:
            self._archive(response.exchanges)
        status = response.status
        if response.error is None and status is not None and 200 <= status < 300:
            return replace(self._parse(origin, response.body), expires_at=_robots_expiry())
        answered = response.error is None or response.error in _REDIRECTS_ENDED
        if answered and status is not None and 300 <= status < 500 and status != 429:
            # 4xx, or redirects past five (or in a loop), or to nowhere: RFC 9309 2.3.1.2
            # and 2.3.1.3 take robots.txt as unavailable, which allows all
            return replace(ALLOW_ALL, expires_at=_robots_expiry())
        if response.error == ErrorKind.BLOCKED_ADDRESS and response.url == robots_url:
            # The host's own address is refused: asking again would not change that.
            return RobotsRules(denied=ErrorKind.BLOCKED_ADDRESS)
        failures = self._failures.get(origin)
        if failures is None:  # a host held as unreachable before gets one attempt a hold
            held = self._rules.peek(origin)
            unreachable = held is not None and held.denied == ErrorKind.ROBOTS_UNREACHABLE
            failures = self._retries if unreachable else 0
        failures += 1
        reason = response.error or f"HTTP {status}"
        if failures <= self._retries:
            self._failures[origin] = failures
            self._failure_log.log(
                "whose robots.txt is tried again",
                logging.INFO,
                "robots.txt of %s unreachable (%s); trying again",
                origin,
                reason,
            )
            return None
        self._failure_log.log(
            "whose robots.txt is unreachable",
            logging.WARNING,
            "robots.txt of %s unreachable (%s): its URLs are disallowed for %.0f s",
            origin,
            reason,
            UNREACHABLE_HOLD_S,
        )
        return RobotsRules(
            denied=ErrorKind.ROBOTS_UNREACHABLE, expires_at=time.monotonic() + UNREACHABLE_HOLD_S
        )

    def _parse(self, origin: str, body: bytes) -> RobotsRules:
        text = _robots_text(body)
        try:
            parser = parse_robots(text)
        except Exception as exc:  # protego on garbage: treat as no rules, but say so
            log.warning("robots.txt of %s could not be parsed (%s); allowing all", origin, exc)
            return ALLOW_ALL
        delay = parser.crawl_delay(self._agent) or 0.0
        rate = parser.request_rate(self._agent)
        if rate is not None and rate.requests > 0:
            delay = max(delay, rate.seconds / rate.requests)
        self._keep_parsed(origin, parser, len(text))
        return RobotsRules(packed=zlib.compress(text.encode()), crawl_delay_s=float(delay))


# The keys protego reads (as of 0.7, its typos of Disallow included), lowercased. RFC
# 9309 2.2.1 defines only user-agent, allow and disallow, and section 2.1 lets a crawler
# read others; protego reads these, and would end a group at any other key.
_ROBOTS_KEYS = frozenset(
    {
        *("user-agent", "useragent", "user agent", "allow"),
        *("disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"),
        *("sitemap", "sitemaps", "site-map", "host"),
        *("crawl-delay", "crawl delay", "request-rate", "request rate"),
        *("visit-time", "visit time"),
    }
)
_MOST_KEY_WORDS = max(len(key.split()) for key in _ROBOTS_KEYS)


def parse_robots(text: str) -> Protego:
    """robots.txt parsed by protego, less the lines whose key it does not know: it would
    end the group of user-agent lines above them at such a line, where RFC 9309 (and
    Google's parser, robots_test.cc's ID_LineSyntax_Groups_OtherRules) go on:
    "User-agent: FooBot / Invalid-Unknown-Line: x / User-agent: * / Disallow: /"
    disallows / to FooBot."""
    kept = (_rule_bytes_kept(line) for line in text.splitlines() if _known_line(line))
    return Protego.parse("\n".join(kept))


def _robots_text(body: bytes) -> str:
    """robots.txt's text for parse_robots. A byte that is no UTF-8 (a path saved in GBK)
    is kept as its escape, as Google's parser keeps it: a rule matches the URLs with
    those bytes, not every U+FFFD. A rule with such bytes is also read in the encoding
    they suggest, as a line of its own beside it: 'Disallow: /私有/' saved in GBK, as
    Chinese sites save the file, is meant for /私有/, which a link of that name asks for
    in UTF-8 as browsers do, as well as for the GBK escapes some links hold. Another line
    (a Sitemap's URL) is read in that encoding only: 'Sitemap: /网站地图.xml' is that URL."""
    # utf-8-sig: with a byte order mark (Notepad writes one) left in, the first line
    # is "\ufeffUser-agent", which protego does not read: the first group was lost.
    text = body.decode("utf-8-sig", "surrogateescape")
    if _STRAY_BYTE.search(text) is None:
        return text
    encoding = guessed_encoding(body)
    lines = []
    for line in text.splitlines():
        if _STRAY_BYTE.search(line) is None or encoding == "utf-8":
            lines.append(_escape_surrogates(line, "%"))
            continue
        decoded = decode_as(line.encode("utf-8", "surrogateescape"), encoding)
        if _RULE.match(line):
            lines.append(_escape_surrogates(line, "%"))
        lines.append(decoded)
    return "\n".join(lines)


# An escape of a byte past ASCII, and a byte that was no UTF-8 once decoded.
_HIGH_ESCAPE = re.compile(r"%[89A-Fa-f][0-9A-Fa-f]")
_HIGH_ESCAPE_BYTES = re.compile(_HIGH_ESCAPE.pattern.encode())
_STRAY_BYTE = re.compile("[\udc80-\udcff]")
_RULE = re.compile(r"\s*(allow|disallow)\s*:?", re.I)


def _bytes_kept(value: str) -> str:
    """`value` (a URL, a rule's path) with each escaped byte that is no UTF-8 (GBK's, as
    Chinese sites' links escape their paths) written %25XX, which protego leaves as it is.
    protego decodes every escape as UTF-8 and makes what is not U+FFFD, so to it
    /%D6%D0%CE%C4/ (中文 in GBK) and /%B1%B1%BE%A9/ (北京) were one path: a Disallow of
    either refused both. Byte for byte, as Google's parser compares them, they differ."""
    if "%" not in value or _HIGH_ESCAPE.search(value) is None:
        return value
    try:
        unquote_to_bytes(value).decode()
    except UnicodeDecodeError:
        raw = value.encode("utf-8", "surrogateescape")
        unescaped = _HIGH_ESCAPE_BYTES.sub(lambda escape: bytes((int(escape[0][1:], 16),)), raw)
        return _escape_surrogates(unescaped.decode("utf-8", "surrogateescape"), "%25")
    return value  # UTF-8 throughout: protego reads it right


def _rule_bytes_kept(line: str) -> str:
    return _bytes_kept(line) if _RULE.match(line) else line


def _escape_surrogates(text: str, prefix: str) -> str:
    """`text` with each byte that surrogateescape kept written `prefix` and its hex."""
    return _STRAY_BYTE.sub(lambda byte: f"{prefix}{ord(byte[0]) - 0xDC00:02X}", text)


def _known_line(line: str) -> bool:
    """Whether protego reads `line` as one of its keys (or as nothing: a blank line, a
    comment), as its own reading goes: "key: value", else "key value" of one to three
    words."""
    line = line.partition("#")[0].strip()
    if not line:
        return True
    key, colon, _ = line.partition(":")
    if colon and key.strip().lower() in _ROBOTS_KEYS:
        return True
    words = line.lower().split(None, _MOST_KEY_WORDS)
    return any(" ".join(words[:count]) in _ROBOTS_KEYS for count in range(1, _MOST_KEY_WORDS + 1))


def robots_fetches_for(concurrency: int, per_host: int) -> int:
    """How many workers may fetch robots.txt at once: enough to start new hosts at the
    pace of the others, and never all of them, so that hosts already started go on
    while new ones hang. Every worker on robots.txt, 20 hosts that took connections
    and never answered held 16 workers a --timeout each, and a live site waited."""
    return max(1, concurrency // 2, concurrency - per_host)


def _slot_of(request: Request) -> str:
    """The host whose slot `request` takes: the one its redirects brought it to, if any
    (they never leave a host: a target on another host is moved to that host's line)."""
    return host_of(request.location) if request.location is not None else request.host


def _robots_expiry() -> float:
    return time.monotonic() + ROBOTS_MAX_AGE_S


async def _follow_any(_source: str, _target: str) -> Hop:
    return Hop(follow=True)


class _Host:
    __slots__ = (
        "active",
        "backoff_s",
        "base_delay_s",
        "down",
        "down_until",
        "failures",
        "in_heap",
        "key",
        "next_start",
        "ready_order",
        "retries",
        "scheme",
    )

    def __init__(self, key: str, delay_s: float) -> None:
        self.key = key
        self.active = 0
        self.next_start = 0.0
        self.base_delay_s = delay_s
        self.backoff_s = 0.0
        self.failures = 0  # connections that failed in a row
        self.down: ErrorKind | None = None  # the last failure, once there were too many
        self.down_until = 0.0
        self.retries: deque[Request] | None = None  # go before the frontier's; made when needed
        self.in_heap = False
        self.ready_order: int | None = None  # of its live entry in the ready heap, if there
        # Of the last request handed out, "" before: one of two shared strings, where the
        # origin would be a string for every host taken from.
        self.scheme = ""

    @property
    def delay_s(self) -> float:
        delay_s = max(self.base_delay_s, self.backoff_s)
        return delay_s + DELAY_MARGIN_S if delay_s else 0.0


def _forget_at(host: _Host) -> float:
    """When idle `host` may be forgotten: once its delay is over, a dead host's hold
    (UNREACHABLE_HOLD_S) with it, and a throttled host's backoff has passed once more
    after its wait (a host kept for each of those was kept for the crawl's life: 10^5
    dead or once throttled hosts held 10^5 slots)."""
    forget_at = host.next_start + host.backoff_s
    return max(forget_at, host.down_until) if host.down is not None else forget_at


class HostScheduler:
    """Decides which request starts next, honouring every per-host limit.

    Of the hosts that may start a request now, the one whose next request is
    shallowest goes first (first come at equal depths, but a host whose robots.txt
    has just come before them, on a connection still open): across many hosts, each
    with its own queue, that keeps the crawl close to breadth-first, so that few
    fetched pages must wait for shallower ones (crawler/engine.py's hold) and none
    waits on a host that is merely slow to be reached. A host that may not start
    before some time (its delay, a backoff) waits apart until then.
    """

    def __init__(
        self,
        frontier: Frontier,
        robots: Robots,
        *,
        per_host: int,
        delay_s: float,
        max_crawl_delay_s: float,
        max_retry_after_s: float,
        max_pages: int,
        open_ended: bool = False,
        max_robots_fetches: int = 1 << 30,
    ) -> None:
        """`max_robots_fetches`: robots.txt fetches at once, at most; a host whose
        robots.txt would go past them waits for one to end (see `robots_fetches_for`)."""
        self._frontier = frontier
        self._robots = robots
        self._per_host = per_host
        self._delay_s = delay_s
        self._max_crawl_delay_s = max_crawl_delay_s
        self._max_retry_after_s = max_retry_after_s
        self._budget = max_pages or math.inf  # records still allowed to start
        self._hosts: dict[str, _Host] = {}
        self._ready: list[tuple[int, int, _Host]] = []  # (depth of its next request, order, host)
        self._waiting: list[tuple[float, int, _Host]] = []  # (when it may start, order, host)
        self._idle: list[tuple[float, str]] = []  # (next start, host): hosts to forget then
        self._tiebreak = itertools.count()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._active = 0
        self._retrying = 0
        self._warned_down = False
        self._failure_log = HostFailureLog()
        self.failing = 0  # hosts whose last connection failed: reached() has work to do
        self._robots_pending: set[str] = set()
        self._max_robots_fetches = max_robots_fetches
        self._awaiting_robots: dict[str, None] = {}  # hosts past that, first come first
        self._stopping = False
        self._open = open_ended  # work may still come from elsewhere: over only at end()
        for host in frontier.hosts():
            self._schedule(self._host(host))

    # -- what the engine calls ------------------------------------------------

    def committed_elsewhere(self, records: int) -> None:
        """`records` records of the budget go to pages not handed out here (held pages
        a crash left, on resume)."""
        self._budget -= records

    def add(self, requests: list[Request]) -> None:
        """Requests just pushed to the frontier: make their hosts ready."""
        for request in requests:
            host = self._host(request.host)
            if not host.in_heap:
                self._schedule(host)
        self._wake_one()

    async def next_job(self) -> Request | RobotsFetch | Refused | None:
        """The next request to fetch, robots.txt to load, or request robots.txt refuses
        (to record, then release); None when the crawl is over."""
        while True:
            job = self._take()
            if job is not None:
                if self._any_ready(time.monotonic()):
                    self._wake_one()  # more is ready: let another worker have it
                return job
            if self._finished():
                self._wake_all()
                return None
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self._arm_timer()
            await waiter

    def release(self, request: Request, *, retry_after_s: float | None = None) -> None:
        """`request` got its record. `retry_after_s`: the host answered 429 or 503,
        asking for that wait before another request (0 if it named none). Kept up to
        --max-retry-after: RFC 9110 10.2.3 asks it of any follow-up request, not only
        of this URL's retries."""
        host = self._hosts[_slot_of(request)]
        throttled = retry_after_s is not None
        self._end(host, throttled)
        if retry_after_s:
            wait_s = min(retry_after_s, self._max_retry_after_s)
            host.next_start = max(host.next_start, time.monotonic() + wait_s)
        elif not throttled:
            host.backoff_s = host.backoff_s / 2 if host.backoff_s > 0.05 else 0.0
        self._after_change(host)

    def reached(self, request: Request, unreachable: ErrorKind | None) -> None:
        """`request` was fetched; `unreachable`: the error, if no connection to its host
        answered. After UNREACHABLE_AFTER such in a row, the host's queued URLs get that
        error without a request, until UNREACHABLE_HOLD_S have passed; then one is tried
        again. Needed only after such a failure, or while a host's last connection
        failed (`failing`)."""
        host = self._hosts[_slot_of(request)]
        if unreachable is None:
            if host.failures:
                host.failures, host.down = 0, None
                self.failing -= 1
            return
        if not host.failures:
            self.failing += 1
        host.failures += 1
        if host.failures < UNREACHABLE_AFTER:
            return
        if host.down is None:
            self._failure_log.log(
                "that failed to connect",
                logging.INFO if self._warned_down else logging.WARNING,
                "%s: %d connections in a row failed (%s); its queued URLs get that error "
                "without a request for %.0f s",
                host.key,
                host.failures,
                unreachable,
                UNREACHABLE_HOLD_S,
            )
            self._warned_down = True
        host.down, host.down_until = unreachable, time.monotonic() + UNREACHABLE_HOLD_S

    def retry(self, request: Request, wait_s: float, *, throttled: bool) -> None:
        """Try `request` again, first in its host's line, not before `wait_s` from now."""
        host = self._hosts[_slot_of(request)]
        self._end(host, throttled)
        request.attempt += 1
        self._first_in_line(host, request)
        host.next_start = max(host.next_start, time.monotonic() + wait_s)
        self._after_change(host)

    def move(self, request: Request, location: str, redirects: int) -> None:
        """`request` was redirected to `location`, on another host: it goes on from
        there, first in that host's line, in its slots and at its pace."""
        left = self._hosts[_slot_of(request)]
        self._end(left, throttled=False)
        self._after_change(left)
        request.location, request.redirects = location, redirects
        host = self._host(_slot_of(request))
        self._first_in_line(host, request)
        self._after_change(host)

    def _first_in_line(self, host: _Host, request: Request) -> None:
        if host.retries is None:
            host.retries = deque()
        host.retries.appendleft(request)
        self._retrying += 1

    async def fetch_robots(self, job: RobotsFetch) -> None:
        """Load robots.txt in the slot `next_job` reserved for it; apply its Crawl-delay."""
        host = self._hosts[job.host]
        try:
            rules = await self._robots.load(job.origin)
        finally:
            self._robots_pending.discard(job.origin)
            self._end(host, throttled=False)
        if rules is None:  # unreachable: hold the host, then ask again
            wait_s = backoff_s(self._robots.failures(job.origin))
            host.next_start = max(host.next_start, time.monotonic() + wait_s)
        elif rules.crawl_delay_s:
            if rules.crawl_delay_s > self._max_crawl_delay_s:
                log.warning(
                    "%s asks for Crawl-delay %g s; crawling it at the cap, %g s",
                    job.origin,
                    rules.crawl_delay_s,
                    self._max_crawl_delay_s,
                )
            self._apply_crawl_delay(host, rules)
            # From robots.txt's answer, not its start: a first request to a host may
            # reach it late (a new connection), and the server would see a shorter gap.
            host.next_start = max(host.next_start, time.monotonic() + host.delay_s)
        # First among the hosts at its depth: its connection is still open. Behind them,
        # in a broad crawl, it was closed (the idle pool's oldest) before the host's first
        # page came, and that page opened another: two connections a host, over TLS two
        # handshakes.
        self._schedule(host, first=True)

    def stop(self) -> None:
        """Hand out nothing more; workers finish what they hold."""
        self._stopping = True
        self._wake_all()

    def end(self) -> None:
        """No more work will come from elsewhere (an open-ended scheduler's crawl is over)."""
        self._open = False
        self._wake_all()

    def hold(self, key: str, wait_s: float) -> None:
        """Start nothing on host `key` for `wait_s` (a hand-over's remaining delay)."""
        host = self._host(key)
        host.next_start = max(host.next_start, time.monotonic() + wait_s)

    def delay_s(self, key: str) -> float:
        """The time host `key` leaves between two requests now; 0 if it leaves none."""
        host = self._hosts.get(key)
        return host.delay_s if host else 0.0

    def wait_s(self, key: str) -> float:
        """How long until host `key` may start its next request."""
        host = self._hosts.get(key)
        return max(0.0, host.next_start - time.monotonic()) if host else 0.0

    @property
    def queued(self) -> int:
        return len(self._frontier) + self._retrying

    def host_view(self, key: str) -> dict[str, Any]:
        """Host `key` now: requests in flight and waiting to be retried, its delay and
        backoff, the wait before its next start, and its robots.txt."""
        host = self._hosts.get(key)
        if host is None:
            return {}
        return {
            "in_flight": host.active,
            "retrying": len(host.retries or ()),
            "delay_s": round(host.base_delay_s, 3),
            "backoff_s": round(host.backoff_s, 3),
            "wait_s": round(max(0.0, host.next_start - time.monotonic()), 3),
            "robots": self._robots.state(f"{host.scheme}://{key}") if host.scheme else "unknown",
        }

    @property
    def in_flight(self) -> int:
        return self._active

    # -- inside ---------------------------------------------------------------

    def _host(self, key: str) -> _Host:
        host = self._hosts.get(key)
        if host is None:
            key = sys.intern(key)  # the frontier's string for it: one a host, not two
            host = self._hosts[key] = _Host(key, self._delay_s)
        return host

    def _head(self, host: _Host) -> Request | None:
        return host.retries[0] if host.retries else self._frontier.peek(host.key)

    def _schedule(self, host: _Host, now: float | None = None, *, first: bool = False) -> None:
        """Make `host` ready, or wait until it may start, if it has a request to start;
        if it has nothing to do, have it forgotten once its next start is no longer ahead.
        `now`: the time `_take` goes by, for which a host is ready or not. `first`: ahead
        of the hosts made ready before it at the same depth."""
        if host.in_heap:
            if first and host.ready_order is not None and host.ready_order >= 0:
                self._make_ready(host, first)  # its entry further back is left, stale
            return
        if host.active >= self._per_host:
            return
        if host.retries or self._frontier.queued_for(host.key):
            host.in_heap = True
            if host.next_start > (time.monotonic() if now is None else now):
                heapq.heappush(self._waiting, (host.next_start, next(self._tiebreak), host))
            else:
                self._make_ready(host, first)
        elif not host.active:
            heapq.heappush(self._idle, (_forget_at(host), host.key))

    def _forget_idle(self, now: float) -> None:
        """Drop the hosts with nothing to do once nothing they remember matters any more:
        a broad crawl would otherwise keep every host it ever saw. One that gets work
        again starts afresh, its Crawl-delay applied again from robots.txt."""
        idle = self._idle
        while idle and idle[0][0] <= now:
            _, key = heapq.heappop(idle)
            host = self._hosts.get(key)
            if host is None or host.in_heap or host.active or host.retries:
                continue  # pushed again when it is idle again
            if self._frontier.queued_for(key):
                continue
            forget_at = _forget_at(host)
            if forget_at > now:  # its hold or its backoff grew since
                heapq.heappush(idle, (forget_at, key))
                continue
            if host.failures:
                self.failing -= 1
            del self._hosts[key]

    def _make_ready(self, host: _Host, first: bool = False) -> None:
        head = self._head(host)
        depth = head.depth if head is not None else 0
        order = -next(self._tiebreak) if first else next(self._tiebreak)
        host.ready_order = order
        heapq.heappush(self._ready, (depth, order, host))

    def _any_ready(self, now: float) -> bool:
        return bool(self._ready) or bool(self._waiting and self._waiting[0][0] <= now)

    def _take(self) -> Request | RobotsFetch | Refused | None:
        if self._stopping:
            return None
        now = time.monotonic()
        self._forget_idle(now)
        if self._awaiting_robots:
            self._wake_awaiting_robots()
        waiting, ready = self._waiting, self._ready
        while waiting and waiting[0][0] <= now:
            self._make_ready(heapq.heappop(waiting)[2])
        while ready:
            _, order, host = heapq.heappop(ready)
            if order != host.ready_order:
                continue  # put further ahead since
            host.in_heap, host.ready_order = False, None
            job = self._take_from(host, now)
            # A host blocked by anything but time is scheduled again by whatever unblocks
            # it: a release, new work, or its robots.txt arriving. One with nothing left
            # to do (its URLs handed over to another process, --redis) is left to be
            # forgotten, as an idle host is.
            if job is not None or host.next_start > now or self._head(host) is None:
                self._schedule(host, now)  # by the clock of the loop: it ends
            if job is not None:
                return job
        return None

    def _wake_awaiting_robots(self) -> None:
        """Make ready as many hosts waiting to fetch robots.txt as there are places."""
        awaiting = self._awaiting_robots
        for _ in range(self._max_robots_fetches - len(self._robots_pending)):
            if not awaiting:
                return
            key = next(iter(awaiting))
            del awaiting[key]
            if (host := self._hosts.get(key)) is not None:
                self._schedule(host)

    def _take_from(self, host: _Host, now: float) -> Request | RobotsFetch | Refused | None:
        """A job from `host` if it can start one now."""
        while host.active < self._per_host and host.next_start <= now:
            request = self._head(host)
            if request is None:
                return None
            retries = host.retries
            if not retries and self._budget <= 0:
                return None
            origin = origin_of(request.location or request.url)
            host.scheme = "https" if origin.startswith("https:") else "http"
            rules = self._robots.cached(origin)
            if rules is None:
                if origin in self._robots_pending:
                    return None
                if len(self._robots_pending) >= self._max_robots_fetches:
                    self._awaiting_robots[host.key] = None
                    return None
                self._robots_pending.add(origin)
                self._start(host, now)
                return RobotsFetch(host.key, origin)
            # A host forgotten while idle gets it back here (a request's redirects never
            # left its host: another host's target is moved to that host's line).
            self._apply_crawl_delay(host, rules)
            if rules.restored and not host.next_start and host.delay_s:
                host.next_start = now + host.delay_s  # its last request may be that recent
                return None
            if retries:
                retries.popleft()
                self._retrying -= 1
            else:
                self._frontier.pop(host.key)
                self._budget -= request.kind != ROBOTS  # that one writes no record
            refusal = host.down if host.down is not None and now < host.down_until else None
            if refusal is None:
                refusal = self._robots.refusal(rules, request.location or request.url)
            if refusal is not None:  # holds a slot until recorded, but sends nothing
                host.active += 1
                self._active += 1
                return Refused(request, refusal)
            self._start(host, now)
            return request
        return None

    def _apply_crawl_delay(self, host: _Host, rules: RobotsRules) -> None:
        delay_s = min(rules.crawl_delay_s, self._max_crawl_delay_s)
        if delay_s > host.base_delay_s:
            host.base_delay_s = delay_s

    def _start(self, host: _Host, now: float) -> None:
        host.active += 1
        self._active += 1
        host.next_start = now + host.delay_s

    def _end(self, host: _Host, throttled: bool) -> None:
        host.active -= 1
        self._active -= 1
        if host.delay_s:
            # From the end of a request as well as its start (as Nutch and Heritrix
            # count): a request handed out may reach the wire late, when the loop is
            # busy, and the server would then see two closer than the delay.
            host.next_start = max(host.next_start, time.monotonic() + host.delay_s)
        if throttled:
            host.backoff_s = min(self._max_retry_after_s, max(1.0, 2 * host.delay_s))
            host.next_start = max(host.next_start, time.monotonic() + host.backoff_s)

    def _after_change(self, host: _Host) -> None:
        self._schedule(host)
        if self._finished():
            self._wake_all()
        else:
            self._wake_one()

    def _finished(self) -> bool:
        if self._stopping:
            return True
        if self._active or self._retrying or self._open:
            return False
        return self._budget <= 0 or not (self._ready or self._waiting)

    def _wake_one(self) -> None:
        now = time.monotonic()
        if self._any_ready(now):
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        else:
            self._arm_timer()

    def _wake_all(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _arm_timer(self) -> None:
        if not self._waiting or not self._waiters:
            return
        at = self._waiting[0][0]
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = asyncio.get_running_loop().call_later(
            max(0.0, at - time.monotonic()), self._on_timer
        )

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, math.inf
        self._wake_one()
