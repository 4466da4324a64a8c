"""--revisit DIR: rounds without end, each page again when due, on an adaptive schedule."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest
from aiohttp import web

from crawler.revisit import AdaptiveSchedule, rounds_in
from tests.conftest import Site, by_url, html, read_records
from tests.test_recrawl import Validating, crawl_to, tree_bodies


def test_the_interval_shrinks_on_change_grows_without_and_stays_within_bounds() -> None:
    schedule = AdaptiveSchedule(100.0, 50.0, 200.0, inc_rate=0.2, dec_rate=0.3)
    assert schedule.next_interval_s(None, None) == 100.0  # first seen
    assert schedule.next_interval_s(100.0, True) == pytest.approx(70.0)
    assert schedule.next_interval_s(100.0, False) == pytest.approx(120.0)
    assert schedule.next_interval_s(100.0, None) == 100.0  # no answer: nothing learned
    assert schedule.next_interval_s(60.0, True) == 50.0
    assert schedule.next_interval_s(190.0, False) == 200.0


async def test_rounds_go_on_fetching_each_page_when_due_until_sigterm(
    site: Site, tmp_path: Path
) -> None:
    bodies = {"/": html("Home", ["/news", "/about"]), "/about": html("About")}
    pages = Validating(site, bodies)
    served_news: list[int] = []
    round_started = {n: asyncio.Event() for n in (4, 5)}

    async def news(request: web.Request) -> web.Response:
        served_news.append(len(served_news) + 1)
        if len(served_news) in round_started:
            round_started[len(served_news)].set()
        bodies["/news"] = html(f"News {len(served_news)}")  # changes every time
        return await pages.serve(request)

    bodies["/news"] = html("News")
    site.handle("/news", news)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    directory = tmp_path / "fresh"
    command = [sys.executable, "-m", "crawler", str(seeds), "--revisit", str(directory)]
    # Round 3 comes when /news is due, 0.8 s before the others: time enough to be sure.
    command += ["--revisit-interval", "2", "--revisit-min-interval", "0.3"]
    command += ["--revisit-max-interval", "60", "--ignore-robots", "--quiet"]
    assert await _run_until(command, round_started[4]) == 143

    rounds = [by_url(read_records(directory / f"round-{n:05d}.jsonl")) for n in (1, 2, 3)]
    news_url, about_url = site.url + "/news", site.url + "/about"
    assert [r[news_url]["revisit_interval_s"] for r in rounds] == [2.0, 1.6, 1.28]
    assert [r[news_url].get("changed") for r in rounds] == [None, True, True]
    assert rounds[1][about_url]["status"] == 304
    assert rounds[1][about_url]["revisit_interval_s"] == 2.4
    # Round 3 came when /news was due, before / and /about were: they are carried over.
    for url in (site.url + "/", about_url):
        assert rounds[2][url].get("not_due") is True
        assert rounds[2][url]["due_at"] == rounds[1][url]["due_at"]
    assert rounds[2][about_url]["title"] == "About"
    done = rounds_in(directory)[:-1]  # the last may have been cut short
    written = {n: (directory / f"round-{n:05d}.jsonl").stat().st_mtime_ns for n in done}

    # The same DIR again: it goes on from the round it was in, and leaves the others be.
    assert await _run_until(command, round_started[5]) == 143
    assert {n: (directory / f"round-{n:05d}.jsonl").stat().st_mtime_ns for n in done} == written
    assert max(rounds_in(directory)) >= max(done) + 1
    assert len(served_news) >= 5


async def _run_until(command: list[str], event: asyncio.Event) -> int:
    """Run the CLI until `event`, then SIGTERM it; its exit code."""
    process = await asyncio.create_subprocess_exec(*command, stderr=asyncio.subprocess.PIPE)
    waiting = asyncio.ensure_future(event.wait())
    exited = asyncio.ensure_future(process.wait())
    await asyncio.wait({waiting, exited}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    assert not exited.done(), (await process.stderr.read()).decode()  # type: ignore[union-attr]
    process.send_signal(signal.SIGTERM)
    await process.communicate()
    return process.returncode or 0


async def test_kill_9_in_a_round_then_the_same_command_goes_on_with_each_page_once(
    site: Site, tmp_path: Path
) -> None:
    count = 60
    bodies = tree_bodies(count, fan_out=3)
    Validating(site, bodies)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/p/0\n")
    directory = tmp_path / "fresh"
    command = [sys.executable, "-m", "crawler", str(seeds), "--revisit", str(directory)]
    command += ["--revisit-interval", "0.5", "--revisit-min-interval", "0.3"]
    command += ["--ignore-robots", "--quiet", "--per-host", "2", "--concurrency", "2"]
    for hits in (count + 20, 2 * count + 20):  # in round 2, then in round 3
        reached = site.hits_reached(hits)
        process = await asyncio.create_subprocess_exec(*command)
        await reached.wait()
        process.kill()
        await process.wait()
    assert await _run_until(command, site.hits_reached(3 * count + 10)) == 143
    for number in rounds_in(directory)[:-1]:
        records = read_records(directory / f"round-{number:05d}.jsonl")
        assert sorted(r["url"] for r in records) == sorted(site.url + p for p in bodies)


async def test_a_sitemap_lastmod_brings_a_page_forward_while_its_host_proves_it_right(
    site: Site, tmp_path: Path
) -> None:
    bodies = {"/": html("Home", ["/c"]), "/a": html("A"), "/b": html("B"), "/c": html("C")}
    Validating(site, bodies)
    lastmod = {"/a": "2020-01-01", "/b": "2020-01-01"}

    async def sitemap(_request: web.Request) -> web.Response:
        urls = "".join(
            f"<url><loc>{site.url}{path}</loc><lastmod>{when}</lastmod></url>"
            for path, when in lastmod.items()
        )
        xml = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        return web.Response(text=xml, content_type="application/xml")

    site.handle("/sitemap.xml", sitemap)
    site.page("/robots.txt", content_type="text/plain", body=f"Sitemap: {site.url}/sitemap.xml\n")
    schedule = {
        "revisit": str(tmp_path / "rounds"),  # the API crawls one round: the schedule is on
        "revisit_interval": 3600.0,  # nothing is due by its schedule in this test
        "sitemaps": True,
        "ignore_robots": False,
    }
    await crawl_to(tmp_path / "1.jsonl", [site.url + "/"], **schedule)

    now = "2100-01-01T00:00:00+00:00"  # later than any fetch
    lastmod.update({"/a": now, "/b": now})
    bodies["/a"] = html("A, changed")  # /b is not: its lastmod is wrong
    second, _ = await crawl_to(
        tmp_path / "2.jsonl", [site.url + "/"], since=str(tmp_path / "1.jsonl"), **schedule
    )
    records = by_url(second)
    assert records[site.url + "/a"]["changed"] is True
    assert records[site.url + "/a"]["lastmod_right"] is True
    assert records[site.url + "/b"]["status"] == 304
    assert records[site.url + "/b"]["lastmod_right"] is False
    assert records[site.url + "/c"]["not_due"] is True

    site.hits.clear()
    bodies["/a"] = html("A, changed again")
    third, _ = await crawl_to(
        tmp_path / "3.jsonl", [site.url + "/"], since=str(tmp_path / "2.jsonl"), **schedule
    )
    records = by_url(third)
    assert records[site.url + "/a"]["not_due"] is True  # the host's lastmod lied about /b
    assert site.count("/a") == site.count("/b") == 0
    assert records[site.url + "/b"]["lastmod_right"] is False  # carried: still distrusted
