"""The Python API: Crawler, Page, Settings, hooks, early exit, and parity with the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import pickle
import platform
import re
import sys
import threading
import time
import zipfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from selectolax.lexbor import LexborHTMLParser

import crawler as crawler_package
from crawler import ConfigError, Crawler, Page, Settings
from crawler.config import load_settings
from crawler.page import RECORD_FIELDS, RECORD_TYPES
from tests.conftest import TEST_SETTINGS, by_url, html, read_records

# (setting, a bad value for Settings(...), the same value as a flag's argument)
BAD_VALUES = [
    ("max_depth", -1, "-1"),
    ("concurrency", 0, "0"),
    ("fp_rate", 2.0, "2"),
    ("timeout", 0, "0"),
    ("include", ("(",), "("),
    ("allow_host", ("a b",), "a b"),
    ("user_agent", " ", " "),
]


def chain_site(site, pages: int) -> None:
    """/ links to /p1 ... /pN, each of which links back to /."""
    site.page("/", "home", [f"/p{i}" for i in range(1, pages + 1)])
    for i in range(1, pages + 1):
        site.page(f"/p{i}", f"page {i}", ["/"])


@pytest.mark.parametrize(("name", "value", "flag_value"), BAD_VALUES)
def test_settings_refuse_a_bad_value_with_the_message_a_flag_gets(name, value, flag_value):
    flag = "--" + name.replace("_", "-")
    with pytest.raises(ConfigError) as built:
        Settings(**{name: value})
    with pytest.raises(ConfigError) as flagged:
        load_settings(["seeds.txt", f"{flag}={flag_value}"])
    # The same rule, the same words: only the name of the setting differs.
    assert str(built.value).startswith(name + " ")
    assert str(built.value).removeprefix(name) == str(flagged.value).removeprefix(flag)


def test_settings_refuse_a_value_of_the_wrong_type():
    with pytest.raises(ConfigError, match="max_depth must be an integer"):
        Settings(max_depth="3")
    with pytest.raises(ConfigError, match="--fresh only makes sense with --state"):
        Settings(fresh=True)
    with pytest.raises(ConfigError, match="user_agent must be a string"):
        Settings(user_agent=None)  # only settings that are None by default may be None
    with pytest.raises(ConfigError, match="seeds must be a string"):
        Settings(seeds=5)


def test_settings_take_one_header_as_a_string_as_list_options_take_one_string():
    # Settings(include="a") was taken and Settings(header="X-Token: a") refused.
    assert Settings(header="X-Token: a").header == (("X-Token", "a"),)
    assert Settings(include="a").include == ("a",)
    with pytest.raises(ConfigError, match=r"header must be 'Name: value', got 'X-Token'"):
        Settings(header="X-Token")


async def test_settings_take_pathlib_paths_as_the_strings_they_name(site, tmp_path):
    site.page("/", "home", ["/a"])
    site.page("/a", "a")
    cookies = tmp_path / "cookies.txt"
    cookies.write_text("# Netscape HTTP Cookie File\n")
    settings = replace(
        TEST_SETTINGS,
        output=tmp_path / "out.jsonl",
        state=tmp_path / "state",
        warc=tmp_path / "warc",
        stats=tmp_path / "stats.json",
        cookies=cookies,
    )
    assert (settings.output, settings.cookies) == (str(tmp_path / "out.jsonl"), str(cookies))

    async with Crawler([site.url + "/"], settings) as crawler:
        await crawler.crawl()

    assert len(read_records(tmp_path / "out.jsonl")) == 2
    assert (tmp_path / "stats.json").exists() and list((tmp_path / "warc").glob("*.warc.gz"))


def test_settings_refuse_an_option_they_do_not_have_by_name():
    with pytest.raises(ConfigError, match=r"no option 'max_depht' \(did you mean 'max_depth'\?\)"):
        Settings(max_depht=3)
    with pytest.raises(ConfigError, match=r"Settings has no option 'bogus'$"):
        Settings(bogus=1)
    assert replace(Settings(max_depth=2), max_depth=3).max_depth == 3


def test_a_crawler_refuses_settings_and_seeds_of_the_wrong_type_by_name():
    with pytest.raises(ConfigError, match=r"settings must be a Settings, not dict"):
        Crawler(["http://127.0.0.1:9/"], {"max_depth": 1})
    with pytest.raises(ConfigError, match=r"seeds must be a URL or URLs \(str\), not NoneType"):
        Crawler(None)
    # Bytes iterate as numbers: the message was "seed 104 is not an absolute http(s) URL".
    with pytest.raises(ConfigError, match=r"seeds must be a URL or URLs \(str\), not bytes"):
        Crawler(b"http://127.0.0.1:9/")
    with pytest.raises(ConfigError, match=r"seeds must be a URL or URLs \(str\), not bytes"):
        Crawler([b"http://127.0.0.1:9/"])


def test_settings_from_toml_reads_and_validates(tmp_path):
    config = tmp_path / "crawl.toml"
    config.write_text("max_depth = 2\nexclude = ['/private/']\n", encoding="utf-8")
    settings = Settings.from_toml(str(config))
    assert settings.max_depth == 2 and settings.exclude == ("/private/",)
    config.write_text("max_depth = -2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"key 'max_depth' must be >= 0, got -2"):
        Settings.from_toml(str(config))


async def test_settings_config_reads_the_file_under_the_options_given_as_config_does(
    site, tmp_path
):
    # Settings(config=FILE), --config by its keyword, kept FILE's name and ignored its
    # settings: the crawl ran with the defaults (here, five links deep instead of one).
    chain = {"/": "/1", "/1": "/2", "/2": "/3"}
    for path, link in chain.items():
        site.page(path, path, [link])
    config = tmp_path / "crawl.toml"
    config.write_text("max_depth = 1\nconcurrency = 3\n", encoding="utf-8")
    settings = replace(Settings(config=config), ignore_robots=True)
    assert (settings.max_depth, settings.concurrency, settings.config) == (1, 3, str(config))
    await Crawler([f"{site.url}/"], settings).crawl()
    assert sorted(site.paths()) == ["/", "/1"]
    assert Settings(config=str(config), max_depth=4).max_depth == 4  # as a flag over the file
    assert vars(pickle.loads(pickle.dumps(settings))) == vars(settings)  # a copy is the same
    with pytest.raises(ConfigError, match="config must be a path"):
        Settings(config=5)
    with pytest.raises(ConfigError, match="config file not found"):
        Settings(config=tmp_path / "missing.toml")


def test_a_config_file_saved_with_a_byte_order_mark_is_read(tmp_path):
    config = tmp_path / "crawl.toml"
    config.write_bytes("\ufeffmax_depth = 2\n".encode())  # as Windows editors save UTF-8
    assert Settings.from_toml(str(config)).max_depth == 2


def test_a_visited_set_larger_than_the_machines_memory_is_refused_before_output_is_opened(
    tmp_path,
):
    output = tmp_path / "pages.jsonl"
    output.write_text("kept\n")
    crawler = Crawler(["http://127.0.0.1:9/"], Settings(expected_urls=10**14, output=str(output)))
    with pytest.raises(ConfigError, match=r"--expected-urls 100,000,000,000,000 .* GiB"):
        crawler.open()
    assert output.read_text() == "kept\n"


@pytest.mark.parametrize("expected_urls", [10**14, 10**30])
def test_a_state_directory_whose_visited_set_cannot_fit_is_refused_before_it_is_made(
    tmp_path, expected_urls
):
    # --state made its filter without the check an in-memory one has: an OverflowError
    # traceback from bitarray (or a MemoryError), the directory and its database left.
    state = tmp_path / "state"
    settings = Settings(expected_urls=expected_urls, state=str(state), output=str(tmp_path / "o"))
    with pytest.raises(ConfigError, match=r"^--expected-urls [0-9,]+ at --fp-rate 1e-06 needs"):
        Crawler(["http://127.0.0.1:9/"], settings).open()
    assert not state.exists()


@pytest.mark.parametrize(
    ("outputs", "named"),
    [
        ({"output": "missing/pages.jsonl"}, "cannot write missing/pages.jsonl"),
        ({"stats": "missing/stats.json"}, "cannot write missing/stats.json"),
        ({"warc": "seeds.txt"}, "cannot use --warc seeds.txt: it is a file"),
        ({"output": "seeds.txt"}, "-o seeds.txt is the seeds file"),
    ],
)
def test_outputs_the_crawl_cannot_write_are_refused_when_it_opens_as_the_cli_refuses_them(
    tmp_path, monkeypatch, outputs, named
):
    # The API ran such a crawl (no stats file, a line in the log) or failed at its first
    # page with an OSError.
    monkeypatch.chdir(tmp_path)
    Path("seeds.txt").write_text("http://127.0.0.1:9/\n")
    crawler = Crawler(["http://127.0.0.1:9/"], Settings(seeds="seeds.txt", **outputs))
    with pytest.raises(ConfigError, match=re.escape(named)):
        crawler.open()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seeds.txt"]
    assert Path("seeds.txt").read_text() == "http://127.0.0.1:9/\n"


def test_a_bad_seed_is_refused():
    with pytest.raises(ConfigError, match=r"'ftp://example\.com/' is not an absolute http"):
        Crawler(["ftp://example.com/"])


def test_a_seed_longer_than_max_url_length_is_refused():
    with pytest.raises(ConfigError, match=r"a seed is 41 characters, past --max-url-length 40"):
        Crawler(["https://example.com/" + "a" * 21], Settings(max_url_length=40))


async def test_pages_carry_the_record_the_body_the_text_and_the_tree(site):
    site.page("/", body=html("首页", ["/a"]).encode("gbk"), content_type="text/html; charset=gbk")
    site.page("/a", "A", [], head='<meta name="description" content="x">')
    pages: dict[str, Page] = {}
    async with Crawler([f"{site.url}/"], TEST_SETTINGS) as crawler:
        async for page in crawler:
            pages[page.url] = page
    home = pages[f"{site.url}/"]
    assert (home.status, home.title, home.links) == (200, "首页", [f"{site.url}/a"])
    assert home.body == html("首页", ["/a"]).encode("gbk")
    assert "首页" in home.text()
    assert home.tree.css_first("a").attributes["href"] == "/a"
    assert home.record()["title"] == "首页"
    assert crawler.stats["records"] == 2


async def test_pages_waiting_for_a_slow_loop_drop_their_tree_and_parse_it_again(site):
    chain_site(site, 12)
    hooked_trees = {}
    all_hooked = asyncio.Event()

    def keep_tree(page: Page) -> None:
        hooked_trees[page.url] = page.tree
        if len(hooked_trees) == 13:
            all_hooked.set()

    settings = replace(TEST_SETTINGS, concurrency=16, per_host=16)
    pages, kept = [], []
    async with Crawler([f"{site.url}/"], settings, on_page=keep_tree) as crawler:
        async for page in crawler:
            pages.append(page)
            kept.append(page.tree is hooked_trees[page.url])
            await all_hooked.wait()  # the others are committed while the loop is away
    assert len(pages) == 13 and kept[1:] == [True] * 4 + [False] * 8
    assert all(p.tree.css_first("title").text() == p.title for p in pages)


async def test_on_page_adds_fields_and_follow_decides_per_link(site):
    site.page("/", "home", ["/keep", "/skip"])
    site.page("/keep", "kept", [])
    site.page("/skip", "skipped", [])

    async def heading(page: Page) -> dict[str, str]:
        await asyncio.sleep(0)
        return {"first_link": page.tree.css_first("a").text() if page.links else None}

    records = []
    async with Crawler(
        [f"{site.url}/"],
        TEST_SETTINGS,
        follow=lambda url, page: not url.endswith("/skip"),
        on_page=heading,
    ) as crawler:
        async for page in crawler:
            records.append(page.record())
    assert site.count("/skip") == 0 and site.count("/keep") == 1
    assert by_url(records)[f"{site.url}/"]["first_link"] == "/keep"


async def test_a_hook_that_raises_marks_the_page_and_the_crawl_goes_on(site, caplog):
    chain_site(site, 5)

    def broken(page: Page) -> dict[str, int]:
        return {"ratio": 1 // 0}

    with caplog.at_level(logging.ERROR, logger="crawler"):
        async with Crawler([f"{site.url}/"], TEST_SETTINGS, on_page=broken) as crawler:
            records = [page.record() async for page in crawler]
    assert len(records) == 6
    assert {r["error"] for r in records} == {"hook_failed"}
    assert all(r["status"] == 200 for r in records)
    failures = [r for r in caplog.records if "on_page hook failed" in r.getMessage()]
    assert len(failures) == 1 and "ZeroDivisionError" in failures[0].exc_text


async def test_on_page_sees_every_record_those_robots_txt_refuses_too(site):
    # A dataset that tags each record (a crawl id, a source) had records without the tag:
    # robots.txt's refusals were written without asking on_page.
    site.page("/robots.txt", body="User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page("/", "home", ["/private", "/public"])
    site.page("/public", "public")
    settings = replace(TEST_SETTINGS, ignore_robots=False)

    async with Crawler([f"{site.url}/"], settings, on_page=lambda page: {"source": "t"}) as c:
        records = [page.record() async for page in c]

    assert {r["url"].removeprefix(site.url): r.get("source") for r in records} == {
        "/": "t",
        "/public": "t",
        "/private": "t",
    }
    assert site.count("/private") == 0


async def test_a_hook_that_awaits_something_cancelled_fails_that_page_not_the_crawl(site):
    chain_site(site, 5)

    async def on_page(page: Page) -> None:
        cancelled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        cancelled.cancel()  # as a request the hook shares with other code may be
        await cancelled

    async with Crawler([f"{site.url}/"], TEST_SETTINGS, on_page=on_page) as crawler:
        records = [page.record() async for page in crawler]
    assert len(records) == 6
    assert {r["error"] for r in records} == {"hook_failed"}


def test_a_hook_that_is_not_a_function_is_refused_up_front():
    with pytest.raises(ConfigError, match="on_page must be a function, not dict"):
        Crawler(["http://127.0.0.1:9/"], on_page={"a": 1})


def test_a_hook_that_yields_its_answer_is_refused_up_front():
    """A generator is truthy whatever it yields: such a `follow` took every link."""

    async def follow(url: str, page: Page) -> AsyncIterator[bool]:
        yield False

    def on_page(page: Page) -> Iterator[dict[str, int]]:
        yield {"a": 1}

    with pytest.raises(ConfigError, match=r"^follow must return its answer, not yield it$"):
        Crawler(["http://127.0.0.1:9/"], follow=follow)
    with pytest.raises(ConfigError, match=r"^on_page must return its answer, not yield it$"):
        Crawler(["http://127.0.0.1:9/"], on_page=on_page)


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_follow_hook_that_raises_costs_that_link_not_the_pages_others(
    site, caplog, is_async
):
    site.page("/", "home", ["/a", "/boom", "/b", "/skip", "/boom2"])
    for path in ("/a", "/b", "/skip", "/boom", "/boom2"):
        site.page(path, path, [])

    def decide(url: str, page: Page) -> bool:
        if "/boom" in url:
            raise RuntimeError(f"no {url}")
        return not url.endswith("/skip")

    async def decide_async(url: str, page: Page) -> bool:
        return decide(url, page)

    hook = decide_async if is_async else decide
    with caplog.at_level(logging.ERROR, logger="crawler"):
        async with Crawler([f"{site.url}/"], TEST_SETTINGS, follow=hook) as crawler:
            records = by_url([page.record() async for page in crawler])
    assert records[f"{site.url}/"]["error"] == "hook_failed"
    assert sorted(records) == [f"{site.url}/", f"{site.url}/a", f"{site.url}/b"]
    assert [site.count(p) for p in ("/a", "/b", "/skip", "/boom", "/boom2")] == [1, 1, 0, 0, 0]
    failures = [r for r in caplog.records if "follow hook failed" in r.getMessage()]
    assert len(failures) == 1 and "RuntimeError: no" in failures[0].exc_text


async def test_on_page_may_not_replace_the_records_own_fields(site):
    site.page("/", "home", [])
    async with Crawler([f"{site.url}/"], TEST_SETTINGS, on_page=lambda p: {"url": "x"}) as c:
        records = [page.record() async for page in c]
    assert records[0]["url"] == f"{site.url}/" and records[0]["error"] == "hook_failed"


@pytest.mark.parametrize("name", ["text", "warc_file"])
async def test_on_page_may_not_write_the_fields_the_crawler_adds_with_an_option(
    site, tmp_path, name
):
    """A hook's "text" replaced --text's, and its "warc_file" was replaced by --warc's,
    both without a word: either the crawler's value or the hook's was lost."""
    site.page("/", body=html("Home", body="<p>home body</p>"))
    settings = replace(
        TEST_SETTINGS, text=True, warc=str(tmp_path / "w"), output=str(tmp_path / "o.jsonl")
    )
    async with Crawler([f"{site.url}/"], settings, on_page=lambda p: {name: "mine"}) as c:
        await c.crawl()
    [record] = read_records(tmp_path / "o.jsonl")
    assert record["error"] == "hook_failed"
    assert record["text"] == "home body" and record["warc_file"].endswith(".warc.gz")


async def test_on_page_values_json_has_not_are_written_as_orjson_writes_them(site, tmp_path):
    """NaN is null in the line, as orjson writes it, also when a lone surrogate sends
    the record to the standard library's encoder (which wrote NaN, no JSON: jq and
    JSON.parse refused the line); the surrogate is U+FFFD, as everywhere the crawler
    meets one (it was "?")."""
    site.page("/", "home", [])
    output = tmp_path / "pages.jsonl"
    settings = replace(TEST_SETTINGS, output=str(output))

    def on_page(page: Page) -> dict[str, Any]:
        return {"score": float("nan"), "scores": [float("inf"), 1.5], "name": "half \ud83d"}

    await Crawler([f"{site.url}/"], settings, on_page=on_page).crawl()
    [record] = [orjson.loads(line) for line in output.read_bytes().splitlines()]
    assert (record["score"], record["scores"], record["name"]) == (None, [None, 1.5], "half \ufffd")


@pytest.mark.parametrize("hook", ["on_page", "follow"])
async def test_a_hook_that_writes_page_fields_json_cannot_encode_costs_that_field(
    site, tmp_path, hook
):
    # Written to page.fields rather than returned, a set failed the page's record with
    # internal_error and left its links unfollowed: the site's crawl ended at its seed.
    site.page("/", "home", ["/a"])
    site.page("/a", "a")
    output = tmp_path / "pages.jsonl"

    def tag(page: Page) -> None:
        page.fields["tags"] = {"x"}
        page.fields["kept"] = 1

    def follow(url: str, page: Page) -> bool:
        tag(page)
        return True

    hooks: dict[str, Any] = {"on_page": tag} if hook == "on_page" else {"follow": follow}
    settings = replace(TEST_SETTINGS, output=str(output))
    await Crawler([f"{site.url}/"], settings, **hooks).crawl()
    records = by_url(read_records(output))
    assert site.count("/a") == 1
    home = records[f"{site.url}/"]
    assert home["error"] == "hook_failed" and home["kept"] == 1 and "tags" not in home


async def test_leaving_the_loop_early_stops_the_crawl(site):
    chain_site(site, 200)
    settings = replace(TEST_SETTINGS, concurrency=2, per_host=2)
    async with Crawler([f"{site.url}/"], settings) as crawler:
        async for page in crawler:
            if page.url.endswith("/p3"):
                break
    # Pages taken by the consumer, plus those committed ahead of it and those in flight.
    assert len(site.hits) < 100
    assert crawler.stats["records"] == len(site.hits)


async def test_contextlib_aclosing_stops_the_crawl_as_async_with_does(site, tmp_path):
    # The idiom for async iterators, async generators' own; a Crawler had no aclose().
    chain_site(site, 200)
    settings = replace(TEST_SETTINGS, concurrency=2, per_host=2, output=str(tmp_path / "p.jsonl"))
    async with contextlib.aclosing(Crawler([f"{site.url}/"], settings)) as crawler:
        async for page in crawler:
            if page.url.endswith("/p3"):
                break
    assert len(site.hits) < 100
    assert crawler.stats["records"] == len(site.hits) == len(read_records(tmp_path / "p.jsonl"))


async def test_leaving_early_with_state_commits_everything_and_resumes(site, tmp_path):
    chain_site(site, 60)
    output, state = tmp_path / "pages.jsonl", tmp_path / "state"
    settings = replace(TEST_SETTINGS, output=str(output), state=str(state), concurrency=2)
    seen = []
    async with Crawler([f"{site.url}/"], settings) as crawler:
        async for page in crawler:
            seen.append(page.url)
            if len(seen) == 10:
                break
    first_run = read_records(output)
    assert len(first_run) >= 10 and len(first_run) == len(site.hits)
    async with Crawler([f"{site.url}/"], settings) as crawler:
        await crawler.crawl()
    records = read_records(output)
    assert len(by_url(records)) == 61  # every page once, across both runs
    assert len(site.hits) == 61


async def test_a_loop_left_early_without_async_with_closes_its_crawl(site, tmp_path):
    # `async for page in Crawler(...)` and a break left the crawl waiting for a consumer,
    # its --state locked for as long as the process ran: it could never be resumed there.
    chain_site(site, 60)
    output = tmp_path / "pages.jsonl"
    settings = replace(TEST_SETTINGS, output=str(output), state=str(tmp_path / "s"))
    async for page in Crawler([f"{site.url}/"], settings):
        if page.url.endswith("/p3"):
            break
    resumed = None
    for _ in range(500):  # the event loop closes the loop's generator soon, not at once
        try:
            resumed = Crawler([f"{site.url}/"], settings)
            resumed.open()
            break
        except ConfigError as exc:
            assert "in use by another crawler" in str(exc)
            await asyncio.sleep(0.01)
    assert resumed is not None
    async with resumed:
        await resumed.crawl()
    assert len(by_url(read_records(output))) == 61 == len(read_records(output))
    assert len(site.hits) == 61


async def test_a_crawl_cancelled_without_async_with_stops_and_unlocks_its_state(site, tmp_path):
    # crawl() under asyncio.wait_for, with no `async with`: the time ran out and the
    # crawl went on fetching, unwatched, its --state locked.
    chain_site(site, 20)
    site.gate = asyncio.Event()  # the site answers nothing until the test says so
    settings = replace(
        TEST_SETTINGS, state=str(tmp_path / "s"), output=str(tmp_path / "p.jsonl"), drain_timeout=0
    )
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(Crawler([f"{site.url}/"], settings).crawl(), 0.5)
    asked = len(site.hits)
    site.gate.set()
    async with Crawler([f"{site.url}/"], settings) as again:  # unlocked: it resumes
        await again.crawl()
    assert len(by_url(read_records(tmp_path / "p.jsonl"))) == 21
    assert len(site.hits) == asked + 21


async def test_a_crawl_to_its_end_without_async_with_finishes_its_outputs_and_state(site, tmp_path):
    # `await Crawler(...).crawl()` left the crawl open at its end: no WACZ was made, and
    # its --state stayed locked for the process's life ("in use by another crawler").
    chain_site(site, 3)
    wacz = tmp_path / "site.wacz"
    settings = replace(
        TEST_SETTINGS,
        state=str(tmp_path / "s"),
        output=str(tmp_path / "p.jsonl"),
        warc=str(tmp_path / "w"),
        wacz=str(wacz),
    )
    await Crawler([f"{site.url}/"], settings).crawl()
    with zipfile.ZipFile(wacz) as package:
        assert "datapackage.json" in package.namelist()
    again = Crawler([f"{site.url}/"], settings)
    async with again:  # unlocked
        assert again.complete


def parse_trees() -> int:
    gc.collect()
    return sum(isinstance(o, LexborHTMLParser) for o in gc.get_objects())


async def test_pages_kept_after_the_loop_body_keep_no_parse_tree(site):
    # `pages = [page async for page in crawler]` kept every page's tree, 20 times its
    # HTML: 1,500 pages of 24 KB took 1 GB. A kept page parses again if asked.
    chain_site(site, 30)
    trees_before = parse_trees()
    async with Crawler([f"{site.url}/"], TEST_SETTINGS) as crawler:
        pages = []
        async for page in crawler:
            assert page.tree is not None and page.tree.css_first("title") is not None
            pages.append(page)
    assert parse_trees() <= trees_before + 1
    assert len(pages) == 31
    title = pages[5].tree.css_first("title")
    assert title is not None and title.text() == pages[5].title


async def test_pages_an_on_page_hook_keeps_keep_no_parse_tree(site):
    # A hook that collects the pages (on_page=pages.append) kept every page's tree:
    # 1,500 pages of 24 KB took 1 GB. A kept page parses again if asked.
    chain_site(site, 30)
    trees_before = parse_trees()
    pages: list[Page] = []
    await Crawler([f"{site.url}/"], TEST_SETTINGS, on_page=pages.append).crawl()
    assert len(pages) == 31 and parse_trees() <= trees_before
    title = pages[5].tree.css_first("title")
    assert title is not None and title.text() == pages[5].title


async def test_a_crawl_run_in_a_thread_of_its_own_is_stopped_from_another(site):
    # stop() from a thread with no event loop (a web app's) raised 'no running event
    # loop', after changing the crawl's state from outside its loop.
    chain_site(site, 200)
    crawler = Crawler([f"{site.url}/"], replace(TEST_SETTINGS, concurrency=2, per_host=2))
    running = asyncio.create_task(asyncio.to_thread(crawler.run))  # a loop of its own
    await site.hits_reached(10).wait()
    await asyncio.to_thread(crawler.stop)
    stats = await asyncio.wait_for(running, 10)
    assert 10 <= stats["records"] < 100 and len(site.hits) < 100


async def test_cancelling_the_consuming_task_stops_cleanly(site, tmp_path):
    chain_site(site, 100)
    settings = replace(TEST_SETTINGS, concurrency=2, state=str(tmp_path / "s"))
    some_pages = asyncio.Event()

    async def consume() -> None:
        async with Crawler([f"{site.url}/"], settings) as crawler:
            async for _page in crawler:
                some_pages.set()

    task = asyncio.create_task(consume())
    await some_pages.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The state directory was committed and unlocked: the crawl resumes and finishes.
    async with Crawler([f"{site.url}/"], settings) as crawler:
        rest = [page.url async for page in crawler]
    assert len(site.hits) == 101
    assert len(rest) < 101


async def test_the_cli_writes_exactly_page_record_as_json_lines(site, tmp_path):
    chain_site(site, 30)
    site.page("/p7", "中文 «quotes»", ["/", "/ünïcode?q=ä"])
    output = tmp_path / "pages.jsonl"
    settings = replace(TEST_SETTINGS, output=str(output))
    lines = []
    async with Crawler([f"{site.url}/"], settings, on_page=lambda p: {"n": len(p.links)}) as c:
        async for page in c:
            lines.append(orjson.dumps(page.record(), option=orjson.OPT_APPEND_NEWLINE))
    assert output.read_bytes() == b"".join(lines)


async def test_run_crawls_to_the_end_without_a_loop_of_its_own(site):
    chain_site(site, 5)
    crawler = Crawler([f"{site.url}/"], TEST_SETTINGS)
    stats = await asyncio.to_thread(crawler.run)
    assert stats["records"] == 6 and len(site.hits) == 6


async def test_the_stats_setting_writes_the_stats_file_as_the_flag_does(site, tmp_path):
    # A config file shared by the CLI and a script: its `stats` key was read, checked,
    # and ignored by the API, which wrote no file.
    chain_site(site, 5)
    config = tmp_path / "crawl.toml"
    config.write_text(f"stats = '{tmp_path / 'stats.json'}'\n", encoding="utf-8")
    settings = replace(Settings.from_toml(config), **{"ignore_robots": True, "uvloop": False})

    async with Crawler([f"{site.url}/"], settings) as crawler:
        async for _ in crawler:
            pass

    written = orjson.loads((tmp_path / "stats.json").read_bytes())
    assert (written["records"], written["statuses"]) == (6, {"200": 6})
    assert written["depths"] == crawler.stats["depths"] == {"0": 1, "1": 5}


async def test_run_from_a_coroutine_says_what_to_use_instead():
    crawler = Crawler(["http://127.0.0.1:9/"])
    with pytest.raises(RuntimeError, match=r"await crawler\.crawl\(\)"):
        crawler.run()


def test_the_package_ships_py_typed():
    assert Path(crawler_package.__file__).with_name("py.typed").exists()


def test_the_readme_documents_every_error_kind_and_no_other():
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Error kinds", 1)[1].split("\n## ", 1)[0]
    table = section.split("|---|---|\n", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines()]
    documented = {kind for row in rows for kind in re.findall(r"`([a-z_]+)`", row)}
    assert documented == {kind.value for kind in crawler_package.ErrorKind}


async def test_the_readmes_python_examples_run_as_written(site, tmp_path):
    # A new user pastes them: the API's, against a local site instead of example.com,
    # and the one that reads a page's WARC record back (it named a `rec` it never made).
    chain_site(site, 3)
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    warc, api = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    api = api.replace("https://example.com/", f"{site.url}/") + "print(stats['records'])\n"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")

    async def python(*args: str) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, *args, cwd=tmp_path, stdout=-1, stderr=-1
        )
        out, err = await process.communicate()
        return process.returncode, out.decode(), err.decode()

    assert await python("-c", api) == (0, "4\n", "")
    crawl = ("-m", "crawler", "seeds.txt", "-o", "pages.jsonl", "--warc", "archive", "--quiet")
    assert (await python(*crawl))[0] == 0
    code, out, err = await python("-c", warc)
    assert (code, err) == (0, ""), err
    assert out.startswith("b'<!doctype html>")


SETTINGS_AS_USERS_WRITE_THEM = """
from pathlib import Path

from crawler import Settings

Settings.from_toml(Path("config.example.toml"))
settings = Settings(
    allow_host=["docs.example.com"],
    include=r"/docs/",
    header={"Accept-Language": "zh-CN"},
    output=Path("pages.jsonl"),
    cookies=Path("cookies.txt"),
    dashboard=8080,
    timeout=5,
)
output: str | None = settings.output
hosts: tuple[str, ...] = settings.allow_host
"""


def test_a_users_mypy_strict_takes_the_readmes_example_and_settings_as_users_write_them(
    tmp_path, monkeypatch
):
    # The package ships py.typed, so users check their code against its hints. Their
    # mypy --strict refused the README's example (a bare `dict`), and a list, a Path, a
    # header table or a port number given to Settings, which takes them at run time.
    from mypy import api as mypy

    from crawler.config import SettingsOptions

    assert set(SettingsOptions.__annotations__) == {f.name for f in fields(Settings)}
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    example = tmp_path / "example.py"
    example.write_text(re.findall(r"```python\n(.*?)```", readme, re.DOTALL)[1])
    settings = tmp_path / "settings.py"
    settings.write_text(SETTINGS_AS_USERS_WRITE_THEM)
    out, err, code = mypy.run(["--strict", "--python-version", "3.11", str(example), str(settings)])
    assert (code, err) == (0, ""), out
    monkeypatch.chdir(Path(__file__).parent.parent)  # where config.example.toml is
    exec(compile(SETTINGS_AS_USERS_WRITE_THEM, str(settings), "exec"), {})


def test_uvloop_asked_for_but_not_installed_is_said_not_ignored(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed: import fails
    ran = []

    async def crawl() -> None:
        ran.append(asyncio.get_running_loop())

    crawler_package.api.event_loop_runner(True)(crawl())
    assert len(ran) == 1
    assert "--uvloop: uvloop is not installed" in caplog.text


def test_an_error_kind_is_written_as_its_text():
    page = Page("http://a.test/", 0, None, error=crawler_package.ErrorKind.TIMEOUT)
    assert orjson.loads(orjson.dumps(page.record()))["error"] == "timeout" == page.error
    assert Page.from_record(page.record()).error is crawler_package.ErrorKind.TIMEOUT


async def test_the_api_shows_the_crawl_not_the_engine(site, tmp_path):
    chain_site(site, 3)
    settings = replace(TEST_SETTINGS, state=str(tmp_path / "state"))
    crawler = Crawler([f"{site.url}/"], settings)
    public = {name for name in dir(crawler) if not name.startswith("_")}
    assert public == {
        "aclose", "close", "complete", "crawl", "dashboard_figures", "dashboard_url", "failure",
        "figures",
        "open", "run", "seeds", "settings", "stats", "stop",
    }  # fmt: skip
    assert crawler.open() is None
    assert crawler.complete is False and crawler.failure is None
    async with crawler:
        await crawler.crawl()
    stats = crawler.stats
    assert stats["records"] == 4 and stats["visited"]["urls"] == 4
    assert stats["rate_history"][-1]["records"] == 4
    again = Crawler([f"{site.url}/"], settings)
    assert again.complete is True
    await again.close()


async def test_a_crawl_that_cannot_write_says_why_in_failure(site):
    chain_site(site, 3)
    crawler = Crawler([f"{site.url}/"], replace(TEST_SETTINGS, output="/dev/full"))
    with pytest.raises(crawler_package.sinks.WriteFailed, match="cannot write /dev/full"):
        async with crawler:
            await crawler.crawl()
    assert "No space left" in str(crawler.failure)


MALLOC_PROBE = """
import sys
import threading
import time
import crawler
from crawler import Crawler, Settings
stats = Crawler([sys.argv[1]], Settings(ignore_robots=True, uvloop=False)).run()
print(stats["records"], crawler.keep_freed_memory.cache_info().currsize)
"""


async def test_the_library_leaves_the_processs_malloc_alone_unless_asked(site):
    chain_site(site, 2)
    probe = await asyncio.create_subprocess_exec(
        sys.executable, "-c", MALLOC_PROBE, f"{site.url}/", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await probe.communicate()
    assert out.split() == [b"3", b"0"]  # crawled, and mallopt never called
    glibc = platform.libc_ver()[0] == "glibc"
    assert crawler_package.keep_freed_memory() is glibc  # the opt-in, where there is mallopt


async def test_a_finished_crawl_leaves_no_parse_thread_running(site):
    # Pages over 32 KiB are parsed in threads beside the loop; a crawl kept after its end
    # (to read its figures) kept them alive, a set for each crawl of a web app's life.
    big = "<p>a plain paragraph</p>" * 2000
    site.page("/", "home", ["/a"], body=html("home", ["/a"]) + big)
    site.page("/a", "a", body=html("a") + big)
    kept = []
    for _ in range(3):
        crawler = Crawler([site.url + "/"], TEST_SETTINGS)
        async with crawler:
            assert [page.status async for page in crawler] == [200, 200]
        kept.append(crawler)
    for thread in threading.enumerate():
        if thread.name.startswith("crawler-parse"):
            thread.join(timeout=5)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("crawler-parse")]


async def test_a_second_crawl_given_an_output_another_is_writing_is_refused(site, tmp_path):
    """Each crawl wrote the file from its start, over the other's records; a device
    (/dev/null) is shared as before."""
    site.page("/", "home", ["/slow"])
    release = asyncio.Event()

    async def slow(_request: Any) -> web.Response:
        await release.wait()
        return web.Response(text=html("slow"), content_type="text/html")

    site.handle("/slow", slow)
    output = tmp_path / "pages.jsonl"
    output.write_text("kept\n")
    asked = site.hits_reached(2)
    first = Crawler([f"{site.url}/"], replace(TEST_SETTINGS, output=str(output)))
    running = asyncio.create_task(first.crawl())
    await asyncio.wait_for(asked.wait(), 30)

    second = Crawler([f"{site.url}/"], replace(TEST_SETTINGS, output=str(output)))
    with pytest.raises(ConfigError, match="is being written by another crawl"):
        await second.crawl()
    devnull = replace(TEST_SETTINGS, output=os.devnull)
    async with Crawler([f"{site.url}/"], replace(devnull, max_pages=1)) as third:
        await asyncio.wait_for(third.crawl(), 30)

    release.set()
    await asyncio.wait_for(running, 30)
    records = read_records(output)
    assert [(r["url"], r["status"]) for r in records] == [
        (f"{site.url}/", 200),
        (f"{site.url}/slow", 200),
    ]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("bytes", "x"),
        ("depth", None),
        ("links", {"x"}),
        ("status", "200"),
        ("elapsed_ms", "1"),
        ("error", "mine"),
    ],
)
async def test_a_hook_that_sets_a_page_attribute_to_a_wrong_type_costs_that_page_only(
    site, tmp_path, name, value
):
    # `p.bytes = "x"` with --state wrote every page twice, the second internal_error (the
    # stats' count failed after the record was written); `p.depth = None` broke
    # crawler.stats (ValueError); `p.links = set(...)` lost the page and its links; an
    # error no kind names failed the crawl if the page was held (ErrorKind("mine")).
    site.page("/", "home", ["/a"])
    site.page("/a", "a", ["/b"])
    site.page("/b", "b")
    output = tmp_path / "pages.jsonl"
    settings = replace(TEST_SETTINGS, output=str(output), state=str(tmp_path / "s"))
    crawler = Crawler([f"{site.url}/"], settings, on_page=lambda p: setattr(p, name, value))
    await crawler.crawl()
    records = read_records(output)
    assert len(records) == len(by_url(records)) == 3
    assert {r["error"] for r in records} == {"hook_failed"}
    kind = {"links": list, "error": str}.get(name, int | float)
    assert all(isinstance(r[name], kind) for r in records)
    stats = crawler.stats
    assert stats["records"] == 3 and stats["errors"] == {"hook_failed": 3}
    assert stats["depths"] == {"0": 1, "1": 1, "2": 1}


async def test_an_iterator_never_iterated_starts_no_crawl_and_locks_nothing(site, tmp_path):
    # aiter(crawler) opened the state and started the crawl before the first anext:
    # an iterator made and dropped fetched the site and kept --state locked.
    chain_site(site, 3)
    settings = replace(TEST_SETTINGS, state=str(tmp_path / "s"), output=str(tmp_path / "p.jsonl"))
    pages = aiter(Crawler([f"{site.url}/"], settings))
    await asyncio.sleep(0.05)  # time for a crawl started by mistake to fetch
    assert site.hits == []
    del pages
    again = Crawler([f"{site.url}/"], settings)
    async for _page in again:
        pass
    assert len(read_records(tmp_path / "p.jsonl")) == 4


async def test_a_page_a_hook_kept_keeps_its_body_when_held_for_shallower_pages(site, tmp_path):
    # /a/deep waits for the slow /b (breadth-first); held as its record alone, its
    # response went, and the page the hook kept had body b"".
    site.page("/", "home", ["/a", "/b"])
    site.page("/a", "a", ["/a/deep"])
    site.page("/a/deep", "deep", ["/c"])
    site.page("/b", "b", delay_s=0.2)
    site.page("/c", "c")
    kept: dict[str, Page] = {}
    settings = replace(TEST_SETTINGS, output=str(tmp_path / "p.jsonl"), concurrency=4, per_host=4)
    await Crawler([f"{site.url}/"], settings, on_page=lambda p: kept.update({p.url: p})).crawl()
    assert len(kept) == 5
    assert b"<title>deep</title>" in kept[f"{site.url}/a/deep"].body


async def test_the_event_loop_keeps_running_while_a_crawl_opens_and_closes(site, tmp_path):
    # open() built the visited set and a --since index (48 s for a million URLs), and
    # close() sorted the WARC's index and packaged the WACZ, on the event loop: a web
    # app's other requests waited all that time.
    site.page("/", "home", ["/big"])
    site.page("/big", body=os.urandom(2**20), content_type="application/octet-stream")
    prev = tmp_path / "prev.jsonl"
    with prev.open("wb") as f:
        for i in range(50_000):  # indexed in 0.7 s, here on a loaded machine
            url = f"{site.url}/old/{i}"
            record = {"url": url, "final_url": url, "status": 200, "depth": 1, "bytes": 1}
            record["content_digest"] = "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
            f.write(orjson.dumps({**record, "fetched_at": "2026-01-01T00:00:00.000+00:00"}) + b"\n")
    settings = replace(
        TEST_SETTINGS,
        since=str(prev),
        state=str(tmp_path / "s"),
        warc=str(tmp_path / "warc"),
        wacz=str(tmp_path / "crawl.wacz"),
    )
    gaps_s: list[float] = []
    beating = True

    async def heartbeat() -> None:
        last = time.monotonic()
        while beating:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps_s.append(now - last)
            last = now

    beats = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.01)
    async with Crawler([f"{site.url}/"], settings) as crawler:
        await crawler.crawl()
    beating = False
    await beats
    assert crawler.stats["records"] == 2
    with zipfile.ZipFile(tmp_path / "crawl.wacz") as wacz:
        assert "datapackage.json" in wacz.namelist()
    assert max(gaps_s) < 0.15, f"the loop stood still {max(gaps_s):.3f} s"


async def test_a_hook_that_writes_a_standard_field_into_page_fields_costs_that_page(site, tmp_path):
    # page.fields["url"] = ... replaced the record's own url in the output (the page's
    # attribute said otherwise), and a later --since refused the whole file for it.
    site.page("/", "home", ["/a"])
    site.page("/a", "a")
    output = tmp_path / "pages.jsonl"
    settings = replace(TEST_SETTINGS, output=str(output))

    def on_page(page: Page) -> None:
        page.fields.update(url="x", depth="deep", mine=1)

    await Crawler([f"{site.url}/"], settings, on_page=on_page).crawl()
    records = by_url(read_records(output))
    assert set(records) == {f"{site.url}/", f"{site.url}/a"}
    assert [r["depth"] for r in records.values()] == [0, 1]
    assert all(r["error"] == "hook_failed" and r["mine"] == 1 for r in records.values())


async def test_a_second_close_returns_once_the_first_has_closed_the_store(site, tmp_path):
    # The store closes in a thread: close() called again meanwhile (the loop's generator
    # closing as `async with` does) returned at once, the --state still locked.
    chain_site(site, 3)
    settings = replace(TEST_SETTINGS, state=str(tmp_path / "s"))
    crawler = Crawler([f"{site.url}/"], settings)
    await crawler.__aenter__()
    first = asyncio.ensure_future(crawler.close())
    await asyncio.sleep(0)  # the first close() has handed the store to its thread
    await crawler.close()
    third = Crawler([f"{site.url}/"], settings)
    third.open()  # unlocked: no ConfigError 'in use by another crawler'
    await third.close()
    await first


def test_every_standard_field_has_the_types_a_hook_is_held_to() -> None:
    # A field added to the record without its types would make every hook's page a KeyError.
    assert set(RECORD_TYPES) == set(RECORD_FIELDS)
    page = Page("http://a/", 0, None)
    assert all(isinstance(getattr(page, name), RECORD_TYPES[name]) for name in RECORD_FIELDS)
