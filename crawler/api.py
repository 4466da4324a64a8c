"""`Crawler`: the crawl as an async context manager that yields each page as it is committed.

    async with Crawler(["https://example.com/"], Settings(max_depth=2)) as crawler:
        async for page in crawler:
            print(page.url, page.status, page.title, len(page.links))
    print(crawler.stats)

The CLI is one more user of this class: it runs `crawl()`, which sends pages
only to the sinks the settings name (-o, --state), with no consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from crawler.config import ConfigError, Settings, meant_url, redact_url, seed_too_long
from crawler.credentials import seed_credentials
from crawler.engine import Crawl
from crawler.files import check_outputs
from crawler.hooks import FollowHook, Hooks, PageHook
from crawler.page import Page
from crawler.session import Client
from crawler.sinks import WriteFailed
from crawler.state import Store, open_store
from crawler.stats import CrawlStats
from crawler.threads import beside_loop
from crawler.urls import canonicalize

if TYPE_CHECKING:
    from crawler.history import History, PreviousCrawl
    from crawler.observe.dashboard import WatchedFigures

_OPEN_CLOSE_THREAD = "crawler-open-close"
# Pages committed but not yet taken by the consumer; past this, workers wait for it.
PAGES_AHEAD = 16
# Of those, how many keep their parsed tree (a page's tree takes 20 times its HTML);
# the others drop it, and parse again if asked. Every worker may put a page before it
# waits, and a gate's release puts many: with trees kept for all, a 2,000-page crawl
# peaked at 65 MiB, against 48 for the CLI; with 4, at 52.
TREES_AHEAD = 4


class _Outbox:
    """Committed pages on their way to the consumer; full, it makes workers wait."""

    def __init__(self, limit: int) -> None:
        self._pages: deque[Page | None] = deque()
        self._limit = limit
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._abandoned = False

    def put(self, page: Page | None) -> None:
        if self._abandoned:
            return
        if page is not None and len(self._pages) >= TREES_AHEAD:
            page.release()
        self._pages.append(page)
        self._ready.set()
        if len(self._pages) >= self._limit:
            self._room.clear()

    async def room(self) -> None:
        await self._room.wait()

    async def get(self) -> Page | None:
        while not self._pages:
            self._ready.clear()
            await self._ready.wait()
        page = self._pages.popleft()
        if len(self._pages) < self._limit:
            self._room.set()
        return page

    def abandon(self) -> None:
        """The consumer left: drop what comes, and never make a worker wait again."""
        self._abandoned = True
        self._pages.clear()
        self._room.set()


class Crawler:
    """A crawl from `seeds`: iterate it for pages, or `run()` it to the end.

    `follow(url, page) -> bool` decides, link by link, whether to follow a link
    the crawl would follow; `on_page(page) -> dict | None` adds fields to the
    page's record. Both may be sync or async.
    """

    def __init__(
        self,
        seeds: Iterable[str],
        settings: Settings | None = None,
        *,
        follow: FollowHook | None = None,
        on_page: PageHook | None = None,
    ) -> None:
        if settings is not None and not isinstance(settings, Settings):
            raise ConfigError(
                f"settings must be a Settings, not {type(settings).__name__} "
                "(Settings(**values) makes one)"
            )
        for name, hook in (("follow", follow), ("on_page", on_page)):
            if hook is not None and not callable(hook):
                raise ConfigError(f"{name} must be a function, not {type(hook).__name__}")
            # A generator's value is the generator, whatever it yields: `follow` took
            # every link, `on_page` failed on every page.
            if inspect.isgeneratorfunction(hook) or inspect.isasyncgenfunction(hook):
                raise ConfigError(f"{name} must return its answer, not yield it")
        self.settings = settings if settings is not None else Settings()
        self.seeds, authorizations = seed_credentials(
            _canonical_seeds(seeds, self.settings.max_url_length)
        )
        self._hooks = Hooks(follow, on_page) if follow or on_page else None
        # reads --cookies FILE, checks the proxy
        self._client = Client(self.settings, self.seeds, authorizations=authorizations)
        self._store: Store | None = None
        self._crawl: Crawl | None = None
        self._task: asyncio.Task[None] | None = None
        self._used = False  # iterated or crawled, which it may be once
        self._closing: asyncio.Future[None] | None = None  # the store's close, in a thread
        self._outbox: _Outbox | None = None
        self._dashboard_sockets: list[socket.socket] = []  # until the dashboard takes them
        # With --dashboard, where its page is, once the crawler is open (for a port of 0,
        # the port chosen); its /metrics is beside it.
        self.dashboard_url: str | None = None
        # With --dashboard, the figures it showed when the crawl ended (--revisit shows
        # them between rounds).
        self.dashboard_figures: WatchedFigures | None = None

    async def __aenter__(self) -> Crawler:
        await self._open_beside_loop()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def open(self) -> None:
        """Open the crawl's store (a --state directory is locked from here on).

        ConfigError if it cannot be used. Entering `async with` opens it too, in a
        thread beside the event loop."""
        self._opened()

    def _opened(self) -> Crawl:
        if self._crawl is None:
            self._start(*self._open_store())
        assert self._crawl is not None
        return self._crawl

    async def _open_beside_loop(self) -> Crawl:
        """`_opened()`, its slow part (a large visited set made, a --since index built:
        48 s for a million URLs) in a thread: the loop's other tasks (a web app's
        requests) went on meanwhile."""
        if self._crawl is None:
            opening = beside_loop(self._open_store, _OPEN_CLOSE_THREAD)
            try:
                opened = await asyncio.shield(opening)
            except asyncio.CancelledError:  # what is opened all the same is closed
                opening.add_done_callback(_close_opened)
                raise
            if self._crawl is None:
                self._start(*opened)
            else:  # opened meanwhile by open()
                opened[0].close()
        return self._opened()

    def _open_store(self) -> tuple[Store, PreviousCrawl | None]:
        """The store and the previous crawl: the part of opening that may take long."""
        # first: bad outputs, or a bad PREV, leave nothing written
        check_outputs(self.settings)
        history: PreviousCrawl | None = _open_history(self.settings)
        if self.settings.dashboard is not None:  # before the store opens -o: a port in use
            from crawler.observe.dashboard import listen, url_of

            self._dashboard_sockets = listen(self.settings.dashboard)
            self.dashboard_url = url_of(self._dashboard_sockets[0].getsockname())
        try:
            store = open_store(self.settings, self.seeds)
        except BaseException:
            self._close_dashboard_sockets()
            raise
        history = history or store.previous_round
        if history is not None:
            store.stats.previous_pages = history.pages
            store.stats.shared = store.shared
        return store, history

    def _start(self, store: Store, history: PreviousCrawl | None) -> None:
        self._store = store
        self._crawl = Crawl(self.settings, self.seeds, store, self._client, self._hooks, history)

    @property
    def complete(self) -> bool:
        """The crawl resumed from `state` had nothing left to do (`fresh` starts over)."""
        return self._opened().store.complete

    @property
    def failure(self) -> Exception | None:
        """Why the crawl stopped before its end: records or state could not be written
        (an `OutputClosed` if the reader of stdout went away), or a bug broke it."""
        return self._crawl.failure if self._crawl is not None else None

    def __aiter__(self) -> AsyncIterator[Page]:
        self._use_once()
        self._outbox = _Outbox(PAGES_AHEAD)
        return self._pages(self._outbox)

    def _use_once(self) -> None:
        if self._used:
            raise RuntimeError("a Crawler can be iterated or crawled once")
        self._used = True

    async def _pages(self, outbox: _Outbox) -> AsyncIterator[Page]:
        # An async generator, so that a loop left early without `async with` (`async for
        # page in Crawler(...): break`) still closes the crawl: the event loop closes a
        # generator dropped unfinished, which an iterator object it would just leave, its
        # crawl waiting for a consumer and its --state locked for the process's life.
        # The crawl starts at the first page asked for: an iterator made and never used
        # (`aiter(crawler)`) opens nothing, which nothing would close.
        try:
            (await self._open_beside_loop()).consumer = outbox
            task = self._task = asyncio.create_task(self._run_engine())
            while (page := await outbox.get()) is not None:
                yield page
                # The loop's body is done with it: a page kept (`pages.append(page)`)
                # drops its tree and decoded text, 20 times its HTML, parsed again if
                # asked; 1,500 pages of 24 KB kept took 1 GB.
                page.release()
            await task  # a failure to write the sinks, or a crawl broken by a bug
        finally:
            await self.close()

    async def crawl(self) -> None:
        """Crawl to the end, the pages going only to the sinks the settings name; then
        close, `async with` or not (as a loop over the pages does)."""
        self._use_once()
        try:
            await self._open_beside_loop()
            self._task = asyncio.create_task(self._run_engine())
            # Shielded: cancelled, the crawl still gets to drain and commit (close()).
            await asyncio.shield(self._task)
        finally:
            # Without `async with`, nothing else closes it: a crawl that ended made no
            # WACZ and kept its --state locked for the process's life, and a cancelled
            # one crawled on unwatched.
            await self.close()

    def stop(self, drain: bool = True) -> None:
        """Take no new URLs; requests in flight get --drain-timeout seconds (if `drain`).

        From any thread: a crawl run in a thread of its own is stopped from another (a
        web app's), where this raised 'no running event loop' after changing the crawl's
        state from outside its loop."""
        crawl = self._crawl
        if crawl is None:
            return
        loop = self._task.get_loop() if self._task is not None else None
        if loop is None or _running_loop() is loop:
            crawl.stop(drain)
        else:
            with contextlib.suppress(RuntimeError):  # its loop is closed: the crawl is over
                loop.call_soon_threadsafe(crawl.stop, drain)

    async def close(self) -> None:
        """Stop the crawl if it still runs, let requests in flight finish, close the store."""
        try:
            if self._outbox is not None:
                self._outbox.abandon()
            if self._task is not None and not self._task.done():
                self.stop()
                await self._task
        finally:
            self._close_dashboard_sockets()
            if self._store is not None:
                store, self._store = self._store, None
                # The sinks' last writes (an index sorted, a WACZ made: minutes for
                # 100 GiB) in a thread: the loop's other tasks go on meanwhile.
                self._closing = beside_loop(store.close, _OPEN_CLOSE_THREAD)
                try:
                    await asyncio.shield(self._closing)
                except WriteFailed as exc:
                    # The crawl's failure, unless it already has one: a full disk that
                    # stopped the crawl fails these writes too.
                    if self._crawl is not None and self._crawl.failure is None:
                        self._crawl.failure = exc
                        raise
            elif self._closing is not None:
                # Closing already (`async with` and the loop's generator both close): this
                # returned first, and a --state opened again was still locked. Why it
                # failed, if it did, is the first close()'s to say.
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._closing)

    async def aclose(self) -> None:
        """`close()`, by the name async iterators close by (`contextlib.aclosing`)."""
        await self.close()

    def _close_dashboard_sockets(self) -> None:
        for sock in self._dashboard_sockets:
            sock.close()
        self._dashboard_sockets = []

    def run(self) -> CrawlStats:
        """Crawl to the end from code that has no event loop of its own; the figures."""
        # asyncio.run() would refuse, and leave a coroutine never awaited
        if _running_loop() is not None:
            raise RuntimeError(
                "Crawler.run() is for code without an event loop; "
                "in a coroutine, use `async with crawler: await crawler.crawl()`"
            )

        async def whole() -> None:
            async with self:
                await self.crawl()

        event_loop_runner(self.settings.uvloop)(whole())
        return self.stats

    @property
    def stats(self) -> CrawlStats:
        """The crawl's figures, as in the summary and the --stats file."""
        return self.figures(exact=True)

    def figures(self, exact: bool = False, per_host: bool | None = None) -> CrawlStats:
        """The crawl's figures now; `exact` measures the visited set's fill, which is
        slower (the live status line reads the cheap estimate several times a second);
        `per_host` (by default as `exact`) adds --max-pages-per-host's claims of every host."""
        if self._crawl is None:
            raise RuntimeError("the crawl has not started")
        return self._crawl.stats.snapshot(exact, per_host)

    async def _run_engine(self) -> None:
        crawl = self._opened()
        try:
            dashboard = None
            async with contextlib.AsyncExitStack() as beside:
                if self.settings.stats is not None:
                    from crawler.observe.progress import StatsFile

                    await beside.enter_async_context(StatsFile(self.settings.stats, self.figures))
                if self.settings.dashboard is not None:
                    from crawler.observe.dashboard import Dashboard, Figures

                    sockets, self._dashboard_sockets = self._dashboard_sockets, []
                    figures = Figures(crawl.stats, self.settings)
                    dashboard = Dashboard(figures, self.settings, sockets)
                    await beside.enter_async_context(dashboard)
                await crawl.run()
            if dashboard is not None:
                self.dashboard_figures = dashboard.final
        finally:
            if self._outbox is not None:
                self._outbox.put(None)
        if crawl.failure is not None:
            raise crawl.failure


def _close_opened(opening: asyncio.Future[tuple[Store, PreviousCrawl | None]]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result()[0].close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _open_history(settings: Settings) -> History | None:
    if settings.since is None:
        return None
    from crawler.history import open_history

    warc_dirs = [d for d in (settings.since_warc, settings.warc) if d is not None]
    return open_history(settings.since, warc_dirs, settings.max_depth)


def _canonical_seeds(seeds: Iterable[str], max_url_length: int) -> list[str]:
    if isinstance(seeds, str):
        seeds = [seeds]
    elif not isinstance(seeds, Iterable) or isinstance(seeds, bytes | bytearray):
        raise ConfigError(f"seeds must be a URL or URLs (str), not {type(seeds).__name__}")
    canonical = []
    for seed in seeds:
        if isinstance(seed, bytes | bytearray):
            raise ConfigError(f"seeds must be a URL or URLs (str), not {type(seed).__name__}")
        url = canonicalize(seed) if isinstance(seed, str) else None
        if url is None:
            meant = meant_url(seed) if isinstance(seed, str) else None
            hint = f"; did you mean {meant}?" if meant else ""
            shown = redact_url(seed) if isinstance(seed, str) else seed
            raise ConfigError(f"seed {shown!r} is not an absolute http(s) URL{hint}")
        if len(url) > max_url_length:
            raise ConfigError(f"a seed is {seed_too_long(url, max_url_length)}")
        canonical.append(url)
    if not canonical:
        raise ConfigError("no seed URLs given")
    return canonical


def event_loop_runner(use_uvloop: bool) -> Callable[[Coroutine[Any, Any, None]], None]:
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            logging.getLogger("crawler").warning(
                "--uvloop: uvloop is not installed (pip install uvloop); running on asyncio's "
                "event loop"
            )
        else:
            run: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
            return run
    return asyncio.run
