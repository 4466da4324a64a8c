"""--revisit DIR: rounds without end, each page again when due, on an adaptive schedule."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
import redis
from aiohttp import web

from crawler.revisit import AdaptiveSchedule, rounds_in
from crawler.state.redis import host_owner
from crawler.state.redis_rounds import round_crawl_id
from crawler.urls import host_of, origin_of
from tests.conftest import Site, Wayback, by_url, html, read_records
from tests.redis_server import RedisServer
from tests.test_cli import assert_one_line_error, run_cli
from tests.test_recrawl import Validating, assert_revisit_of, crawl_to, tree_bodies
from tests.test_redis import members_following
from tests.test_warc import read_archive, warc_files


def test_the_interval_shrinks_on_change_grows_without_and_stays_within_bounds() -> None:
    schedule = AdaptiveSchedule(100.0, 50.0, 200.0, inc_rate=0.2, dec_rate=0.3)
    assert schedule.next_interval_s(None, None) == 100.0  # first seen
    assert schedule.next_interval_s(100.0, True) == pytest.approx(70.0)
    assert schedule.next_interval_s(100.0, False) == pytest.approx(120.0)
    assert schedule.next_interval_s(100.0, None) == 100.0  # no answer: nothing learned
    assert schedule.next_interval_s(60.0, True) == 50.0
    assert schedule.next_interval_s(190.0, False) == 200.0


@pytest.mark.parametrize(("rate", "error"), [(1.0, None), (2.5, None), (0.0, "> 0")])
def test_an_unchanged_page_may_wait_twice_as_long_or_more_next_time(
    rate: float, error: str | None
) -> None:
    # Nutch's inc_rate is a rate too; 1 (doubling) was refused as 'between 0 and 1'.
    from crawler.config import ConfigError, Settings

    try:
        Settings(seeds="-", revisit="rounds", revisit_inc_rate=rate)
    except ConfigError as exc:
        assert error is not None and error in str(exc)
    else:
        assert error is None


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
    # Round 3 comes when /news is due, 0.4 s before the others: time enough to be sure.
    command += ["--revisit-interval", "1", "--revisit-min-interval", "0.3"]
    command += ["--revisit-max-interval", "60", "--ignore-robots", "--quiet"]
    assert await _run_until(command, round_started[4]) == 143

    rounds = [by_url(read_records(directory / f"round-{n:05d}.jsonl")) for n in (1, 2, 3)]
    news_url, about_url = site.url + "/news", site.url + "/about"
    assert [r[news_url]["revisit_interval_s"] for r in rounds] == [1.0, 0.8, 0.64]
    assert [r[news_url].get("changed") for r in rounds] == [None, True, True]
    assert rounds[1][about_url]["status"] == 304
    assert rounds[1][about_url]["revisit_interval_s"] == 1.2
    # Round 3 came when /news was due, before / and /about were: they are carried over.
    for url in (site.url + "/", about_url):
        assert rounds[2][url].get("not_due") is True
        assert rounds[2][url]["due_at"] == rounds[1][url]["due_at"]
    assert rounds[2][about_url]["title"] == "About"
    # Each round left a state (3.5 MB of visited set alone) and an index: without end.
    # The last round needs the records of the one before and their index, and its own
    # state, no more.
    last = max(rounds_in(directory))
    kept = sorted(path.name for path in directory.iterdir() if path.suffix != ".jsonl")
    assert kept == [f"round-{last - 1:05d}.jsonl.history.sqlite", f"round-{last:05d}.state"]
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


async def test_a_round_in_which_no_page_was_fetched_waits_the_shortest_interval(
    site: Site, tmp_path: Path
) -> None:
    # The site down (its robots.txt answering 503): no page got a time to be due again,
    # and the next round began at once, and the next: hundreds a minute, each a file in
    # DIR and a request for robots.txt, without end.
    site.page("/robots.txt", status=503, body="down")
    site.page("/", "home")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    directory = tmp_path / "fresh"
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "crawler", str(seeds), "--revisit", str(directory)],
        *["--retries", "0", "--revisit-min-interval", "60", "--quiet"],
        stderr=PIPE,
    )
    assert process.stderr is not None
    said = []
    while not said or not ("next round in" in said[-1] or "round 3:" in said[-1]):
        said.append((await asyncio.wait_for(process.stderr.readline(), 30)).decode())
    process.send_signal(signal.SIGTERM)
    await process.communicate()

    assert process.returncode == 143
    assert "next round in" in said[-1], said
    assert 59 < float(said[-1].split("next round in ")[1].split()[0]) <= 60
    assert rounds_in(directory) == [1]
    [record] = read_records(directory / "round-00001.jsonl")
    assert (record["error"], record["revisit_interval_s"]) == ("robots_unreachable", 60.0)


async def test_a_redirected_page_carried_over_not_due_is_asked_where_its_redirects_ended(
    site: Site, tmp_path: Path
) -> None:
    pages = Validating(site, {"/": html("Home", ["/moved"]), "/target": html("Target")})
    site.redirect("/moved", "/target", 301)
    rounds = {"revisit": str(tmp_path / "fresh"), "revisit_interval": 3600.0}
    await crawl_to(tmp_path / "round-1.jsonl", [site.url + "/"], **rounds)
    carried, _ = await crawl_to(
        tmp_path / "round-2.jsonl",
        [site.url + "/"],
        since=str(tmp_path / "round-1.jsonl"),
        **rounds,
    )
    assert all(r["not_due"] for r in carried)
    site.hits.clear()
    later, _ = await crawl_to(
        tmp_path / "later.jsonl", [site.url + "/"], since=str(tmp_path / "round-2.jsonl")
    )
    moved = by_url(later)[site.url + "/moved"]
    assert (moved["status"], moved["changed"], moved["final_url"]) == (
        304,
        False,
        site.url + "/target",
    )
    assert pages.not_modified == ["/", "/target"]


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


# --- --revisit with --redis: rounds shared by several processes ---------------------------


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    server = RedisServer(tmp_path / "redis").start()
    yield server.url
    server.stop()


async def _or_exit(event: asyncio.Event, processes: list[asyncio.subprocess.Process]) -> None:
    """Wait for `event`; fail with their stderr if a process exits first."""
    waiting = asyncio.ensure_future(event.wait())
    exits = [asyncio.ensure_future(p.wait()) for p in processes]
    await asyncio.wait({waiting, *exits}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
    for task in exits:
        task.cancel()
    if not waiting.done():
        waiting.cancel()
        for process in processes:
            if process.returncode is None:
                process.kill()
        errors = [(await p.communicate())[1].decode() for p in processes]
        pytest.fail("\n".join(errors))


async def crawl_round_begun(
    redis_url: str, crawl: str, number: int, *processes: asyncio.subprocess.Process
) -> None:
    """Wait until `crawl` is in round `number`: the ones before are over everywhere."""
    client = redis.Redis.from_url(redis_url)
    try:
        while int(client.get(f"crawler:{{{crawl}}}:round") or 0) < number:
            for process in processes:
                assert process.returncode is None, await process.stderr.read()  # type: ignore[union-attr]
            await asyncio.sleep(0.02)  # Redis tells no one when a key changes
    finally:
        client.close()


class SharedRevisit:
    """Processes `crawler SEEDS --revisit DIR_i --redis URL --crawl-id ID`, each its DIR."""

    def __init__(self, tmp_path: Path, seeds: list[str], redis_url: str) -> None:
        self.tmp_path, self.redis_url = tmp_path, redis_url
        self.seeds = tmp_path / "seeds.txt"
        self.seeds.write_text("".join(f"{url}\n" for url in seeds))
        self.directories: list[Path] = []
        self.processes: list[asyncio.subprocess.Process] = []
        self.killed: list[Path] = []
        self.directory_of: dict[int, Path] = {}  # by pid

    async def start(self, *extra: str) -> asyncio.subprocess.Process:
        directory = self.tmp_path / f"process-{len(self.directories)}"
        command = [sys.executable, "-m", "crawler", str(self.seeds), "--revisit", str(directory)]
        command += ["--redis", self.redis_url, "--crawl-id", "fresh", "--quiet"]
        command += ["--revisit-interval", "1", "--revisit-min-interval", "0.5"]
        command += ["--ignore-robots", "--per-host", "2", "--stats", str(directory) + ".stats"]
        process = await asyncio.create_subprocess_exec(
            *command, *extra, stderr=asyncio.subprocess.PIPE
        )
        self.directories.append(directory)
        self.processes.append(process)
        self.directory_of[process.pid] = directory
        return process

    async def round_begun(self, number: int) -> None:
        await crawl_round_begun(self.redis_url, "fresh", number, *self.processes)

    async def stop(self) -> None:
        for process in self.processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            _, err = await process.communicate()
            assert b"Traceback" not in err, err.decode()

    def round(self, number: int) -> list[dict[str, Any]]:
        """Round `number`'s records, from all processes (a killed one's last line may be
        cut short)."""
        name = f"round-{number:05d}.jsonl"
        files = [d / name for d in self.directories if (d / name).exists()]
        lines = [line for f in files for line in f.read_text().splitlines(keepends=True)]
        return [json.loads(line) for line in lines if line.endswith("\n")]

    def writers(self, number: int) -> int:
        """How many processes wrote records in round `number`."""
        name = f"round-{number:05d}.jsonl"
        return sum(1 for d in self.directories if (d / name).exists() and read_records(d / name))

    async def terminate(self, process: asyncio.subprocess.Process) -> None:
        """SIGTERM `process`, which exits cleanly, wherever it is."""
        process.send_signal(signal.SIGTERM)
        _, err = await process.communicate()
        assert process.returncode == 143, err.decode()
        self.processes.remove(process)

    async def kill(self, process: asyncio.subprocess.Process) -> None:
        process.kill()
        await process.wait()
        self.killed.append(self.directory_of[process.pid])
        self.processes.remove(process)

    async def stats_of_round_2(self) -> list[dict[str, Any]]:
        """Each live process's recrawl figures, once it has finished round 2 (the stats
        file is written at the end of each round)."""
        alive = [d for d in self.directories if d not in self.killed]
        while True:
            figures = [_recrawl_figures(Path(str(d) + ".stats")) for d in alive]
            if all(f is not None and f["gone"] is not None for f in figures):
                return cast("list[dict[str, Any]]", figures)
            await asyncio.sleep(0.02)  # no event says a file was written


def _recrawl_figures(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    figures: dict[str, Any] | None = json.loads(path.read_text()).get("recrawl")
    return figures


def _end_round_1_late(
    site: Site,
    server: Validating,
    interval_s: float = 1.0,
    then: Callable[[], None] | None = None,
) -> None:
    """Round 1 ends after its other pages are due again: round 2 fetches them all.
    `then` is called once the last page of round 1 is served."""
    served = []

    async def last_of_round_1(request: web.Request) -> web.Response:
        served.append(request.path)
        if len(served) > 1:
            return await server.serve(request)
        await asyncio.sleep(interval_s + 0.5)
        response = await server.serve(request)
        if then is not None:
            then()
        return response

    site.handle("/p/11", last_of_round_1)


class Slow(Validating):
    """Slow enough that each process of a shared crawl gets its hosts before the end;
    serves nothing before `opened` is set."""

    opened: asyncio.Event | None = None

    async def serve(self, request: web.Request) -> web.Response:
        if self.opened is not None:
            await self.opened.wait()
        await asyncio.sleep(0.05)
        return await super().serve(request)


class ThreeSites:
    """Three hosts, each a tree of COUNT pages, served slowly and with validators."""

    COUNT = 12

    def __init__(self, sites: list[Site]) -> None:
        self.sites = sites
        self.bodies = [tree_bodies(self.COUNT, fan_out=3) for _ in sites]
        self.servers = [Slow(site, pages) for site, pages in zip(sites, self.bodies, strict=True)]
        self.urls = {site.url + path for site in sites for path in self.bodies[0]}
        self.seeds = [site.url + "/p/0" for site in sites]


@pytest.fixture
async def three_sites() -> AsyncIterator[ThreeSites]:
    sites = [await Site(host).start() for host in ("127.0.0.1", "127.0.0.2", "127.0.0.3")]
    yield ThreeSites(sites)
    for site in sites:
        await site.stop()


async def test_processes_sharing_the_rounds_fetch_each_url_once_a_round_conditionally(
    tmp_path: Path, redis_url: str, three_sites: ThreeSites
) -> None:
    count, sites, bodies = ThreeSites.COUNT, three_sites.sites, three_sites.bodies
    servers, urls = three_sites.servers, three_sites.urls
    first_round = [site.hits_reached(count) for site in sites]
    # Round 2 is served once all three know each other in it: the first to begin it
    # would otherwise take every host, alone, as long as it knows no other.
    round_2_open = asyncio.Event()

    def gate_round_2() -> None:
        for server in servers:
            server.opened = round_2_open

    # /p/11, no longer linked in round 2
    _end_round_1_late(sites[0], servers[0], then=gate_round_2)
    crawl = SharedRevisit(tmp_path, three_sites.seeds, redis_url)
    try:
        for _ in range(3):
            await crawl.start()
        for event in first_round:
            await _or_exit(event, crawl.processes)
        # Before round 2 (a second away): /p/3 no longer links to /p/11.
        bodies[0]["/p/3"] = html("page 3", ["/p/10"])
        client = redis.Redis.from_url(redis_url)
        try:
            members = await members_following(client, round_crawl_id("fresh", 2), 3)
        finally:
            client.close()
        round_2_open.set()
        await crawl.round_begun(3)
        hits = [site.paths() for site in sites]
        stats = await crawl.stats_of_round_2()
    finally:
        await crawl.stop()

    gone = sites[0].url + "/p/11"
    for n, site_hits in enumerate(hits):
        expected = {path: 2 for path in bodies[n]}
        if n == 0:
            expected["/p/11"] = 1
        assert site_hits == expected  # once a round, by one process of the three
        unchanged = [p for p in bodies[n] if n or p not in ("/p/3", "/p/11")]
        assert sorted(servers[n].not_modified) == sorted(unchanged)  # round 2's validators
    first, second = by_url(crawl.round(1)), by_url(crawl.round(2))
    assert set(first) == urls and set(second) == urls - {gone}
    assert all(r["status"] == 200 and r.get("changed") is None for r in first.values())
    for url, record in second.items():
        if url == sites[0].url + "/p/3":
            assert record["changed"] is True and record["status"] == 200
        else:
            assert record["status"] == 304 and record["changed"] is False
            assert record["title"] == first[url]["title"]  # carried from round 1
            assert record["revisit_interval_s"] == 1.2
    # Round 2 was shared: each host's pages written by the process that owns it (and a
    # first request or two by one that began the round before the others joined). All
    # three hosts go to one of the three processes in 1 round of 9.
    owners = {host_owner(site.url.removeprefix("http://"), members) for site in sites}
    assert crawl.writers(2) >= len(owners)
    for figures in stats:  # of the whole crawl's round 2, in each process
        assert figures["gone"] == 1
        assert figures["previous_pages"] == len(urls)


async def test_kill_9_of_a_process_mid_round_loses_nothing_its_hosts_go_to_the_others(
    tmp_path: Path, redis_url: str, three_sites: ThreeSites
) -> None:
    sites, servers, urls = three_sites.sites, three_sites.servers, three_sites.urls
    # Round 3 comes 2.4 s after round 2's first fetches: long after its end.
    _end_round_1_late(sites[0], servers[0], interval_s=2.0)
    in_round_2 = sites[0].hits_reached(ThreeSites.COUNT + 3)
    crawl = SharedRevisit(tmp_path, three_sites.seeds, redis_url)
    try:
        for _ in range(3):
            await crawl.start("--lease-s", "0.5", "--revisit-interval", "2")
        await _or_exit(in_round_2, crawl.processes)
        victim = _serving(redis_url, "fresh.r00002", host_of(sites[0].url), crawl.processes)
        await crawl.kill(victim)
        await crawl.round_begun(3)
        hits = [site.paths() for site in sites]
        stats = await crawl.stats_of_round_2()
    finally:
        await crawl.stop()

    second = [r["url"] for r in crawl.round(2)]
    assert set(second) == urls  # the victim's hosts were finished by the others
    assert all(n <= 3 for site_hits in hits for n in site_hits.values())  # in flight: again
    client = redis.Redis.from_url(redis_url)
    rows = client.hlen("crawler:{fresh.r00002}:pages")
    assert rows == len(urls)  # round 3 has every page's schedule and validators
    assert client.keys("crawler:{fresh.r00002*") and not client.keys("crawler:{fresh.r00001*")
    for figures in stats:
        assert figures["gone"] == 0 and figures["previous_pages"] == len(urls)


async def test_shared_rounds_fetch_gone_fetches_each_page_the_round_left_unreached_once(
    tmp_path: Path, redis_url: str, three_sites: ThreeSites
) -> None:
    count, sites, bodies = ThreeSites.COUNT, three_sites.sites, three_sites.bodies
    first_round = [site.hits_reached(count) for site in sites]
    _end_round_1_late(sites[0], three_sites.servers[0])
    crawl = SharedRevisit(tmp_path, three_sites.seeds, redis_url)
    try:
        for _ in range(3):
            await crawl.start("--fetch-gone")
        for event in first_round:
            await _or_exit(event, crawl.processes)
        bodies[0]["/p/3"] = html("page 3")  # round 2 reaches neither /p/10 nor /p/11
        del bodies[0]["/p/11"]
        await crawl.round_begun(3)
        hits = [site.paths() for site in sites]
        stats = await crawl.stats_of_round_2()
    finally:
        await crawl.stop()

    assert hits == [dict.fromkeys(tree_bodies(count, 3), 2)] * 3  # once a round, in all
    unlinked = {r["url"]: r["status"] for r in crawl.round(2) if r["kind"] == "unlinked"}
    assert unlinked == {sites[0].url + "/p/10": 304, sites[0].url + "/p/11": 404}
    assert [f["gone"] for f in stats] == [2] * 3
    assert sum(f["unlinked"] for f in stats) == 2 and sum(f["unlinked_404_410"] for f in stats) == 1


def _serving(
    redis_url: str, crawl_id: str, host: str, processes: list[asyncio.subprocess.Process]
) -> asyncio.subprocess.Process:
    """The process that serves `host` in the shared crawl (a member is "machine-pid-tag")."""
    member = redis.Redis.from_url(redis_url).hget(f"crawler:{{{crawl_id}}}:locks", host)
    assert member is not None
    pid = int(member.decode().rsplit("-", 2)[1])
    return next(p for p in processes if p.pid == pid)


async def test_a_shared_revisit_dir_is_one_process_s_and_a_long_crawl_id_is_one_line(
    tmp_path: Path, redis_url: str
) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")  # refused at once: round 1 is over soon
    shared = [str(seeds), "--redis", redis_url, "--quiet"]
    first = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawler",
        *shared,
        "--crawl-id",
        "one",
        "--revisit",
        "d",
        cwd=tmp_path,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await crawl_round_begun(redis_url, "one", 2, first)
        second = run_cli(*shared, "--crawl-id", "one", "--revisit", str(tmp_path / "d"))
        assert_one_line_error(second, "in use by another crawler", "its own DIR")
    finally:
        first.send_signal(signal.SIGTERM)
        await first.communicate()
    assert first.returncode == 143
    too_long = run_cli(*shared, "--crawl-id", "x" * 58, "--revisit", str(tmp_path / "e"))
    assert_one_line_error(too_long, "--crawl-id", "57")


async def test_a_round_s_revisits_refer_to_the_captures_another_process_archived_and_replay(
    site: Site, tmp_path: Path, redis_url: str, wayback: Wayback
) -> None:
    pages = Validating(site, {"/": html("Home", ["/a", "/touched"]), "/a": html("A")})
    touched = html("Touched, not changed")

    async def ignores_validators(_request: web.Request) -> web.Response:
        return web.Response(
            text=touched, headers={"ETag": f'"{time.time()}"'}, content_type="text/html"
        )

    site.handle("/touched", ignores_validators)
    bodies = {**pages.bodies, "/touched": touched}
    warc = tmp_path / "warc"
    crawl = SharedRevisit(tmp_path, [site.url + "/"], redis_url)
    try:
        first = await crawl.start("--warc", str(warc), "--revisit-interval", "2")
        await crawl.round_begun(2)  # round 1 is over, archived by the first process alone
        await crawl.terminate(first)  # while it waits for round 2
        await crawl.start("--warc", str(warc), "--revisit-interval", "2")
        await crawl.round_begun(3)
    finally:
        await crawl.stop()

    archive = read_archive(warc)  # warcio check passes on every file
    captured = {r["uri"]: r["headers"] for r in archive if r["type"] == "response"}
    revisits = {r["uri"]: r["headers"] for r in archive if r["type"] == "revisit"}
    writers = {r["type"]: _prefix(r["file"]) for r in archive if r["uri"] in revisits}
    assert writers["response"] != writers["revisit"]  # each round by another process
    second = by_url(crawl.round(2))
    assert set(second) == set(revisits) == set(captured) == {site.url + p for p in bodies}
    for url, record in second.items():
        assert_revisit_of(revisits[url], captured[url], url, record["status"])
    assert second[site.url + "/touched"]["status"] == 200
    assert {second[site.url + p]["status"] for p in ("/", "/a")} == {304}
    files = warc_files(warc)
    base = wayback.collection("rounds", *files)
    async with aiohttp.ClientSession(auto_decompress=False) as client:
        for url in second:  # at a later time than any: round 2's revisits
            async with client.get(f"{base}/2999id_/{url}") as response:
                body = await response.read()
                assert (response.status, body) == (200, bodies[url[len(site.url) :]].encode())


def _prefix(warc_file: str) -> str:
    """The prefix of a WARC file's name: the process that wrote it, in a shared crawl."""
    return warc_file.rsplit("-", 2)[0]


# --- --since and --fetch-gone with --redis: one recrawl shared by several processes ----------


async def test_shared_fetch_gone_fetches_each_page_no_link_reaches_once_in_all_processes(
    tmp_path: Path, redis_url: str, three_sites: ThreeSites
) -> None:
    sites, bodies, servers = three_sites.sites, three_sites.bodies, three_sites.servers
    previous = tmp_path / "previous.jsonl"
    await crawl_to(previous, three_sites.seeds)
    first = set(bodies[0])
    changed = [{"/p/3", "/p/11"}, {"/p/2", "/p/8"}, set()]
    bodies[0]["/p/3"] = html("page 3")  # /p/10 and /p/11 unlinked, /p/11 deleted
    del bodies[0]["/p/11"]
    bodies[1]["/p/2"] = html("page 2")  # /p/7, /p/8 and /p/9 unlinked, /p/8 deleted
    del bodies[1]["/p/8"]
    for site in sites:
        site.hits.clear()
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"{url}\n" for url in three_sites.seeds))
    opened = asyncio.Event()
    for server in servers:
        server.opened = opened
    processes = []
    for n in range(3):
        command = [sys.executable, "-m", "crawler", str(seeds), "-o", str(tmp_path / f"{n}.jsonl")]
        command += ["--redis", redis_url, "--crawl-id", "again", "--since", str(previous)]
        command += ["--fetch-gone", "--stats", str(tmp_path / f"{n}.stats"), "--quiet"]
        command += ["--ignore-robots", "--per-host", "2"]
        processes.append(await asyncio.create_subprocess_exec(*command, stderr=PIPE))
    members = await _joined(redis_url, "again", processes)
    opened.set()
    for process in processes:
        _, err = await process.communicate()
        assert process.returncode == 0, err.decode()
    owners = {site.url: members[host_owner(host_of(site.url), list(members))] for site in sites}

    for n, site in enumerate(sites):  # each page of the first crawl once, in all
        assert site.paths() == dict.fromkeys(first, 1)
        assert sorted(servers[n].not_modified) == sorted(first - changed[n])  # conditionally
    records = []
    for n, process in enumerate(processes):  # each gone page by the owner of its host
        written = read_records(tmp_path / f"{n}.jsonl")
        gone_here = [r["url"] for r in written if r["kind"] == "unlinked"]
        assert all(owners[origin_of(url)] == process.pid for url in gone_here)
        records += written
    unlinked = {r["url"]: r["status"] for r in records if r["kind"] == "unlinked"}
    gone = {sites[0].url + p: 200 for p in ("/p/10", "/p/11")}
    gone |= {sites[1].url + p: 200 for p in ("/p/7", "/p/8", "/p/9")}
    gone[sites[0].url + "/p/11"] = gone[sites[1].url + "/p/8"] = 404
    assert unlinked == {url: 304 if status == 200 else 404 for url, status in gone.items()}
    assert len(records) == len(three_sites.urls)
    figures = [json.loads((tmp_path / f"{n}.stats").read_text())["recrawl"] for n in range(3)]
    assert [f["gone"] for f in figures] == [len(gone)] * 3  # of the whole crawl, in each
    assert sum(f["unlinked"] for f in figures) == len(gone)
    assert sum(f["unlinked_404_410"] for f in figures) == 2
    assert sum(f["checked"] for f in figures) == len(three_sites.urls) - len(gone)


async def _joined(
    redis_url: str, crawl: str, processes: list[asyncio.subprocess.Process]
) -> dict[str, int]:
    """Wait until all `processes` are members of `crawl`; each member's pid."""
    client = redis.Redis.from_url(redis_url)
    try:
        while len(members := client.zrange(f"crawler:{{{crawl}}}:members", 0, -1)) < len(processes):
            for process in processes:
                assert process.returncode is None, await process.stderr.read()  # type: ignore[union-attr]
            await asyncio.sleep(0.02)  # Redis tells no one when a key changes
    finally:
        client.close()
    names = sorted(member.decode() for member in members)
    return {name: int(name.rsplit("-", 2)[1]) for name in names}


def test_a_round_s_row_gives_back_what_the_next_round_needs_of_the_page() -> None:
    from crawler.history import Capture, page_row
    from crawler.page import Page
    from crawler.state.redis_rows import previous_of_row, record_args, warc_file_id

    page = Page("http://a.example/p?y=2&x=1", 2, None, status=200, content_digest="sha1:AB")
    page.etag, page.last_modified = 'W/"1"', "Mon, 02 Nov 2026 10:00:00 GMT"
    page.title, page.links = "P", ["http://a.example/q", "http://b.example/r"]
    page.fields = {"due_at": "2026-11-25T10:00:00.250+00:00", "revisit_interval_s": 60.0}
    page.fields |= {"warc_file": "w.warc.gz", "warc_offset": 10, "warc_length": 20}
    page.fields["lastmod_right"] = False
    uuid_urn = b"<urn:uuid:0b1c2d3e-0000-4000-8000-000000000001>"
    for capture in (
        Capture(uuid_urn, page.url.encode(), b"2026-11-24T10:00:00.000123Z"),
        Capture(b"<other-tool:7>", b"http://a.example/elsewhere", b"2026-11-24T10:00:00Z"),
    ):
        page.capture = capture
        key, row, due, wrong, file_id, file = record_args(page)
        assert (key, due, wrong) == (
            "http://a.example/p?x=1&y=2",
            page.fields["due_at"],
            "a.example",
        )
        assert file == "w.warc.gz" and file_id == warc_file_id(file)
        previous = previous_of_row(key, row, {file_id: file})
        assert previous is not None and previous.capture == capture
        _, url, status, fetched_at, digest, etag, last_modified, kept, *rest = page_row(
            page.record()
        )
        assert (previous.url, previous.status, previous.fetched_at) == (url, status, fetched_at)
        assert (previous.digest, previous.etag, previous.last_modified) == (
            digest,
            etag,
            last_modified,
        )
        assert previous.record == kept and previous.warc == tuple(rest[:3])
        assert (previous.interval_s, previous.due_at, previous.lastmod_right) == (60.0, due, False)
    # A row as versions before wrote it: the JSON of page_row's fields after the key,
    # the 304's fields a string. It held no capture.
    _, *fields = page_row(page.record())
    fields[6] = fields[6].decode()
    previous = previous_of_row(key, json.dumps(fields).encode(), {})
    assert previous is not None and previous.capture is None
    assert (previous.url, previous.status, previous.etag) == (url, status, etag)
    assert previous.record == kept and previous.warc == ("w.warc.gz", 10, 20)
    assert (previous.interval_s, previous.due_at, previous.lastmod_right) == (60.0, due, False)
    for other in (b'["http://a.example/p", 200]', b"[1, 2", b"\x03", b""):
        assert previous_of_row(key, other, {}) is None


async def test_a_round_of_refusals_alone_waits_until_its_pages_fall_due(
    site: Site, tmp_path: Path
) -> None:
    """A round whose every page was refused (robots.txt) gave no page a time to be due,
    and the next began at once: hundreds of rounds a second, each asking again."""
    site.page("/robots.txt", content_type="text/plain", body="User-agent: *\nDisallow: /\n")
    site.page("/", "Home")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    directory = tmp_path / "rounds"
    command = [sys.executable, "-m", "crawler", str(seeds), "--revisit", str(directory)]
    process = await asyncio.create_subprocess_exec(
        *command,
        "--revisit-interval",
        "30",
        "--revisit-min-interval",
        "10",
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    lines = []
    while b"next round in" not in (line := await process.stderr.readline()):
        # it ended, or began round 2 without waiting
        assert line and b"round 2:" not in line, b"".join([*lines, line]).decode()
        lines.append(line)
    process.send_signal(signal.SIGTERM)
    await process.communicate()
    assert process.returncode == 143
    assert 9 < float(line.split(b"next round in ")[1].split()[0]) <= 10  # the shortest
    assert rounds_in(directory) == [1]
    [record] = read_records(directory / "round-00001.jsonl")
    assert (record["error"], record["revisit_interval_s"]) == ("robots_disallowed", 10.0)
    assert record["due_at"] is not None
    assert (site.count("/robots.txt"), site.count("/")) == (1, 0)
