"""The breadth-first gate's held pages: packed, or on disk with --state, and given back whole."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from crawler.errors import ErrorKind
from crawler.frontier import Request
from crawler.held import HeldPages
from crawler.page import Page
from crawler.state.held import HeldTable
from tests.conftest import Site, html, read_records
from tests.redis_server import free_port
from tests.test_state import Run
from tests.test_warc import read_archive, record_at


def held_page(n: int) -> tuple[Request, Page, list[str]]:
    url = f"http://127.16.0.{n}:8080/p/{n}"
    request = Request(url, 3, "http://127.16.0.1:8080/", seq=100 + n, hops=[url + "?moved"])
    links = [f"http://127.16.0.{m}:8080/p/{m}" for m in range(n, n + 30)]
    page = Page(url, 3, request.referrer, status=200, title=f"p{n}", links=links, bytes=2000)
    page.error = ErrorKind.DECODING_ERROR if n % 2 else None
    page.fields["lang"] = "en"
    return request, page, links[::2]


def test_held_pages_past_the_memorys_share_wait_on_disk_and_come_back_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("crawler.held.IN_MEMORY", 2)
    db = sqlite3.connect(tmp_path / "crawl.sqlite", isolation_level=None)
    table = HeldTable(db)
    held = HeldPages(table)
    pages = [held_page(n) for n in range(6)]
    for request, page, follow in pages[:5]:
        held.add(request, page, follow, pack=True)
    held.add(*pages[5], pack=False)  # its response is read at commit: kept whole, in memory

    assert len(held) == 6 and held.shallowest() == 3
    assert len(table) == 5  # the packed ones, those in memory too
    back = [held.pop(3) for _ in range(6)]
    assert len(held) == 0 and held.shallowest() is None and held.nbytes == 0
    for (request, page, follow), (was_request, was_page, was_follow) in zip(
        back, [pages[0], pages[1], pages[5], pages[2], pages[3], pages[4]], strict=True
    ):
        assert page.record() == was_page.record()
        assert follow == was_follow
        fields = ("url", "depth", "referrer", "seq", "kind", "hops")
        assert [getattr(request, f) for f in fields] == [getattr(was_request, f) for f in fields]
    assert back[0][0] is pages[0][0]  # those in memory keep their request object
    for request, _, _ in back:
        table.forget(request)  # as their commit does
    assert len(table) == 0 and db.execute("SELECT count(*) FROM held").fetchone() == (0,)


def test_pages_held_in_a_state_directory_are_held_again_by_the_next_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("crawler.held.IN_MEMORY", 1)
    db = sqlite3.connect(tmp_path / "crawl.sqlite", isolation_level=None)
    held = HeldPages(HeldTable(db))
    pages = [held_page(n) for n in range(3)]
    for request, page, follow in pages:
        held.add(request, page, follow, pack=True)
    db.close()  # as a kill -9 leaves it

    again = HeldPages(HeldTable(sqlite3.connect(tmp_path / "crawl.sqlite")))
    assert again.restore() == {3: 3} and len(again) == 3
    back = [again.pop(3) for _ in range(3)]
    assert [page.record() for _, page, _ in back] == [page.record() for _, page, _ in pages]
    assert [follow for _, _, follow in back] == [follow for _, _, follow in pages]
    assert [request.hops for request, _, _ in back] == [request.hops for request, _, _ in pages]


def test_a_page_with_a_lone_surrogate_is_packed_and_written_down_all_the_same(
    tmp_path: Path,
) -> None:
    table = HeldTable(sqlite3.connect(tmp_path / "crawl.sqlite", isolation_level=None))
    held = HeldPages(table)
    request, page, follow = held_page(1)
    page.title = "broken \ud800 surrogate"  # orjson refuses it; the output replaces it

    held.add(request, page, follow, pack=True)

    assert len(table) == 1  # held again after a crash, not fetched again
    _, back, back_follow = held.pop(3)
    assert back.record() == page.record() and back_follow == follow


HELD = 10  # the depth-2 pages held while the depth-1 page /slow is in flight


def slow_page_scene(site: Site) -> asyncio.Event:
    """/p/0 -> /slow and /b; /b -> /c0../c9, each -> /d<n> and /x; /slow -> /x. /slow
    answers once the event returned is set: until then the c pages are held."""
    answer = asyncio.Event()

    async def slow(_request: web.Request) -> web.Response:
        await answer.wait()
        return web.Response(text=html("slow", ["/x"]), content_type="text/html")

    site.page("/p/0", "seed", ["/slow", "/b"])
    site.handle("/slow", slow)
    site.page("/b", "b", [f"/c{n}" for n in range(HELD)])
    for n in range(HELD):
        site.page(f"/c{n}", f"c{n}", [f"/d{n}", "/x"])
        site.page(f"/d{n}", f"d{n}")
    site.page("/x", "x")
    return answer


async def held_pages(dashboard: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(f"{dashboard}/metrics") as response:
        metrics = await response.text()
    found = re.search(r"^crawler_held_pages (\S+)$", metrics, re.MULTILINE)
    return int(float(found[1])) if found else 0


@pytest.mark.parametrize("archived", [False, True])
async def test_kill_9_while_pages_are_held_resumes_without_fetching_them_again(
    site: Site, tmp_path: Path, archived: bool
) -> None:
    answer = slow_page_scene(site)
    warc = tmp_path / "warc"
    run = Run(site, tmp_path, *archive_flags(warc, archived))
    await killed_once_held(run, HELD)
    answer.set()
    records = await each_page_once_but_slow(site, run)
    x = next(r for r in records if r["url"] == site.url + "/x")
    assert (x["depth"], x["referrer"]) == (2, site.url + "/slow")  # held across the kill too
    if archived:  # warcio check passes; each page archived once, where its record says
        responses = [r["uri"] for r in read_archive(warc) if r["type"] == "response"]
        robots = f"{site.url}/robots.txt"
        assert sorted(responses) == sorted([robots, *(r["url"] for r in records)])
        for record in records:
            at = record_at(warc, record["warc_file"], record["warc_offset"], record["warc_length"])
            assert at.rec_headers.get_header("WARC-Target-URI") == record["url"]
        with zipfile.ZipFile(warc.parent / "crawl.wacz") as package:
            _, *lines = package.read("pages/pages.jsonl").splitlines()
        assert sorted(orjson.loads(line)["url"] for line in lines) == sorted(
            r["url"] for r in records
        )


async def test_pages_held_at_a_kill_count_toward_max_pages_on_resume(
    site: Site, tmp_path: Path
) -> None:
    # 8 requests: /p/0, /slow, /b and five c pages, held; killed, /slow is asked again.
    answer = slow_page_scene(site)
    run = Run(site, tmp_path, "--max-pages", "8")
    await killed_once_held(run, 5)
    answer.set()
    code, err = await run.until_done()

    assert code == 0, err
    records = read_records(run.output)
    assert len(records) == 8 and len({r["url"] for r in records}) == 8
    assert sum(site.paths().values()) - site.count("/robots.txt") == 9  # /slow twice


async def each_page_once_but_slow(site: Site, run: Run) -> list[dict[str, Any]]:
    """The records of `run`, resumed to its end: one for each page of the site, each
    page asked for once but /slow, which was in flight at the kill."""
    code, err = await run.until_done()
    assert code == 0, err
    records = read_records(run.output)
    assert sorted(r["url"] for r in records) == sorted(site.url + path for path in site.routes)
    seen = site.paths()
    assert [path for path in site.routes if seen[path] != 1] == ["/slow"]
    return records


async def killed_once_held(run: Run, held: int) -> None:
    """Start `run`, and kill -9 it once it holds `held` pages (its /metrics say so)."""
    port = free_port()
    run.extra = (*run.extra, "--dashboard", f"127.0.0.1:{port}")
    process = await run.start()
    now_held = 0
    while now_held < held:  # polling the other process: its pages are held, written down
        assert process.returncode is None, (await process.communicate())[1]
        await asyncio.sleep(0.02)
        with contextlib.suppress(aiohttp.ClientError):
            now_held = await held_pages(f"http://127.0.0.1:{port}")
    process.send_signal(signal.SIGKILL)
    await process.wait()
    run.extra = run.extra[:-2]


def archive_flags(warc: Path, archived: bool) -> list[str]:
    return ["--warc", str(warc), "--wacz", str(warc.parent / "crawl.wacz")] if archived else []


async def test_kill_9_while_pages_are_held_in_a_recrawl_resumes_as_a_first_crawl_does(
    site: Site, tmp_path: Path
) -> None:
    answer = slow_page_scene(site)
    answer.set()
    (tmp_path / "first").mkdir()
    first = Run(site, tmp_path / "first")
    assert (await first.until_done())[0] == 0
    answer.clear()
    site.hits.clear()
    run = Run(site, tmp_path, "--since", str(first.output))
    await killed_once_held(run, HELD)
    answer.set()
    records = await each_page_once_but_slow(site, run)
    assert all(r["changed"] is False for r in records)
