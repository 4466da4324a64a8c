"""--dashboard: a live page, its event stream and /metrics, served in the crawl's loop.

    GET /          the page (static/dashboard.html, its script and style beside it)
    GET /events    server-sent events: the crawl's figures every UPDATE_EVERY_S
    GET /metrics   the Prometheus text format (crawler.observe.metrics)

It is read-only and reads nothing but `Stats`. The figures are made at most once
per UPDATE_EVERY_S, shared by every watcher and scrape, and only while someone
watches: a dashboard nobody watches costs a listening socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from crawler.config import ConfigError, Settings, dashboard_address, is_loopback
from crawler.observe.display import display_host, display_url
from crawler.stats import CrawlStats, Stats

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger("crawler")

UPDATE_EVERY_S = 1.0
RECONNECT_MS = 1000  # how soon a page tries again when its stream ends (a --revisit round)
END_WAIT_S = 1.0  # for the last figures to reach the watchers when the crawl ends
# The page keeps this many pages/s points (static/dashboard.js's HISTORY); a page just
# opened gets the crawl's rate samples (one each 10 s with --stats) up to this many.
HISTORY_POINTS = 600
PORT_TRIES = 20  # PORT 0 on several addresses: ports to try until one is free on all
STATIC = Path(__file__).parent / "static"
# The page and its script come from here and nowhere else, and nothing may frame it.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


class ServerLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server log, into the crawl's: a request it cannot parse (a line past
    8 KiB, a header that is no header) is the client's doing, a debug line; aiohttp
    logged it as an error with its traceback, onto the crawl's stderr."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if isinstance(kwargs.get("exc_info"), HttpProcessingError):
            level, kwargs["exc_info"] = logging.DEBUG, None
        super().log(level, f"dashboard: {msg}", *args, **kwargs)


class WatchedFigures(CrawlStats):
    """What the page gets: the crawl's figures, and what only a watcher needs."""

    # The hosts and URLs as the page shows them are beside them ("shown"): a host in
    # Unicode, as browsers show it; the slow pages are only shown.
    busiest_hosts: list[dict[str, Any]]
    last_errors: list[dict[str, Any]]
    slow_pages: list[str]
    max_pages: int
    member: str | None
    next_round_at: str | None  # --revisit, between rounds: when the next is due


class Watched(Protocol):
    def now(self, fresh: bool = False) -> WatchedFigures: ...


class Figures:
    """The crawl's figures for watchers and scrapes, made at most once per `every_s`."""

    def __init__(self, stats: Stats, settings: Settings, every_s: float = UPDATE_EVERY_S) -> None:
        self._stats = stats
        self._every_s = every_s
        self._max_pages = settings.max_pages
        self._made_at = -float("inf")
        self._figures: WatchedFigures | None = None

    def now(self, fresh: bool = False) -> WatchedFigures:
        made_at = time.monotonic()
        if self._figures is None or fresh or made_at - self._made_at >= self._every_s:
            stats = self._stats
            if fresh:  # the last figures: the busiest hosts as they are now
                stats.top_hosts(fresh=True)
            self._figures = WatchedFigures(
                **stats.snapshot(),
                busiest_hosts=[
                    view | {"shown": display_host(view["host"])} for view in stats.busiest_hosts()
                ],
                last_errors=[
                    error | {"shown": display_url(error["url"])} for error in stats.last_errors
                ],
                slow_pages=[display_url(url) for url in stats.slow_pages()],
                max_pages=self._max_pages,
                member=stats.member,
                next_round_at=None,
            )
            self._made_at = made_at
        return self._figures


class Fixed:
    """Figures that no longer change: a --revisit round's last, between rounds."""

    def __init__(self, figures: WatchedFigures) -> None:
        self._figures = figures

    def now(self, fresh: bool = False) -> WatchedFigures:
        return self._figures


def listen(address: str) -> list[socket.socket]:
    """Sockets listening on --dashboard's [HOST:]PORT (one per address HOST has), bound
    before the crawl opens its files: an address in use is a ConfigError that leaves -o
    and --state as they were. PORT 0 is one free port on every address (localhost is
    127.0.0.1 and ::1 on most systems: the page was at two ports, one announced)."""
    host, port = dashboard_address(address)
    for _ in range(PORT_TRIES):
        try:
            return _bind_all(host, port)
        except OSError as exc:
            if port == 0 and exc.errno == errno.EADDRINUSE:  # the first's port, taken on another
                continue
            reason = (exc.strerror or str(exc)).lower()
            raise ConfigError(f"--dashboard cannot listen on {host}:{port}: {reason}") from None
    raise ConfigError(f"--dashboard found no port free on every address of {host}")


def _bind_all(host: str, port: int) -> list[socket.socket]:
    """Every address of `host` bound at `port`, or, for 0, at the port the first got."""
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, bound in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio's create_server: one family a socket
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if len(sockets) > 1:
                bound = (bound[0], sockets[0].getsockname()[1], *bound[2:])
            sock.bind(bound)
            sock.listen(128)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def url_of(address: Any) -> str:
    """The page's URL at a listening socket's address ((host, port, ...))."""
    host, port = address[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def same_port_each_round(address: str) -> str:
    """--dashboard's address with a free port for PORT 0, so that every --revisit round
    serves the page at the URL the first round gave (the page follows the rounds)."""
    host, port = dashboard_address(address)
    if port:
        return address
    sockets = listen(address)
    port = sockets[0].getsockname()[1]
    for sock in sockets:
        sock.close()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@contextlib.asynccontextmanager
async def between_rounds(settings: Settings, last: WatchedFigures) -> AsyncIterator[WatchedFigures]:
    """--revisit: the page and /metrics while the crawl waits for its next round, with
    the last round's figures; set `next_round_at` in those it gives once it is known."""
    waiting = WatchedFigures(**{**last, "next_round_at": None})
    try:
        sockets = listen(settings.dashboard or "")
    except ConfigError as exc:  # the port was taken since: the next round says so
        log.warning("%s, until the next round", exc)
        yield waiting
        return
    async with Dashboard(Fixed(waiting), settings, sockets, announce=False):
        yield waiting


class Dashboard:
    """Serves the dashboard while the crawl runs (an async context manager)."""

    def __init__(
        self,
        figures: Watched,
        settings: Settings,
        sockets: list[socket.socket],
        announce: bool = True,
    ) -> None:
        """`sockets`: listen(settings.dashboard)'s, which the dashboard now owns;
        `announce`: log its address."""
        assert settings.dashboard is not None
        self._host = dashboard_address(settings.dashboard)[0]
        self._sockets = sockets
        self._loopback_only = not settings.dashboard_public
        self._announce = announce
        # A --revisit round's end is not the crawl's: its pages wait for the next round.
        self._last_event = {"round_over": True} if settings.revisit is not None else {"done": True}
        self._figures = figures
        self.final: WatchedFigures | None = None  # the figures it showed last
        self._registry: CollectorRegistry | None = None  # made at the first scrape
        self._watchers: set[asyncio.Queue[bytes]] = set()
        self._streams: set[asyncio.Task[Any]] = set()
        self._broadcast: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self._ending = False
        self.url = ""

    async def __aenter__(self) -> Dashboard:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._page)
        app.router.add_get("/events", self._events)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_static("/static", STATIC)
        self._runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=1.0, logger=ServerLog(log, {})
        )
        await self._runner.setup()
        for sock in self._sockets:
            await web.SockSite(self._runner, sock).start()
        self.url = url_of(self._runner.addresses[0])
        if self._announce:
            if not is_loopback(self._host):
                log.warning(
                    "the dashboard listens on %s, beyond this machine, and shows the crawl's URLs",
                    self.url,
                )
            log.info("dashboard at %s, metrics at %smetrics", self.url, self.url)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._broadcast is not None:
            self._broadcast.cancel()
        self._ending = True
        self.final = self._figures.now(fresh=True)
        if self._streams:  # the last figures, so that the page shows how the crawl ended
            self._send(self._event({**self.final, **self._last_event}))
            await asyncio.wait(self._streams, timeout=END_WAIT_S)
        for stream in self._streams:
            stream.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Only GET; on loopback, only for a loopback Host (localhost, or a loopback
        address such as the 127.0.0.2 it may listen on), so that a web page whose name
        was rebound to 127.0.0.1 cannot read the crawl (DNS rebinding)."""
        if request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD"])
        if self._loopback_only and not is_loopback(request.url.host or ""):
            raise web.HTTPForbidden(text="the dashboard answers only to 127.0.0.1 or localhost")
        response: web.StreamResponse = await handler(request)
        response.headers.update(HEADERS)
        return response

    async def _page(self, _request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "dashboard.html")

    async def _metrics(self, _request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if self._registry is None:  # prometheus_client is imported only if someone scrapes
            from crawler.observe.metrics import registry_of

            self._registry = registry_of(self._figures.now, self._figures.now()["member"])
        return web.Response(
            body=generate_latest(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}
        )
        queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=1)
        self._watchers.add(queue)
        task = asyncio.current_task()
        assert task is not None
        self._streams.add(task)
        try:
            await response.prepare(request)
            first = self._event(self._figures.now(), with_history=True)
            await response.write(b"retry: %d\n" % RECONNECT_MS + first)
            if self._broadcast is None or self._broadcast.done():
                self._broadcast = asyncio.create_task(self._send_every_update())
            while not self._ending:
                await response.write(await queue.get())
        except ConnectionResetError:  # the watcher left
            pass
        finally:
            self._watchers.discard(queue)
            self._streams.discard(task)
        return response

    async def _send_every_update(self) -> None:
        """While anyone watches: the figures, made once, to every watcher."""
        while self._watchers:
            await asyncio.sleep(UPDATE_EVERY_S)
            self._send(self._event(self._figures.now()))

    def _send(self, event: bytes) -> None:
        for queue in self._watchers:
            if queue.full():  # a slow watcher gets the newest figures, not a backlog
                queue.get_nowait()
            queue.put_nowait(event)

    @staticmethod
    def _event(figures: Mapping[str, Any], with_history: bool = False) -> bytes:
        """The figures as an event; the last rate samples `with_history` only, for a
        stream's first event, the one the page reads them from."""
        shown = dict(figures)
        history = shown.pop("rate_history")
        if with_history:
            shown["rate_history"] = history[-HISTORY_POINTS:]
        return b"data: " + orjson.dumps(shown) + b"\n\n"
