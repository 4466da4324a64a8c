"""Traps end: repeating paths, deep paths, long queries, endless session ids, a cap per host."""

from __future__ import annotations

import json
import re
import secrets
import signal
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from crawler import Crawler
from crawler.state.host_counts import SqliteClaims
from tests.conftest import TEST_SETTINGS, Site, html, read_records
from tests.test_cli import run_cli_async
from tests.test_state import Run


async def crawl_with_stats(
    tmp_path: Path, seeds: list[str], **overrides: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    output = tmp_path / "pages.jsonl"
    settings = replace(TEST_SETTINGS, output=str(output), **overrides)
    async with Crawler(seeds, settings) as crawler:
        await crawler.crawl()
    return read_records(output), crawler.stats


def relative_loop(site: Site, levels: int) -> None:
    """/a/b/ links to "a/b/" relative to itself: /a/b/a/b/, /a/b/a/b/a/b/, ... endlessly."""
    site.page("/", "index", ["/a/b/"])
    for n in range(1, levels + 1):
        site.page("/a/b" * n + "/", f"level {n}", ["a/b/"])


async def test_a_path_that_repeats_a_run_of_segments_three_times_is_dropped(site: Site, tmp_path):
    relative_loop(site, 5)

    records, stats = await crawl_with_stats(tmp_path, [site.url + "/"])

    assert set(site.paths()) == {"/", "/a/b/", "/a/b/a/b/"}
    assert len(records) == 3
    assert stats["dropped"] == {"repeating_path": 1}


async def test_the_repeating_path_rule_can_be_turned_off(site: Site, tmp_path):
    relative_loop(site, 5)

    _, stats = await crawl_with_stats(
        tmp_path, [site.url + "/"], drop_repeating_paths=False, max_depth=4
    )

    assert site.count("/a/b/a/b/a/b/a/b/") == 1
    assert stats["dropped"] == {}


async def test_paths_deeper_than_max_path_depth_are_dropped(site: Site, tmp_path):
    site.page("/", "index", ["/1/2/3", "/1/2/3/", "/1/2/3/4"])

    _, stats = await crawl_with_stats(tmp_path, [site.url + "/"], max_path_depth=3)

    assert set(site.paths()) == {"/", "/1/2/3", "/1/2/3/"}
    assert stats["dropped"] == {"path_too_deep": 1}
    await crawl_with_stats(tmp_path, [site.url + "/"], max_path_depth=0)
    assert site.count("/1/2/3/4") == 1


async def test_urls_with_more_than_max_query_params_are_dropped(site: Site, tmp_path):
    site.page("/", "index", ["/s?a=1&b=2", "/s?a=1&b=2&c=3"])

    _, stats = await crawl_with_stats(tmp_path, [site.url + "/"], max_query_params=2)

    assert set(site.paths()) == {"/", "/s?a=1&b=2"}
    assert stats["dropped"] == {"too_many_query_params": 1}
    await crawl_with_stats(tmp_path, [site.url + "/"], max_query_params=0)
    assert site.count("/s?a=1&b=2&c=3") == 1


async def test_urls_longer_than_max_url_length_are_dropped_and_counted_once(site: Site, tmp_path):
    # A search form's trap: each result page links to a query one term longer.
    site.page("/", "index", ["/s?q=a", "/p"])
    site.page("/p", "p", ["/s?q=a+b+c+d+e+f+g+h"])  # a second link to a too long URL
    site.page("/s?q=a", "a", ["/s?q=a+b", "/s?q=a+b+c+d+e+f+g+h"])
    site.page("/s?q=a+b", "a b", ["/s?q=a+b+c+d+e+f+g+h"])
    limit = len(site.url + "/s?q=a+b")

    records, stats = await crawl_with_stats(tmp_path, [site.url + "/"], max_url_length=limit)

    assert set(site.paths()) == {"/", "/p", "/s?q=a", "/s?q=a+b"}
    assert len(records) == 4
    assert stats["dropped"] == {"url_too_long": 1}  # one URL, however many links to it


def session_id_site(site: Site) -> None:
    """Every page links to three pages under a fresh ?sid=: endless unique URLs."""

    async def page(_request: web.Request) -> web.Response:
        links = [f"/page?sid={secrets.token_hex(8)}" for _ in range(3)]
        return web.Response(text=html("page", links), content_type="text/html")

    site.handle("/", page)
    site.handle("/page", page)


async def test_endless_session_id_links_end_at_the_depth_limit(site: Site, tmp_path):
    session_id_site(site)

    records, _ = await crawl_with_stats(tmp_path, [site.url + "/"], max_depth=3)

    assert len(records) == 1 + 3 + 9 + 27
    assert len(site.hits) == len(records)


async def test_endless_session_id_links_end_at_max_pages_per_host(site: Site, tmp_path):
    session_id_site(site)

    records, stats = await crawl_with_stats(
        tmp_path, [site.url + "/"], max_depth=1000, max_pages_per_host=25
    )

    assert len(records) == 25
    assert len(site.hits) == 25
    assert stats["dropped"]["max_pages_per_host"] > 0


async def test_max_pages_per_host_counts_each_host_on_its_own(site: Site, site2: Site, tmp_path):
    for server in (site, site2):
        server.page("/", "index", [f"/p{n}" for n in range(10)])

    records, stats = await crawl_with_stats(
        tmp_path, [site.url + "/", site2.url + "/"], max_pages_per_host=4
    )

    assert len(site.hits) == len(site2.hits) == 4
    assert len(records) == 8
    assert stats["dropped"] == {"max_pages_per_host": 14}


async def assert_a_sitemaps_pages_meet_the_per_host_cap(
    site: Site, tmp_path: Path, **where: Any
) -> None:
    """A sitemap of 50 pages, with --max-pages-per-host 10: its pages count as links do."""
    site.page("/", "index", ["/linked"])
    entries = "".join(f"<url><loc>/p{n}</loc></url>" for n in range(50))
    site.page("/sitemap.xml", body=f"<urlset>{entries}</urlset>", content_type="application/xml")

    records, stats = await crawl_with_stats(
        tmp_path, [site.url + "/"], max_pages_per_host=10, sitemaps=True, **where
    )

    pages = [r for r in records if r["kind"] == "page"]
    assert len(pages) == 10  # the seed, its link and 8 of the sitemap's: the sitemap is none
    assert len(site.hits) == 11
    assert stats["dropped"] == {"max_pages_per_host": 42}  # of the 52 pages known


@pytest.mark.parametrize("state", [False, True])
async def test_max_pages_per_host_holds_for_the_pages_a_sitemap_lists(site: Site, tmp_path, state):
    where = {"state": str(tmp_path / "state")} if state else {}
    await assert_a_sitemaps_pages_meet_the_per_host_cap(site, tmp_path, **where)


async def test_many_spellings_still_cost_one_request_and_one_claim(site: Site, tmp_path):
    spellings = ["/x", "/x#top", "/./x", "/y/../x", "/%78", "x", "/x?", f"{site.url}/x", " /x\n"]
    site.page("/", "index", spellings)
    site.page("/x", "X")

    records, stats = await crawl_with_stats(
        tmp_path, [site.url + "/"], max_pages_per_host=2, max_path_depth=1, max_query_params=1
    )

    assert site.paths() == {"/": 1, "/x": 1}
    assert len(records) == 2
    assert stats["dropped"] == {}


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
async def test_max_pages_per_host_holds_across_an_interrupted_run(
    site: Site, tmp_path: Path, how: signal.Signals
) -> None:
    """A kill -9 before the first checkpoint (a second) lost the host's claims, and the
    resumed crawl fetched 28 of its pages under --max-pages-per-host 20."""
    for n in range(60):
        site.page(f"/p/{n}", str(n), [f"/p/{n + 1}", f"/p/{n + 2}"], delay_s=0.01)
    run = Run(site, tmp_path, "--max-pages-per-host", "20", "--ignore-robots", "--max-depth", "99")
    await run.interrupted_after(8, how)

    code, _ = await run.until_done()

    assert code == 0
    assert len({r["url"] for r in read_records(run.output)}) == 20
    assert len(site.paths()) == 20


async def test_a_state_directory_keeps_each_hosts_claims_in_a_table_not_in_memory(
    site: Site, site2: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each checkpoint (once a second) wrote every host's --max-pages-per-host claims in
    its JSON figures (1.65 s at 10^6 hosts), and every host's stayed in memory (108 MiB).
    They are rows, of which memory keeps the hosts asked about last (a resume reading
    them back: the tests above); the stats file's last write reads them all."""
    monkeypatch.setattr(SqliteClaims, "MAX_CACHED", 1)
    for server, other in ((site, site2), (site2, site)):  # each page links to both hosts
        server.page("/", "index", [f"/p{n}" for n in range(10)] + [f"{other.url}/"])
        for n in range(10):
            server.page(f"/p{n}", str(n), [f"{other.url}/p{n}"])
    state = tmp_path / "state"
    settings = replace(
        TEST_SETTINGS,
        allow_host=("127.0.0.2",),
        allow_private_addresses=True,
        max_pages_per_host=4,
        state=str(state),
        stats=str(tmp_path / "stats.json"),
        output=str(tmp_path / "pages.jsonl"),
    )
    async with Crawler([site.url + "/"], settings) as crawler:
        await crawler.crawl()
        claims = crawler._opened().stats.claims_per_host

    assert len(site.hits) == len(site2.hits) == 4
    assert isinstance(claims, SqliteClaims) and len(claims._counts) == 1
    db = sqlite3.connect(state / "crawl.sqlite")
    try:
        rows = dict(db.execute("SELECT host, records FROM claims"))
        [(figures,)] = db.execute("SELECT value FROM meta WHERE name = 'stats'")
    finally:
        db.close()
    assert sorted(rows.values()) == [4, 4] and len(rows) == 2
    assert "claims_per_host" not in json.loads(figures)
    assert json.loads((tmp_path / "stats.json").read_text())["claims_per_host"] == rows


async def test_expected_missed_urls_survive_a_resume(site: Site, tmp_path):
    for n in range(60):
        site.page(f"/p/{n}", str(n), [f"/p/{n + 1}", f"/p/{n + 2}"], delay_s=0.01)
    stats_file = tmp_path / "stats.json"
    run = Run(site, tmp_path, "--ignore-robots", "--expected-urls", "50", "--fp-rate", "0.01")
    run.extra += ("--stats", str(stats_file), "--max-depth", "99")
    await run.interrupted_after(30, signal.SIGINT)
    first = json.loads(stats_file.read_text())["visited"]["expected_missed_urls"]

    code, _ = await run.until_done()

    final = json.loads(stats_file.read_text())["visited"]["expected_missed_urls"]
    assert code == 0
    assert 0 < first < final < 1


async def test_the_summary_says_how_many_urls_max_pages_left_unfetched(site: Site, tmp_path):
    site.page("/", "home", [f"/p{n}" for n in range(12)])
    for n in range(12):
        site.page(f"/p{n}", f"p{n}")
    (tmp_path / "seeds.txt").write_text(f"{site.url}/\n")

    code, _, err = await run_cli_async(
        str(tmp_path / "seeds.txt"),
        "--max-pages",
        "5",
        "--ignore-robots",
        "-o",
        str(tmp_path / "o"),
    )

    assert code == 0
    row = re.search(r"\n  not fetched +(.*)", err)
    assert row is not None and re.split(r"  +", row[1]) == [
        "8",
        "URLs still queued when the crawl stopped",
    ]
    assert len(read_records(tmp_path / "o")) == len(site.paths()) == 5


async def test_the_summary_counts_a_request_abandoned_at_ctrl_c_as_not_fetched(
    site: Site, tmp_path: Path
) -> None:
    """A request still in flight when --drain-timeout ran out has no record; the summary
    said nothing of it, as if the crawl had fetched everything it found."""
    import asyncio
    import sys

    async def hang(_request: web.Request) -> web.Response:
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    site.page("/", "home", ["/slow"])
    site.handle("/slow", hang)
    (tmp_path / "seeds.txt").write_text(f"{site.url}/\n")
    asked = site.hits_reached(2)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", str(tmp_path / "seeds.txt"), "-o", str(tmp_path / "o"),
        "--ignore-robots", "--drain-timeout", "0.2", stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await asyncio.wait_for(asked.wait(), 30)
    process.send_signal(signal.SIGINT)
    _, err = await process.communicate()

    assert process.returncode == 130
    row = re.search(r"\n  not fetched +(.*)", err.decode())
    assert row is not None and re.split(r"  +", row[1]) == [
        "1",
        "URL still queued (0) or in flight (1) when the crawl stopped",
    ]
    assert [r["url"] for r in read_records(tmp_path / "o")] == [f"{site.url}/"]
