"""The crawl loop: frontier + workers + visited set + stop conditions.

    seed -> canonical URL -> visited check -> frontier -> fetch -> Page -> (hooks) -> sinks
    Page -> links -> canonical URL -> visited check -> frontier

N workers share one aiohttp session. Each takes the next job the host
scheduler allows, fetches it into a `Page`, and hands the page and its links to
the store in one step, which claims the links in the visited set and queues the
new ones, so output, visited set and frontier always agree. The crawl is over
when no host has work and no worker holds any, when --max-pages records are
written, or when `stop()` is called. A crawl shared with other processes
(--redis) is over when that holds in all of them: its store feeds the scheduler
and ends it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Sequence
from typing import Any, Protocol

from crawler.config import Settings
from crawler.fetch import Fetcher, Hop, Response
from crawler.frontier import PAGE, ROBOTS, Request
from crawler.hooks import Hooks
from crawler.page import Page
from crawler.parse import language, parse_html, robots_directives_forbid_following, visible_text
from crawler.politeness import (
    ROBOTS_MAX_BYTES,
    ROBOTS_MAX_REDIRECTS,
    HostScheduler,
    Refused,
    Robots,
    RobotsFetch,
    backoff_s,
)
from crawler.session import Client
from crawler.sinks import WriteFailed
from crawler.sitemaps import SITEMAP_MAX_BYTES, in_robots, listed_in, parse_sitemap
from crawler.state import Store, trap_check
from crawler.urls import Scope, canonical_links, canonicalize, origin_of

log = logging.getLogger(__name__)

THROTTLE_STATUSES = frozenset({429, 503})
# Pages waiting for shallower ones keep their bodies, which sinks such as the WARC
# archive write at commit. Past either cap, as when a host with a long Crawl-delay
# holds back a level, the shallowest go ahead: memory stays bounded, and depths may
# then come from longer paths.
MAX_HELD_PAGES = 5000
MAX_HELD_BYTES = 64 * 2**20


class Consumer(Protocol):
    """Takes committed pages; `room()` returns once it can take more."""

    def put(self, page: Page) -> None: ...
    async def room(self) -> None: ...


class BreadthFirstGate:
    """Lets a fetched page claim its links only when every shallower page is finished.

    Workers fetch whatever is ready, so pages complete out of order. If a page at
    depth 3 claimed its links while a page at depth 1 was still in flight, a URL
    that page links to would get depth 4 instead of 2, and --max-depth would cut
    off pages within reach depending on timing. So such a page is held here,
    fetched and parsed, until no page shallower than it is queued or in flight.
    Meanwhile fetching goes on: the hold costs memory for the held records, never
    requests. Depths are then exact shortest distances from the seeds.

    Unless a shallower page is slow: when the crawl has nothing else to do for
    --gate-timeout seconds, `go_past_slow_pages()` makes the pages it waits on
    late. Late pages hold nothing back; their links are claimed when they answer,
    and a link claimed meanwhile at a greater depth keeps it: `late_claims` counts
    those, the only depths that are then not shortest distances.
    """

    def __init__(self, queued_by_depth: Counter[int], exact: bool = True) -> None:
        self._exact = exact  # False: other processes hold pages this one cannot wait for
        self._unfinished = Counter(queued_by_depth)  # queued, in flight or held
        self._held: dict[int, deque[tuple[Request, Page, list[str]]]] = {}
        self.held = 0
        self.held_bytes = 0
        self._started: dict[int, Request] = {}  # by id: fetched, retried, not yet finished
        self._late: dict[int, Request] = {}  # started pages deeper ones no longer wait on
        self._claims_past_late: dict[str, int] = {}  # visit key -> depth, while pages are late

    def queued(self, requests: list[Request]) -> None:
        for request in requests:
            self._unfinished[request.depth] += 1

    def started(self, request: Request) -> None:
        self._started[id(request)] = request

    def finished(self, request: Request) -> None:
        self._started.pop(id(request), None)
        if self._late and self._late.pop(id(request), None) is not None:
            if not self._late:
                self._claims_past_late.clear()
            return
        self._unfinished[request.depth] -= 1

    def must_hold(self, depth: int) -> bool:
        return self._exact and any(self._unfinished[shallower] for shallower in range(depth))

    def waiting_on(self) -> int:
        """How many pages the held ones wait for: those shallower than the shallowest held."""
        if not self._held:
            return 0
        return sum(self._unfinished[depth] for depth in range(min(self._held)))

    def hold(self, request: Request, page: Page, follow: list[str]) -> None:
        self._held.setdefault(request.depth, deque()).append((request, page, follow))
        self.held += 1
        self.held_bytes += len(page.body)

    def next_ready(self, everything: bool = False) -> tuple[Request, Page, list[str]] | None:
        """A held page whose turn has come (any held page, shallowest first, if `everything`)."""
        if not self._held:
            return None
        depth = min(self._held)
        if not everything and self.must_hold(depth):
            return None
        pages = self._held[depth]
        page = pages.popleft()
        if not pages:
            del self._held[depth]
        self.held -= 1
        self.held_bytes -= len(page[1].body)
        return page

    def go_past_slow_pages(self) -> list[Request]:
        """Stop waiting for the started pages the held ones wait on; those pages, slowest first."""
        if not self._held:
            return []
        shallowest_held = min(self._held)
        slow = [r for r in self._started.values() if r.depth < shallowest_held]
        for request in slow:
            if id(request) not in self._late:
                self._late[id(request)] = request
                self._unfinished[request.depth] -= 1
        return slow

    def late_claims(self, request: Request, keys: list[str], fresh: list[bool]) -> int:
        """While pages are late: note `request`'s new claims, or, if it is a late page,
        count its links already claimed deeper than through it."""
        depth = request.depth + 1
        if id(request) in self._late:
            deeper = self._claims_past_late
            return sum(
                1
                for key, new in zip(keys, fresh, strict=True)
                if not new and deeper.get(key, depth) > depth
            )
        if depth > min(late.depth for late in self._late.values()) + 1:
            for key, new in zip(keys, fresh, strict=True):
                if new:
                    self._claims_past_late[key] = depth
        return 0

    @property
    def late(self) -> int:
        return len(self._late)


class Crawl:
    """One crawl's state; `await Crawl(...).run()` crawls until done or stopped.

    A `consumer`, if set, is given each page once it is committed.
    """

    def __init__(
        self,
        settings: Settings,
        seeds: Sequence[str],
        store: Store,
        client: Client,
        hooks: Hooks | None = None,
    ) -> None:
        self.settings = settings
        self.seeds = list(seeds)
        self.store = store
        self.client = client
        self.stats = store.stats
        self.hooks = hooks
        self.consumer: Consumer | None = None
        self.scope = Scope(
            seeds,
            settings.allow_host,
            settings.any_host,
            settings.include,
            settings.exclude,
            settings.max_url_length,
        )
        self._is_trap = trap_check(settings, self.stats)
        self.scheduler: HostScheduler | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._stopping = False
        self._warned_held = False
        self._gate_timer: asyncio.TimerHandle | None = None
        self._releasing: asyncio.Task[None] | None = None  # held pages let go past slow ones
        self._progress_at = time.monotonic()  # a page started or finished
        self.failure: WriteFailed | None = None

    async def run(self) -> None:
        settings = self.settings
        archive = self.store.sinks.archive
        async with self.client as client:
            if client.cookie_jar is not None:
                self.store.keep_cookies(client.cookie_jar)
            keep = archive is not None
            self._fetcher = Fetcher(
                client, settings.timeout, settings.max_bytes, settings.max_redirects, keep
            )
            self._sitemap_fetcher = Fetcher(
                client, settings.timeout, SITEMAP_MAX_BYTES, settings.max_redirects, keep
            )
            robots_fetcher = Fetcher(
                client, settings.timeout, ROBOTS_MAX_BYTES, ROBOTS_MAX_REDIRECTS, keep
            )
            self._robots = Robots(
                robots_fetcher,
                settings.user_agent,
                enabled=not settings.ignore_robots,
                retries=settings.retries,
                archive=archive,
            )
            remaining = settings.max_pages - self.stats.records if settings.max_pages else None
            if remaining is not None and remaining <= 0:
                return
            self.scheduler = HostScheduler(
                self.store.frontier,
                self._robots,
                per_host=settings.per_host,
                delay_s=settings.delay,
                max_crawl_delay_s=settings.max_crawl_delay,
                max_retry_after_s=settings.max_retry_after,
                max_pages=remaining or 0,
                open_ended=self.store.shared,
            )
            if self._stopping:  # stopped before it started
                self.scheduler.stop()
            self.gate = BreadthFirstGate(self.store.frontier.depths(), not self.store.shared)
            self.store.gate = self.gate
            if not self.store.resumed:
                await self._enqueue_seeds()
            self._workers = [
                asyncio.create_task(self._worker()) for _ in range(settings.concurrency)
            ]
            feeder = asyncio.create_task(self._feed())
            await asyncio.gather(*self._workers, return_exceptions=True)
            if self._gate_timer is not None:
                self._gate_timer.cancel()
            if self._releasing is not None:
                await self._releasing
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
            if self.failure is None:  # pages held for shallower ones that will never come
                await self._complete_held(everything=True)

    def stop(self, drain: bool = True) -> None:
        """Take no new URLs; in-flight requests get --drain-timeout seconds to finish."""
        if self.scheduler is not None:
            self.scheduler.stop()
        if not drain:
            self._cancel_workers()
        elif not self._stopping:
            asyncio.get_running_loop().call_later(self.settings.drain_timeout, self._cancel_workers)
        self._stopping = True

    def _cancel_workers(self) -> None:
        for worker in self._workers:
            worker.cancel()

    async def _enqueue_seeds(self) -> None:
        robots = []
        if self.settings.sitemaps:  # each seed host's robots.txt, read for its Sitemap lines
            origins = dict.fromkeys(origin_of(url) for url in self.seeds)
            robots = [Request(f"{origin}/robots.txt", 0, None, kind=ROBOTS) for origin in origins]
        fresh = await self.store.commit(None, None, self.seeds, [], robots)
        self.gate.queued(fresh)
        self.scheduler.add(fresh)

    async def _feed(self) -> None:
        try:
            await self.store.serve(self.scheduler)
        except WriteFailed as exc:
            self._fail(exc)

    def _fail(self, failure: WriteFailed) -> None:
        """Records or state have nowhere to go: the crawl cannot go on."""
        self.failure = failure
        self.stop(drain=False)

    async def _worker(self) -> None:
        scheduler = self.scheduler
        while (job := await scheduler.next_job()) is not None:
            try:
                if isinstance(job, RobotsFetch):
                    await scheduler.fetch_robots(job)
                elif isinstance(job, Refused):
                    await self._record_refused(job.request, job.error)
                elif job.kind == PAGE:
                    await self._crawl(job)
                else:
                    await self._crawl_sitemap(job)
            except WriteFailed as exc:
                self._fail(exc)
                return
            if self.consumer is not None:
                await self.consumer.room()

    async def _crawl(self, request: Request) -> None:
        started = time.monotonic()
        response: Response | None = None
        self._started(request, started)
        try:
            response = await self._fetch(request, self._fetcher)
            if response is None:
                return
            page, follow = self._page(request, response, time.monotonic() - started)
        except Exception:  # a bug must cost one page, not the crawl
            page, follow = self._internal_error(request), []
        if self.hooks is not None:
            follow = await self.hooks.apply(page, follow)
        if follow and self.gate.must_hold(request.depth):
            page.release()
            self.gate.hold(request, page, follow)
        else:
            await self._commit(request, page, follow)
        await self._complete_held()
        self._page_done()
        self.scheduler.release(request, throttled=_throttled(response))

    async def _crawl_sitemap(self, request: Request) -> None:
        """A sitemap, or robots.txt's list of them: its record, and what it lists queued."""
        started = time.monotonic()
        response: Response | None = None
        self._started(request, started)
        try:
            if request.kind == ROBOTS:  # read before this request was handed out
                origin = origin_of(request.url)
                parser = self._robots.parser(origin, self._robots.cached(origin))
                lines = list(parser.sitemaps) if parser is not None else []
                page, listed = None, in_robots(request, lines)
            else:
                response = await self._fetch(request, self._sitemap_fetcher)
                if response is None:
                    return
                page, listed = await self._sitemap(request, response, time.monotonic() - started)
        except Exception:  # a bug must cost one sitemap, not the crawl
            page, listed = self._internal_error(request), []
        await self._commit(request, page, [], await self._followed(page, listed))
        await self._complete_held()
        self._page_done()
        self.scheduler.release(request, throttled=_throttled(response))

    async def _fetch(self, request: Request, fetcher: Fetcher) -> Response | None:
        """Fetch `request`; None if the failure was worth another try and it went back
        to its host's line."""
        response = await fetcher.fetch(
            request.location or request.url, self._admit_hop, request.redirects
        )
        request.hops.extend(response.hops)
        if self._retried(request, response, _throttled(response)):
            request.exchanges += tuple(response.exchanges)
            return None
        if request.exchanges:  # the page's archive holds its earlier attempts too
            response.exchanges[:0] = request.exchanges
        return response

    def _internal_error(self, request: Request) -> Page:
        log.exception("internal error on %s", request.url)
        return self._new_page(request, error="internal_error")

    def _new_page(self, request: Request, **fields: Any) -> Page:
        page = Page(request.url, request.depth, request.referrer, kind=request.kind, **fields)
        if request.lastmod is not None:
            page.fields["sitemap_lastmod"] = request.lastmod
        return page

    def _started(self, request: Request, now: float) -> None:
        self.gate.started(request)
        if not request.attempt:  # a slow page trying again is no progress
            self._progress_at = now

    def _page_done(self) -> None:
        """A page was committed or held: progress, and maybe the first held page."""
        self._progress_at = time.monotonic()
        if self.gate.held and self._gate_timer is None and self.settings.gate_timeout:
            self._check_gate_in(self.settings.gate_timeout)

    def _check_gate_in(self, delay_s: float) -> None:
        self._gate_timer = asyncio.get_running_loop().call_later(delay_s, self._check_gate)

    def _check_gate(self) -> None:
        """Pages are held: has the crawl had nothing else to do for --gate-timeout seconds?"""
        self._gate_timer = None
        if not self.gate.held or self._stopping:
            return
        timeout_s = self.settings.gate_timeout
        idle_s = time.monotonic() - self._progress_at
        if idle_s < timeout_s or len(self.store.frontier):  # busy, or waiting on politeness
            self._check_gate_in(timeout_s - idle_s if idle_s < timeout_s else timeout_s)
            return
        slow = self.gate.go_past_slow_pages()
        if slow:
            others = f" and {len(slow) - 1} more" if len(slow) > 1 else ""
            log.warning(
                "%s%s (depth %d) kept the crawl waiting %g s: deeper pages go ahead; "
                "its links are claimed when it answers (--gate-timeout)",
                slow[0].url,
                others,
                slow[0].depth,
                timeout_s,
            )
        self._releasing = asyncio.create_task(self._release_held())

    async def _release_held(self) -> None:
        try:
            await self._complete_held()
        except WriteFailed as exc:
            self._fail(exc)

    def _retried(self, request: Request, response: Response, throttled: bool) -> bool:
        """Send `request` back to its host's line if the failure is worth another try."""
        if not response.retryable or request.attempt >= self.settings.retries:
            return False
        wait_s = (response.retry_after_s() if throttled else None) or backoff_s(request.attempt)
        if wait_s > self.settings.max_retry_after:
            response.error = "retry_after_too_long"
            return False
        request.location, request.redirects = response.url, response.redirects
        self.stats.retries += 1
        self.scheduler.retry(request, wait_s, throttled=throttled)
        return True

    def _page(
        self, request: Request, response: Response, elapsed_s: float
    ) -> tuple[Page, list[str]]:
        """The page of a fetched URL, and the links on it to follow."""
        page = self._fetched_page(request, response, elapsed_s)
        status = response.status or 0
        if response.error is not None or 300 <= status < 400 or not response.is_html:
            return page, []
        parsed = parse_html(page.tree)
        base = response.url
        if parsed.base_href:
            base = canonicalize(parsed.base_href, base) or base
        page.title = parsed.title
        page.description = parsed.description
        if parsed.canonical_href:
            page.canonical = canonicalize(parsed.canonical_href, base)
        if self.settings.text:
            # Only hooks and a consumer see the tree after this: without them, no copy.
            seen = self.hooks is not None or self.consumer is not None
            page.fields["text"] = visible_text(page.tree, keep_tree=seen)
            page.fields["lang"] = language(page.tree)
        page.links = links = canonical_links(parsed.hrefs, base)
        robots_header = response.headers.get("X-Robots-Tag", "")
        if (
            parsed.nofollow
            or robots_directives_forbid_following(robots_header)
            or not 200 <= status < 300
            or request.depth >= self.settings.max_depth  # too deep: not even claimed
        ):
            return page, []
        return page, self.scope.allowed(links)

    def _fetched_page(self, request: Request, response: Response, elapsed_s: float) -> Page:
        fetched = response.status is not None
        return self._new_page(
            request,
            final_url=(response.final_url or response.url) if fetched else None,
            status=response.status,
            elapsed_ms=round(elapsed_s * 1000, 1),
            content_type=response.content_type,
            bytes=len(response.body) if fetched else None,
            content_digest=response.payload_digest,
            error=response.error,
            truncated=response.truncated,
            response=response,
        )

    async def _sitemap(
        self, request: Request, response: Response, elapsed_s: float
    ) -> tuple[Page, list[Request]]:
        """The page of a fetched sitemap, and what it lists."""
        page = self._fetched_page(request, response, elapsed_s)
        if response.error is not None or not 200 <= (response.status or 0) < 300:
            return page, []
        sitemap = await parse_sitemap(response.url, response.body, cut=response.truncated)
        page.error, page.truncated = sitemap.error, page.truncated or sitemap.truncated
        page.fields["sitemap_urls"] = sitemap.entries
        return page, listed_in(request, sitemap, pages_too=self.settings.max_depth > 0)

    async def _followed(self, page: Page | None, listed: list[Request]) -> list[Request]:
        """What a sitemap or robots.txt lists, in scope and let through by the hooks."""
        in_scope = set(self.scope.allowed([r.url for r in listed]))
        listed = [r for r in listed if r.url in in_scope]
        if self.hooks is not None and page is not None:
            pages = [r.url for r in listed if r.kind == PAGE]
            followed = set(await self.hooks.apply(page, pages))
            listed = [r for r in listed if r.kind != PAGE or r.url in followed]
        return listed

    async def _complete_held(self, everything: bool = False) -> None:
        while (held := self.gate.next_ready(everything)) is not None:
            await self._commit(*held)
        gate = self.gate
        while gate.held > MAX_HELD_PAGES or gate.held_bytes > MAX_HELD_BYTES:
            if not self._warned_held:
                self._warned_held = True
                log.warning(
                    "over %s pages (or %s MiB) wait for shallower ones, held back by slow "
                    "hosts: letting the shallowest go ahead, so some depths may come from "
                    "longer paths",
                    f"{MAX_HELD_PAGES:,}",
                    MAX_HELD_BYTES // 2**20,
                )
            await self._commit(*gate.next_ready(everything=True))

    async def _commit(
        self,
        request: Request,
        page: Page | None,
        follow: list[str],
        listed: Sequence[Request] = (),
    ) -> None:
        new = await self.store.commit(request, page, follow, request.hops, listed)
        if page is not None and self.consumer is not None:
            self.consumer.put(page)
        self.gate.finished(request)
        if new:
            self.gate.queued(new)
            self.scheduler.add(new)

    async def _record_refused(self, request: Request, error: str) -> None:
        page = None if request.kind == ROBOTS else self._new_page(request, error=error)
        await self._commit(request, page, [])
        await self._complete_held()
        self.scheduler.release(request)

    async def _admit_hop(self, target: str) -> Hop:
        """May a redirect go on to `target`? Same checks as a link, plus robots.txt."""
        if not self.scope.allows(target) or (self._is_trap and self._is_trap(target)):
            return Hop(follow=False)
        refusal = await self._robots.check(target)
        if refusal is not None:
            return Hop(follow=False, error=refusal)
        return Hop(follow=await self.store.claim(target))


def _throttled(response: Response | None) -> bool:
    """Did the host answer 429 or 503?"""
    return response is not None and response.error is None and response.status in THROTTLE_STATUSES
