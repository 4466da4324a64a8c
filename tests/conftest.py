"""Local web sites on 127.0.0.x that the tests build, and a way to crawl them."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import settings as hypothesis_settings
from multidict import CIMultiDictProxy

from crawler import Crawler, Settings
from tests.archive_tools import pywb, run_tool

# Property tests: modest by default, a few hundred examples in CI (CI=true), and
# HYPOTHESIS_PROFILE=long for a thorough local run.
hypothesis_settings.register_profile("dev", max_examples=100, deadline=None)
hypothesis_settings.register_profile("ci", max_examples=300, deadline=None, print_blob=True)
hypothesis_settings.register_profile("long", max_examples=20_000, deadline=None)
hypothesis_settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev")
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Hit:
    path: str  # path and query, as the server saw them
    started: float  # time.monotonic()
    user_agent: str
    headers: CIMultiDictProxy[str]


def html(title: str = "", links: Iterable[str] = (), head: str = "", body: str = "") -> str:
    anchors = "".join(f'<a href="{href}">{href}</a>\n' for href in links)
    return (
        f"<!doctype html><html><head><title>{title}</title>{head}</head>"
        f"<body>{body}{anchors}</body></html>"
    )


class Site:
    """A site whose pages the test defines, and a record of every request it served."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.routes: dict[str, Handler] = {}
        self.hits: list[Hit] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._hit_waiters: list[tuple[int, asyncio.Event]] = []
        self.gate: asyncio.Event | None = None  # when set, requests wait for it

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def hits_reached(self, count: int) -> asyncio.Event:
        """An event set once the site has served `count` requests in all."""
        event = asyncio.Event()
        self._hit_waiters.append((count, event))
        self._notify()
        return event

    def _notify(self) -> None:
        for count, event in self._hit_waiters:
            if len(self.hits) >= count:
                event.set()

    def count(self, path: str) -> int:
        return sum(1 for hit in self.hits if hit.path == path)

    def paths(self) -> Counter[str]:
        return Counter(hit.path for hit in self.hits)

    def page(
        self,
        path: str,
        title: str = "",
        links: Iterable[str] = (),
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        content_type: str = "text/html; charset=utf-8",
        body: bytes | str | None = None,
        delay_s: float = 0.0,
        head: str = "",
    ) -> None:
        """Serve a fixed response at `path` (which may include a query)."""
        if body is None:
            body = html(title, links, head)
        payload = body.encode() if isinstance(body, str) else body

        async def handler(_request: web.Request) -> web.Response:
            if delay_s:
                await asyncio.sleep(delay_s)
            response = web.Response(body=payload, status=status, headers=headers)
            response.headers["Content-Type"] = content_type
            return response

        self.routes[path] = handler

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        async def handler(_request: web.Request) -> web.Response:
            return web.Response(status=status, headers={"Location": location})

        self.routes[path] = handler

    def handle(self, path: str, handler: Handler) -> None:
        self.routes[path] = handler

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(
            Hit(
                request.path_qs,
                time.monotonic(),
                request.headers.get("User-Agent", ""),
                request.headers,
            )
        )
        self._notify()
        if self.gate is not None:
            await self.gate.wait()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            handler = self.routes.get(request.path_qs) or self.routes.get(request.path)
            if handler is None:
                return web.Response(status=404, text="not here")
            return await handler(request)
        finally:
            self.in_flight -= 1

    async def start(self) -> Site:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        tcp = web.TCPSite(self._runner, self.host, 0)
        await tcp.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    server = await Site().start()
    yield server
    await server.stop()


@pytest.fixture
async def site2() -> AsyncIterator[Site]:
    """A second site, on another loopback address."""
    server = await Site("127.0.0.2").start()
    yield server
    await server.stop()


@dataclass
class Wayback:
    """A pywb `wayback` and the directory whose collections it serves."""

    root: Path
    url: str

    def collection(self, name: str, *archives: Path, unpack_wacz: bool = False) -> str:
        """A collection `name` of `archives` (WARC files, or WACZ packages to unpack),
        made with pywb's wb-manager; the URL its replays are under."""
        run_tool("wb-manager", "init", name, cwd=self.root)
        unpack = ["--unpack-wacz"] if unpack_wacz else []
        run_tool("wb-manager", "add", *unpack, name, *map(str, archives), cwd=self.root)
        return f"{self.url}/{name}"

    def warc_directory(self, name: str, warc: Path) -> str:
        """--warc DIR as it is, its CDXJ indexes beside its WARC files, as collection
        `name`: pywb reads the indexes and the archives where the crawler left them."""
        collection = self.root / "collections" / name
        collection.mkdir(parents=True)
        (collection / "indexes").symlink_to(warc, target_is_directory=True)
        (collection / "archive").symlink_to(warc, target_is_directory=True)
        return f"{self.url}/{name}"


@pytest.fixture(scope="session")
def wayback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wayback]:
    """One wayback for the session (each takes 1.6 s to start): every test that replays
    its archives adds a collection of its own, which the running wayback then serves."""
    root = tmp_path_factory.mktemp("pywb")
    with pywb(root) as url:
        yield Wayback(root, url)


@pytest.fixture(autouse=True)
def _no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The crawler honours HTTP_PROXY and the like: the machine's must not reach the tests."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


# Fast settings for tests: no robots.txt unless a test asks, short timeouts.
TEST_SETTINGS = Settings(seeds="-", timeout=5.0, retries=0, ignore_robots=True, uvloop=False)


async def crawl(tmp_path: Path, seeds: Iterable[str], **overrides: Any) -> list[dict[str, Any]]:
    """Crawl from `seeds` through the API, as the CLI would; return the records."""
    output = tmp_path / "pages.jsonl"
    settings = replace(TEST_SETTINGS, output=str(output), **overrides)
    async with Crawler(seeds, settings) as crawler:
        await crawler.crawl()
    return read_records(output)


def read_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@dataclass
class LinkAndFifo:
    """A symlink to `target` (not there yet), and a FIFO with its reading end open, so
    that a writer can open it: outputs a crawl or a report must write into, not replace."""

    target: Path
    link: Path
    fifo: Path
    reader: int

    def read_fifo(self) -> bytes:
        try:
            return os.read(self.reader, 1 << 16)
        finally:
            os.close(self.reader)


def link_and_fifo(directory: Path, target_name: str) -> LinkAndFifo:
    target = directory / target_name
    link = directory / f"latest-{target_name}"
    link.symlink_to(target.name)
    fifo = directory / f"{target_name}.fifo"
    os.mkfifo(fifo)
    return LinkAndFifo(target, link, fifo, os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))


def by_url(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    index = {r["url"]: r for r in records}
    assert len(index) == len(records), "a URL was recorded twice"
    return index
