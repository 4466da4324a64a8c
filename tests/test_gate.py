"""--gate-timeout: a slow shallow page holds deeper ones back only so long."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from crawler import Crawler, Settings
from crawler.engine import BreadthFirstGate
from crawler.frontier import Request
from crawler.politeness import BACKOFF_BASE_S
from tests.conftest import TEST_SETTINGS, Site, by_url, read_records

SITE_PAGES = 2000
FAN_OUT = 8  # page n links to 8n+1 .. 8n+8: every page within depth 4 of page 0
DEFAULT_GATE_TIMEOUT_S = Settings().gate_timeout
DEFAULT_TIMEOUT_S = Settings().timeout


def build_site(site: Site) -> None:
    """SITE_PAGES pages, a tree plus cross links, and /hang linked from the seed."""
    rng = random.Random(10)
    cross = [[rng.randrange(SITE_PAGES) for _ in range(3)] for _ in range(SITE_PAGES)]

    async def page(request: web.Request) -> web.Response:
        n = int(request.path.rsplit("/", 1)[1])
        children = [m for m in range(FAN_OUT * n + 1, FAN_OUT * n + FAN_OUT + 1) if m < SITE_PAGES]
        links = [f"/p/{m}" for m in [*children, *cross[n]]] + (["/hang"] if n == 0 else [])
        anchors = "".join(f'<a href="{href}">x</a>' for href in links)
        return web.Response(text=f"<title>{n}</title>{anchors}", content_type="text/html")

    for n in range(SITE_PAGES):
        site.handle(f"/p/{n}", page)


async def crawl_into(directory: Path, site: Site, **overrides: object) -> float:
    """Crawl the site from /p/0 into directory/pages.jsonl; the monotonic time it ended."""
    directory.mkdir()
    settings = replace(TEST_SETTINGS, output=str(directory / "pages.jsonl"), **overrides)
    async with Crawler([site.url + "/p/0"], settings) as crawler:
        await crawler.crawl()
    return time.monotonic()


def depths(directory: Path) -> dict[str, int]:
    return {url: r["depth"] for url, r in by_url(read_records(directory / "pages.jsonl")).items()}


async def test_a_url_that_never_answers_stalls_the_crawl_only_for_the_gate_timeout(
    site: Site, tmp_path, caplog, monkeypatch
):
    build_site(site)
    site.page("/hang", "answers at once in the reference crawl")
    await crawl_into(tmp_path / "reference", site)
    reference = depths(tmp_path / "reference")
    assert len(reference) == SITE_PAGES + 1

    gave_up: list[float] = []  # when the crawler dropped each attempt on /hang

    async def never_answers(_request: web.Request) -> web.Response:
        try:
            await asyncio.Event().wait()
        finally:
            gave_up.append(time.monotonic())
        raise AssertionError("unreachable")

    site.handle("/hang", never_answers)
    site.hits.clear()
    # The defaults, scaled down twentyfold to keep the suite fast: a 1.5 s timeout (the rest
    # of the site is crawled within the first), 2 retries after backoffs forty times as short,
    # and the gate timeout in the same proportion to the timeout as by default.
    timeout_s = DEFAULT_TIMEOUT_S / 20
    monkeypatch.setattr("crawler.politeness.BACKOFF_BASE_S", BACKOFF_BASE_S / 40)
    with caplog.at_level("WARNING", logger="crawler"):
        ended = await crawl_into(
            tmp_path / "hung",
            site,
            timeout=timeout_s,
            retries=2,
            gate_timeout=DEFAULT_GATE_TIMEOUT_S / 20,
        )

    assert len(gave_up) == 3
    assert ended - gave_up[-1] < 5.0
    others = [hit.started for hit in site.hits if hit.path != "/hang"]
    assert len(others) == SITE_PAGES
    assert max(others) < gave_up[-1], "the rest of the site waited for the hung URL"
    assert depths(tmp_path / "hung") == reference
    hung = by_url(read_records(tmp_path / "hung" / "pages.jsonl"))[site.url + "/hang"]
    assert (hung["error"], hung["status"], hung["final_url"]) == ("timeout", None, None)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and f"{site.url}/hang (depth 1)" in warnings[0]


async def test_a_late_page_claims_its_new_links_then_and_a_url_claimed_deeper_keeps_its_depth(
    site: Site, tmp_path
):
    # / -> slow -> x, w and / -> b -> c -> x: x is 2 links away, but /slow answers only
    # once x has been fetched, at depth 3 through c, after the gate stopped waiting.
    x_fetched = asyncio.Event()

    async def slow(_request: web.Request) -> web.Response:
        await x_fetched.wait()
        return web.Response(text='<a href="/x">x</a><a href="/w">w</a>', content_type="text/html")

    async def x(_request: web.Request) -> web.Response:
        x_fetched.set()
        return web.Response(text='<a href="/y">y</a>', content_type="text/html")

    site.page("/", "index", ["/slow", "/b"])
    site.handle("/slow", slow)
    site.page("/b", "b", ["/c"])
    site.page("/c", "c", ["/x"])
    site.handle("/x", x)
    site.page("/w", "w")
    site.page("/y", "y")
    settings = replace(TEST_SETTINGS, output=str(tmp_path / "pages.jsonl"), gate_timeout=0.2)

    async with Crawler([site.url + "/"], settings) as crawler:
        await crawler.crawl()

    records = by_url(read_records(tmp_path / "pages.jsonl"))
    found = {url.rpartition("/")[2]: (r["depth"], r["referrer"]) for url, r in records.items()}
    assert found == {
        "": (0, None),
        "slow": (1, site.url + "/"),
        "b": (1, site.url + "/"),
        "c": (2, site.url + "/b"),
        "x": (3, site.url + "/c"),  # claimed deeper before /slow answered: keeps depth 3
        "w": (2, site.url + "/slow"),  # claimed when /slow answered
        "y": (4, site.url + "/x"),
    }
    assert crawler.stats["depth_inexact"] == 1


async def test_gate_timeout_0_waits_for_the_slow_page_however_long(site: Site, tmp_path):
    site.page("/", "index", ["/slow", "/b"])
    site.page("/slow", "slow", ["/x"], delay_s=0.6)
    site.page("/b", "b", ["/c"])
    site.page("/c", "c", ["/x"])
    site.page("/x", "x")
    settings = replace(TEST_SETTINGS, output=str(tmp_path / "pages.jsonl"), gate_timeout=0)

    async with Crawler([site.url + "/"], settings) as crawler:
        await crawler.crawl()

    x = by_url(read_records(tmp_path / "pages.jsonl"))[site.url + "/x"]
    assert (x["depth"], x["referrer"]) == (2, site.url + "/slow")
    assert crawler.stats["depth_inexact"] == 0


def test_the_gate_timeout_is_10_s_by_default():
    assert DEFAULT_GATE_TIMEOUT_S == 10.0


def full_hold_scene(site: Site, site2: Site, tmp_path: Path, **overrides: object) -> Settings:
    """/ -> b -> c0..c4 -> x on a fast host, and / -> s1, s2 on one whose Crawl-delay keeps
    s2 queued for half a second (b, the c pages and x take milliseconds), while the five
    c pages (depth 2) wait for it."""

    async def robots(_request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nCrawl-delay: 0.5\n")

    site2.handle("/robots.txt", robots)
    site.page("/", "index", [f"{site2.url}/s1", f"{site2.url}/s2", "/b"])
    site2.page("/s1", "s1")
    site2.page("/s2", "s2", [f"{site.url}/x"])
    site.page("/b", "b", [f"/c{n}" for n in range(5)])
    for n in range(5):
        site.page(f"/c{n}", f"c{n}", ["/x", f"/d{n}"])
        site.page(f"/d{n}", f"d{n}")
    site.page("/x", "x")
    return replace(
        TEST_SETTINGS,
        output=str(tmp_path / "pages.jsonl"),
        ignore_robots=False,
        allow_host=("127.0.0.2",),
        allow_private_addresses=True,
        per_host=8,
        **overrides,
    )


@pytest.mark.parametrize("archived", [False, True])
async def test_pages_let_go_past_a_full_hold_count_the_depths_they_get_wrong(
    site: Site, site2: Site, tmp_path, monkeypatch, archived
):
    # The hold takes two pages: three c pages go ahead of s2 and claim x at depth 3,
    # though s2 (depth 1) links to it. The crawl says so. So it does with --state
    # when held pages keep their response for --warc: they stay in memory.
    monkeypatch.setattr("crawler.engine.MAX_HELD_PAGES", 2)
    on_disk = {"state": str(tmp_path / "state"), "warc": str(tmp_path / "warc")}
    settings = full_hold_scene(site, site2, tmp_path, **(on_disk if archived else {}))

    async with Crawler([site.url + "/"], settings) as crawler:
        await crawler.crawl()

    records = by_url(read_records(tmp_path / "pages.jsonl"))
    assert len(records) == 15
    x_started = next(hit.started for hit in site.hits if hit.path == "/x")
    assert x_started < next(hit.started for hit in site2.hits if hit.path == "/s2")
    assert records[site.url + "/x"]["depth"] == 3  # one too deep: s2 is depth 1
    assert crawler.stats["depth_inexact"] == 1


async def test_with_a_state_directory_held_pages_wait_on_disk_and_keep_depths_exact(
    site: Site, site2: Site, tmp_path, monkeypatch
):
    # The same scene, with one held page in memory: the others wait on disk, past the
    # two pages the hold takes in memory alone.
    monkeypatch.setattr("crawler.engine.MAX_HELD_PAGES", 2)
    monkeypatch.setattr("crawler.held.IN_MEMORY", 1)
    state = tmp_path / "state"
    settings = full_hold_scene(site, site2, tmp_path, state=str(state))

    async with Crawler([site.url + "/"], settings) as crawler:
        await crawler.crawl()

    records = by_url(read_records(tmp_path / "pages.jsonl"))
    assert len(records) == 15
    x_started = next(hit.started for hit in site.hits if hit.path == "/x")
    assert x_started > next(hit.started for hit in site2.hits if hit.path == "/s2")
    assert records[site.url + "/x"]["depth"] == 2
    assert records[site.url + "/x"]["referrer"] == site2.url + "/s2"
    assert {records[f"{site.url}/d{n}"]["referrer"] for n in range(5)} == {
        f"{site.url}/c{n}" for n in range(5)
    }
    assert crawler.stats["depth_inexact"] == 0
    with sqlite3.connect(state / "crawl.sqlite") as db:  # each held page's row left with it
        assert db.execute("SELECT count(*) FROM held").fetchone() == (0,)


def test_claims_made_past_a_shallower_page_are_counted_once_and_forgotten_when_it_is_done():
    gate = BreadthFirstGate(Counter({1: 1, 2: 1}))
    shallow, deep = Request("http://a/1", 1, None), Request("http://a/2", 2, None)

    assert gate.checked_claims(deep, ["x", "y"], [True, True]) == 0  # past the depth-1 page
    assert gate.checked_claims(shallow, ["x", "z"], [False, True]) == 1  # x is depth 3, not 2
    assert gate.checked_claims(shallow, ["x"], [False]) == 0
    gate.finished(deep)
    assert gate.claims_checked
    gate.finished(shallow)
    assert not gate.claims_checked
