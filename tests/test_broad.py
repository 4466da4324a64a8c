"""Broad crawls: 10^4 hosts on loopback (benchmarks/broad_web.py), checked at the servers.

Each host of the web is an address of its own, 127.16.x.y, served by a process of
benchmarks/broad_web.py that counts what the crawler asked: every page once,
robots.txt first and once per host, no disallowed URL, no request too soon after
the last on a Crawl-delay host.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from benchmarks.broad_web import BroadWeb, raise_open_files_limit
from crawler import Crawler, politeness
from crawler.frontier import SITEMAP, MemoryFrontier, Request, SqliteFrontier
from crawler.politeness import HostScheduler, Robots
from crawler.state.host_counts import SqliteHostCounts
from crawler.state.redis import _record as redis_entry
from crawler.state.redis import _request as redis_request
from crawler.state.robots import SqliteRobotsRules
from crawler.stats import RATE_HISTORY_POINTS, MemoryHostCounts, Stats
from tests.conftest import TEST_SETTINGS, Site, read_records
from tests.conftest import crawl as crawl_in_process
from tests.redis_server import RedisServer
from tests.test_state import Run


def text_handler(text: str) -> Any:
    async def handler(_request: web.Request) -> web.Response:
        return web.Response(text=text)

    return handler


def crawl(
    web: BroadWeb, directory: Path, *options: str, redis_url: str | None = None
) -> subprocess.Popen[bytes]:
    """A crawl of `web` in its own process, with --state in `directory` (or --redis)."""
    seeds = directory / "seeds.txt"
    seeds.write_text("\n".join(web.seed_urls()) + "\n")
    command = [sys.executable, "-m", "crawler", str(seeds), "-o", str(directory / "out.jsonl")]
    command += ["--any-host", "--allow-private-addresses"]
    if redis_url is None:
        command += ["--state", str(directory / "state")]
    else:
        command += ["--redis", redis_url, "--crawl-id", "broad"]
    command += ["--quiet", "--max-depth", "50", "--concurrency", "64", *options]
    return subprocess.Popen(command, stderr=subprocess.PIPE, preexec_fn=raise_open_files_limit)


def records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def expected_urls(web: BroadWeb) -> tuple[dict[str, int], set[str]]:
    """Every URL the crawl must fetch, with its depth (the pages, and the private pages
    of hosts that do not disallow them), and those robots.txt disallows."""
    shape = web.shape
    starts = shape.level_starts()
    fetched, disallowed = {}, set()
    for n in range(shape.pages):
        h = shape.host(n, starts)
        depth = shape.level(n, starts)
        fetched[f"{shape.origin(h)}/p/{n}"] = depth
        if n % 10 == 0:
            private = f"{shape.origin(h)}/private/{n}"
            if shape.disallows_private(h):
                disallowed.add(private)
            else:
                fetched[private] = depth + 1
    return fetched, disallowed


def assert_exact(written: list[dict[str, Any]], web: BroadWeb) -> None:
    """Each URL once, each fetched one at its depth, each disallowed one refused."""
    expected, disallowed = expected_urls(web)
    urls = [r["url"] for r in written]
    assert len(urls) == len(set(urls))
    assert {r["url"]: r["depth"] for r in written if r.get("error") is None} == expected
    assert {r["url"] for r in written if r.get("error") == "robots_disallowed"} == disallowed
    assert len(written) == len(expected) + len(disallowed)


def assert_obeyed(counters: dict[str, int]) -> None:
    """robots.txt read before any page of its host, and obeyed."""
    assert counters["before_robots"] == 0
    assert counters["disallowed"] == 0
    assert counters["too_soon"] == 0, f"Crawl-delay not kept: {counters}"
    assert counters["wrong_host"] == 0


def test_a_crawl_of_3_000_hosts_fetches_every_page_once_at_its_depth_obeying_robots(
    tmp_path: Path,
) -> None:
    # 3,000 hosts, not 10,000 (16 s of the suite's time): the connection pool, the host
    # table and robots.txt per host are each passed many times over either way, and
    # benchmarks/broad_bench.py crawls 10^5 hosts.
    raise_open_files_limit()
    with BroadWeb(
        hosts=3_000, pages=3_330, seeds=30, same_host=1, slow_hosts=0, filler_bytes=100
    ) as web:
        crawler = crawl(web, tmp_path)
        _, err = crawler.communicate(timeout=120)
        counters = web.counters()
        starts = web.shape.level_starts()
        hosts = {web.shape.host(n, starts) for n in range(web.shape.pages)}

    assert crawler.returncode == 0, err.decode()
    assert_exact(records(tmp_path / "out.jsonl"), web)
    assert len(hosts) >= 2_970
    assert counters["robots"] == len(hosts) and counters["robots_twice"] == 0
    assert counters["pages"] == web.shape.pages and counters["twice"] == 0
    assert_obeyed(counters)
    # A host's first page goes out on the connection its robots.txt came on, still open:
    # behind the other hosts of its depth, that connection had left the idle pool, and
    # the page opened a second (over TLS, a second handshake a host).
    reused = counters["requests"] - counters["connections"]
    assert reused >= 0.9 * len(hosts), (reused, counters)


def test_a_process_on_redis_goes_breadth_first_across_hosts(tmp_path: Path) -> None:
    """Of the hosts it owns, a process takes those whose next URL is shallowest first,
    and of a host it serves nothing deeper than what a host not served yet offers: the
    pages come at their depth (a process taking hosts in any order wrote 7 in 10 of a
    broad crawl's deeper). With no hold, as in one process, a page whose link was still
    in flight when a deeper page's was claimed may come one deeper: 10 of 3,270 here,
    1,853 before; at most what is in flight at each of the levels' ends."""
    raise_open_files_limit()
    server = RedisServer(tmp_path / "redis").start()
    try:
        # Crawl-delay hosts at 0.25 s: at 1 s, host 7's 8 pages, one at a time, took
        # 9 of the test's 13 s.
        with BroadWeb(
            hosts=1_000, pages=3_000, seeds=10, slow_hosts=0, filler_bytes=100, crawl_delay_s=0.25
        ) as web:
            crawler = crawl(web, tmp_path, redis_url=server.url)
            _, err = crawler.communicate(timeout=120)
            counters = web.counters()
    finally:
        server.stop()
    assert crawler.returncode == 0, err.decode()
    written = records(tmp_path / "out.jsonl")
    expected, _ = expected_urls(web)
    depths = {r["url"]: r["depth"] for r in written if r.get("error") is None}
    assert depths.keys() == expected.keys()
    wrong = [url for url, depth in depths.items() if depth != expected[url]]
    assert len(wrong) <= 3 * 64, (len(wrong), len(expected))  # 3 levels' ends, 64 in flight
    assert counters["pages"] == web.shape.pages and counters["twice"] == 0
    assert_obeyed(counters)


def test_a_broad_crawl_killed_at_any_moment_and_resumed_loses_nothing(tmp_path: Path) -> None:
    raise_open_files_limit()
    kills = 0
    # Crawl-delay 0.5 s, not 1 s (host 7's pages alone took 6 s a crawl): still more than
    # a restart takes, so a resumed process that forgot a host's delay would be too soon.
    with BroadWeb(
        hosts=200, pages=800, seeds=20, slow_hosts=0, filler_bytes=100, crawl_delay_s=0.5
    ) as web:
        for kill_at in (80, 300, 550):
            crawler = crawl(web, tmp_path)
            output = tmp_path / "out.jsonl"
            while crawler.poll() is None and (
                not output.exists() or output.read_bytes().count(b"\n") < kill_at
            ):
                time.sleep(0.01)  # polling the output: the crawl runs in another process
            if crawler.poll() is None:
                os.kill(crawler.pid, signal.SIGKILL)
                kills += 1
            crawler.wait()
        crawler = crawl(web, tmp_path)
        _, err = crawler.communicate(timeout=60)
        counters = web.counters()

    assert crawler.returncode == 0, err.decode()
    assert kills == 3
    assert_exact(records(tmp_path / "out.jsonl"), web)
    # Only what was in flight at a kill is fetched again (pages held for shallower ones
    # are held again on resume), robots.txt too.
    assert counters["twice"] <= kills * 64
    assert counters["robots"] == 200 and counters["robots_twice"] <= kills * 64
    assert counters["before_robots"] == counters["disallowed"] == counters["too_soon"] == 0, str(
        counters
    )


def test_the_disk_frontier_reads_ahead_for_few_hosts_and_keeps_each_hosts_order(
    tmp_path: Path,
) -> None:
    db = sqlite3.connect(tmp_path / "f.sqlite", isolation_level=None)
    frontier = SqliteFrontier(db, buffer_per_host=4, buffered_hosts=8)
    hosts = [f"127.16.0.{h}:80" for h in range(100)]
    db.execute("BEGIN")
    frontier.push(Request(f"http://{host}/{i}", 1, None) for i in range(10) for host in hosts)
    db.execute("COMMIT")

    popped: dict[str, list[str]] = {host: [] for host in hosts}
    most_buffered = 0
    for _ in range(5):
        for host in hosts:
            request = frontier.pop(host)
            assert request is not None
            popped[host].append(request.url.rsplit("/", 1)[1])
            most_buffered = max(most_buffered, len(frontier._buffers))
    assert most_buffered <= 8
    assert all(urls == ["0", "1", "2", "3", "4"] for urls in popped.values())
    assert len(frontier) == 500 and frontier.queued_for(hosts[0]) == 5

    db.execute("DELETE FROM frontier WHERE CAST(substr(url, -1) AS INTEGER) < 5")
    resumed = SqliteFrontier(db, buffer_per_host=4, buffered_hosts=8)
    assert len(resumed) == 500
    rest = [resumed.pop(hosts[7]) for _ in range(6)]
    assert [r.url.rsplit("/", 1)[1] for r in rest if r is not None] == ["5", "6", "7", "8", "9"]
    assert not resumed.queued_for(hosts[7])


def test_the_disk_frontier_reads_a_few_rows_ahead_at_first_and_more_for_a_busy_host(
    tmp_path: Path,
) -> None:
    db = sqlite3.connect(tmp_path / "f.sqlite", isolation_level=None)
    frontier = SqliteFrontier(db, buffer_per_host=16, buffered_hosts=8)
    db.execute("BEGIN")
    frontier.push(Request(f"http://busy:80/{i}", 1, None) for i in range(40))
    frontier.push(Request(f"http://127.16.0.{h}:80/0", 1, None) for h in range(20))
    db.execute("COMMIT")
    reads: list[str] = []
    db.set_trace_callback(lambda sql: reads.append(sql) if sql.startswith("SELECT") else None)

    busy = [frontier.pop("busy:80") for _ in range(40)]
    assert [r.url.rsplit("/", 1)[1] for r in busy if r is not None] == [str(i) for i in range(40)]
    assert [read.rsplit(" ", 1)[1] for read in reads] == ["2", "4", "8", "16", "16"]
    for h in range(20):
        assert frontier.peek(f"127.16.0.{h}:80") is not None
    assert sum(len(buffer) for buffer in frontier._buffers.values()) <= 8 * 2


async def test_a_host_whose_pages_come_one_at_a_time_keeps_its_crawl_delay(
    site: Site, site2: Site, tmp_path: Path
) -> None:
    # 127.0.0.1 asks for Crawl-delay 0.3; its pages are found one at a time, through
    # 127.0.0.2, so between them it has nothing queued.
    site.handle("/robots.txt", text_handler("User-agent: *\nCrawl-delay: 0.3\n"))
    for n in range(4):
        site.page(f"/{n}", f"a{n}", [f"{site2.url}/{n}"])
        site2.page(f"/{n}", f"b{n}", [f"{site.url}/{n + 1}"])
    site.page("/4", "a4")

    records = await crawl_in_process(
        tmp_path,
        [site.url + "/0"],
        ignore_robots=False,
        allow_host=("127.0.0.2",),
        allow_private_addresses=True,
        max_depth=10,
    )

    assert len(records) == 9
    starts = [hit.started for hit in site.hits if hit.path != "/robots.txt"]
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.3
    assert site.count("/robots.txt") == 1  # forgotten hosts keep their robots.txt


async def test_robots_txt_is_read_once_per_host_across_kill_9_and_its_rules_still_hold(
    site: Site, site2: Site, tmp_path: Path
) -> None:
    site.handle(
        "/robots.txt", text_handler("User-agent: *\nDisallow: /private/\nCrawl-delay: 0.2\n")
    )
    site2.handle("/robots.txt", text_handler("User-agent: *\nDisallow: /private/\n"))
    for n in range(12):
        site.page(
            f"/p/{n}", f"a{n}", [f"/p/{n + 1}", f"{site2.url}/p/{n}", "/private/a"][n // 11 :]
        )
        site2.page(f"/p/{n}", f"b{n}", ["/private/b"])
    run = Run(site, tmp_path, "--allow-host", "127.0.0.2", "--allow-private-addresses")
    run.extra += ("--max-depth", "20")

    for pages in (3, 8):  # killed once each host has had its robots.txt and a page fetched
        both_seen = [site.hits_reached(1 + pages), site2.hits_reached(2)]
        process = await run.start()
        await asyncio.wait_for(asyncio.gather(*(seen.wait() for seen in both_seen)), 30)
        process.send_signal(signal.SIGKILL)
        await process.communicate()
        assert process.returncode == -signal.SIGKILL
    code, err = await run.until_done()

    assert code == 0, err
    assert site.count("/robots.txt") == site2.count("/robots.txt") == 1
    written = read_records(run.output)
    assert sorted(r["url"] for r in written if r["error"] == "robots_disallowed") == [
        f"{site.url}/private/a",
        f"{site2.url}/private/b",
    ]
    assert not [hit for s in (site, site2) for hit in s.hits if hit.path.startswith("/private/")]
    assert len(written) == 24 + 2
    starts = [hit.started for hit in site.hits if hit.path != "/robots.txt"]
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.2  # across the kills too


def test_robots_txt_rules_stay_right_for_origins_no_longer_held_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Robots, "MAX_PARSED", 2)
    robots = Robots(fetcher=None, user_agent="crawler", enabled=True, retries=0)  # type: ignore[arg-type]
    origins = [f"http://127.16.0.{h}:80" for h in range(5)]
    rules = {
        origin: robots._parse(origin, f"User-agent: *\nDisallow: /{h}/\n".encode())
        for h, origin in enumerate(origins)
    }

    for _ in range(2):
        for h, origin in enumerate(origins):
            assert robots.refusal(rules[origin], f"{origin}/{h}/x") == "robots_disallowed"
            assert robots.refusal(rules[origin], f"{origin}/{h + 1}/x") is None
    assert len(robots._parsed) == 2


def test_records_per_host_with_state_keep_only_hosts_counted_since_the_save_in_memory(
    tmp_path: Path,
) -> None:
    db = sqlite3.connect(tmp_path / "crawl.sqlite", isolation_level=None)
    db.execute("CREATE TABLE hosts (host TEXT PRIMARY KEY, records INTEGER NOT NULL) WITHOUT ROWID")
    counts, memory = SqliteHostCounts(db), MemoryHostCounts()
    rounds = [["a"] * 5 + ["b"] * 3 + ["c"], ["c"] * 6 + ["d"], ["b"] * 4 + ["e"] * 2]
    for hosts in rounds:
        for host in hosts:
            counts.add(host)
            memory.add(host)
        # between saves, the counts since the last one are in memory, and the rest read
        assert len(counts) == len(memory)
        assert counts.most_common(2) == memory.most_common(2)
        counts.save()
        assert counts._since_save == {}
        assert dict(db.execute("SELECT host, records FROM hosts")) == memory
    # a crawl resumed reads them back
    again = SqliteHostCounts(db)
    again.add("a")
    memory.add("a")
    assert len(again) == 5 and again.most_common(5) == memory.most_common(5)
    again.save()
    again.close()  # the crawl's last figures are made after its state is closed
    db.close()
    assert len(again) == 5 and again.most_common(5) == memory.most_common(5)


def test_figures_read_often_look_for_the_busiest_of_many_hosts_at_most_once_a_second() -> None:
    """The live line (4 times a second), the dashboard and a --state checkpoint read
    the figures often; each look for the top hosts reads every host's count."""
    looked: list[int] = []

    class Counted(MemoryHostCounts):
        def most_common(self, n: int | None = None) -> list[tuple[str, int]]:
            looked.append(len(self))
            return super().most_common(n)

    stats = Stats()
    stats.hosts = hosts = Counted()
    for i in range(50_000):
        hosts.add(f"h{i % 20_000}.test")
    for _ in range(8):  # two seconds of the live line, and the dashboard's busiest hosts
        assert stats.as_dict()["hosts_top"] == dict(MemoryHostCounts.most_common(hosts, 20))
        assert [h["host"] for h in stats.busiest_hosts()] == list(stats.as_dict()["hosts_top"])[:10]
    assert len(looked) == 1
    for _ in range(5):
        hosts.add("busy.test")
    # the summary and the stats file look again
    assert next(iter(stats.as_dict(exact=True)["hosts_top"].items())) == ("busy.test", 5)
    assert len(looked) == 2


def test_redis_queue_entries_are_short_and_give_back_the_request() -> None:
    requests = [
        Request("http://a.example:8080/p?q=1", 3, "http://a.example:8080/"),
        Request("https://a.example/x", 1, "http://b.example/y"),
        Request("http://a.example/s.xml", 0, None, kind=SITEMAP, lastmod="2024-01-01 12:00"),
        Request("http://a.example/", 2, "https://a.example/from"),
        Request("https://a.example/", 2, "https://b.example:8443/from"),
        Request("http://a.example/", 2, "ftp://c.example/"),
    ]
    for request in requests:
        entry = redis_entry(request)
        back = redis_request(entry, request.host)
        assert (back.url, back.depth, back.referrer, back.kind, back.lastmod) == (
            request.url,
            request.depth,
            request.referrer,
            request.kind,
            request.lastmod,
        )
    assert redis_entry(requests[0]) == b"3 /p?q=1 /"
    assert redis_entry(requests[1]) == b"1 s/x //b.example/y"


def one_at_a_time(frontier: MemoryFrontier, robots: Robots) -> HostScheduler:
    """A scheduler of one request at a time per host, without --delay."""
    return HostScheduler(
        frontier,
        robots,
        per_host=1,
        delay_s=0.0,
        max_crawl_delay_s=30,
        max_retry_after_s=60,
        max_pages=0,
    )


async def test_hosts_with_nothing_to_do_are_forgotten_once_their_delay_is_over() -> None:
    robots = Robots(fetcher=None, user_agent="crawler", enabled=True, retries=0)  # type: ignore[arg-type]
    robots._cache("http://a:80", robots._parse("http://a:80", b"User-agent: *\nCrawl-delay: 0.2\n"))
    robots._cache("http://b:80", robots._parse("http://b:80", b"User-agent: *\n"))
    frontier = MemoryFrontier()
    scheduler = one_at_a_time(frontier, robots)

    async def fetch(url: str) -> float:
        """Queue `url`, take it, finish it; how long its host must wait then."""
        request = Request(url, 1, None)
        frontier.push([request])
        scheduler.add([request])
        job = await scheduler.next_job()
        assert job is request
        scheduler.release(request)
        return scheduler.wait_s(request.host)

    assert await fetch("http://a:80/1") > 0.15
    await asyncio.sleep(0.25)  # a's delay is over
    await fetch("http://b:80/1")
    assert list(scheduler._hosts) == ["b:80"]  # a was forgotten when b was taken
    assert await fetch("http://a:80/2") > 0.15  # its Crawl-delay, from robots.txt again
    assert list(scheduler._hosts) == ["a:80"]


async def test_a_host_handed_over_before_its_work_started_is_forgotten_too() -> None:
    """--redis: a host taken over with a wait (`hold`) whose URLs go back to Redis
    before any started (another hand-over) was kept for the crawl's life."""
    robots = Robots(fetcher=None, user_agent="crawler", enabled=False, retries=0)  # type: ignore[arg-type]
    frontier = MemoryFrontier()
    scheduler = one_at_a_time(frontier, robots)
    handed_over = Request("http://a:80/1", 1, None)
    frontier.push([handed_over])
    scheduler.hold("a:80", 0.05)
    scheduler.add([handed_over])
    assert frontier.pop("a:80") is handed_over  # given back before its wait is over
    await asyncio.sleep(0.06)

    for url in ("http://b:80/1", "http://c:80/1"):
        request = Request(url, 1, None)
        frontier.push([request])
        scheduler.add([request])
        assert await scheduler.next_job() is request
        scheduler.release(request)

    assert list(scheduler._hosts) == ["c:80"]


async def test_of_the_hosts_ready_the_one_with_the_shallowest_next_page_goes_first() -> None:
    robots = Robots(fetcher=None, user_agent="crawler", enabled=False, retries=0)  # type: ignore[arg-type]
    frontier = MemoryFrontier()
    scheduler = one_at_a_time(frontier, robots)
    # Each host's queue in the order its pages were found: deep ones first on some.
    queued = [
        Request("http://deep:80/a", 3, None),
        Request("http://deep:80/b", 4, None),
        Request("http://mid:80/a", 2, None),
        Request("http://shallow:80/a", 1, None),
        Request("http://mid:80/b", 2, None),
        Request("http://shallow:80/b", 3, None),
    ]
    frontier.push(queued)
    scheduler.add(queued)
    taken = []
    for _ in queued:
        job = await scheduler.next_job()
        assert isinstance(job, Request)
        taken.append(job.url)
        scheduler.release(job)
    # one request at a time per host, each host's own in its order; of those ready,
    # the shallowest first, and the first found at equal depths
    assert taken == [
        "http://shallow:80/a",
        "http://mid:80/a",
        "http://mid:80/b",
        "http://deep:80/a",
        "http://shallow:80/b",
        "http://deep:80/b",
    ]
    assert await scheduler.next_job() is None


def test_a_ready_host_held_back_meanwhile_waits_instead_of_spinning(monkeypatch) -> None:
    class Clock:
        """time.monotonic for the scheduler: a millisecond later at each reading."""

        def __init__(self) -> None:
            self.now, self.readings = 1000.0, 0

        def monotonic(self) -> float:
            self.readings += 1
            assert self.readings < 10_000, "the scheduler spins"
            self.now += 0.001
            return self.now

    clock = Clock()
    monkeypatch.setattr("crawler.politeness.time", clock)
    robots = Robots(fetcher=None, user_agent="crawler", enabled=False, retries=0)  # type: ignore[arg-type]
    frontier = MemoryFrontier()
    scheduler = one_at_a_time(frontier, robots)
    request = Request("http://a:80/1", 1, None)
    frontier.push([request])
    scheduler.add([request])  # ready
    scheduler.hold("a:80", 0.0015)  # and held back while it is: due between two readings
    assert scheduler._take() is None
    assert [host.key for _, _, host in scheduler._waiting] == ["a:80"]
    clock.now += 1
    assert scheduler._take() is request


async def test_dead_and_throttled_hosts_are_forgotten_once_their_hold_and_backoff_pass(
    site: Site, site2: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each host that refused connections, or answered 503, held its slot for the rest
    of the crawl: at 10^5 hosts a broad crawl's dead and once-throttled hosts."""
    monkeypatch.setattr(politeness, "UNREACHABLE_HOLD_S", 0.2)
    dead = []
    for _ in range(10):
        with socket.socket() as unused:  # a port nothing listens on: connections are refused
            unused.bind(("127.0.0.1", 0))
            dead.append(f"http://127.0.0.1:{unused.getsockname()[1]}")
    links = [f"{origin}/{n}" for origin in dead for n in range(politeness.UNREACHABLE_AFTER)]
    site.page("/", "home", [*links, f"{site2.url}/busy", "/slow"])
    site.page("/slow", "slow", delay_s=0.8)  # the crawl goes on past the hold and backoff
    site2.page("/busy", status=503)
    settings = replace(
        TEST_SETTINGS,
        any_host=True,
        allow_private_addresses=True,
        per_host=1,
        max_retry_after=0.2,
        output=str(tmp_path / "o"),
    )
    async with Crawler([site.url + "/"], settings) as crawler:
        await crawler.crawl()
        scheduler = crawler._opened().scheduler

    errors = Counter(r.get("error") for r in read_records(tmp_path / "o"))
    assert errors == {None: 3, "connection_error": len(links)}
    assert scheduler._hosts == {}
    assert scheduler.failing == 0


def test_robots_txt_kept_parsed_or_compressed_is_bounded_by_size_not_only_by_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A robots.txt may be 500 KiB: 2,048 such parsed would take 9 GiB, 4,096 compressed
    940 MiB (with --state; without it every host's rules are kept, compressed)."""
    db = sqlite3.connect(":memory:")
    monkeypatch.setattr(Robots, "MAX_PARSED_TEXT_BYTES", 2 * 2**20)  # 8 MiB: room for 2 parsed
    monkeypatch.setattr(Robots, "MAX_CACHED_PACKED_BYTES", 2**20)  # 16 MiB: and for 3 compressed
    robots = Robots(
        fetcher=None,  # type: ignore[arg-type]
        user_agent="crawler",
        enabled=True,
        retries=0,
        table=SqliteRobotsRules(db),
    )
    rng = random.Random(5)
    origins = [f"http://127.16.0.{h}:80" for h in range(6)]
    for h, origin in enumerate(origins):  # 20,000 rules of random paths, about 600 KiB
        paths = [f"/{rng.getrandbits(96):024x}/" for _ in range(20_000)]
        text = "User-agent: *\n" + "".join(f"Disallow: {path}\n" for path in [f"/{h}/", *paths])
        robots._cache(origin, robots._parse(origin, text.encode()))
        robots._table.put(origin, "crawler", robots._rules.peek(origin))  # as load() keeps them

    assert robots._parsed.nbytes <= 2 * 2**20 and len(robots._parsed) == 2
    assert robots._rules.nbytes <= 2**20 and len(robots._rules) == 3
    assert robots._rules.nbytes == sum(len(r.packed or b"") for r in robots._rules.values())
    for h, origin in enumerate(origins):  # the others read back and parsed again
        rules = robots.cached(origin)
        assert rules is not None
        assert robots.refusal(rules, f"{origin}/{h}/x") == "robots_disallowed"
        assert robots.refusal(rules, f"{origin}/{h + 1}/x") is None


def test_the_rate_history_of_a_crawl_that_runs_for_days_stays_bounded() -> None:
    """One sample each write of the stats file (10 s): 8,640 a day of --revisit, each
    copied by every figures read (a --state checkpoint's, each second)."""
    stats = Stats()
    now = time.monotonic()
    for n in range(8_640):  # a day of samples, 10 s apart
        stats.started, stats.records = now - 10.0 * n, 100 * n
        stats.sample_rate()

    history = stats.rate_history
    assert len(history) <= RATE_HISTORY_POINTS
    assert history[0] == (0.0, 0) and history[-1] == (86_390.0, 863_900)
    recent = [t for t, _ in history[-RATE_HISTORY_POINTS // 2 :]]
    assert {b - a for a, b in itertools.pairwise(recent)} == {10.0}  # as sampled
    assert all(b > a for (a, _), (b, _) in itertools.pairwise(history))
