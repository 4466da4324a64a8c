"""Where a crawl lives: its visited set, frontier, figures and sinks, behind one `Store` protocol.

`MemoryStore` keeps everything in memory; `DiskStore` keeps it in a --state
directory, safe against `kill -9`; `RedisStore` shares it with other processes
through Redis (--redis). The engine sees only the protocol. The store decides
whether a URL is queued: a commit claims a page's links in the visited set, applies
the trap rules, --max-pages-per-host and --max-sitemaps, and queues what is left, in
one step, which for a shared crawl is one atomic script in Redis.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from itertools import compress
from typing import TYPE_CHECKING, Protocol

from crawler.bloom import BloomFilter, optimal_bits
from crawler.config import ConfigError, Settings
from crawler.cookies import CookieJar
from crawler.frontier import PAGE, ROBOTS, SITEMAP, Frontier, Request
from crawler.page import Page
from crawler.sinks import Sinks
from crawler.stats import Stats, VisitedSet
from crawler.urls import TrapRules, host_of, visit_key, visit_keys

if TYPE_CHECKING:
    from crawler.history import PreviousCrawl, Unreached
    from crawler.politeness import HostScheduler, RulesTable, SharedRules
    from crawler.simhash import SimhashIndex
    from crawler.state.held import HeldTable

log = logging.getLogger(__name__)

MAX_PAGES_PER_HOST = "max_pages_per_host"  # the count of URLs dropped by that limit


class Visited(Protocol):
    def add(self, key: str) -> bool: ...
    def add_many(self, keys: Sequence[str]) -> list[bool]: ...


class CheckedClaims(Protocol):
    """The breadth-first gate, as the claims of a page's links see it (crawler/engine.py)."""

    @property
    def claims_checked(self) -> bool:
        """Whether pages go or went past shallower ones, so claims may be too deep."""

    def checked_claims(self, request: Request, keys: list[str], fresh: list[bool]) -> int: ...


class Store(Protocol):
    """Where the crawl keeps what it must not lose: visited set, frontier, output."""

    bloom: BloomFilter
    stats: Stats  # restored on resume
    resumed: bool
    complete: bool  # resumed, and nothing is left to do
    shared: bool  # other processes crawl with us: they feed us work and hold pages we don't see
    sinks: Sinks  # made by open_sinks(); a resumed crawl's reopened at their committed positions
    gate: CheckedClaims | None  # set by the engine: told of claims that may be too deep
    previous_round: PreviousCrawl | None  # --revisit with --redis: the round before this one

    @property
    def robots(self) -> RulesTable | None:
        """Where robots.txt rules outlive the process, if anywhere."""

    @property
    def shared_robots(self) -> SharedRules | None:
        """Where other processes of the crawl read robots.txt rules too, if any."""

    @property
    def visited_figures(self) -> VisitedSet:
        """The visited set that decides, as the summary and --stats describe it."""

    @property
    def held(self) -> HeldTable | None:
        """Where the breadth-first gate's held pages outlive the process, if anywhere."""

    @property
    def frontier(self) -> Frontier:
        """The URLs queued here (a shared crawl's: those taken from Redis, not started)."""

    async def commit(
        self,
        done: Request | None,
        page: Page | None,
        links: list[str],
        claimed: list[str],
        listed: Sequence[Request] = (),
    ) -> list[Request]:
        """Atomically: hand `done`'s `page` to the sinks; claim in the visited set the
        `links` to follow from it (the seeds if `done` is None) and the requests a
        sitemap or robots.txt `listed`; queue those no one had claimed that pass the
        trap rules, --max-pages-per-host and --max-sitemaps (the seeds' robots.txt
        requests are claimed apart from pages, if at all); and make the claims of the
        redirect targets `claimed` permanent; then count the page in `stats`, so that
        saved figures match the saved records. Returns the requests queued."""

    async def claim(self, url: str) -> bool:
        """Claim a redirect target in the visited set; True if no one had."""

    async def serve(self, scheduler: HostScheduler, gone_from: Unreached | None) -> None:
        """Feed `scheduler` with work from elsewhere, if any; cancelled when the crawl ends.
        `gone_from` (--fetch-gone): once the links are crawled everywhere, a shared crawl
        queues this previous crawl's pages that no link reached (a local one's engine
        does)."""

    def keep_cookies(self, jar: CookieJar) -> None:
        """Restore `jar` if a resumed crawl saved one; save it with the state from now on."""

    def close(self) -> None: ...


def visited_set_in_memory(settings: Settings, fp_rate: float) -> BloomFilter:
    """A Bloom filter sized for --expected-urls, in this process's memory (ConfigError if
    it cannot be: see check_visited_set_fits)."""
    check_visited_set_fits(settings, fp_rate)
    return BloomFilter(settings.expected_urls, fp_rate)


def check_visited_set_fits(settings: Settings, fp_rate: float) -> None:
    """ConfigError if the visited set's first slice alone would not fit in the machine's
    memory (a --state one is made in memory too, then mapped from its file): the
    allocation would fail with a MemoryError or an OverflowError, or succeed and have the
    kernel kill the process as the bits are zeroed.
    """
    size = optimal_bits(settings.expected_urls, fp_rate) // 8
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if size > memory:
        raise ConfigError(
            f"--expected-urls {settings.expected_urls:,} at --fp-rate {settings.fp_rate:g} "
            f"needs a {size / 2**30:,.1f} GiB visited set, more than this machine's "
            f"{memory / 2**30:,.1f} GiB of memory; the set grows as URLs come, so a smaller "
            "--expected-urls is fine"
        )


def trap_check(settings: Settings, stats: Stats) -> Callable[[str], bool] | None:
    """`is_trap(url)`, which counts each trap it finds in `stats.dropped`; None if no
    trap rule is on."""
    rules = TrapRules(
        settings.max_path_depth,
        settings.max_query_params,
        settings.drop_repeating_paths,
        settings.max_url_length,
    )
    if not rules.enabled:
        return None

    def is_trap(url: str) -> bool:
        rule = rules.trap(url)
        if rule is not None:
            stats.dropped[rule] += 1
        return rule is not None

    return is_trap


def near_duplicate_index(settings: Settings) -> SimhashIndex | None:
    """The index of the pages' fingerprints (--extract); None, and no import, without it."""
    if not settings.extract:
        return None
    from crawler.simhash import SimhashIndex

    return SimhashIndex()


class RecentKeys:
    """The visited set's last few thousand claimed keys, held exactly in front of it.

    A page's links are mostly those of the pages before it (menus, footers, the
    index): 93% of a generated site's claims, which a set answers in a tenth of a
    Bloom filter probe. A key here was claimed in this crawl, so "seen" is exact.
    Two generations of `size` keys: the newer one becomes the older when full, so
    links that keep coming back stay, and memory stays bounded."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._newer: set[str] = set()
        self._older: set[str] = set()

    def add_many(self, keys: Sequence[str], visited: Visited) -> list[bool]:
        """`visited.add_many(keys)`, asked only of the keys not claimed recently."""
        newer, older = self._newer, self._older
        recent = [key in newer or key in older for key in keys]
        asked = [key for key, seen in zip(keys, recent, strict=True) if not seen]
        if not asked:
            return [False] * len(keys)
        verdicts = iter(visited.add_many(asked))
        newer.update(asked)
        if len(newer) >= self._size:
            self._older, self._newer = newer, set()
        return [False if seen else next(verdicts) for seen in recent]


class LocalStore:
    """The claims and commit of a crawl that one process has to itself.

    Links are claimed first and filtered after, so that a trap or a link past a limit
    is checked and counted once, when it is new: most links were seen before."""

    resumed = complete = shared = False
    gate: CheckedClaims | None = None
    previous_round: PreviousCrawl | None = None  # --revisit's rounds are read from files here
    robots: RulesTable | None = None
    shared_robots: SharedRules | None = None
    held: HeldTable | None = None
    visited: Visited
    stats: Stats
    bloom: BloomFilter

    def __init__(self, settings: Settings) -> None:
        self.near_duplicates = near_duplicate_index(settings)
        self._is_trap = trap_check(settings, self.stats)
        self._max_pages_per_host = settings.max_pages_per_host
        self._max_sitemaps = settings.max_sitemaps
        self._recent = RecentKeys()

    async def commit(
        self,
        done: Request | None,
        page: Page | None,
        links: list[str],
        claimed: list[str],
        listed: Sequence[Request] = (),
    ) -> list[Request]:
        new = self._claim_links(done, links) if links else []
        if listed:
            new += self._claim_listed(listed)
        if page is not None and self.near_duplicates is not None:
            self.near_duplicates.mark(page)
        self.save(done, page, new, claimed)
        return new

    def save(
        self, done: Request | None, page: Page | None, new: list[Request], claimed: list[str]
    ) -> None:
        """Hand `page` to the sinks and queue `new`, whose claims are made (and `claimed`)."""
        raise NotImplementedError

    @property
    def visited_figures(self) -> VisitedSet:
        return self.bloom

    async def claim(self, url: str) -> bool:
        return self.visited.add(visit_key(url))

    async def serve(self, scheduler: HostScheduler, gone_from: Unreached | None) -> None:
        """Nothing comes from elsewhere."""

    def _claim_links(self, done: Request | None, links: list[str]) -> list[Request]:
        keys = visit_keys(links)
        fresh = self._recent.add_many(keys, self.visited)
        gate = self.gate
        if gate is not None and gate.claims_checked and done is not None:
            self.stats.depth_inexact += gate.checked_claims(done, keys, fresh)
        urls = list(compress(links, fresh))
        is_trap = self._is_trap if done is not None else None  # a seed is no trap
        if urls and (is_trap or self._max_pages_per_host):
            urls = [url for url in urls if not (is_trap and is_trap(url)) and self._room(url)]
        depth, referrer = (done.depth + 1, done.url) if done is not None else (0, None)
        return [Request(url, depth, referrer) for url in urls]

    def _claim_listed(self, listed: Sequence[Request]) -> list[Request]:
        """Listed requests no one claimed; sitemaps past --max-sitemaps are dropped."""
        robots = [r for r in listed if r.kind == ROBOTS]
        listed = [r for r in listed if r.kind != ROBOTS]
        fresh = self.visited.add_many([visit_key(r.url) for r in listed])
        new = [r for r, is_new in zip(listed, fresh, strict=True) if is_new]
        is_trap = self._is_trap
        if is_trap is not None or self._max_pages_per_host:  # a sitemap's URLs are its links
            new = [
                r
                for r in new
                if r.kind != PAGE or (not (is_trap and is_trap(r.url)) and self._room(r.url))
            ]
        sitemaps = [r for r in new if r.kind == SITEMAP]
        if sitemaps:
            stats = self.stats
            room = max(0, self._max_sitemaps - stats.sitemaps)
            warn_sitemaps_dropped(self._max_sitemaps, len(sitemaps) - room)
            stats.sitemaps += min(len(sitemaps), room)
            new = [r for r in new if r.kind != SITEMAP] + sitemaps[:room]
        return robots + new

    def _room(self, url: str) -> bool:
        """Claim one of the --max-pages-per-host records of `url`'s host, if one is left."""
        if not self._max_pages_per_host:
            return True
        claims = self.stats.claims_per_host
        host = host_of(url)
        if claims[host] >= self._max_pages_per_host:
            self.stats.dropped[MAX_PAGES_PER_HOST] += 1
            return False
        claims.add(host)
        return True


def warn_sitemaps_dropped(max_sitemaps: int, dropped: int) -> None:
    if dropped > 0:
        log.warning(
            "--max-sitemaps %s reached: %s more sitemaps not fetched", max_sitemaps, dropped
        )


def open_store(settings: Settings, seeds: Sequence[str]) -> Store:
    """The store the settings ask for; ConfigError if a state directory or Redis cannot be used."""
    if settings.redis:
        from crawler.state.redis import RedisStore  # redis-py is imported only when used

        return RedisStore(settings, seeds)
    if settings.state:
        from crawler.state.disk import DiskStore  # and SQLite

        return DiskStore(settings, seeds)
    from crawler.state.memory import MemoryStore

    return MemoryStore(settings)
