"""Politeness, measured at the server: robots.txt, per-host caps, delays, backoff, no
head-of-line blocking."""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import logging
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from crawler import Crawler, politeness
from crawler.config import DEFAULT_USER_AGENT
from crawler.politeness import HOST_FAILURES_LOGGED, parse_robots
from tests.conftest import TEST_SETTINGS, Site, by_url, crawl, read_records


def start_gaps(site: Site) -> list[float]:
    starts = sorted(hit.started for hit in site.hits)
    return [later - earlier for earlier, later in itertools.pairwise(starts)]


def robots(site: Site, text: str) -> None:
    site.page("/robots.txt", body=text, content_type="text/plain")


async def crawl_every_host(tmp_path: Path, site: Site, **overrides: Any) -> list[dict[str, Any]]:
    """Crawl from `site`'s home page into any host (loopback ones too), obeying robots.txt."""
    return await crawl(
        tmp_path,
        [site.url + "/"],
        ignore_robots=False,
        any_host=True,
        allow_private_addresses=True,
        **overrides,
    )


def fan_out(site: Site, pages: int, **page_options) -> None:
    site.page("/", "index", [f"/p{n}" for n in range(pages)])
    for n in range(pages):
        site.page(f"/p{n}", str(n), **page_options)


async def test_disallowed_urls_are_recorded_and_never_requested(site: Site, tmp_path):
    robots(site, "User-agent: *\nDisallow: /private\n")
    site.page("/", "index", ["/public", "/private/a", "/private/b"])
    site.page("/public", "public")

    records = by_url(await crawl(tmp_path, [site.url + "/"], ignore_robots=False))

    assert site.paths() == {"/robots.txt": 1, "/": 1, "/public": 1}
    for path in ("/private/a", "/private/b"):
        assert (records[site.url + path]["status"], records[site.url + path]["error"]) == (
            None,
            "robots_disallowed",
        )


async def test_robots_txt_is_fetched_once_per_host(site: Site, site2: Site, tmp_path):
    robots(site, "User-agent: *\nAllow: /\n")
    fan_out(site, 20)
    site.page("/", "index", [*(f"/p{n}" for n in range(20)), f"{site2.url}/"])
    site2.page("/", "other")

    await crawl(
        tmp_path,
        [site.url + "/"],
        ignore_robots=False,
        concurrency=8,
        per_host=8,
        allow_host=("127.0.0.2",),
        allow_private_addresses=True,  # 127.0.0.2 stands for a public host here
    )

    assert site.count("/robots.txt") == 1
    assert site2.count("/robots.txt") == 1


async def test_robots_groups_match_our_product_token(site: Site, tmp_path):
    robots(site, "User-agent: other-bot\nDisallow: /\n\nUser-agent: crawler\nDisallow: /secret\n")
    site.page("/", "index", ["/secret", "/open"])
    site.page("/open", "open")

    await crawl(tmp_path, [site.url + "/"], ignore_robots=False)

    assert site.count("/secret") == 0
    assert site.count("/open") == 1


async def test_a_bot_that_says_mozilla_compatible_is_matched_by_the_name_it_gives(
    site: Site, tmp_path
):
    # As Googlebot and bingbot name themselves; the group for MyBot is ours, not '*'.
    robots(site, "User-agent: *\nDisallow: /\n\nUser-agent: mybot\nDisallow: /secret\n")
    site.page("/", "index", ["/secret", "/open"], headers={"X-Robots-Tag": "MyBot: nofollow"})
    site.page("/open", "open")
    user_agent = "Mozilla/5.0 (compatible; MyBot/1.0; +https://example.com/bot)"

    [record] = await crawl(tmp_path, [site.url + "/"], ignore_robots=False, user_agent=user_agent)

    assert record["nofollow"] is True
    assert site.paths() == {"/robots.txt": 1, "/": 1}
    assert {hit.user_agent for hit in site.hits} == {user_agent}

    site.page("/", "index", ["/secret", "/open"])
    records = by_url(
        await crawl(tmp_path, [site.url + "/"], ignore_robots=False, user_agent=user_agent)
    )

    assert (site.count("/open"), site.count("/secret")) == (1, 0)
    assert records[site.url + "/secret"]["error"] == "robots_disallowed"


async def test_missing_robots_txt_allows_everything(site: Site, tmp_path):
    fan_out(site, 3)

    records = await crawl(tmp_path, [site.url + "/"], ignore_robots=False)

    assert [r["error"] for r in records] == [None] * 4


async def test_robots_txt_starting_with_a_byte_order_mark_keeps_its_first_group(
    site: Site, tmp_path
):
    site.page(
        "/robots.txt", body="\ufeffUser-agent: *\nDisallow: /private\n", content_type="text/plain"
    )
    site.page("/", "index", ["/private", "/public"])
    site.page("/public", "public")

    records = by_url(await crawl(tmp_path, [site.url + "/"], ignore_robots=False))

    assert site.count("/private") == 0
    assert records[site.url + "/private"]["error"] == "robots_disallowed"


async def test_robots_rules_for_gbk_paths_match_those_bytes_and_no_others(site: Site, tmp_path):
    # 中文 in GBK, escaped as RFC 9309 asks for bytes that are no UTF-8; and a GBK file's
    # raw 私有, as Chinese sites save robots.txt. To protego each was U+FFFDs, so the
    # first refused 北京 (B1B1BEA9) too and the second 私人 (CBBDC8CB).
    site.page(
        "/robots.txt",
        body="User-agent: *\nDisallow: /%D6%D0%CE%C4/\nDisallow: /私有/\n".encode("gbk"),
        content_type="text/plain",
    )
    refused = ["/%D6%D0%CE%C4/a.html", "/%CB%BD%D3%D0/a.html"]
    fetched = ["/%B1%B1%BE%A9/a.html", "/%CB%BD%C8%CB/a.html", "/%E4%B8%AD%E6%96%87/a.html"]
    site.page("/", "index", refused + fetched)

    records = by_url(await crawl(tmp_path, [site.url + "/"], ignore_robots=False))

    assert [records[site.url + path]["error"] for path in refused] == ["robots_disallowed"] * 2
    assert [records[site.url + path]["status"] for path in fetched] == [404] * 3
    assert len(site.hits) == 2 + len(fetched)


async def test_a_robots_txt_saved_in_gbk_refuses_its_paths_as_links_spell_them_in_utf8(
    site: Site, tmp_path
):
    # <a href="/私有/秘密.html"> on a page asks for /私有/ in UTF-8, as browsers do; the
    # file's 私有 in GBK matched only GBK's escapes, and the private pages were fetched.
    site.page(
        "/robots.txt",
        body="User-agent: *\nDisallow: /私有/\nAllow: /私有/公开/\n".encode("gbk"),
        content_type="text/plain",
    )
    site.page("/", "index", ["/私有/秘密.html", "/%CB%BD%D3%D0/b.html", "/私有/公开/c.html"])

    records = by_url(await crawl(tmp_path, [site.url + "/"], ignore_robots=False))

    private = ["/%E7%A7%81%E6%9C%89/%E7%A7%98%E5%AF%86.html", "/%CB%BD%D3%D0/b.html"]
    assert [records[site.url + path]["error"] for path in private] == ["robots_disallowed"] * 2
    public = "/%E7%A7%81%E6%9C%89/%E5%85%AC%E5%BC%80/c.html"
    assert records[site.url + public]["status"] == 404
    assert len(site.hits) == 3


async def test_failing_robots_txt_disallows_the_host_as_unreachable(site: Site, tmp_path):
    site.page("/robots.txt", status=503, body="down")
    fan_out(site, 3)

    records = await crawl(tmp_path, [site.url + "/"], ignore_robots=False, retries=1)

    assert [r["error"] for r in records] == ["robots_unreachable"]
    assert set(site.paths()) == {"/robots.txt"}
    assert site.count("/robots.txt") == 2  # tried again before giving up


async def test_robots_txt_redirects_are_followed(site: Site, tmp_path):
    site.redirect("/robots.txt", "/real-robots.txt", 301)
    robots_text = "User-agent: *\nDisallow: /no\n"
    site.page("/real-robots.txt", body=robots_text, content_type="text/plain")
    site.page("/", "index", ["/no", "/yes"])
    site.page("/yes", "yes")

    await crawl(tmp_path, [site.url + "/"], ignore_robots=False)

    assert site.count("/no") == 0
    assert site.count("/yes") == 1


async def test_a_robots_txt_past_five_redirects_or_in_a_loop_is_unavailable_so_allows_all(
    site: Site, tmp_path
):
    """RFC 9309 2.3.1.2: past five consecutive redirects, a crawler MAY take robots.txt
    as unavailable, which 2.3.1.3 says allows everything; not as unreachable."""
    for hop in range(6):
        site.redirect("/robots.txt" if hop == 0 else f"/r{hop}", f"/r{hop + 1}", 301)
    site.page("/r6", body="User-agent: *\nDisallow: /\n", content_type="text/plain")
    site.page("/", "index", ["/yes"])
    site.page("/yes", "yes")

    records = await crawl(tmp_path, [site.url + "/"], ignore_robots=False, retries=1)

    assert [r["error"] for r in records] == [None, None]
    assert site.count("/robots.txt") == 1
    assert site.count("/r6") == 0


async def test_every_request_sends_the_user_agent(site: Site, tmp_path):
    robots(site, "User-agent: *\nAllow: /\n")
    fan_out(site, 2)

    await crawl(tmp_path, [site.url + "/"], ignore_robots=False)
    await crawl(tmp_path, [site.url + "/"], user_agent="my-bot/2.0")

    agents = [hit.user_agent for hit in site.hits]
    assert agents == [DEFAULT_USER_AGENT] * 4 + ["my-bot/2.0"] * 3
    assert DEFAULT_USER_AGENT.startswith("crawler/0.1.0 (+http")


async def test_requests_per_host_never_exceed_per_host(site: Site, tmp_path):
    fan_out(site, 20, delay_s=0.05)

    await crawl(tmp_path, [site.url + "/"], concurrency=10, per_host=2)

    assert site.max_in_flight == 2


async def test_delay_spaces_request_starts_on_a_host(site: Site, tmp_path):
    fan_out(site, 4)

    await crawl(tmp_path, [site.url + "/"], delay=0.2, per_host=4)

    assert len(site.hits) == 5
    assert min(start_gaps(site)) >= 0.2


async def test_redirects_to_another_host_keep_that_hosts_crawl_delay_and_slots(
    site: Site, site2: Site, tmp_path
):
    # A redirector (a link shortener, /go?url=, an old domain) in front of a host that
    # asks for a Crawl-delay: the redirects were followed in the redirector's slots, so
    # the other host got them all at once.
    robots(site2, "User-agent: *\nCrawl-delay: 0.3\n")
    site.page("/", "index", [f"/go{n}" for n in range(4)])
    for n in range(4):
        site.redirect(f"/go{n}", f"{site2.url}/page{n}")
        site2.page(f"/page{n}", f"page {n}")

    records = by_url(
        await crawl(
            tmp_path,
            [site.url + "/"],
            ignore_robots=False,
            allow_host=("127.0.0.2",),
            allow_private_addresses=True,  # 127.0.0.2 stands for a public host here
        )
    )

    pages = [hit for hit in site2.hits if hit.path.startswith("/page")]
    assert len(pages) == 4 and site2.max_in_flight == 1
    starts = sorted(hit.started for hit in pages)
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.3
    for n in range(4):  # one record each, for the URL linked, as before
        record = records[f"{site.url}/go{n}"]
        assert (record["status"], record["final_url"]) == (200, f"{site2.url}/page{n}")
    assert len(records) == 5


async def test_crawl_delay_in_robots_txt_raises_the_delay(site: Site, tmp_path):
    robots(site, "User-agent: *\nCrawl-delay: 0.4\n")
    fan_out(site, 3)

    await crawl(tmp_path, [site.url + "/"], ignore_robots=False, delay=0.1)

    assert len(site.hits) == 5  # robots.txt, the index, three pages
    assert min(start_gaps(site)) >= 0.4


async def test_crawl_delay_is_capped_with_a_warning(site: Site, tmp_path, caplog):
    robots(site, "User-agent: *\nCrawl-delay: 3600\n")
    fan_out(site, 2)

    with caplog.at_level(logging.WARNING, logger="crawler"):
        await crawl(tmp_path, [site.url + "/"], ignore_robots=False, max_crawl_delay=0.2)

    gaps = start_gaps(site)
    assert min(gaps) >= 0.2
    assert max(gaps) < 1.0
    assert "Crawl-delay 3600" in caplog.text


async def test_429_with_retry_after_is_retried_after_it(site: Site, tmp_path):
    calls = []

    async def busy_once(_request: web.Request) -> web.Response:
        calls.append(1)
        if len(calls) == 1:
            return web.Response(status=429, headers={"Retry-After": "1"})
        return web.Response(text="<title>ok</title>", content_type="text/html")

    site.handle("/", busy_once)

    [record] = await crawl(tmp_path, [site.url + "/"], retries=2)

    assert (record["status"], record["title"]) == (200, "ok")
    first, second = sorted(hit.started for hit in site.hits)
    assert second - first >= 1.0


async def test_retry_after_past_the_cap_is_an_error(site: Site, tmp_path):
    site.page("/", status=503, headers={"Retry-After": "3600"})

    [record] = await crawl(tmp_path, [site.url + "/"], retries=2, max_retry_after=5)

    assert (record["status"], record["error"]) == (503, "retry_after_too_long")
    assert site.count("/") == 1


async def test_a_429_slows_the_whole_host(site: Site, tmp_path):
    async def too_many(_request: web.Request) -> web.Response:
        return web.Response(status=429)

    site.page("/", "index", ["/busy", "/a", "/b"])
    site.handle("/busy", too_many)
    site.page("/a", "a")
    site.page("/b", "b")

    await crawl(tmp_path, [site.url + "/"], per_host=1, retries=0)

    busy = next(hit.started for hit in site.hits if hit.path == "/busy")
    after = [hit.started - busy for hit in site.hits if hit.started > busy]
    assert after and min(after) >= 1.0


async def test_a_throttled_host_does_not_hold_up_another(site: Site, site2: Site, tmp_path):
    robots(site, "User-agent: *\nCrawl-delay: 0.5\n")
    fan_out(site, 2)
    fan_out(site2, 30)

    records = await crawl(
        tmp_path, [site.url + "/", site2.url + "/"], ignore_robots=False, concurrency=1
    )

    assert len(records) == 3 + 31
    fast = sorted(hit.started for hit in site2.hits)
    slow = sorted(hit.started for hit in site.hits)
    assert fast[-1] - fast[0] < 0.5  # all of 127.0.0.2 at full speed...
    assert fast[-1] < slow[-1] - 0.9  # ...long before the delayed host is done
    assert min(start_gaps(site)) >= 0.5


async def test_include_exclude_and_url_length_filter_what_is_followed(site: Site, tmp_path):
    long_path = "/" + "x" * 100
    site.page("/", "index", ["/docs/a", "/docs/b.pdf", "/blog/c", long_path])
    for path in ("/docs/a", "/docs/b.pdf", "/blog/c", long_path):
        site.page(path, path)

    await crawl(
        tmp_path, [site.url + "/"], include=("/docs/",), exclude=(r"\.pdf$",), max_url_length=60
    )

    assert set(site.paths()) == {"/", "/docs/a"}


async def test_include_and_exclude_in_chinese_match_the_paths_as_people_read_them(
    site: Site, tmp_path
):
    # URLs are kept escaped (/%E6%96%B0%E9%97%BB/), so /新闻/ was never found in one: the
    # crawl stopped at its seed, and --exclude 下载 let the downloads through.
    links = [
        "/新闻/北京.html",
        "/新闻/下载/a.zip",
        "/%E6%96%B0%E9%97%BB/%E4%B8%8A%E6%B5%B7",
        "/关于",
    ]
    site.page("/", "index", links)

    records = await crawl(tmp_path, [site.url + "/"], include=("/新闻/",), exclude=("下载",))

    assert [record["url"].removeprefix(site.url) for record in records] == [
        "/",
        "/%E6%96%B0%E9%97%BB/%E5%8C%97%E4%BA%AC.html",
        "/%E6%96%B0%E9%97%BB/%E4%B8%8A%E6%B5%B7",
    ]


async def test_a_host_that_refuses_connections_is_reported_unreachable(tmp_path):
    with socket.socket() as probe:  # a port on which nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    records = await crawl(tmp_path, [f"http://127.0.0.1:{port}/"], ignore_robots=False)

    assert [r["error"] for r in records] == ["robots_unreachable"]


async def test_robots_txt_is_fetched_again_once_its_cache_expires(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(politeness, "ROBOTS_MAX_AGE_S", 0.3)  # RFC 9309: at most 24 hours
    site.page("/robots.txt", content_type="text/plain", body="User-agent: *\nAllow: /\n")
    site.page("/", "Home", ["/1"])
    for n in range(1, 8):
        site.page(f"/{n}", str(n), [f"/{n + 1}"], delay_s=0.1)
    await crawl(tmp_path, [site.url + "/"], ignore_robots=False, max_depth=10)
    assert site.count("/robots.txt") >= 2
    assert site.count("/7") == 1


async def test_a_host_that_hangs_up_on_every_connection_fails_its_queued_urls_at_once(
    site: Site, tmp_path
):
    """With --ignore-robots nothing else finds a dead host out: each of its links cost
    its full retries (50 took 31 s). After politeness.UNREACHABLE_AFTER connections in a
    row fail, its queued URLs get that error without a request."""
    connections = 0

    async def hang_up(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        writer.close()

    dead = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    dead_url = f"http://127.0.0.1:{dead.sockets[0].getsockname()[1]}"
    with socket.socket() as unused:  # a port nothing listens on: connections are refused
        unused.bind(("127.0.0.1", 0))
        refusing_url = f"http://127.0.0.1:{unused.getsockname()[1]}"
    links = [f"{dead_url}/{n}" for n in range(30)]
    refused = [f"{refusing_url}/{n}" for n in range(30)]
    site.page("/", "home", [*links, *refused, "/live"])
    site.page("/live", "live")
    try:
        records = by_url(
            await crawl(tmp_path, [site.url + "/"], any_host=True, retries=2, per_host=1)
        )
    finally:
        dead.close()
        await dead.wait_closed()

    failed = links + refused
    assert {url: records[url]["error"] for url in failed} == dict.fromkeys(
        failed, "connection_error"
    )
    assert records[site.url + "/live"]["title"] == "live"
    # The first link's three tries; aiohttp sends each idempotent request once more on a
    # new connection when the server hangs up (RFC 9112 9.3.1).
    assert connections == 2 * politeness.UNREACHABLE_AFTER


async def test_an_unreachable_robots_txt_is_tried_once_a_hold_and_its_failures_not_kept(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Its --retries first, then one attempt each time the hold is over; a broad crawl
    kept a count for every host that ever failed (10^5 dead hosts, 10^5 entries)."""
    monkeypatch.setattr(politeness, "UNREACHABLE_HOLD_S", 0.3)
    monkeypatch.setattr(politeness, "backoff_s", lambda _attempt: 0.05)
    caplog.set_level(logging.INFO, "crawler.politeness")
    with socket.socket() as unused:  # a port nothing listens on: connections are refused
        unused.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{unused.getsockname()[1]}"
    site.page("/", "home", [f"{dead_url}/1", "/slow"])
    site.page("/slow", "slow", [f"{dead_url}/2"], delay_s=0.6)  # past the hold
    settings = replace(
        TEST_SETTINGS, ignore_robots=False, any_host=True, retries=2, output=str(tmp_path / "o")
    )
    async with Crawler([site.url + "/"], settings) as crawler:
        await crawler.crawl()
        robots = crawler._opened()._robots

    errors = {r["url"]: r.get("error") for r in read_records(tmp_path / "o")}
    assert errors[f"{dead_url}/1"] == errors[f"{dead_url}/2"] == "robots_unreachable"
    attempts = [r.message.split(": its")[0] for r in caplog.records if "robots.txt" in r.message]
    tried, held = f"robots.txt of {dead_url} unreachable (connection_error)", "; trying again"
    assert attempts == [tried + held, tried + held, tried, tried]  # 2 retries, hold, 1 try
    assert robots._failures == {}


async def test_a_retry_after_is_kept_by_the_whole_host_when_its_url_is_given_up(
    site: Site, site2: Site, tmp_path: Path
) -> None:
    """RFC 9110 10.2.3: Retry-After says how long to wait before a follow-up request,
    in seconds or as an HTTP-date. With no retry left (or one past --max-retry-after,
    whose wait is then the cap), the host's next URL went 1 s later whatever it said."""
    site3 = await Site("127.0.0.3").start()

    async def busy_for_3_s(_request: web.Request) -> web.Response:
        # the date made as it is sent: 2-3 s from then, at a whole second's precision
        later = email.utils.formatdate(time.time() + 3, usegmt=True)
        return web.Response(status=429, headers={"Retry-After": later})

    waits = {site: "2", site2: None, site3: "3600"}  # site3's is past --max-retry-after 2
    try:
        for server, retry_after in waits.items():
            server.page("/", "index", ["/busy", "/next"])
            if retry_after is None:
                server.handle("/busy", busy_for_3_s)
            else:
                server.page("/busy", status=429, headers={"Retry-After": retry_after})
            server.page("/next", "next")
        records = await crawl(
            tmp_path,
            [server.url + "/" for server in waits],
            per_host=1,
            retries=0,
            max_retry_after=2,
            allow_private_addresses=True,
        )
    finally:
        await site3.stop()

    for server in waits:
        started = {hit.path: hit.started for hit in server.hits}
        assert started["/next"] - started["/busy"] >= 2.0, server.url
    assert sorted(r["status"] for r in records) == [200] * 6 + [429] * 3


async def test_a_redirect_to_a_host_whose_robots_txt_fails_once_waits_for_its_retries(
    site: Site, site2: Site, tmp_path: Path
) -> None:
    """A link there would have robots.txt asked again (--retries); a redirect there was
    recorded robots_unreachable after one failure, and its target never fetched."""
    answers = [web.Response(status=500), web.Response(text="User-agent: *\nDisallow: /no\n")]

    async def flaky(_request: web.Request) -> web.Response:
        return answers.pop(0)

    site2.handle("/robots.txt", flaky)
    site2.page("/x", "x")
    site.page("/", "home", ["/go", "/go-no"])
    site.redirect("/go", f"{site2.url}/x")
    site.redirect("/go-no", f"{site2.url}/no")
    records = by_url(await crawl_every_host(tmp_path, site, retries=2))

    assert (records[f"{site.url}/go"]["status"], records[f"{site.url}/go"]["title"]) == (200, "x")
    assert records[f"{site.url}/go-no"]["error"] == "robots_disallowed"
    assert site2.paths() == {"/robots.txt": 2, "/x": 1}


async def test_hosts_whose_robots_txt_hangs_leave_workers_to_a_live_site(
    site: Site, tmp_path: Path
) -> None:
    """20 hosts that take connections and never answer, linked before a live site's
    pages: every worker waited on their robots.txt for a --timeout, and the site too."""

    async def hang(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3600)

    hanging = [await asyncio.start_server(hang, f"127.0.1.{n}", 0) for n in range(1, 21)]
    dead = [
        f"http://127.0.1.{n}:{s.sockets[0].getsockname()[1]}/" for n, s in enumerate(hanging, 1)
    ]
    site.page("/", "home", [*dead, *(f"/p{n}" for n in range(20))])
    for n in range(20):
        site.page(f"/p{n}", str(n))
    started = time.monotonic()
    try:
        records = await crawl_every_host(tmp_path, site, concurrency=16, timeout=1.0)
    finally:
        for server in hanging:
            server.close()

    pages = [hit.started - started for hit in site.hits if hit.path.startswith("/p")]
    assert len(pages) == 20 and max(pages) < 0.5  # not after a --timeout
    assert sorted(r["error"] or "" for r in records)[-20:] == ["robots_unreachable"] * 20


@pytest.mark.parametrize(
    ("ignore_robots", "kinds"),
    [
        (False, ("whose robots.txt is tried again", "whose robots.txt is unreachable")),
        (True, ("that failed to connect",)),
    ],
)
async def test_dead_hosts_are_logged_a_few_then_counted_and_each_url_has_its_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, ignore_robots: bool, kinds: tuple[str, ...]
) -> None:
    # Nothing listens on port 9 of these addresses: every connection is refused at once.
    hosts = [f"127.0.1.{n}:9" for n in range(1, 31)]
    seeds = [f"http://{host}/{path}" for host in hosts for path in ("", "a", "b")]
    caplog.set_level(logging.INFO, "crawler")

    records = await crawl(
        tmp_path, seeds, ignore_robots=ignore_robots, retries=1, allow_private_addresses=True
    )

    assert len(records) == len(seeds) and all(r["error"] for r in records)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("crawler")]
    assert len(lines) == len(kinds) * (HOST_FAILURES_LOGGED + 1), lines
    for kind in kinds:
        assert sum(line.startswith(f"more hosts {kind}: not logged") for line in lines) == 1


async def test_an_unknown_line_does_not_end_the_group_of_user_agents_above_it(
    site: Site, tmp_path: Path
) -> None:
    # "crawler" and "*" are one group: the unknown line between them ends nothing.
    robots(site, "User-agent: crawler\nNoindex-Please: /\nUser-agent: *\nDisallow: /private/\n")
    site.page("/", "index", ["/public", "/private/a"])
    site.page("/public", "public")

    records = by_url(await crawl(tmp_path, [site.url + "/"], ignore_robots=False))

    assert site.paths() == {"/robots.txt": 1, "/": 1, "/public": 1}
    assert records[site.url + "/private/a"]["error"] == "robots_disallowed"


# Google's robots_test.cc, the cases of RFC 9309's groups (ID_LineSyntax_Groups*,
# ID_REPLineNamesCaseInsensitive): (robots.txt, agent, URL, allowed).
_GROUPS = (
    "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\n"
    "disallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\n"
    "allow: /z/\ndisallow: /\n"
)
_SITEMAP_IN_GROUP = (
    "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n"
)
_UNKNOWN_IN_GROUP = (
    "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n"
)
GOOGLE_GROUP_CASES = [
    (_GROUPS, "FooBot", "http://foo.bar/x/b", True),
    (_GROUPS, "FooBot", "http://foo.bar/z/d", True),
    (_GROUPS, "FooBot", "http://foo.bar/y/c", False),
    (_GROUPS, "BarBot", "http://foo.bar/y/c", True),
    (_GROUPS, "BarBot", "http://foo.bar/w/a", True),
    (_GROUPS, "BarBot", "http://foo.bar/z/d", False),
    (_GROUPS, "BazBot", "http://foo.bar/z/d", True),
    (_GROUPS, "FooBot", "http://foo.bar/foo/bar/", False),
    (_GROUPS, "BarBot", "http://foo.bar/foo/bar/", False),
    (_GROUPS, "BazBot", "http://foo.bar/foo/bar/", False),
    (_SITEMAP_IN_GROUP, "FooBot", "http://foo.bar/", False),
    (_SITEMAP_IN_GROUP, "BarBot", "http://foo.bar/", False),
    (_UNKNOWN_IN_GROUP, "FooBot", "http://foo.bar/", False),
    (_UNKNOWN_IN_GROUP, "BarBot", "http://foo.bar/", False),
    *[
        (text, "FooBot", url, allowed)
        for text in (
            "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
            "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
            "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
        )
        for url, allowed in (("http://foo.bar/x/y", True), ("http://foo.bar/a/b", False))
    ],
    # What protego reads beside RFC 9309's keys still counts, its typos included.
    ("User-agent: FooBot\nDissallow: /a\n", "FooBot", "http://foo.bar/a", False),
    ("User agent FooBot\nDisallow /a\n", "FooBot", "http://foo.bar/a", False),
    ("User-agent: FooBot\nCrawl-delay: 1\nDisallow: /a\n", "FooBot", "http://foo.bar/a", False),
]


@pytest.mark.parametrize(("text", "agent", "url", "allowed"), GOOGLE_GROUP_CASES)
def test_robots_groups_as_googles_parser_reads_them(
    text: str, agent: str, url: str, allowed: bool
) -> None:
    assert parse_robots(text).can_fetch(url, agent) is allowed
