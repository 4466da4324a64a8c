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
import functools
import itertools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from multidict import CIMultiDictProxy

from crawler.bloom import BloomFilter
from crawler.config import Settings
from crawler.errors import ErrorKind
from crawler.fetch import NOT_MODIFIED, Fetcher, Hop, Response
from crawler.frontier import PAGE, ROBOTS, SITEMAP, UNLINKED, Request
from crawler.held import Held, HeldPages
from crawler.hooks import Hooks
from crawler.htmlguard import HtmlParser
from crawler.page import Page
from crawler.parse import (
    NOFOLLOW,
    NOINDEX,
    language,
    refresh_url,
    visible_text,
    x_robots_directives,
)
from crawler.politeness import (
    ROBOTS_MAX_BYTES,
    ROBOTS_MAX_REDIRECTS,
    HostScheduler,
    Refused,
    Robots,
    RobotsFetch,
    backoff_s,
    product_token,
    robots_fetches_for,
)
from crawler.session import Client
from crawler.sinks import WriteFailed
from crawler.state import Store, trap_check
from crawler.stats import links_left
from crawler.urls import (
    Scope,
    absolute_links,
    canonical_links,
    canonicalize,
    document_base,
    host_of,
    origin_of,
    without_userinfo,
)

if TYPE_CHECKING:
    from crawler.history import InScope, Previous, PreviousCrawl
    from crawler.revisit import AdaptiveSchedule
    from crawler.state.held import HeldTable

# --since, --revisit and --sitemaps import their modules where they are used: off, they
# cost no import.

log = logging.getLogger(__name__)

THROTTLE_STATUSES = frozenset({429, 503})
# Pages waiting for shallower ones keep their record and links, and their responses if
# the WARC archive or a consumer reads them at commit. Past either cap in memory, or
# past MAX_HELD_PAGES_ON_DISK in all, as when a host with a long Crawl-delay holds
# back a level, the shallowest go ahead: memory stays bounded, and a depth that then
# comes from a longer path is counted.
MAX_HELD_PAGES = 5000
MAX_HELD_BYTES = 64 * 2**20
# With --state, held pages are on disk (crawler/state/held.py), and past the first few
# hundred only there: the hold can be longer at flat memory, and depths stay exact longer.
MAX_HELD_PAGES_ON_DISK = 100_000
# Claims made past unfinished pages: a filter of about 4 bytes a claim (it grows as
# needed), whose false positives would count about 2 in a million links checked.
PAST_CLAIMS_BLOOM = (100_000, 1e-6)


def _main_content(settings: Settings) -> Callable[[Page, str], Awaitable[None]] | None:
    """--extract's step, which adds a page's main content; None (and no import) without it."""
    if not settings.extract:
        return None
    from crawler.extract import MainContent

    return MainContent().add


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
    and a link claimed meanwhile at a greater depth keeps it. Or unless the hold is
    full (MAX_HELD_PAGES): the shallowest held pages then go ahead of the shallower
    pages still queued or in flight. Either way the claims made past unfinished
    shallower pages are noted with their depth until no page that could reach them
    sooner is left, and `checked_claims` counts the links such a page finds claimed
    deeper than through it: the only depths that are then not shortest distances.
    """

    def __init__(
        self,
        queued_by_depth: Counter[int],
        exact: bool = True,
        table: HeldTable | None = None,
    ) -> None:
        """`table`: a state directory's, where held pages outlive the process; those a
        crash left there are held again."""
        self._exact = exact  # False: other processes hold pages this one cannot wait for
        self._held = HeldPages(table)
        # queued, in flight or held
        self._unfinished = Counter(queued_by_depth) + self._held.restore()
        self._started: dict[int, Request] = {}  # by id: fetched, retried, not yet finished
        self._late: dict[int, Request] = {}  # started pages deeper ones no longer wait on
        # depth -> the visit keys claimed at it past unfinished shallower pages: in a
        # Bloom filter, since in a broad crawl slow hosts can keep a level open for long
        self._claimed_past: dict[int, BloomFilter] = {}
        self._counted: set[str] = set()  # claims found too deep, each counted once

    def queued(self, requests: list[Request]) -> None:
        for request in requests:
            self._unfinished[request.depth] += 1

    def started(self, request: Request) -> None:
        self._started[id(request)] = request

    def finished(self, request: Request) -> None:
        self._started.pop(id(request), None)
        if not (self._late and self._late.pop(id(request), None) is not None):
            self._unfinished[request.depth] -= 1
        if self._claimed_past:
            self._forget_unreachable_claims()

    def _forget_unreachable_claims(self) -> None:
        """Drop the noted claims no unfinished page is shallow enough to find sooner."""
        unfinished = [depth for depth, count in self._unfinished.items() if count > 0]
        unfinished += [late.depth for late in self._late.values()]
        reach = min(unfinished) + 1 if unfinished else None  # the least depth a link can get
        for depth in [d for d in self._claimed_past if reach is None or d <= reach]:
            del self._claimed_past[depth]
        if not self._claimed_past:
            self._counted.clear()

    def must_hold(self, depth: int) -> bool:
        return self._exact and any(self._unfinished[shallower] for shallower in range(depth))

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def full(self) -> bool:
        """Whether the shallowest held pages must go ahead, ready or not."""
        held = self._held
        return (
            held.in_memory > MAX_HELD_PAGES
            or held.nbytes > MAX_HELD_BYTES
            or len(held) > MAX_HELD_PAGES_ON_DISK
        )

    def waiting_on(self) -> int:
        """How many pages the held ones wait for: those shallower than the shallowest held."""
        shallowest_held = self._held.shallowest()
        if shallowest_held is None:
            return 0
        return sum(self._unfinished[depth] for depth in range(shallowest_held))

    def slow_pages(self, limit: int) -> list[str]:
        """Up to `limit` URLs of started pages the held ones wait for (for the dashboard)."""
        shallowest_held = self._held.shallowest()
        if shallowest_held is None:
            return []
        slow = (r.url for r in self._started.values() if r.depth < shallowest_held)
        return list(itertools.islice(slow, limit))

    def hold(self, request: Request, page: Page, follow: list[str], record_only: bool) -> None:
        """Hold `page` until its turn; `record_only`: its commit will read only its record."""
        # No slow page is as deep as a held one: only a late page's request must stay
        # the same object, to be found among the late when it is finished.
        self._started.pop(id(request), None)
        spill = id(request) not in self._late
        self._held.add(request, page, follow, pack=record_only, spill=spill)

    def next_ready(self, everything: bool = False) -> Held | None:
        """A held page whose turn has come (any held page, shallowest first, if `everything`)."""
        depth = self._held.shallowest()
        if depth is None or (not everything and self.must_hold(depth)):
            return None
        return self._held.pop(depth)

    def go_past_slow_pages(self) -> list[Request]:
        """Stop waiting for the started pages the held ones wait on; those pages, slowest first."""
        shallowest_held = self._held.shallowest()
        if shallowest_held is None:
            return []
        slow = [r for r in self._started.values() if r.depth < shallowest_held]
        for request in slow:
            if id(request) not in self._late:
                self._late[id(request)] = request
                self._unfinished[request.depth] -= 1
        return slow

    @property
    def claims_checked(self) -> bool:
        """Whether commits must tell `checked_claims` what their links claimed."""
        return bool(self._late or self._claimed_past or self.held)

    def checked_claims(self, request: Request, keys: list[str], fresh: list[bool]) -> int:
        """How many of the links `request`'s page claimed were claimed deeper before;
        notes its new claims if it goes past unfinished shallower pages."""
        depth = request.depth + 1
        claimed = [key for key, new in zip(keys, fresh, strict=True) if not new]
        inexact = 0
        for at, deeper in self._claimed_past.items():
            if at > depth:
                too_deep = {key for key in claimed if key in deeper} - self._counted
                self._counted |= too_deep
                inexact += len(too_deep)
        if self.must_hold(request.depth) or (
            self._late and request.depth > min(late.depth for late in self._late.values())
        ):
            if depth not in self._claimed_past:
                self._claimed_past[depth] = BloomFilter(*PAST_CLAIMS_BLOOM, quiet=True)
            self._claimed_past[depth].update(itertools.compress(keys, fresh))
        return inexact


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
        history: PreviousCrawl | None = None,
    ) -> None:
        self.settings = settings
        self.history = history  # --since: the previous crawl
        self.schedule = revisit_schedule(settings)  # --revisit: when pages are due again
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
        )
        self._is_trap = trap_check(settings, self.stats)
        self._robots_agent = product_token(settings.user_agent).lower()  # for X-Robots-Tag
        self._html = HtmlParser(self._robots_agent)
        self._extract = _main_content(settings)
        # The fields of an HTML page's record that only its body gives (a 304 has none)
        self._from_body = ("text",) * settings.text + ("main_text",) * settings.extract
        archive = store.sinks.archive
        keep = archive is not None
        self._fetcher = Fetcher(
            client, settings.timeout, settings.max_bytes, settings.max_redirects, keep
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
            table=store.robots,
            shared=store.shared_robots,
        )
        self._remaining = settings.max_pages - self.stats.records if settings.max_pages else None
        self.scheduler = HostScheduler(
            store.frontier,
            self._robots,
            per_host=settings.per_host,
            delay_s=settings.delay,
            max_crawl_delay_s=settings.max_crawl_delay,
            max_retry_after_s=settings.max_retry_after,
            max_pages=self._remaining or 0,
            open_ended=store.shared,
            max_robots_fetches=robots_fetches_for(settings.concurrency, settings.per_host),
        )
        self.gate = BreadthFirstGate(store.frontier.depths(), not store.shared, store.held)
        self.scheduler.committed_elsewhere(self.gate.held)  # those a crash left held
        store.gate = self.gate
        self.stats.watch(store.visited_figures, store.frontier, self.scheduler, self.gate)
        self._workers: list[asyncio.Task[None]] = []
        self._stopping = False
        self._warned_held = False
        self._gate_timer: asyncio.TimerHandle | None = None
        self._releasing: asyncio.Task[None] | None = None  # held pages let go past slow ones
        self._progress_at = time.monotonic()  # a page started or finished
        self.failure: Exception | None = None

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self._html.close()

    async def _run(self) -> None:
        async with self.client as client:
            if client.cookie_jar is not None:
                self.store.keep_cookies(client.cookie_jar)
            if self._remaining is not None and self._remaining <= 0:
                return
            try:
                if not self.store.resumed:
                    await self._enqueue_seeds()
                else:  # the pages a crash left held whose turn has come
                    await self._complete_held()
            except WriteFailed as exc:  # the first commit refused: said as any
                self._fail(exc)
                return
            feeder = asyncio.create_task(self._feed())
            await self._run_workers()
            if self.settings.list_gone is not None:
                await self._list_gone(self.settings.list_gone)
            if self._fetching_gone():
                await self._enqueue_unreached()
                await self._run_workers()
            if self._gate_timer is not None:
                self._gate_timer.cancel()
            if self._releasing is not None:
                await self._releasing
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
            if self.failure is None:  # pages held for shallower ones that will never come
                await self._complete_held(everything=True)

    async def _run_workers(self) -> None:
        """Run the workers until the scheduler has nothing more."""
        self._workers = [
            asyncio.create_task(self._worker()) for _ in range(self.settings.concurrency)
        ]
        await asyncio.gather(*self._workers, return_exceptions=True)

    def _fetching_gone(self) -> bool:
        return (
            self.settings.fetch_gone
            and self.history is not None
            and not self.store.shared  # whose store queues them (see Store.serve)
            and not self._stopping
            and self.failure is None
        )

    async def _enqueue_unreached(self) -> None:
        """--fetch-gone: the previous crawl's pages that no link reached, queued once each
        (those already claimed, in a crawl resumed in this phase, are not)."""
        gone_from = self._gone_from()
        assert gone_from is not None
        await self._complete_held(everything=True)
        bloom = self.store.bloom
        async for urls in gone_from.unreached(bloom.__contains__):
            listed = [Request(url, 0, None, kind=UNLINKED) for url in urls]
            fresh = await self.store.commit(None, None, [], [], listed)
            self.gate.queued(fresh)
            self.scheduler.add(fresh)

    async def _list_gone(self, path: str) -> None:
        """--list-gone: the previous crawl's pages that no link reached, written to `path`,
        once every link has been followed (see stats.links_left)."""
        scheduler = self.scheduler
        if self.history is None or self.failure is not None:
            return
        if self._stopping or links_left(scheduler.queued, scheduler.in_flight, self.stats.dropped):
            log.warning("--list-gone: %s not written, as links were left unfollowed", path)
            return
        from crawler.files import replacing

        listed = 0
        try:
            with replacing(path) as f:
                async for urls in self.history.unreached(self.store.bloom.__contains__):
                    f.write("".join(f"{url}\n" for url in urls).encode())
                    listed += len(urls)
        except OSError as exc:
            log.warning("cannot write %s: %s", path, exc.strerror)
            return
        log.info("--list-gone: %d URLs no link reaches now, in %s", listed, path)

    def _gone_from(self) -> InScope | None:
        """--fetch-gone: where the previous pages no link reached are found, in scope."""
        if not self.settings.fetch_gone or self.history is None:
            return None
        from crawler.history import InScope

        return InScope(self.history, self.scope.allowed)

    def stop(self, drain: bool = True) -> None:
        """Take no new URLs; in-flight requests get --drain-timeout seconds to finish."""
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
            await self.store.serve(self.scheduler, self._gone_from())
        except WriteFailed as exc:
            self._fail(exc)
        except Exception as exc:
            self._broken(exc)

    def _broken(self, exc: Exception) -> None:
        """A bug outside any one page's steps: the crawl stops, rather than hang."""
        log.exception("internal error: the crawl stops")
        self._fail(RuntimeError(f"internal error: {exc!r}"))

    def _fail(self, failure: Exception) -> None:
        """Records or state have nowhere to go, or a bug broke the loop: the crawl cannot go on."""
        self.failure = failure
        self.stop(drain=False)

    async def _worker(self) -> None:
        try:
            await self._work()
        except Exception as exc:  # the scheduler or the consumer broke
            self._broken(exc)

    async def _work(self) -> None:
        scheduler = self.scheduler
        while (job := await scheduler.next_job()) is not None:
            try:
                if isinstance(job, RobotsFetch):
                    await scheduler.fetch_robots(job)
                elif isinstance(job, Refused):
                    await self._record_refused(job.request, job.error)
                elif job.kind in (PAGE, UNLINKED):
                    await self._crawl(job)
                else:
                    await self._crawl_sitemap(job)
            except WriteFailed as exc:
                self._fail(exc)
                return
            except Exception:  # a bug past the guards of the job's own steps
                log.exception("internal error on %s", _job_url(job))
            if self.consumer is not None:
                await self.consumer.room()

    async def _crawl(self, request: Request) -> None:
        started = time.monotonic()
        response: Response | None = None
        self._started(request, started)
        try:
            previous = await self.history.take(request.url) if self.history is not None else None
            if (
                self.schedule is not None
                and previous is not None
                and not self._due(request, previous)
            ):
                page, follow = self._not_due_page(request, previous)
            else:
                response = await self._fetch(request, self._fetcher, previous)
                if response is None:
                    return
                page, follow = await self._page(
                    request, response, time.monotonic() - started, previous
                )
                if self.schedule is not None:
                    self._schedule_next(request, page, previous)
        except Exception:  # a bug must cost one page, not the crawl
            page, follow = self._internal_error(request), []
        try:
            if self.hooks is not None:
                follow = await self.hooks.apply(page, follow)
            if follow and self.gate.must_hold(request.depth):
                self._hold(request, page, follow)
            else:
                await self._commit(request, page, follow)
            await self._complete_held()
            self._page_done()
        finally:  # whatever went wrong, the host's slot must not stay taken
            self.scheduler.release(request, retry_after_s=_retry_after_s(response))

    def _hold(self, request: Request, page: Page, follow: list[str]) -> None:
        """Hold `page` in the gate: whole if its commit reads its response (a consumer,
        or --warc without --state), else as its record, with --warc once archived."""
        store = self.store
        archived = store.sinks.archive is not None
        record_only = self.consumer is None and (not archived or store.held is not None)
        if record_only and archived:  # committed with the held page's row (state/held.py)
            store.sinks.write_archived(page)
        # Its tree goes, never its response: held whole, its commit reads it; held as its
        # record, this object is left to a hook that may have kept it (its body was b"").
        page.release()
        self.gate.hold(request, page, follow, record_only)

    async def _crawl_sitemap(self, request: Request) -> None:
        """A sitemap, or robots.txt's list of them: its record, and what it lists queued."""
        started = time.monotonic()
        response: Response | None = None
        self._started(request, started)
        try:
            if request.kind == ROBOTS:  # read before this request was handed out
                origin = origin_of(request.url)
                # None if its rules expired since, or it had none
                parser = self._robots.parser(origin, self._robots.cached(origin))
                lines = list(parser.sitemaps) if parser is not None else []
                from crawler.sitemaps import in_robots

                page, listed = None, in_robots(request, lines)
            else:
                response = await self._fetch(request, self._sitemap_fetcher)
                if response is None:
                    return
                page, listed = await self._sitemap(request, response, time.monotonic() - started)
        except Exception:  # a bug must cost one sitemap, not the crawl
            page, listed = self._internal_error(request), []
        try:
            await self._commit(request, page, [], await self._followed(request, page, listed))
            await self._complete_held()
            self._page_done()
        finally:
            self.scheduler.release(request, retry_after_s=_retry_after_s(response))

    async def _fetch(
        self, request: Request, fetcher: Fetcher, previous: Previous | None = None
    ) -> Response | None:
        """Fetch `request`, conditionally if the previous crawl had it; None if the
        failure was worth another try and it went back to its host's line."""
        url = request.location or request.url
        validators: dict[str, str] = {}
        validated = None
        if previous is not None:  # for the URL that gave them: where its redirects ended
            validators, validated = previous.validators(self._from_body), previous.final_url
        admit = self._admit_sitemap_hop if request.kind == SITEMAP else self._admit_hop
        response = await fetcher.fetch(url, admit, request.redirects, validators, validated)
        if response.unreachable or self.scheduler.failing:
            self.scheduler.reached(request, response.error if response.unreachable else None)
        if (
            response.status == NOT_MODIFIED
            and response.error is None  # so it was asked with the validators
            and previous is not None
            and previous.contradicted_by(response.headers.get("ETag"))
        ):
            # Asked again of the URL that answered: the redirects there were admitted.
            unconditional = await fetcher.fetch(response.url, self._admit_hop, response.redirects)
            unconditional.exchanges[:0] = response.exchanges
            unconditional.hops[:0] = response.hops
            response = unconditional
        request.hops.extend(response.hops)
        if response.moved_to is not None:  # on, from the target host's slot
            request.exchanges += tuple(response.exchanges)
            self.scheduler.move(request, response.moved_to, response.redirects)
            return None
        if self._retried(request, response, _retry_after_s(response)):
            request.exchanges += tuple(response.exchanges)
            return None
        if request.exchanges:  # the page's archive holds its earlier attempts too
            response.exchanges[:0] = request.exchanges
        return response

    def _internal_error(self, request: Request) -> Page:
        log.exception("internal error on %s", request.url)
        return self._new_page(request, error=ErrorKind.INTERNAL_ERROR)

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
        except Exception as exc:
            self._broken(exc)

    def _retried(self, request: Request, response: Response, retry_after_s: float | None) -> bool:
        """Send `request` back to its host's line if the failure is worth another try."""
        if not response.retryable or request.attempt >= self.settings.retries:
            return False
        wait_s = retry_after_s or backoff_s(request.attempt)
        if wait_s > self.settings.max_retry_after:
            response.error = ErrorKind.RETRY_AFTER_TOO_LONG
            return False
        request.location, request.redirects = response.url, response.redirects
        self.stats.retries += 1
        self.scheduler.retry(request, wait_s, throttled=retry_after_s is not None)
        return True

    async def _page(
        self,
        request: Request,
        response: Response,
        elapsed_s: float,
        previous: Previous | None = None,
    ) -> tuple[Page, list[str]]:
        """The page of a fetched URL, and the links on it to follow."""
        page = self._fetched_page(request, response, elapsed_s)
        status = response.status or 0
        if self.history is not None:
            page.previous = previous
            if status == NOT_MODIFIED and previous is not None and response.error is None:
                return self._unchanged_page(request, page, previous)
            changed = (
                previous.changed_to(response.status, page.content_digest, page.final_url or "")
                if previous
                else None
            )
            page.fields["changed"] = changed
            if (
                changed is False
                and previous is not None
                and self._parsed_before(response, previous)
            ):
                fields = previous.fields()
                if self._carries(fields, page):
                    return page, self._carry(request, page, previous, fields)
        said = _x_robots_tag(response, self._robots_agent)
        if not NOINDEX.isdisjoint(said):
            page.fields["noindex"] = True  # a PDF's too: the header is how one says it
        if response.error is not None or 300 <= status < 400 or not response.is_html:
            return page, []
        tree, parsed, bounded = await self._html.parse(page.text() or "")
        page.tree = tree
        if bounded:
            page.error = ErrorKind.HTML_TOO_COMPLEX
        encoding = page.encoding
        base: str | None = response.url
        if parsed.base_href:
            base = document_base(parsed.base_href, response.url, encoding)
        page.title = parsed.title
        page.description = parsed.description
        if parsed.canonical_href:
            canonical = canonicalize(parsed.canonical_href, base, encoding)
            page.canonical = without_userinfo(canonical) if canonical else None
        if self._extract is not None:
            await self._extract(page, response.url)
        if self.settings.text:
            # Only hooks and a consumer see the tree after this: without them, no copy.
            seen = self.hooks is not None or self.consumer is not None
            page.fields["text"] = visible_text(tree, keep_tree=seen)
            page.fields["lang"] = language(tree, response.headers.get("Content-Language"))
        hrefs = parsed.hrefs
        if (refresh := response.headers.get("Refresh")) and (url := refresh_url(refresh)):
            hrefs.append(url)  # the header's refresh, as a <meta http-equiv=refresh>'s
        if base is not None:
            page.links = canonical_links(hrefs, base, encoding)
        else:  # a <base href="mailto:..."> or "ftp://...": no relative link is a page
            page.links = absolute_links(hrefs, encoding)
        if parsed.noindex:
            page.fields["noindex"] = True
        if parsed.nofollow or not NOFOLLOW.isdisjoint(said):
            page.fields["nofollow"] = True
            return page, []
        if not 200 <= status < 300 or request.kind == UNLINKED:
            return page, []
        return page, self._to_follow(request, page.links)

    @functools.cached_property
    def _sitemap_fetcher(self) -> Fetcher:
        from crawler.sitemaps import SITEMAP_MAX_BYTES

        settings, keep = self.settings, self.store.sinks.archive is not None
        return Fetcher(
            self.client, settings.timeout, SITEMAP_MAX_BYTES, settings.max_redirects, keep
        )

    def _to_follow(self, request: Request, links: list[str]) -> list[str]:
        if request.depth >= self.settings.max_depth:  # too deep: not even claimed
            return []
        return self.scope.allowed(links)

    def _unchanged_page(
        self, request: Request, page: Page, previous: Previous
    ) -> tuple[Page, list[str]]:
        """A page that answered 304: its content, title and links are the previous
        crawl's, and the pages under it are reached through them as before."""
        page.etag = page.etag or previous.etag
        page.last_modified = page.last_modified or previous.last_modified
        page.fields["changed"] = False
        return page, self._carry(request, page, previous)

    def _not_due_page(self, request: Request, previous: Previous) -> tuple[Page, list[str]]:
        """--revisit: a page not due yet is not requested; its record is the previous
        one, and the pages under it are reached through its links as before."""
        page = self._new_page(
            request,
            # where its redirects ended, whose validators it keeps (a 2xx's is known)
            final_url=previous.final_url if previous.ok else None,
            status=previous.status,
            fetched_at=previous.fetched_at,
            etag=previous.etag,
            last_modified=previous.last_modified,
        )
        page.fields.update(previous.revisit_fields())
        page.fields["not_due"] = True
        page.capture = previous.capture  # what the next round's revisits refer to
        return page, self._carry(request, page, previous)

    def _parsed_before(self, response: Response, previous: Previous) -> bool:
        """Whether a 2xx body the previous crawl had would be read as it was then: by
        nothing but the crawler (no hook, consumer or extraction to give its tree to),
        at the same URL, with no X-Robots-Tag to read afresh."""
        return (
            200 <= (response.status or 0) < 300
            and response.url == previous.url
            and response.error is None
            and self.hooks is None
            and self.consumer is None
            and self._extract is None
            and "X-Robots-Tag" not in response.headers
        )

    def _carries(self, fields: dict[str, Any], page: Page) -> bool:
        """Whether the previous record's `fields` are what parsing `page` again would give:
        decoded as before, whole then, with the text if it is wanted now."""
        return (
            bool(fields)
            and fields.get("content_type") == page.content_type
            and "error" not in fields
            and not fields.get("nofollow")
            and ("text" in fields or not self.settings.text)
        )

    def _carry(
        self,
        request: Request,
        page: Page,
        previous: Previous,
        fields: dict[str, Any] | None = None,
    ) -> list[str]:
        """Give `page` the previous record's content fields; the links to follow."""
        fields = previous.fields() if fields is None else fields
        # The page's own error, if any, is this fetch's; but the body it stands for
        # (a 304's, or one not due) was read with its markup bounded, and says so, so
        # that the next crawl parses that body again rather than carry these fields.
        if fields.pop("error", None) == ErrorKind.HTML_TOO_COMPLEX and page.error is None:
            page.error = ErrorKind.HTML_TOO_COMPLEX
        page.content_digest = previous.digest
        page.content_type = fields.pop("content_type", None)
        page.bytes = fields.pop("bytes", None)
        page.title = fields.pop("title", None)
        page.description = fields.pop("description", None)
        page.canonical = fields.pop("canonical", None)
        page.links = fields.pop("links", [])
        page.fields.update(fields)
        if fields.get("nofollow") or request.kind == UNLINKED:
            return []
        return self._to_follow(request, page.links)

    def _due(self, request: Request, previous: Previous) -> bool:
        """--revisit: whether the page is due by its schedule, or by its sitemap's
        <lastmod> if its host's have proved right. A page no link reaches any more is
        due whenever --fetch-gone asks whether it is still there: it has no next round."""
        from crawler.revisit import is_due, lastmod_after

        if request.kind == UNLINKED or is_due(previous.due_at):
            return True
        assert self.history is not None
        return (
            request.lastmod is not None
            and self.history.trusts_lastmod(request.host)
            and lastmod_after(request.lastmod, previous.fetched_at) is True
        )

    def _schedule_next(self, request: Request, page: Page, previous: Previous | None) -> None:
        """--revisit: when the page is due again, from what this fetch found; whether
        its sitemap's <lastmod> told true."""
        from crawler.revisit import lastmod_after

        assert self.schedule is not None
        changed = page.fields.get("changed")
        if request.lastmod is not None and previous is not None and changed is not None:
            said_changed = lastmod_after(request.lastmod, previous.fetched_at)
            if said_changed is not None:
                page.fields["lastmod_right"] = said_changed == changed
        last_s = previous.interval_s if previous is not None else None
        self._due_again(page, self.schedule.next_interval_s(last_s, changed))

    def _due_again(self, page: Page, interval_s: float) -> None:
        from crawler.revisit import due_at

        page.fields["revisit_interval_s"] = round(interval_s, 3)
        page.fields["due_at"] = due_at(time.time(), interval_s)

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
            etag=response.headers.get("ETag"),
            last_modified=response.headers.get("Last-Modified"),
            error=response.error,
            # Browsers show a page whose stream was cut short as far as it goes: so is
            # it read, and said to be cut (its WARC record holds every byte received).
            truncated=response.truncated or response.incomplete,
            response=response,
        )

    async def _sitemap(
        self, request: Request, response: Response, elapsed_s: float
    ) -> tuple[Page, list[Request]]:
        """The page of a fetched sitemap, and what it lists."""
        from crawler.sitemaps import listed_in, parse_sitemap

        page = self._fetched_page(request, response, elapsed_s)
        if response.error is not None or not 200 <= (response.status or 0) < 300:
            return page, []
        sitemap = await parse_sitemap(
            response.url, response.body, cut=response.truncated, content_type=response.content_type
        )
        page.error, page.truncated = sitemap.error, page.truncated or sitemap.truncated
        page.fields["sitemap_urls"] = sitemap.entries
        return page, listed_in(request, sitemap, pages_too=self.settings.max_depth > 0)

    async def _followed(
        self, lister: Request, page: Page | None, listed: list[Request]
    ) -> list[Request]:
        """What a sitemap or robots.txt (`lister`) lists, in scope and let through by the
        hooks. A site may keep its sitemaps on a host of their own (sitemaps.org's
        cross-submission: a CDN, a bucket): robots.txt's are fetched wherever they are, an
        index's on its own host too. The pages they list must be in scope."""
        in_scope = set(self.scope.allowed([r.url for r in listed if r.kind == PAGE]))
        lister_host = host_of(lister.url)
        listed = [
            r
            for r in listed
            if r.url in in_scope
            or (
                r.kind == SITEMAP
                and self.scope.allows_sitemap(
                    r.url, lister.kind == ROBOTS or host_of(r.url) == lister_host
                )
            )
        ]
        if self.hooks is not None and page is not None:
            pages = [r.url for r in listed if r.kind == PAGE]
            followed = set(await self.hooks.apply(page, pages))
            listed = [r for r in listed if r.kind != PAGE or r.url in followed]
        return listed

    async def _complete_held(self, everything: bool = False) -> None:
        while (held := self.gate.next_ready(everything)) is not None:
            await self._commit(*held)
        gate = self.gate
        while gate.full:
            if not self._warned_held:
                self._warned_held = True
                log.warning(
                    "over %s pages in memory (or %s MiB, or %s on disk with --state) wait "
                    "for shallower ones, held back by slow hosts: letting the shallowest go "
                    "ahead, so some depths may come from longer paths (counted as "
                    "depth_inexact)",
                    f"{MAX_HELD_PAGES:,}",
                    MAX_HELD_BYTES // 2**20,
                    f"{MAX_HELD_PAGES_ON_DISK:,}",
                )
            held = gate.next_ready(everything=True)
            assert held is not None  # some are held
            await self._commit(*held)

    async def _commit(
        self,
        request: Request,
        page: Page | None,
        follow: list[str],
        listed: Sequence[Request] = (),
    ) -> None:
        try:
            if page is not None and request.hops and self.history is not None:
                page.previous_hops = await self._previous_among(request.hops, page)
            try:
                new = await self.store.commit(request, page, follow, request.hops, listed)
            except WriteFailed:
                raise
            except Exception:  # a bug (a sink's encoder, the store) costs the page
                page = None if page is None else self._internal_error(request)
                new = await self.store.commit(request, page, [], request.hops)
            if page is not None and self.consumer is not None:
                self.consumer.put(page)
            elif page is not None and self.hooks is not None:
                # A hook may have kept it (a list of the crawl's pages): its tree, 20
                # times its HTML, goes (parsed again if asked). 1,500 pages of 24 KB
                # kept took 1 GB.
                page.release()
        finally:  # pages held for this one must not wait for it forever
            self.gate.finished(request)
        if new:
            self.gate.queued(new)
            if self.history is not None:
                self.history.prefetch([r.url for r in new if r.kind == PAGE])
            self.scheduler.add(new)

    async def _previous_among(self, hops: Sequence[str], page: Page) -> int:
        """How many of the redirect targets `hops` the previous crawl had: each answered
        (the last one, if `page` has a response), so is not gone, though it gets no
        record (its URL was claimed by the redirect)."""
        assert self.history is not None
        answered = hops if page.status is not None else hops[:-1]
        return sum([await self.history.take(url) is not None for url in answered])

    async def _record_refused(self, request: Request, error: ErrorKind) -> None:
        page = None if request.kind == ROBOTS else self._new_page(request, error=error)
        if page is not None and self.schedule is not None:
            # Asked again as soon as a page may be: the refusal may be lifted (robots.txt
            # back, or changed) sooner than a page changes. With no time at all, a round
            # of refusals alone had the next begin at once, round after round.
            self._due_again(page, self.schedule.min_interval_s)
        try:
            if page is not None and self.hooks is not None:  # on_page sees every record
                await self.hooks.apply(page, [])
            await self._commit(request, page, [])
            await self._complete_held()
        finally:
            self.scheduler.release(request)

    async def _admit_hop(self, source: str, target: str) -> Hop:
        """May a redirect go on to `target`? Same checks as a link, plus robots.txt. On
        another host, it is fetched from that host's slot, after its delay: followed at
        once, it was sent at the pace of `source`'s host, whatever its own Crawl-delay."""
        return await self._admit(source, target, self.scope.allows(target))

    async def _admit_sitemap_hop(self, source: str, target: str) -> Hop:
        """`_admit_hop` for a sitemap's redirect, which --include (for pages) does not
        stop (WordPress sends /sitemap.xml on to /sitemap_index.xml), nor another host:
        the site sends there, as its robots.txt may."""
        return await self._admit(source, target, self.scope.allows_sitemap(target, anywhere=True))

    async def _admit(self, source: str, target: str, in_scope: bool) -> Hop:
        if not in_scope or (self._is_trap and self._is_trap(target)):
            return Hop(follow=False)
        elsewhere = host_of(target) != host_of(source)
        # Another host's robots.txt that failed once is asked again, with its retries, in
        # that host's line; a redirect there was recorded robots_unreachable at once.
        refusal = await self._robots.check(target, final=not elsewhere)
        if refusal is not None:
            return Hop(follow=False, error=refusal)
        if not await self.store.claim(target):
            return Hop(follow=False)
        return Hop(follow=True, elsewhere=elsewhere)


_NO_DIRECTIVES: frozenset[str] = frozenset()


def _x_robots_tag(response: Response, agent: str) -> frozenset[str]:
    """The directives of the response's X-Robots-Tag headers for every crawler and for
    `agent`: "googlebot: noindex" is not ours."""
    headers = response.headers
    values = headers.getall("X-Robots-Tag", ()) if isinstance(headers, CIMultiDictProxy) else ()
    return x_robots_directives(values, agent) if values else _NO_DIRECTIVES


def revisit_schedule(settings: Settings) -> AdaptiveSchedule | None:
    if settings.revisit is None:
        return None
    from crawler.revisit import AdaptiveSchedule

    return AdaptiveSchedule(
        settings.revisit_interval,
        settings.revisit_min_interval,
        settings.revisit_max_interval,
        settings.revisit_inc_rate,
        settings.revisit_dec_rate,
    )


def _job_url(job: Request | RobotsFetch | Refused) -> str:
    if isinstance(job, RobotsFetch):
        return f"{job.origin}/robots.txt"
    return job.request.url if isinstance(job, Refused) else job.url


def _retry_after_s(response: Response | None) -> float | None:
    """None unless the host answered 429 or 503; then the wait it asked for (Retry-After,
    in seconds or as an HTTP-date), 0 if it named none."""
    if response is None or response.error is not None or response.status not in THROTTLE_STATUSES:
        return None
    return response.retry_after_s() or 0.0
