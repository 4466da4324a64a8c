"""A bug costs its page, never the crawl: each way out of a worker, with a bug put in its path.

Each test crawls a real local site with one page, /bug, whose handling breaks at
one step. That page gets a record saying why (`internal_error`, or `hook_failed`
for a hook's bad value), the traceback is logged once, every other page is
crawled, and the crawl ends (per_host=1: a host slot left taken would hang it,
and `asyncio.wait_for` would say so).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from crawler import Crawler, ErrorKind, Page, Settings
from crawler.fetch import Fetcher
from crawler.politeness import HostScheduler, Robots
from crawler.sinks.jsonl import JsonlSink
from crawler.state.disk import DiskStore
from tests.conftest import TEST_SETTINGS, by_url, read_records

LIMIT_S = 20.0
PAGES = ("/a", "/bug", "/b", "/c")
SETTINGS = replace(TEST_SETTINGS, per_host=1, concurrency=4)


@pytest.fixture
def bug_site(site):
    site.page("/", "home", list(PAGES))
    for path in PAGES:
        site.page(path, path, ["/d"] if path == "/c" else [])
    site.page("/d", "d", [])
    return site


async def crawl_to_file(site, tmp_path: Path, settings: Settings = SETTINGS, **hooks: Any):
    output = tmp_path / "pages.jsonl"
    settings = replace(settings, output=str(output))

    async def whole() -> None:
        async with Crawler([f"{site.url}/"], settings, **hooks) as crawler:
            await crawler.crawl()

    await asyncio.wait_for(whole(), LIMIT_S)
    return by_url(read_records(output))


def assert_only_the_bug_page_lost(site, records, error: str) -> None:
    assert sorted(records) == sorted(f"{site.url}{p}" for p in ("/", *PAGES, "/d"))
    errors = {url.removeprefix(site.url): r["error"] for url, r in records.items() if r["error"]}
    assert errors == {"/bug": error}


def logged_tracebacks(caplog, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_text and text in r.exc_text]


async def test_an_on_page_value_json_cannot_encode_costs_its_page_not_the_crawl(
    bug_site, tmp_path, caplog
):
    def tags(page: Page) -> dict[str, Any]:
        return {"tags": {"a", "b"}} if page.url.endswith("/bug") else {"tags": ["a"]}

    with caplog.at_level(logging.ERROR, logger="crawler"):
        records = await crawl_to_file(bug_site, tmp_path, on_page=tags)
    assert_only_the_bug_page_lost(bug_site, records, "hook_failed")
    assert "tags" not in records[f"{bug_site.url}/bug"]
    assert records[f"{bug_site.url}/a"]["tags"] == ["a"]
    assert len(logged_tracebacks(caplog, "set is not JSON serializable")) == 1


async def test_a_bug_in_fetching_costs_its_page(bug_site, tmp_path, monkeypatch, caplog):
    fetch = Fetcher.fetch

    async def broken(self: Fetcher, url: str, *args: Any) -> Any:
        if url.endswith("/bug"):
            raise AttributeError("fetch bug")
        return await fetch(self, url, *args)

    monkeypatch.setattr(Fetcher, "fetch", broken)
    with caplog.at_level(logging.ERROR, logger="crawler"):
        records = await crawl_to_file(bug_site, tmp_path)
    assert_only_the_bug_page_lost(bug_site, records, ErrorKind.INTERNAL_ERROR)
    assert len(logged_tracebacks(caplog, "fetch bug")) == 1


async def test_a_bug_in_parsing_costs_its_page(bug_site, tmp_path, monkeypatch, caplog):
    import crawler.htmlguard

    parse = crawler.htmlguard.parse_html

    def broken(tree: Any, agent: str) -> Any:
        if tree.css_first("title").text() == "/bug":
            raise IndexError("parse bug")
        return parse(tree, agent)

    monkeypatch.setattr(crawler.htmlguard, "parse_html", broken)
    with caplog.at_level(logging.ERROR, logger="crawler"):
        records = await crawl_to_file(bug_site, tmp_path)
    assert_only_the_bug_page_lost(bug_site, records, "internal_error")
    assert len(logged_tracebacks(caplog, "parse bug")) == 1


@pytest.mark.parametrize("state", [False, True])
async def test_a_bug_in_a_sinks_encoder_costs_its_page(
    bug_site, tmp_path, monkeypatch, caplog, state
):
    write = JsonlSink.write

    def broken(self: JsonlSink, page: Page) -> None:
        if page.url.endswith("/bug") and page.error is None:
            raise TypeError("encoder bug")
        write(self, page)

    monkeypatch.setattr(JsonlSink, "write", broken)
    settings = replace(SETTINGS, state=str(tmp_path / "state")) if state else SETTINGS
    with caplog.at_level(logging.ERROR, logger="crawler"):
        records = await crawl_to_file(bug_site, tmp_path, settings)
    assert_only_the_bug_page_lost(bug_site, records, "internal_error")
    assert len(logged_tracebacks(caplog, "encoder bug")) == 1


async def test_a_bug_in_the_stores_commit_costs_its_page(bug_site, tmp_path, monkeypatch, caplog):
    save = DiskStore.save

    def broken(self: DiskStore, done: Any, page: Page | None, *args: Any) -> None:
        if page is not None and page.url.endswith("/bug") and page.error is None:
            raise KeyError("commit bug")
        save(self, done, page, *args)

    monkeypatch.setattr(DiskStore, "save", broken)
    settings = replace(SETTINGS, state=str(tmp_path / "state"))
    with caplog.at_level(logging.ERROR, logger="crawler"):
        records = await crawl_to_file(bug_site, tmp_path, settings)
    assert_only_the_bug_page_lost(bug_site, records, "internal_error")
    assert len(logged_tracebacks(caplog, "commit bug")) == 1


async def test_a_bug_in_a_hook_costs_its_page(bug_site, tmp_path, caplog):
    def broken(page: Page) -> None:
        if page.url.endswith("/bug"):
            raise LookupError("hook bug")

    with caplog.at_level(logging.ERROR, logger="crawler"):
        records = await crawl_to_file(bug_site, tmp_path, on_page=broken)
    assert_only_the_bug_page_lost(bug_site, records, "hook_failed")
    assert len(logged_tracebacks(caplog, "hook bug")) == 1


async def test_a_bug_in_fetching_robots_txt_costs_its_hosts_pages(
    bug_site, tmp_path, monkeypatch, caplog
):
    async def broken(self: Robots, origin: str) -> None:
        raise AttributeError("robots bug")

    monkeypatch.setattr(Robots, "_fetch", broken)
    settings = replace(SETTINGS, ignore_robots=False)
    with caplog.at_level(logging.ERROR, logger="crawler"):
        records = await crawl_to_file(bug_site, tmp_path, settings)
    assert [(r["url"], r["error"]) for r in records.values()] == [
        (f"{bug_site.url}/", "internal_error")
    ]
    assert bug_site.count("/") == 0
    assert len(logged_tracebacks(caplog, "robots bug")) == 1


async def test_a_bug_in_the_scheduler_stops_the_crawl_with_an_error_not_a_hang(
    bug_site, tmp_path, monkeypatch, caplog
):
    next_job = HostScheduler.next_job
    calls = 0

    async def broken(self: HostScheduler) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise ZeroDivisionError("scheduler bug")
        return await next_job(self)

    monkeypatch.setattr(HostScheduler, "next_job", broken)
    with (
        caplog.at_level(logging.ERROR, logger="crawler"),
        pytest.raises(RuntimeError, match="internal error: ZeroDivisionError"),
    ):
        await crawl_to_file(bug_site, tmp_path)
    assert len(logged_tracebacks(caplog, "scheduler bug")) == 1
