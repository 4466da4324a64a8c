"""--since PREV: a recrawl asks conditionally, says what changed, and archives only what is new."""

from __future__ import annotations

import asyncio
import codecs
import fcntl
import gzip
import hashlib
import itertools
import json
import logging
import os
import random
import signal
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from crawler import ConfigError, Crawler, Page, Settings
from crawler.sinks.wacz import with_referred_files
from tests.archive_tools import run_tool
from tests.conftest import TEST_SETTINGS, Site, Wayback, by_url, html, read_records
from tests.nginx_server import Nginx
from tests.test_crawl import reset_connection
from tests.test_state import Run
from tests.test_traps import raw
from tests.test_wacz import assert_index_is_cdxj_indexers
from tests.test_warc import read_archive, warc_files

LAST_MODIFIED = "Mon, 02 Nov 2026 10:00:00 GMT"


class Validating:
    """Pages served with ETag and Last-Modified, answering conditional requests with 304;
    `bodies` may change between crawls."""

    def __init__(self, site: Site, bodies: dict[str, str]) -> None:
        self.site, self.bodies = site, bodies
        self.not_modified: list[str] = []  # paths answered 304
        for path in bodies:
            site.handle(path, self.serve)

    def etag(self, body: bytes) -> str:
        return '"' + hashlib.sha1(body).hexdigest()[:16] + '"'

    async def serve(self, request: web.Request) -> web.Response:
        if request.path not in self.bodies:
            return web.Response(status=404, text="gone")
        body = self.bodies[request.path].encode()
        headers = {"ETag": self.etag(body), "Last-Modified": LAST_MODIFIED}
        if request.headers.get("If-None-Match") == headers["ETag"]:
            self.not_modified.append(request.path)
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, headers=headers, content_type="text/html")


async def crawl_to(
    output: Path, seeds: list[str], **overrides: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    settings = replace(TEST_SETTINGS, output=str(output), **overrides)
    async with Crawler(seeds, settings) as crawler:
        await crawler.crawl()
        stats = crawler.stats
    return read_records(output), stats


async def crawl_again(
    site: Site, tmp_path: Path, **overrides: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The second crawl of `site` from /, since the first (first.jsonl), into second.jsonl."""
    since = str(tmp_path / "first.jsonl")
    return await crawl_to(tmp_path / "second.jsonl", [site.url + "/"], since=since, **overrides)


def tree_bodies(count: int, fan_out: int) -> dict[str, str]:
    """Pages /p/0 ... /p/{count-1}, page n linking to the `fan_out` pages after fan_out * n."""
    return {
        f"/p/{n}": html(
            f"page {n}",
            [f"/p/{m}" for m in range(fan_out * n + 1, fan_out * (n + 1) + 1) if m < count],
        )
        for n in range(count)
    }


def tree_site(site: Site) -> Validating:
    """/ -> /a -> /a/deep -> /a/deep/deeper, and / -> /b, /c."""
    return Validating(
        site,
        {
            "/": html("Home", ["/a", "/b", "/c"]),
            "/a": html("A", ["/a/deep"]),
            "/a/deep": html("Deep", ["/a/deep/deeper"]),
            "/a/deep/deeper": html("Deeper"),
            "/b": html("B"),
            "/c": html("C"),
        },
    )


async def test_a_recrawl_asks_conditionally_and_goes_on_through_pages_that_did_not_change(
    site: Site, tmp_path: Path
) -> None:
    pages = tree_site(site)
    first, _ = await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    assert all(r["etag"] and r["last_modified"] == LAST_MODIFIED for r in first)
    pages.bodies["/b"] = html("B, new", ["/b/new"])
    pages.bodies["/b/new"] = html("New")
    site.handle("/b/new", pages.serve)
    del pages.bodies["/c"]
    site.hits.clear()

    second, stats = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    records = by_url(second)
    seen = {hit.path: hit.headers for hit in site.hits}
    for path in ["/", "/a", "/a/deep", "/a/deep/deeper", "/b", "/c"]:
        assert seen[path]["If-None-Match"] == by_url(first)[site.url + path]["etag"]
        assert seen[path]["If-Modified-Since"] == LAST_MODIFIED
    assert "If-None-Match" not in seen["/b/new"]
    assert sorted(pages.not_modified) == ["/", "/a", "/a/deep", "/a/deep/deeper"]
    unchanged = records[site.url + "/a/deep"]
    assert unchanged["status"] == 304 and unchanged["changed"] is False
    assert unchanged["title"] == "Deep" and unchanged["links"] == [site.url + "/a/deep/deeper"]
    assert unchanged["content_digest"] == by_url(first)[site.url + "/a/deep"]["content_digest"]
    assert records[site.url + "/a/deep/deeper"]["depth"] == 3  # reached through 304s
    assert records[site.url + "/b"]["changed"] is True
    assert records[site.url + "/b/new"]["changed"] is None
    assert records[site.url + "/c"]["status"] == 404 and records[site.url + "/c"]["changed"]
    recrawl = stats["recrawl"]
    assert recrawl["checked"] == 6 and recrawl["unchanged_304"] == 4
    assert recrawl["changed"] == 2 and recrawl["new"] == 1 and recrawl["gone"] == 0
    saved = sum(by_url(first)[site.url + p]["bytes"] for p in pages.not_modified)
    assert recrawl["body_bytes_saved"] == saved
    assert stats["bytes"] == sum(r["bytes"] for r in second if r["status"] != 304)


async def test_a_304_page_keeps_the_main_content_extract_found_and_its_near_duplicates(
    site: Site, tmp_path: Path
) -> None:
    article = "<article><h1>News</h1>" + "<p>What happened today, told at length.</p>" * 20
    Validating(
        site,
        {
            "/": html("Home", ["/copy"], body=article + "</article>"),
            "/copy": html("Copy", body=article + "</article>"),
        },
    )
    first, _ = await crawl_to(tmp_path / "first.jsonl", [site.url + "/"], extract=True)
    second, _ = await crawl_to(
        tmp_path / "second.jsonl",
        [site.url + "/"],
        since=str(tmp_path / "first.jsonl"),
        extract=True,
    )
    assert {r["status"] for r in second} == {304}
    extracted = ("main_text", "markdown", "metadata", "simhash", "near_duplicate_of")
    for before, after in zip(first, second, strict=True):
        assert {f: before.get(f) for f in extracted} == {f: after.get(f) for f in extracted}
    assert by_url(second)[site.url + "/copy"]["near_duplicate_of"] == site.url + "/"


@pytest.mark.parametrize(("option", "field"), [("text", "text"), ("extract", "main_text")])
async def test_a_recrawl_wanting_what_the_previous_crawl_did_not_keep_fetches_html_whole(
    site: Site, tmp_path: Path, option: str, field: str
) -> None:
    # A 304 would carry no text, in this recrawl and in every one after it.
    pages = Validating(
        site, {"/": html("Home", ["/b", "/pic.png"], body="<p>Hello</p>"), "/b": html("B")}
    )

    async def image(_request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG", headers={"ETag": '"p"'}, content_type="image/png")

    site.handle("/pic.png", image)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    site.hits.clear()
    second, stats = await crawl_to(
        tmp_path / "second.jsonl",
        [site.url + "/"],
        since=str(tmp_path / "first.jsonl"),
        **{option: True},
    )
    records = by_url(second)
    asked = {hit.path: hit.headers.get("If-None-Match") for hit in site.hits}
    assert asked == {"/": None, "/b": None, "/pic.png": '"p"'}  # the image has no text
    assert "Hello" in records[site.url + "/"][field] and field in records[site.url + "/b"]
    assert {r["changed"] for r in second} == {False}
    assert stats["recrawl"]["unchanged_same_digest"] == 3 and not pages.not_modified
    third, _ = await crawl_to(
        tmp_path / "third.jsonl",
        [site.url + "/"],
        since=str(tmp_path / "second.jsonl"),
        **{option: True},
    )
    assert sorted(pages.not_modified) == ["/", "/b"]
    assert "Hello" in by_url(third)[site.url + "/"][field]


async def test_a_304_keeps_the_fields_an_on_page_hook_found_in_the_body_before(
    site: Site, tmp_path: Path
) -> None:
    # The README's hook: a 304 has no body, so no tree, and the hook adds nothing to it.
    def prices(page: Page) -> dict[str, Any] | None:
        if page.tree is None:
            return None
        return {"prices": [n.text(strip=True) for n in page.tree.css(".price")]}

    Validating(site, {"/": html("Shop", ["/b"], body="<p class=price>3 EUR</p>"), "/b": html("B")})
    records = []
    for name, since in (("first", None), ("second", "first"), ("third", "second")):
        settings = replace(TEST_SETTINGS, output=str(tmp_path / f"{name}.jsonl"))
        if since is not None:
            settings = replace(settings, since=str(tmp_path / f"{since}.jsonl"))
        async with Crawler([site.url + "/"], settings, on_page=prices) as crawler:
            await crawler.crawl()
        records.append(by_url(read_records(tmp_path / f"{name}.jsonl")))
    for later in records[1:]:
        assert {r["status"] for r in later.values()} == {304}
        assert (
            later[site.url + "/"]["prices"] == ["3 EUR"] and later[site.url + "/b"]["prices"] == []
        )


async def test_a_page_titled_as_a_field_of_the_history_is_read_as_its_title(
    site: Site, tmp_path: Path
) -> None:
    Validating(site, {"/": html("final_url")})
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    (record,), _ = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    assert (record["status"], record["error"], record["title"]) == (304, None, "final_url")


async def test_a_page_no_link_reaches_any_more_is_counted_gone_not_fetched(
    site: Site, tmp_path: Path
) -> None:
    pages = tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    pages.bodies["/"] = html("Home", ["/a", "/b"])
    site.hits.clear()
    _, stats = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    assert site.count("/c") == 0
    assert stats["recrawl"]["gone"] == 1 and stats["recrawl"]["changed"] == 1


async def test_a_recrawl_stopped_before_its_links_were_all_followed_counts_none_gone(
    site: Site, tmp_path: Path
) -> None:
    # --max-pages 2 stops it with /b and /c queued and /a's page under it never seen:
    # none of them is known to be gone (a search index would drop them).
    tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    seeds = _write(tmp_path / "seeds.txt", f"{site.url}/\n".encode())
    code, err = await run_cli(
        *(str(seeds), "-o", str(tmp_path / "second.jsonl"), "--ignore-robots", "--max-pages"),
        *("2", "--since", str(tmp_path / "first.jsonl"), "--stats", str(tmp_path / "s.json")),
    )
    assert code == 0, err
    recrawl = json.loads((tmp_path / "s.json").read_text())["recrawl"]
    assert recrawl["checked"] == 2 and recrawl["gone"] is None
    gone = next(line for line in err.splitlines() if line.startswith("  gone"))
    assert gone.split()[1] == "-" and "not followed" in gone


async def test_a_recrawl_whose_host_budget_left_links_unfollowed_counts_none_gone(
    site: Site, tmp_path: Path
) -> None:
    tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    second, stats = await crawl_again(site, tmp_path, max_pages_per_host=2)
    assert len(second) == 2 and stats["dropped"]["max_pages_per_host"] > 0
    assert stats["recrawl"]["gone"] is None


async def test_a_prev_holding_a_url_twice_counts_it_once_and_takes_its_latest_fetch(
    site: Site, tmp_path: Path
) -> None:
    # Concatenated outputs (processes of a --redis crawl, one URL fetched again after a
    # lease ran out), in any order: the page is one of the previous crawl's, as it was
    # last seen.
    first, second, prev = (tmp_path / name for name in ("1.jsonl", "2.jsonl", "both.jsonl"))
    pages = tree_site(site)
    await crawl_to(first, [site.url + "/"])
    pages.bodies["/b"] = html("B, new")
    await crawl_to(second, [site.url + "/"])
    prev.write_bytes(second.read_bytes() + first.read_bytes())
    site.hits.clear()
    third, stats = await crawl_to(tmp_path / "third.jsonl", [site.url + "/"], since=str(prev))
    assert by_url(third)[site.url + "/b"]["changed"] is False
    assert sorted(pages.not_modified) == sorted(p for p in pages.bodies)
    recrawl = stats["recrawl"]
    assert (recrawl["previous_pages"], recrawl["checked"], recrawl["gone"]) == (6, 6, 0)


async def test_a_previous_page_that_gives_no_response_now_is_changed_null_failed_and_gone(
    site: Site, tmp_path: Path
) -> None:
    pages = tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    site.handle("/b", reset_connection)
    second, stats = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    failed = by_url(second)[site.url + "/b"]
    assert (failed["status"], failed["error"]) == (None, "connection_error")
    assert failed["changed"] is None
    recrawl = stats["recrawl"]
    assert recrawl["checked"] == len(pages.bodies) - 1 and recrawl["changed"] == 0
    assert recrawl["failed"] == 1 and recrawl["gone"] == 1


async def test_a_previous_page_a_redirect_now_reaches_is_not_gone(
    site: Site, tmp_path: Path
) -> None:
    # Now only /old's redirects reach /hop and /new: they answered, so they are not gone
    # (they have no record of their own: the redirect claimed them); /x, no longer linked,
    # is.
    pages = Validating(
        site,
        {
            "/": html("Home", ["/old", "/x", "/hop", "/new"]),
            "/old": html("Old"),
            "/x": html("X"),
            "/hop": html("Hop"),
            "/new": html("New"),
        },
    )
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    pages.bodies["/"] = html("Home", ["/old"])
    site.redirect("/old", "/hop", 302)
    site.redirect("/hop", "/new", 301)
    second, stats = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    records = by_url(second)
    assert records[site.url + "/old"]["final_url"] == site.url + "/new"
    assert site.url + "/new" not in records and site.url + "/hop" not in records
    recrawl = stats["recrawl"]
    assert (recrawl["reached_by_redirect"], recrawl["gone"]) == (2, 1)


async def test_a_page_that_now_redirects_is_changed_and_its_validators_go_where_redirects_end(
    site: Site, tmp_path: Path
) -> None:
    same = html("Same")
    pages = Validating(
        site, {"/": html("Home", ["/moved", "/redirects", "/elsewhere"]), "/moved": same}
    )
    for path in ("/moved/", "/target", "/old-target", "/new-target"):
        pages.bodies[path] = same if path == "/moved/" else html("Target")
        site.handle(path, pages.serve)
    site.redirect("/redirects", "/target", 301)
    site.redirect("/elsewhere", "/old-target", 301)
    first, _ = await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    site.redirect("/moved", "/moved/", 301)  # the same bytes, at another URL
    site.redirect("/elsewhere", "/new-target", 301)
    site.hits.clear()
    second, _ = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    records = by_url(second)
    assert records[site.url + "/moved"]["changed"] is True
    assert records[site.url + "/elsewhere"]["changed"] is True
    redirected = records[site.url + "/redirects"]
    assert (redirected["status"], redirected["changed"]) == (304, False)
    assert redirected["title"] == "Target"
    asked = {hit.path: hit.headers.get("If-None-Match") for hit in site.hits}
    assert asked["/target"] == by_url(first)[site.url + "/redirects"]["etag"]
    assert asked["/redirects"] is None and asked["/elsewhere"] is None
    assert pages.not_modified == ["/", "/target"]


async def test_a_redirect_to_where_it_led_before_is_unchanged_though_its_target_has_a_record_now(
    site: Site, tmp_path: Path
) -> None:
    # /docs -> /docs/ (a slash added), and the home page now links /docs/ itself: it is
    # claimed before /docs's redirect reaches it, so /docs's record is the 301. Nothing
    # changed at /docs.
    pages = Validating(site, {"/": html("Home", ["/docs"]), "/docs/": html("Docs")})
    site.redirect("/docs", "/docs/", 301)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    pages.bodies["/"] = html("Home", ["/docs/", "/docs"])
    second, stats = await crawl_again(site, tmp_path)
    docs = by_url(second)[site.url + "/docs"]
    assert (docs["status"], docs["final_url"], docs["changed"]) == (301, site.url + "/docs/", False)
    assert stats["recrawl"]["changed"] == 1  # the home page


async def test_a_link_straight_to_where_a_redirect_ended_before_asks_there_conditionally(
    site: Site, tmp_path: Path
) -> None:
    """/docs -> /docs/ before; now the home page links /docs/ itself. /docs/ was a new
    page (no record had its URL), fetched and archived whole, though it had not changed:
    it is asked with the validators the redirected fetch got there, and carries its links
    on, so /docs/deep is reached and unchanged too."""
    pages = Validating(
        site,
        {
            "/": html("Home", ["/docs"]),
            "/docs/": html("Docs", ["/docs/deep"]),
            "/docs/deep": html("Deep"),
        },
    )
    site.redirect("/docs", "/docs/", 301)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    pages.bodies["/"] = html("Home", ["/docs/"])
    second, stats = await crawl_again(site, tmp_path)
    docs = by_url(second)[site.url + "/docs/"]
    assert (docs["status"], docs["changed"], docs["title"]) == (304, False, "Docs")
    assert docs["links"] == [site.url + "/docs/deep"]
    assert sorted(pages.not_modified) == ["/docs/", "/docs/deep"]
    figures = stats["recrawl"]
    assert (figures["new"], figures["unchanged_304"], figures["changed"]) == (0, 2, 1)
    assert figures["gone"] == 0  # the page /docs led to is checked, at its own URL


async def test_a_server_that_ignores_validators_gives_unchanged_by_digest(
    site: Site, tmp_path: Path
) -> None:
    served = 0

    async def fresh_etag_every_time(_request: web.Request) -> web.Response:
        nonlocal served
        served += 1
        headers = {"ETag": f'"{served}"', "Last-Modified": LAST_MODIFIED}
        return web.Response(text=html("Same"), headers=headers, content_type="text/html")

    site.handle("/", fresh_etag_every_time)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    second, stats = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    assert site.hits[-1].headers["If-None-Match"] == '"1"'
    assert second[0]["status"] == 200 and second[0]["changed"] is False
    assert second[0]["etag"] == '"2"'
    assert stats["recrawl"]["unchanged_same_digest"] == 1


async def test_a_page_with_the_same_body_keeps_its_fields_unless_its_headers_read_it_anew(
    site: Site, tmp_path: Path
) -> None:
    """A 200 whose payload is the previous crawl's is not parsed again: its title and
    links are the previous record's, and the pages under it are reached as before. But
    the same bytes under another charset, or with a new X-Robots-Tag, are read afresh."""
    headers = {"/same": {}, "/charset": {}, "/robots-tag": {}}
    bodies = {
        "/same": html("Same", ["/same-child"]).encode(),
        "/charset": "<!DOCTYPE html><title>\u4e2d\u6587</title><a href=/charset-child>x</a>".encode(
            "gbk"
        ),
        "/robots-tag": html("Tagged", ["/tagged-child"]).encode(),
    }

    def serve(path: str) -> Any:
        async def handler(_request: web.Request) -> web.Response:
            fresh = {"ETag": f'"{time.time_ns()}"', "Content-Type": "text/html; charset=gbk"}
            return web.Response(body=bodies[path], headers={**fresh, **headers[path]})

        return handler

    for path in bodies:
        site.handle(path, serve(path))
    site.page("/", "Home", list(bodies))
    for child in ("/same-child", "/charset-child", "/tagged-child"):
        site.page(child, child)
    first, _ = await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    headers["/charset"] = {"Content-Type": "text/html; charset=utf-8"}
    headers["/robots-tag"] = {"X-Robots-Tag": "nofollow"}
    second, stats = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    before, after = by_url(first), by_url(second)
    same = after[site.url + "/same"]
    assert same["changed"] is False and same["status"] == 200
    assert (same["title"], same["links"]) == (
        before[site.url + "/same"]["title"],
        [site.url + "/same-child"],
    )
    assert after[site.url + "/same-child"]["depth"] == 2
    assert before[site.url + "/charset"]["title"] == "\u4e2d\u6587"
    assert after[site.url + "/charset"]["title"] != "\u4e2d\u6587"
    assert after[site.url + "/robots-tag"]["nofollow"] is True
    assert site.url + "/tagged-child" not in after
    assert stats["recrawl"]["unchanged_same_digest"] == 6  # and /, /same-child, /charset-child


async def test_a_page_parsed_in_part_before_is_parsed_again_and_says_so_again(
    site: Site, tmp_path: Path
) -> None:
    nested = "<div>" * 100_000 + "x" + "</div>" * 100_000
    site.page("/", "Home", ["/nested"])

    async def deep(_request: web.Request) -> web.Response:
        body = f"<title>Deep</title>{nested}<a href=/under>u</a>"
        return web.Response(text=body, content_type="text/html")

    site.handle("/nested", deep)
    site.page("/under", "Under")
    first, _ = await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    second, stats = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    for records in (first, second):
        page = by_url(records)[site.url + "/nested"]
        assert page["error"] == "html_too_complex" and page["links"] == [site.url + "/under"]
    assert by_url(second)[site.url + "/nested"]["changed"] is False
    assert stats["recrawl"]["unchanged_same_digest"] == 3


async def test_a_304_of_a_page_parsed_in_part_says_so_too_and_the_next_crawl_parses_it_again(
    site: Site, tmp_path: Path
) -> None:
    nested = "<div>" * 100_000 + "x" + "</div>" * 100_000
    body = f"<title>Deep</title>{nested}<a href=/under>u</a>"
    validating = True
    site.page("/", "Home", ["/nested"])

    async def deep(request: web.Request) -> web.Response:
        if validating and request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304, headers={"ETag": '"v1"'})
        return web.Response(text=body, headers={"ETag": '"v1"'}, content_type="text/html")

    site.handle("/nested", deep)
    site.page("/under", "Under")
    since = None
    for crawl in ("first", "second", "third"):
        validating = crawl != "third"  # then a server that ignores validators
        records, _ = await crawl_to(tmp_path / f"{crawl}.jsonl", [site.url + "/"], since=since)
        since = str(tmp_path / f"{crawl}.jsonl")
        page = by_url(records)[site.url + "/nested"]
        assert page["error"] == "html_too_complex", crawl
        assert page["status"] == (304 if crawl == "second" else 200)


async def test_a_last_modified_in_the_future_is_never_sent_back(site: Site, tmp_path: Path) -> None:
    site.page("/", "Home", headers={"Last-Modified": "Fri, 01 Jan 2100 00:00:00 GMT"})
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    second, _ = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    assert "If-Modified-Since" not in site.hits[-1].headers
    assert second[0]["changed"] is False


async def test_a_page_whose_body_did_not_come_whole_is_asked_for_whole_next_time(
    site: Site, tmp_path: Path
) -> None:
    etag = '"v1"'
    cut = raw(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n"
        + f"ETag: {etag}\r\n\r\n<title>Whole</title>".encode()
    )
    served = []

    async def page(request: web.Request) -> web.StreamResponse:
        served.append(request.headers.get("If-None-Match"))
        if len(served) == 1:
            return await cut(request)  # the connection closes short of the body's end
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(text=html("Whole"), headers={"ETag": etag}, content_type="text/html")

    site.handle("/", page)
    (first,), _ = await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    assert (first["status"], first["error"], first["etag"]) == (200, "connection_error", etag)

    (second,), _ = await crawl_again(site, tmp_path)

    # Its validators were those of a body never had: a 304 would have said nothing changed
    # in a page the crawl never got, in this recrawl and every later one.
    assert served == [None, None]
    assert (second["status"], second["error"], second["title"]) == (200, None, "Whole")


async def test_a_304_to_a_request_without_validators_is_an_invalid_response(
    site: Site, tmp_path: Path
) -> None:
    async def not_modified(_request: web.Request) -> web.Response:
        return web.Response(status=304)

    site.handle("/", not_modified)
    (record,), _ = await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    assert record["status"] == 304 and record["error"] == "invalid_response"


async def test_a_304_unasked_stays_an_error_in_every_later_recrawl(
    site: Site, tmp_path: Path
) -> None:
    async def not_modified(_request: web.Request) -> web.Response:
        return web.Response(status=304, headers={"ETag": '"e"'})

    site.handle("/", not_modified)
    since = None
    for crawl in ("first", "second", "third"):
        (record,), _ = await crawl_to(tmp_path / f"{crawl}.jsonl", [site.url + "/"], since=since)
        since = str(tmp_path / f"{crawl}.jsonl")
        assert record["status"] == 304 and record["error"] == "invalid_response", crawl
    assert [hit.headers.get("If-None-Match") for hit in site.hits] == [None] * 3


async def test_a_304_naming_another_etag_is_not_trusted_and_the_page_is_fetched_whole(
    site: Site, tmp_path: Path
) -> None:
    body = html("Changed behind a lying 304")
    crawls = 0

    async def lying(request: web.Request) -> web.Response:
        if crawls and "If-None-Match" in request.headers:
            return web.Response(status=304, headers={"ETag": '"other"'})
        text = html("Before") if not crawls else body
        return web.Response(text=text, headers={"ETag": '"v1"'}, content_type="text/html")

    site.handle("/", lying)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    crawls = 1
    site.hits.clear()
    (record,), _ = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    assert [hit.headers.get("If-None-Match") for hit in site.hits] == ['"v1"', None]
    assert record["status"] == 200 and record["changed"] is True
    assert record["title"] == "Changed behind a lying 304"


async def test_vary_on_accept_encoding_still_gets_304_for_the_variant_asked_before(
    site: Site, tmp_path: Path
) -> None:
    async def varying(request: web.Request) -> web.Response:
        gzip = "gzip" in request.headers.get("Accept-Encoding", "")
        etag = '"v1-gzip"' if gzip else '"v1"'
        headers = {"ETag": etag, "Vary": "Accept-Encoding"}
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        response = web.Response(text=html("Varies"), headers=headers, content_type="text/html")
        if gzip:
            response.enable_compression(web.ContentCoding.gzip)
        return response

    site.handle("/", varying)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    (record,), _ = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )
    assert record["status"] == 304 and record["changed"] is False
    assert record["title"] == "Varies"


async def run_cli(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", *args, stderr=asyncio.subprocess.PIPE
    )
    _, err = await process.communicate()
    return process.returncode or 0, err.decode()


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p / "missing.jsonl", "no such file"),
        (lambda p: _write(p / "notes.txt", b"hello\n"), "not JSON"),
        (lambda p: _write(p / "empty.jsonl", b""), "is empty"),
        (lambda p: _write(p / "blank.jsonl", b"\n \r\n"), "has no record"),
        (lambda p: _write(p / "old.jsonl", b'{"url": "http://a/", "status": 200}\n'), "older"),
        (
            lambda p: _write(
                p / "cut.jsonl",
                json.dumps(
                    {
                        "url": "http://a/",
                        "status": 200,
                        "depth": 0,
                        "content_digest": "sha1:X",
                        "fetched_at": "2026-11-02T10:00:00.000+00:00",
                    }
                ).encode()
                + b'\n{"url": "http://a/b", "sta',
            ),
            "cut short",
        ),
        (
            lambda p: _write(
                p / "other.jsonl",
                json.dumps(
                    {
                        "url": "http://a/",
                        "status": "ok",
                        "depth": 0,
                        "content_digest": "sha1:X",
                        "fetched_at": "2026-11-02T10:00:00.000+00:00",
                        "links": "http://a/b",
                    }
                ).encode()
                + b"\n",
            ),
            "line 1 is not a crawl's record (its status is",
        ),
        (lambda p: _mkdir(p / "somedir"), "not a crawl's --state"),
        (lambda p: _write(p / "cut.jsonl.gz", gzip.compress(RECORD * 50)[:-12]), "cut short"),
        (lambda p: _write(p / "bad.jsonl.gz", b"\x1f\x8b" + b"\x00" * 40), "not gzip"),
    ],
)
async def test_a_bad_prev_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, make: Any, says: str
) -> None:
    prev = make(tmp_path)
    seeds = _write(tmp_path / "seeds.txt", b"http://127.0.0.1:9/\n")
    before = sorted(tmp_path.rglob("*"))
    code, err = await run_cli(
        str(seeds), "-o", str(tmp_path / "out.jsonl"), "--since", str(prev), "--quiet"
    )
    assert code == 2
    assert err.count("\n") == 1 and says in err, err
    assert sorted(tmp_path.rglob("*")) == before


RECORD = (
    b'{"url": "http://a/", "status": 200, "depth": 0, "content_digest": "sha1:X", '
    b'"fetched_at": "2026-11-02T10:00:00.000+00:00"}\n'
)


async def test_a_prev_compressed_with_gzip_is_read_as_it_is(site: Site, tmp_path: Path) -> None:
    tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    prev = tmp_path / "first.jsonl.gz"
    prev.write_bytes(gzip.compress((tmp_path / "first.jsonl").read_bytes()))
    (tmp_path / "first.jsonl").unlink()
    second, stats = await crawl_to(tmp_path / "second.jsonl", [site.url + "/"], since=str(prev))
    assert {r["status"] for r in second} == {304}
    assert stats["recrawl"]["previous_pages"] == 6
    assert (tmp_path / "first.jsonl.gz.history.sqlite").exists()


async def test_a_recrawl_may_not_write_over_the_crawl_it_reads(site: Site, tmp_path: Path) -> None:
    tree_site(site)
    prev = tmp_path / "crawl.jsonl"
    await crawl_to(prev, [site.url + "/"])
    kept = prev.read_bytes()
    seeds = _write(tmp_path / "seeds.txt", f"{site.url}/\n".encode())
    code, err = await run_cli(str(seeds), "-o", str(prev), "--since", str(prev), "--quiet")
    assert code == 2
    assert err.count("\n") == 1 and "same file" in err, err
    assert prev.read_bytes() == kept


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


async def test_both_crawls_archives_replay_every_page_of_the_second_in_pywb(
    site: Site, tmp_path: Path, wayback: Wayback
) -> None:
    pages = tree_site(site)
    touched = html("Touched, not changed")
    pages.bodies["/touched"] = touched

    async def ignores_validators(_request: web.Request) -> web.Response:
        return web.Response(
            text=touched, headers={"ETag": f'"{time.time()}"'}, content_type="text/html"
        )

    site.handle("/touched", ignores_validators)
    lying = html("Not modified, it says, of another ETag")
    pages.bodies["/lying"] = lying

    async def not_modified_of_another_etag(request: web.Request) -> web.Response:
        if "If-None-Match" in request.headers:
            return web.Response(status=304, headers={"ETag": '"other"'})
        return web.Response(text=lying, headers={"ETag": '"v1"'}, content_type="text/html")

    site.handle("/lying", not_modified_of_another_etag)
    pages.bodies["/"] = html("Home", ["/a", "/b", "/c", "/touched", "/lying"])
    warc1, warc2 = tmp_path / "warc1", tmp_path / "warc2"
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"], warc=str(warc1))
    pages.bodies["/b"] = html("B, new")
    started = time.time()
    while int(time.time()) == int(started):  # the second crawl's captures are later ones
        await asyncio.sleep(0.05)
    second, _ = await crawl_to(
        tmp_path / "second.jsonl",
        [site.url + "/"],
        warc=str(warc2),
        since=str(tmp_path / "first.jsonl"),
        since_warc=str(warc1),
    )
    records = by_url(second)
    assert records[site.url + "/touched"]["changed"] is False
    assert records[site.url + "/touched"]["status"] == 200
    assert {r["status"] for r in second} == {200, 304}
    archive = [r for r in read_archive(warc2) if r["type"] in ("response", "revisit")]
    by_uri = {r["uri"]: r for r in archive}
    originals = {r["uri"]: r for r in read_archive(warc1) if r["type"] == "response"}
    lying_304, _ = [r for r in archive if r["uri"] == site.url + "/lying"]
    # The 304 not believed is kept, as what it says: a replay of it is the earlier capture.
    assert_revisit_of(
        lying_304["headers"], originals[site.url + "/lying"]["headers"], lying_304["uri"], 304
    )
    for url, record in records.items():
        written = by_uri[url]["headers"]
        if record["changed"]:
            assert by_uri[url]["type"] == "response"
            continue
        assert by_uri[url]["type"] == "revisit"
        assert_revisit_of(written, originals[url]["headers"], url, record["status"])
    assert_index_is_cdxj_indexers(warc2)  # the revisits' index lines too
    base = wayback.collection("both", *warc_files(warc1), *warc_files(warc2))
    async with aiohttp.ClientSession(auto_decompress=False) as client:
        for url in records:  # at a later time than any: the second crawl's captures
            replay = f"{base}/2999id_/{url}"
            async with client.get(replay, allow_redirects=False) as response:
                body = await response.read()
                assert (response.status, body) == (
                    200,
                    pages.bodies[url.removeprefix(site.url)].encode(),
                ), url


async def test_a_recrawls_wacz_holds_the_earlier_captures_its_revisits_refer_to(
    site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture, wayback: Wayback
) -> None:
    # Three crawls into one --warc directory, each from the one before. The third's
    # pages are all 304s: revisits of captures in the first crawl's file (through the
    # second's revisits) and, for /b, changed in the second crawl, in the second's. The
    # third's package alone replays every page.
    pages = tree_site(site)
    archive = tmp_path / "archive"
    crawls = [tmp_path / f"crawl{n}.jsonl" for n in (1, 2, 3)]
    await crawl_to(crawls[0], [site.url + "/"], warc=str(archive))
    # Another tool's file and index in the directory, which holds no CDXJ of ours.
    (archive / "other-tool.warc.gz").write_bytes(b"")
    (archive / "other-tool.cdxj").write_text("com,example)/ 2020 http://example.com/ 200 -\n[1]\n")
    pages.bodies["/b"] = html("B, new")
    for previous, output in itertools.pairwise(crawls):
        started = time.time()
        while int(time.time()) == int(started):  # each crawl's captures are later ones
            await asyncio.sleep(0.05)
        options = {"since": str(previous), "since_warc": str(archive)}
        if output == crawls[-1]:
            options["wacz"] = str(tmp_path / "third.wacz")
        third, _ = await crawl_to(output, [site.url + "/"], warc=str(archive), **options)
    assert {r["status"] for r in third} == {304}
    wacz = tmp_path / "third.wacz"
    assert "Validation succeeded" in run_tool("wacz", "validate", "-f", str(wacz))
    packaged = [name for name in zipfile.ZipFile(wacz).namelist() if name.startswith("archive/")]
    # Its pages, none changed, are listed as a first crawl's are, for ReplayWeb.page.
    _, *listed = zipfile.ZipFile(wacz).read("pages/pages.jsonl").splitlines()
    titles = {page["url"]: page["title"] for page in map(json.loads, listed)}
    assert titles == {record["url"]: record["title"] for record in third}
    ours = [path for path in warc_files(archive) if path.name != "other-tool.warc.gz"]
    assert sorted(packaged) == sorted(f"archive/{path.name}" for path in ours)
    # Without the directory of the earlier files, the package would lack them, and says so.
    third_file = max(ours, key=lambda path: path.name)
    with caplog.at_level("WARNING", logger="crawler"):
        assert with_referred_files([third_file], []) == [third_file]
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "lacks the captures of 6 payloads" in warning
    base = wayback.collection("third", wacz, unpack_wacz=True)
    async with aiohttp.ClientSession(auto_decompress=False) as client:
        for record in third:
            url = record["url"]
            async with client.get(f"{base}/2999id_/{url}") as response:
                replayed = (response.status, await response.read())
            assert replayed == (200, pages.bodies[url.removeprefix(site.url)].encode()), url


async def test_a_recrawls_304s_without_their_captures_are_not_listed_in_its_wacz(
    site: Site, tmp_path: Path
) -> None:
    # The first crawl kept no archive: the second's 304s are archived as 304s, which
    # replay as empty pages, so its package lists only what it holds whole.
    pages = tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    pages.bodies["/b"] = html("B, new")
    wacz = tmp_path / "second.wacz"
    second, _ = await crawl_to(
        tmp_path / "second.jsonl",
        [site.url + "/"],
        warc=str(tmp_path / "warc"),
        wacz=str(wacz),
        since=str(tmp_path / "first.jsonl"),
    )
    assert sorted(r["status"] for r in second) == [200] + [304] * 5
    _, *listed = zipfile.ZipFile(wacz).read("pages/pages.jsonl").splitlines()
    assert [json.loads(page)["url"] for page in listed] == [site.url + "/b"]


def assert_revisit_of(revisit: Any, original: Any, url: str, status: int) -> None:
    """`revisit` (warcio's record headers) refers to `original`, the capture of `url`,
    as a 304 (`status`) or a 200 with the same payload does."""
    profile = "server-not-modified" if status == 304 else "identical-payload-digest"
    assert revisit.get_header("WARC-Profile").endswith(profile)
    assert revisit.get_header("WARC-Refers-To") == original.get_header("WARC-Record-ID")
    assert revisit.get_header("WARC-Refers-To-Target-URI") == url
    assert revisit.get_header("WARC-Refers-To-Date") == original.get_header("WARC-Date")
    digest = "WARC-Payload-Digest"
    assert revisit.get_header(digest) == original.get_header(digest)


async def test_kill_9_during_a_recrawl_with_state_resumes_exactly(
    site: Site, tmp_path: Path
) -> None:
    count = 200
    bodies = tree_bodies(count, fan_out=4)
    pages = Validating(site, bodies)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/p/0"])
    for n in range(0, count, 10):  # every tenth page changed
        bodies[f"/p/{n}"] += "<p>changed</p>"
    site.hits.clear()
    stats_file = tmp_path / "stats.json"
    run = Run(site, tmp_path, "--since", str(tmp_path / "first.jsonl"), "--stats", str(stats_file))
    run.output = tmp_path / "second.jsonl"
    rng = random.Random(22)
    kills = 0
    for _ in range(3):
        code = await run.interrupted_after(rng.randrange(10, 60), signal.SIGKILL)
        kills += code == -signal.SIGKILL
    code, err = await run.until_done()
    assert code == 0, err
    assert kills >= 2
    records = by_url(read_records(run.output))
    assert sorted(records) == sorted(site.url + path for path in bodies)
    changed = {url for url, r in records.items() if r["changed"]}
    assert changed == {f"{site.url}/p/{n}" for n in range(0, count, 10)}
    assert all(r["status"] == 304 for url, r in records.items() if url not in changed)
    assert len(pages.not_modified) >= count - len(changed)
    recrawl = json.loads(stats_file.read_text())["recrawl"]
    assert recrawl["checked"] == count and recrawl["changed"] == len(changed)
    assert recrawl["unchanged_304"] == count - len(changed) and recrawl["gone"] == 0


async def test_the_summary_says_what_the_recrawl_found(site: Site, tmp_path: Path) -> None:
    tree_site(site)
    seeds = _write(tmp_path / "seeds.txt", f"{site.url}/\n".encode())
    first = tmp_path / "first.jsonl"
    code, err = await run_cli(str(seeds), "-o", str(first), "--ignore-robots", "--quiet")
    assert code == 0, err
    code, err = await run_cli(
        str(seeds), "-o", str(tmp_path / "second.jsonl"), "--ignore-robots", "--since", str(first)
    )
    assert code == 0, err
    lines = {line.split()[0]: line for line in err.splitlines()[1:] if line.startswith("  ")}
    assert lines["checked"].split()[1] == "6" and "previous crawl's 6 pages" in lines["checked"]
    assert "6 answered 304" in lines["unchanged"] and lines["gone"].split()[1] == "0"
    assert (tmp_path / "first.jsonl.history.sqlite").exists()  # built once, kept for the next


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Nginx]:
    server = Nginx(tmp_path / "www", tmp_path / "nginx")
    (tmp_path / "www").mkdir()
    yield server
    server.stop()


async def test_nginx_answers_304_with_no_body_for_each_unchanged_file(
    nginx: Nginx, tmp_path: Path
) -> None:
    www = nginx.root
    names = ["index", "same", "touched", "edited", "deleted"]
    (www / "index.html").write_text(html("Home", [f"/{n}.html" for n in names[1:]]))
    for name in names[1:]:
        (www / f"{name}.html").write_text(html(name.title()))
    nginx.start()
    first, _ = await crawl_to(tmp_path / "first.jsonl", [nginx.url + "/index.html"])
    assert len(first) == 5 and all(r["etag"] and r["last_modified"] for r in first)
    nginx.served()
    later = time.time() + 10
    os.utime(www / "touched.html", (later, later))  # a new ETag and Last-Modified, same bytes
    (www / "edited.html").write_text(html("Edited, longer than before"))
    (www / "deleted.html").unlink()

    second, stats = await crawl_to(
        tmp_path / "second.jsonl",
        [nginx.url + "/index.html"],
        since=str(tmp_path / "first.jsonl"),
    )
    served = {s.path: s for s in nginx.served()}
    before = {r["url"].removeprefix(nginx.url): r for r in first}
    for path, request in served.items():
        assert request.if_none_match == before[path]["etag"]
        assert request.if_modified_since == before[path]["last_modified"]
    assert {p: (s.status, s.body_bytes) for p, s in served.items()} == {
        "/index.html": (304, 0),
        "/same.html": (304, 0),
        "/touched.html": (200, before["/touched.html"]["bytes"]),
        "/edited.html": (200, len(html("Edited, longer than before"))),
        "/deleted.html": (404, served["/deleted.html"].body_bytes),
    }
    changed = {r["url"].removeprefix(nginx.url): r["changed"] for r in second}
    assert changed == {
        "/index.html": False,
        "/same.html": False,
        "/touched.html": False,
        "/edited.html": True,
        "/deleted.html": True,
    }
    recrawl = stats["recrawl"]
    assert (recrawl["unchanged_304"], recrawl["unchanged_same_digest"]) == (2, 1)


async def test_prev_may_be_a_state_directory_and_its_index_is_built_once(
    site: Site, tmp_path: Path
) -> None:
    tree_site(site)
    state = tmp_path / "state1"
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"], state=str(state))
    second, _ = await crawl_to(tmp_path / "second.jsonl", [site.url + "/"], since=str(state))
    assert {r["status"] for r in second} == {304}
    index = state / "history.sqlite"
    built = index.stat().st_mtime_ns
    third, _ = await crawl_to(tmp_path / "third.jsonl", [site.url + "/"], since=str(state))
    assert {r["changed"] for r in third} == {False}
    assert index.stat().st_mtime_ns == built


async def test_a_prev_in_a_read_only_directory_is_indexed_in_the_users_cache_once(
    site: Site, tmp_path: Path
) -> None:
    """An archive's storage is often read-only: such a PREV was refused ("cannot write
    its index"). The recrawl runs as root without its capabilities, so that the
    directory's mode 555 holds for it as for any user."""
    tree_site(site)
    archive = tmp_path / "archive"
    archive.mkdir()
    await crawl_to(archive / "first.jsonl", [site.url + "/"])
    seeds = _write(tmp_path / "seeds.txt", f"{site.url}/\n".encode())
    cache = tmp_path / "cache"
    archive.chmod(0o555)
    try:
        for output in ("second.jsonl", "third.jsonl"):
            process = await asyncio.create_subprocess_exec(
                *("setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"),
                *(sys.executable, "-m", "crawler", str(seeds), "--quiet"),
                *("-o", str(tmp_path / output), "--since", str(archive / "first.jsonl")),
                env={**os.environ, "XDG_CACHE_HOME": str(cache)},
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await process.communicate()
            assert process.returncode == 0, err.decode()
            [index] = (cache / "crawler" / "history").iterdir()
            if output == "second.jsonl":
                built = index.stat().st_mtime_ns
            assert {r["status"] for r in read_records(tmp_path / output)} == {304}
    finally:
        archive.chmod(0o755)
    assert index.stat().st_mtime_ns == built  # the third crawl used the second's index
    assert sorted(p.name for p in archive.iterdir()) == ["first.jsonl"]


async def test_an_index_built_without_the_previous_warc_files_is_rebuilt_once_they_are_given(
    site: Site, tmp_path: Path
) -> None:
    tree_site(site)
    warc1, warc2 = tmp_path / "warc1", tmp_path / "warc2"
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"], warc=str(warc1))
    since = str(tmp_path / "first.jsonl")
    await crawl_to(tmp_path / "trial.jsonl", [site.url + "/"], since=since)  # no WARC files
    second, _ = await crawl_to(
        tmp_path / "second.jsonl",
        [site.url + "/"],
        since=since,
        since_warc=str(warc1),
        warc=str(warc2),
    )
    assert {r["status"] for r in second} == {304}
    archived = [r for r in read_archive(warc2) if r["type"] in ("response", "revisit")]
    pages = [r for r in archived if not r["uri"].endswith("/robots.txt")]
    assert {r["type"] for r in pages} == {"revisit"} and len(pages) == len(second)


async def test_a_recrawl_that_archives_without_the_previous_warc_files_says_so(
    site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"], warc=str(tmp_path / "warc1"))
    with caplog.at_level(logging.WARNING, logger="crawler"):
        await crawl_to(
            tmp_path / "second.jsonl",
            [site.url + "/"],
            since=str(tmp_path / "first.jsonl"),
            since_warc=str(tmp_path / "no-such-dir"),
            warc=str(tmp_path / "warc2"),
        )
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "crawl-" in warning and "no-such-dir" in warning and "replay empty" in warning


async def test_a_shallower_recrawl_neither_counts_gone_nor_fetches_as_unlinked_the_pages_below(
    site: Site, tmp_path: Path
) -> None:
    # A deep crawl weekly, a shallow one daily since it: /a/deep (depth 2) and its child
    # are still linked, only below this crawl's --max-depth.
    pages = tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    del pages.bodies["/c"]
    pages.bodies["/"] = html("Home", ["/a", "/b"])
    site.hits.clear()
    second, stats = await crawl_again(site, tmp_path, max_depth=1, fetch_gone=True)
    assert sorted(hit.path for hit in site.hits) == ["/", "/a", "/b", "/c"]
    assert [r["url"] for r in second if r["kind"] == "unlinked"] == [site.url + "/c"]
    recrawl = stats["recrawl"]
    assert (recrawl["previous_pages"], recrawl["checked"], recrawl["gone"]) == (4, 3, 1)


async def test_fetch_gone_tells_a_deleted_page_from_one_merely_unlinked(
    site: Site, tmp_path: Path
) -> None:
    pages = tree_site(site)
    pages.bodies["/"] = html("Home", ["/a", "/b", "/c", "/d"])
    pages.bodies["/d"] = html("D", ["/d/under"])
    pages.bodies["/d/under"] = html("Under D")
    for path in ("/d", "/d/under"):
        site.handle(path, pages.serve)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    pages.bodies["/"] = html("Home", ["/a"])  # /b, /c and /d (and /d/under) unlinked
    del pages.bodies["/c"]
    site.hits.clear()
    second, stats = await crawl_to(
        tmp_path / "second.jsonl",
        [site.url + "/"],
        since=str(tmp_path / "first.jsonl"),
        fetch_gone=True,
    )
    records = by_url(second)
    unlinked = {
        url.removeprefix(site.url): r for url, r in records.items() if r["kind"] == "unlinked"
    }
    assert sorted(unlinked) == ["/b", "/c", "/d", "/d/under"]
    assert unlinked["/c"]["status"] == 404 and unlinked["/c"]["changed"] is True
    assert unlinked["/b"]["status"] == 304 and unlinked["/b"]["changed"] is False
    assert all(r["depth"] == 0 and r["referrer"] is None for r in unlinked.values())
    assert site.count("/d/under") == 1  # fetched as unlinked, not reached through /d
    recrawl = stats["recrawl"]
    assert recrawl["gone"] == 4 and recrawl["unlinked"] == 4 and recrawl["unlinked_404_410"] == 1


async def test_fetch_gone_fetches_no_previous_page_outside_this_crawls_scope(
    site: Site, tmp_path: Path
) -> None:
    # /a is excluded now (a section the site asked us to leave), and the other host is
    # no longer allowed: their pages are gone from this crawl, never asked for.
    pages = tree_site(site)
    other = site.url.replace("127.0.0.1", "localhost")
    pages.bodies["/"] = html("Home", ["/a", "/b", "/c", other + "/elsewhere"])
    pages.bodies["/elsewhere"] = html("Elsewhere")
    site.handle("/elsewhere", pages.serve)
    await crawl_to(
        tmp_path / "first.jsonl",
        [site.url + "/"],
        allow_host=("localhost",),
        allow_private_addresses=True,
    )
    pages.bodies["/"] = html("Home", ["/a", "/b"])  # /c unlinked
    site.hits.clear()
    second, stats = await crawl_again(
        site, tmp_path, fetch_gone=True, exclude=("/a",), allow_private_addresses=True
    )
    assert sorted(hit.path for hit in site.hits) == ["/", "/b", "/c"]
    assert [r["url"] for r in second if r["kind"] == "unlinked"] == [site.url + "/c"]
    assert stats["recrawl"]["gone"] == 5  # /a, /a/deep, /a/deep/deeper, /c, /elsewhere


@pytest.mark.parametrize("fetch_gone", [False, True])
async def test_list_gone_writes_the_previous_pages_no_link_reaches_and_fetches_none(
    site: Site, tmp_path: Path, fetch_gone: bool
) -> None:
    # A search index deletes them; one that a redirect now reaches, or that failed, is not
    # gone from the link graph. With --fetch-gone too, the list is of the same pages.
    pages = tree_site(site)
    pages.bodies["/"] = html("Home", ["/a", "/b", "/c", "/old"])
    pages.bodies["/old"] = html("Old")
    site.handle("/old", pages.serve)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    pages.bodies["/"] = html("Home", ["/a", "/gone-to-old"])  # /b, /c unlinked
    site.redirect("/gone-to-old", "/old")
    site.hits.clear()
    listed = tmp_path / "gone.txt"
    listed.write_text("the last crawl's list\n")
    _, stats = await crawl_again(site, tmp_path, list_gone=str(listed), fetch_gone=fetch_gone)
    assert sorted(listed.read_text().splitlines()) == [site.url + "/b", site.url + "/c"]
    assert site.count("/b") == site.count("/c") == int(fetch_gone)
    assert stats["recrawl"]["gone"] == 2


async def test_list_gone_keeps_the_last_list_when_links_were_left_unfollowed(
    site: Site, tmp_path: Path
) -> None:
    tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    listed = tmp_path / "gone.txt"
    listed.write_text("the last crawl's list\n")
    _, stats = await crawl_again(site, tmp_path, list_gone=str(listed), max_pages=2)
    assert stats["recrawl"]["gone"] is None
    assert listed.read_text() == "the last crawl's list\n"


@pytest.mark.parametrize(
    "flags",
    [
        ("--list-gone", "gone.txt"),
        (
            "--list-gone",
            "gone.txt",
            "--since",
            "first.jsonl",
            "--redis",
            "redis://127.0.0.1:1",
            "--crawl-id",
            "x",
        ),
        ("--list-gone", "first.jsonl", "--since", "first.jsonl"),
    ],
)
async def test_list_gone_without_a_recrawl_of_one_process_or_over_prev_is_bad_input(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    (tmp_path / "first.jsonl").write_text("")
    seeds = _write(tmp_path / "seeds.txt", b"http://127.0.0.1:9/\n")
    arguments = [
        str(seeds),
        *(str(tmp_path / f) if f.endswith((".txt", ".jsonl")) else f for f in flags),
    ]
    code, err = await run_cli(*arguments)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--list-gone" in err, err


@pytest.mark.parametrize(
    ("last_modified", "usable"),
    [
        ("Mon, 02 Nov 2026 10:00:00 GMT", True),
        ("Mon, 02 Nov 2026 10:00:01 GMT", False),  # a second after the fetch
        ("Monday, 02-Nov-26 09:00:00 GMT", True),  # RFC 850, obsolete but read
        ("Mon Nov  2 11:00:00 2026", False),  # asctime
        ("yesterday", False),
    ],
)
def test_a_last_modified_is_sent_back_only_if_not_after_the_fetch(
    last_modified: str, usable: bool
) -> None:
    from crawler.history import _usable

    fetched_at = "2026-11-02T10:00:00.000+00:00"
    assert (_usable(last_modified, fetched_at) == last_modified) is usable


async def test_a_third_crawl_refers_to_the_first_capture_through_the_second_crawls_revisits(
    site: Site, tmp_path: Path
) -> None:
    tree_site(site)
    runs = [tmp_path / f"{n}.jsonl" for n in (1, 2, 3)]
    warcs = [tmp_path / f"warc{n}" for n in (1, 2, 3)]
    await crawl_to(runs[0], [site.url + "/"], warc=str(warcs[0]))
    for n in (1, 2):
        await crawl_to(
            runs[n],
            [site.url + "/"],
            warc=str(warcs[n]),
            since=str(runs[n - 1]),
            since_warc=str(warcs[n - 1]),
        )
    first = {r["uri"]: r["headers"] for r in read_archive(warcs[0]) if r["type"] == "response"}
    third = [r for r in read_archive(warcs[2]) if r["type"] == "revisit"]
    assert {r["uri"] for r in third} == set(first) - {None}
    for revisit in third:
        original = first[revisit["uri"]]
        headers = revisit["headers"]
        assert headers.get_header("WARC-Refers-To") == original.get_header("WARC-Record-ID")
        assert headers.get_header("WARC-Refers-To-Date") == original.get_header("WARC-Date")
    assert {r["status"] for r in read_records(runs[2])} == {304}


async def test_queued_urls_are_looked_up_in_the_history_in_batches(tmp_path: Path) -> None:
    """A page's commit queues a URL or two: the history answers them a batch at a time,
    and each as it would alone, whether queued long before it is taken or just now."""
    from crawler.history import open_history

    previous = tmp_path / "previous.jsonl"
    records = [
        {
            "url": f"http://example.com/p/{n}",
            "status": 200,
            "depth": 1,
            "fetched_at": "2026-11-24T10:00:00.000+00:00",
            "content_digest": f"sha1:{n:032d}",
            "etag": f'"{n}"',
            "title": f"page {n}",
            "links": [f"http://example.com/p/{n + 1}"],
        }
        for n in range(200)
    ]
    previous.write_text("".join(json.dumps(r) + "\n" for r in records))
    history = open_history(str(previous), [])
    queries: list[str] = []
    history._db.set_trace_callback(queries.append)
    try:
        urls = [r["url"] for r in records] + ["http://example.com/new"]
        for url in urls[:150]:
            history.prefetch([url])  # as commits queue them, one at a time
        taken = {url: await history.take(url) for url in urls[:100]}
        for url in urls[150:]:
            history.prefetch([url])
        taken |= {url: await history.take(url) for url in urls[100:]}
    finally:
        history.close()
    selects = [q for q in queries if q.lstrip().startswith("SELECT")]
    assert len(selects) <= 200 // 64 + 2, len(selects)
    assert taken["http://example.com/new"] is None
    for n, record in enumerate(records):
        row = taken[record["url"]]
        assert row is not None and row.etag == f'"{n}"' and row.fields()["title"] == f"page {n}"


def test_a_build_killed_leaves_no_file_the_next_does_not_remove(tmp_path: Path) -> None:
    """A build killed with -9 left its temporary index (each kill one more, as big as the
    index); the next build removes such files, but not those of a build still running
    (locked by it: another process indexing the same PREV)."""
    from crawler.history import index_beside, open_history

    previous = tmp_path / "previous.jsonl"
    record = {
        "url": "http://example.com/",
        "status": 200,
        "depth": 0,
        "fetched_at": "2026-11-24T10:00:00.000+00:00",
        "content_digest": "sha1:AAAA",
    }
    previous.write_text(json.dumps(record) + "\n")
    index = index_beside(previous)
    killed = tmp_path / f"{index.name}k1ll3d.tmp"
    killed.write_bytes(b"SQLite format 3\x00 cut short")
    running = tmp_path / f"{index.name}runn1ng.tmp"
    running.touch()
    with running.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        open_history(str(previous), []).close()
        assert index.exists() and not killed.exists() and running.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [previous.name, index.name, running.name]
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("status", "200"), ("links", [["nested"]]), ("last_modified", 1), ("url", None)],
)
def test_a_previous_record_with_a_field_of_the_wrong_type_is_bad_input(tmp_path, field, value):
    record = {
        "url": "http://127.0.0.1:9/",
        "final_url": "http://127.0.0.1:9/",
        "status": 200,
        "depth": 0,
        "fetched_at": "2026-11-25T03:18:52.832+00:00",
        "content_digest": "sha1:YY6QBSZNVNWHJKBMTWCBACIGFRAAASJB",
        "last_modified": "Wed, 25 Nov 2026 03:18:51 GMT",
        "links": ["http://127.0.0.1:9/a"],
    }
    previous = tmp_path / "previous.jsonl"
    previous.write_text(json.dumps(record) + "\n")
    crawler = Crawler(["http://127.0.0.1:9/"], Settings(since=str(previous)))
    crawler.open()  # as written, the record is a crawl's
    asyncio.run(crawler.close())

    for index in tmp_path.glob("previous.jsonl.*"):
        index.unlink()
    previous.write_text(json.dumps({**record, field: value}) + "\n")
    with pytest.raises(ConfigError, match=rf"line 1 is not a crawl's record \(its {field} "):
        Crawler(["http://127.0.0.1:9/"], Settings(since=str(previous))).open()


async def test_a_304_keeps_the_previous_records_noindex(site: Site, tmp_path: Path) -> None:
    noindex = '<meta name="robots" content="noindex">'
    pages = Validating(site, {"/": html("home", ["/hidden"]), "/hidden": html("hid", head=noindex)})
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])

    second, _ = await crawl_to(
        tmp_path / "second.jsonl", [site.url + "/"], since=str(tmp_path / "first.jsonl")
    )

    assert sorted(pages.not_modified) == ["/", "/hidden"]
    record = by_url(second)[site.url + "/hidden"]
    assert (record["status"], record["noindex"]) == (304, True)
    assert "noindex" not in by_url(second)[site.url + "/"]


@pytest.mark.parametrize(("field", "value"), [("links", [["nested"]]), ("status", "200")])
def test_a_bad_record_after_good_ones_of_its_shape_is_still_bad_input(tmp_path, field, value):
    # The index checks a shape of record (its fields' names and types) once: what the
    # shape does not tell (a link's type, a URL's form) is still checked on every line.
    from crawler.history import open_history

    record = {
        "url": "http://127.0.0.1:9/",
        "status": 200,
        "depth": 0,
        "fetched_at": "2026-11-25T03:18:52.832+00:00",
        "content_digest": "sha1:YY6QBSZNVNWHJKBMTWCBACIGFRAAASJB",
        "links": ["http://127.0.0.1:9/a"],
    }
    previous = tmp_path / "previous.jsonl"
    lines = [record, {**record, "url": "http://127.0.0.1:9/a"}, {**record, field: value}]
    previous.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(ConfigError, match=rf"line 3 is not a crawl's record \(its {field} "):
        open_history(str(previous), [])
    assert list(tmp_path.iterdir()) == [previous]


async def test_a_prev_with_a_byte_order_mark_and_blank_lines_is_read_as_without(
    site: Site, tmp_path: Path
) -> None:
    """A Windows editor's BOM, and the blank line an editor or a `cat` leaves: each made the
    whole file 'not JSON'."""
    tree_site(site)
    await crawl_to(tmp_path / "first.jsonl", [site.url + "/"])
    lines = (tmp_path / "first.jsonl").read_bytes().splitlines(keepends=True)
    edited = codecs.BOM_UTF8 + lines[0] + b"\n" + b"".join(lines[1:]) + b"\r\n"
    prev = _write(tmp_path / "edited.jsonl", edited)
    second, stats = await crawl_to(tmp_path / "second.jsonl", [site.url + "/"], since=str(prev))
    assert {r["status"] for r in second} == {304}
    assert stats["recrawl"]["previous_pages"] == 6
