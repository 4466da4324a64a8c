"""--dashboard: the live page in a real browser, /metrics checked by promtool and read by
prometheus_client's parser, and what happens without it or on a public address."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from crawler import Crawler
from crawler.config import ConfigError, Settings, dashboard_address
from tests.browser import Chromium, Tab
from tests.conftest import Site, html, read_records
from tests.redis_server import RedisServer
from tests.test_observe_report import validated_page

PROMTOOL = "/opt/prometheus/usr/bin/promtool"
CLI = [sys.executable, "-m", "crawler"]
QUICK_PAGES = 12


def promtool_path() -> str:
    """promtool, from Debian's prometheus package unpacked (not installed: that would
    start a server); a failure where it is missing, as the README's test command installs it."""
    path = PROMTOOL if os.path.exists(PROMTOOL) else shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool is missing: apt-get download prometheus && "
            "dpkg-deb -x prometheus_*.deb /opt/prometheus"
        )
    return path


def held_page(site: Site, path: str, links: list[str]) -> asyncio.Event:
    """A page that answers only once the returned event is set."""
    release = asyncio.Event()

    async def handler(_request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text=html(path, links), content_type="text/html")

    site.handle(path, handler)
    return release


def samples(exposition: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, read by prometheus_client's own parser."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }


def counters(scrape: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, float]:
    return {
        f"{name}{dict(labels)}": value
        for (name, labels), value in scrape.items()
        if name.endswith(("_total", "_count", "_sum", "_bucket"))
    }


def records_by_status(path: Path) -> Counter[str]:
    return Counter(
        str(r["status"] if r["status"] is not None else "none") for r in read_records(path)
    )


def crawl_command(tmp_path: Path, site: Site, *flags: str) -> list[str]:
    """The CLI crawling `site`, writing pages.jsonl and stats.json in `tmp_path`."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    output, stats = tmp_path / "pages.jsonl", tmp_path / "stats.json"
    return [*CLI, str(seeds), "-o", str(output), "--stats", str(stats), "--ignore-robots", *flags]


@contextlib.asynccontextmanager
async def dashboard_crawl(
    tmp_path: Path, site: Site, *flags: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """The crawl with --dashboard on a free port, and the dashboard's URL; killed at
    the end if it still runs."""
    command = crawl_command(tmp_path, site, "--dashboard", "127.0.0.1:0", *flags)
    async with dashboard_process(command) as started:
        yield started


@contextlib.asynccontextmanager
async def dashboard_process(
    command: list[str], **pipes: int
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """`command`, which gives --dashboard, run, and the dashboard's URL once it says it;
    killed at the end if it still runs."""
    process = await asyncio.create_subprocess_exec(
        *command, stderr=asyncio.subprocess.PIPE, **pipes
    )
    try:
        assert process.stderr is not None
        while b"dashboard at" not in (
            line := await asyncio.wait_for(process.stderr.readline(), 30)
        ):
            assert line, "the crawl ended before its dashboard started"
        yield process, line.decode().split("dashboard at ")[1].split(",")[0]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@contextlib.asynccontextmanager
async def api_crawl_watched(
    seeds: list[str], settings: Settings, tmp_path: Path
) -> AsyncIterator[tuple[Crawler, asyncio.Task[None], Tab]]:
    """A crawl through the API, its dashboard open in Chromium: the crawler, the task
    that crawls, and the tab."""
    async with Crawler(seeds, settings) as crawler, Chromium(tmp_path / "profile") as browser:
        crawl = asyncio.create_task(crawler.crawl())
        assert crawler.dashboard_url is not None
        tab = await browser.new_tab()
        await tab.open(crawler.dashboard_url)
        yield crawler, crawl, tab
        await tab.close()


async def scrape(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(f"{url}metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        return await response.text()


def promtool_check(exposition: str) -> None:
    result = subprocess.run(
        [promtool_path(), "check", "metrics"], input=exposition.encode(), capture_output=True
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


async def test_dashboard_during_a_crawl_shows_the_records_written_and_metrics_only_go_up(
    site: Site, tmp_path: Path
) -> None:
    quick = [f"/p{i}" for i in range(QUICK_PAGES)]
    site.page("/", "home", [*quick, "/missing", "/slow"])
    for path in quick:
        site.page(path, path, ["/"])
    release_slow = held_page(site, "/slow", ["/after1", "/after2", "/slow2"])
    site.page("/after1", "after1")
    site.page("/after2", "after2")
    release_slow2 = held_page(site, "/slow2", [])
    output = tmp_path / "pages.jsonl"
    promtool_path()

    async with (
        dashboard_crawl(tmp_path, site) as (process, url),
        Chromium(tmp_path / "profile") as browser,
        aiohttp.ClientSession() as session,
    ):
        tab = await browser.new_tab()
        await tab.open(url)
        # Every page but the held one is written: the crawl waits on /slow.
        first_count = QUICK_PAGES + 2
        await tab.until(
            f"document.querySelector('[data-figure=records]').textContent === '{first_count}'"
        )
        assert len(read_records(output)) == first_count
        first = samples(await scrape(session, url))
        promtool_check(await scrape(session, url))
        written = records_by_status(output)
        assert {
            labels[0][1]: value
            for (name, labels), value in first.items()
            if name == "crawler_records_total"
        } == written
        assert first[("crawler_in_flight_requests", ())] == 1
        assert first[("crawler_fetch_duration_seconds_count", ())] == first_count

        shown = await tab.figures()
        assert shown["records"] == str(first_count)
        assert shown["in_flight"] == "1"
        assert shown["hosts"] == "1"
        headings = await tab.evaluate(
            "[...document.querySelectorAll('[id^=chart-]')]"
            ".map(box => box.closest('section').querySelector('h2').textContent)"
        )  # each says what it counts
        assert all(" by " in heading for heading in headings), headings
        drawn = await tab.drawn_charts("[id^=chart-]")
        assert drawn["chart-statuses"] and drawn["chart-depths"] and drawn["chart-latency"]
        hosts = await tab.evaluate("document.querySelector('#hosts tbody').rows.length")
        assert hosts == 1
        png = await tab.screenshot(tmp_path / "dashboard.png")
        assert png.startswith(b"\x89PNG") and len(png) > 10_000

        release_slow.set()
        second_count = first_count + 3  # /slow, /after1 and /after2; /slow2 is held
        await tab.until(
            f"document.querySelector('[data-figure=records]').textContent === '{second_count}'"
        )
        second = samples(await scrape(session, url))
        assert len(read_records(output)) == second_count
        before, after = counters(first), counters(second)
        assert all(after.get(name, 0) >= value for name, value in before.items()), (
            before,
            after,
        )
        assert (
            sum(v for (n, _), v in second.items() if n == "crawler_records_total") == second_count
        )

        release_slow2.set()
        await tab.until("document.getElementById('state').textContent === 'crawl finished'")
        # Two updates at least came since the page opened: pages/s has a line.
        assert (await tab.drawn_charts("#chart-rate"))["chart-rate"]
        assert await process.wait() == 0
        final = json.loads((tmp_path / "stats.json").read_text())
        shown = await tab.figures()
        assert shown["records"] == str(final["records"]) == str(second_count + 1)
        assert shown["errors"] == str(sum(final["errors"].values()))
        assert shown["queued"] == str(final["queued"])
        assert shown["hosts"] == str(final["host_count"])
        assert await tab.width_in(360) == 360  # a phone's screen, its tables scrolled apart
        assert tab.errors == []
        await tab.close()


async def test_a_plain_crawl_imports_nothing_of_the_options_it_does_not_use(
    site: Site, tmp_path: Path
) -> None:
    site.page("/", "home", ["/a"])
    site.page("/a", "a")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    script = (
        "import sys; from crawler.__main__ import main; "
        f"code = main([{str(seeds)!r}, '-o', {str(tmp_path / 'out.jsonl')!r}, "
        "'--quiet', '--ignore-robots']); "
        "print(sorted(m for m in sys.modules if m.startswith(('crawler.observe.dashboard', "
        "'crawler.observe.metrics', 'prometheus_client', 'crawler.sinks.warc', "
        "'crawler.sinks.cdxj', 'crawler.sinks.wacz', 'surt', 'crawler.history', "
        "'crawler.extract', 'crawler.simhash', 'crawler.revisit', 'crawler.sitemaps', "
        "'sqlite3', 'tomllib', 'ada_url')))); "
        "sys.exit(code)"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE
    )
    stdout, _ = await process.communicate()
    assert process.returncode == 0
    assert stdout.decode().strip() == "[]"
    assert len(read_records(tmp_path / "out.jsonl")) == 2


@pytest.mark.parametrize("address", ["0.0.0.0:8080", "192.0.2.1:80", "[::]:9000", "example.com:80"])
def test_a_dashboard_beyond_loopback_is_refused_without_the_opt_in(address: str) -> None:
    result = subprocess.run(
        [*CLI, "--dashboard", address, "-"], input=b"http://127.0.0.1:1/\n", capture_output=True
    )
    assert result.returncode == 2
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and "--dashboard-public" in lines[0] and address in lines[0]


def test_port_0_on_a_name_of_two_addresses_is_one_port_on_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """localhost is 127.0.0.1 and ::1 on most systems (not in this machine's /etc/hosts,
    hence the name given both here): each address got a free port of its own, and the
    page announced at one was not at the other."""
    from crawler.observe.dashboard import listen

    resolve = socket.getaddrinfo

    def both(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        if host != "localhost":
            return resolve(host, *args, **kwargs)
        return [*resolve("127.0.0.1", *args, **kwargs), *resolve("::1", *args, **kwargs)]

    monkeypatch.setattr(socket, "getaddrinfo", both)
    sockets = listen("localhost:0")
    try:
        families = {sock.family for sock in sockets}
        ports = {sock.getsockname()[1] for sock in sockets}
        assert families == {socket.AF_INET, socket.AF_INET6} and len(ports) == 1
    finally:
        for sock in sockets:
            sock.close()


def test_a_dashboard_address_that_is_not_host_port_is_refused() -> None:
    result = subprocess.run(
        [*CLI, "--dashboard", "localhost:http", "-"],
        input=b"http://127.0.0.1:1/\n",
        capture_output=True,
    )
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1 and "[HOST:]PORT" in result.stderr.decode()


async def test_a_busy_dashboard_port_is_one_line_and_exit_2_and_leaves_the_output_as_it_was(
    site: Site, tmp_path: Path
) -> None:
    site.page("/", "home")
    previous = '{"url": "http://example.com/", "status": 200}\n'
    (tmp_path / "pages.jsonl").write_text(previous)
    command = crawl_command(tmp_path, site, "--dashboard", str(site.port))
    process = await asyncio.create_subprocess_exec(*command, stderr=asyncio.subprocess.PIPE)
    _, stderr = await process.communicate()
    assert process.returncode == 2
    (line,) = stderr.decode().splitlines()
    assert line == (
        f"crawler: error: --dashboard cannot listen on 127.0.0.1:{site.port}: "
        "address already in use"
    )
    assert (tmp_path / "pages.jsonl").read_text() == previous
    assert site.hits == []


async def test_the_dashboard_answers_only_to_a_loopback_host_name(
    site: Site, tmp_path: Path
) -> None:
    release = held_page(site, "/", [])
    async with dashboard_crawl(tmp_path, site) as (process, url):
        async with aiohttp.ClientSession() as session:
            async with session.get(url, headers={"Host": "attacker.example:80"}) as response:
                assert response.status == 403
            async with session.post(f"{url}metrics") as response:
                assert response.status == 405
            async with session.get(url) as response:
                assert response.status == 200
                assert "default-src 'self'" in response.headers["Content-Security-Policy"]
        release.set()
        assert await process.wait() == 0


async def test_requests_the_dashboard_cannot_parse_get_400_and_no_traceback_on_stderr(
    site: Site, tmp_path: Path
) -> None:
    release = held_page(site, "/", [])
    async with dashboard_crawl(tmp_path, site) as (process, url):
        host, port = url.removeprefix("http://").strip("/").split(":")
        for request in (
            f"GET /?{'a' * 9000} HTTP/1.1\r\nHost: {host}\r\n\r\n",  # past aiohttp's 8 KiB
            f"GET / HTTP/1.1\r\nHost: {host}\r\nContent-Length: x\r\n\r\n",
        ):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(request.encode())
            assert (await reader.readline()).split()[1] == b"400"
            writer.close()
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 200
        release.set()
        assert await process.wait() == 0
        assert process.stderr is not None
        stderr = (await process.stderr.read()).decode()
    assert "Traceback" not in stderr and "Error handling request" not in stderr, stderr


async def test_a_dashboard_on_another_loopback_address_answers_at_the_url_it_gave(
    site: Site, tmp_path: Path
) -> None:
    release = held_page(site, "/", [])
    async with dashboard_crawl(tmp_path, site, "--dashboard", "127.0.0.2:0") as (process, url):
        assert url.startswith("http://127.0.0.2:")
        async with aiohttp.ClientSession() as session:
            promtool_check(await scrape(session, url))
            async with session.get(url) as response:
                assert response.status == 200
            async with session.get(url, headers={"Host": "attacker.example"}) as response:
                assert response.status == 403
        release.set()
        assert await process.wait() == 0


async def test_with_redis_every_metric_is_labelled_with_the_member_id(
    site: Site, tmp_path: Path
) -> None:
    release = held_page(site, "/", [])
    redis = RedisServer(tmp_path / "redis").start()
    try:
        crawl_id = ["--redis", redis.url, "--crawl-id", f"dashboard-{os.getpid()}"]
        async with dashboard_crawl(tmp_path, site, *crawl_id) as (process, url):
            await site.hits_reached(1).wait()  # the held page is in flight
            async with aiohttp.ClientSession() as session:
                scraped = samples(await scrape(session, url))
            members = {dict(labels).get("member") for _, labels in scraped}
            (member,) = members
            assert member.startswith(f"{socket.gethostname()}-{process.pid}-")
            assert scraped[("crawler_in_flight_requests", (("member", member),))] == 1
            release.set()
            assert await process.wait() == 0
    finally:
        redis.stop()


def test_the_opt_in_lets_any_address_be_given() -> None:
    settings = Settings(dashboard="0.0.0.0:8080", dashboard_public=True)
    assert dashboard_address(settings.dashboard) == ("0.0.0.0", 8080)
    assert dashboard_address("[::1]:9090") == ("::1", 9090)
    assert dashboard_address("9090") == ("127.0.0.1", 9090)
    with pytest.raises(ConfigError, match="only makes sense with --dashboard"):
        Settings(dashboard_public=True)


async def test_with_revisit_the_page_and_metrics_follow_the_rounds_and_the_wait_between(
    site: Site, tmp_path: Path
) -> None:
    """The page opened in round 1 shows round 2 without a reload, and /metrics answers
    at the same URL (port 0 given) while the crawl waits for the next round."""
    releases = [asyncio.Event(), asyncio.Event()]  # the home page, in rounds 1 and 2

    async def home(_request: web.Request) -> web.Response:
        await releases[min(site.count("/"), 2) - 1].wait()
        return web.Response(text=html("home", ["/a"]), content_type="text/html")

    site.handle("/", home)
    site.page("/a", "a")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    command = [*CLI, str(seeds), "--revisit", str(tmp_path / "rounds"), "--ignore-robots"]
    command += ["--revisit-interval", "2", "--revisit-min-interval", "1", "--quiet"]
    command += ["--dashboard", "127.0.0.1:0"]
    state = "document.getElementById('state').textContent"
    async with dashboard_process(command) as (process, url):
        async with Chromium(tmp_path / "profile") as browser, aiohttp.ClientSession() as session:
            tab = await browser.new_tab()
            await tab.open(url)
            await tab.until(f"{state} === 'live'")
            recrawl_tiles_hidden = "document.querySelector('.tile.recrawl').hidden"
            assert await tab.evaluate(recrawl_tiles_hidden) is True  # round 1 recrawls nothing
            releases[0].set()
            await tab.until(f"{state}.startsWith('round over; next round at ')")
            between = await scrape(session, url)  # round 1 over, round 2 not begun
            promtool_check(between)
            assert samples(between)[("crawler_records_total", (("status", "200"),))] == 2
            assert (await tab.figures())["records"] == "2"

            await site.hits_reached(3).wait()  # round 2 asks for the home page
            await tab.until(f"{state} === 'live'")  # no reload: the page followed
            assert (await tab.figures())["records"] == "0"
            releases[1].set()
            await tab.until(f"{state}.startsWith('round over')")
            shown = await tab.figures()
            assert shown["records"] == "2"
            # round 2 recrawls round 1: the same bodies, and no validators to ask with
            assert (shown["changed"], shown["unchanged"], shown["new"]) == ("0", "2", "0")
            assert shown["unchanged_label"] == "unchanged (0 answered 304)"
            assert await tab.evaluate(recrawl_tiles_hidden) is False
            assert [e for e in tab.errors if "ERR_CONNECTION_REFUSED" not in e] == []
            await tab.close()
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 10) == 130


# The CLI, with the index of a round's records held until a line comes on stdin.
HELD_INDEX = """
import sys
import crawler.history
from crawler.__main__ import main

build = crawler.history.open_history

def held(*args, **kwargs):
    print("indexing", flush=True)
    sys.stdin.readline()
    return build(*args, **kwargs)

crawler.history.open_history = held
sys.exit(main(sys.argv[1:]))
"""


async def test_with_revisit_the_metrics_answer_while_a_round_is_indexed(
    site: Site, tmp_path: Path
) -> None:
    """Between rounds the round's records are indexed (16 s at 10^6 pages) to find when
    the next is due: the port was closed meanwhile, and a scraper found the crawl down."""
    site.page("/", "home", ["/a"])
    site.page("/a", "a")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    command = [sys.executable, "-c", HELD_INDEX, str(seeds), "--revisit", str(tmp_path / "r")]
    command += ["--ignore-robots", "--revisit-interval", "60", "--dashboard", "127.0.0.1:0"]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
    async with dashboard_process(command, **pipes) as (process, url):
        assert process.stdin and process.stdout and process.stderr
        assert await process.stdout.readline() == b"indexing\n"
        async with aiohttp.ClientSession() as session:
            indexing = await scrape(session, url)
            assert samples(indexing)[("crawler_records_total", (("status", "200"),))] == 2
            process.stdin.write(b"go\n")
            while b"next round in" not in (line := await process.stderr.readline()):
                assert line, "the crawl ended between rounds"
            async with session.get(f"{url}events") as response:
                async for line in response.content:
                    if line.startswith(b"data: "):
                        assert json.loads(line.removeprefix(b"data: "))["next_round_at"]
                        break
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 10) == 143


async def test_no_counter_goes_down_across_kill_9_and_a_state_resume(
    site: Site, tmp_path: Path
) -> None:
    """URLs dropped as traps just before the kill (no checkpoint since) are still
    counted when the crawl resumes: Prometheus would take a drop for a reset."""
    traps = [f"/t{i}?a=1&b=2&c=3" for i in range(20)]
    site.page("/", "home", [*traps, "/held"])
    held_page(site, "/held", [])
    flags = ("--state", str(tmp_path / "state"), "--max-query-params", "2")
    scrapes = []
    for run in (1, 2):
        async with dashboard_crawl(tmp_path, site, *flags) as (process, url):
            await site.hits_reached(1 + run).wait()  # /held asked: / is committed
            async with aiohttp.ClientSession() as session:
                scrapes.append(counters(samples(await scrape(session, url))))
            process.kill()
            await process.wait()
    before, after = scrapes
    assert before["crawler_dropped_urls_total{'rule': 'too_many_query_params'}"] == 20
    assert {name: after.get(name, 0) for name in before} == before


async def test_a_recrawl_s_metrics_say_what_became_of_the_previous_pages(
    site: Site, tmp_path: Path
) -> None:
    validated_page(site, "/", html("home", ["/same"]), '"home"')
    validated_page(site, "/same", html("same", ["/held"]), '"same"')
    site.page("/held", "held")
    first = tmp_path / "first.jsonl"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    crawl = await asyncio.create_subprocess_exec(
        *CLI, str(seeds), "-o", str(first), "--ignore-robots", "--quiet"
    )
    assert await crawl.wait() == 0
    held_page(site, "/held", [])
    async with dashboard_crawl(tmp_path, site, "--since", str(first)) as (process, url):
        await site.hits_reached(6).wait()  # /held asked again: / and /same are committed
        async with aiohttp.ClientSession() as session:
            exposition = await scrape(session, url)
        process.kill()
    promtool_check(exposition)
    scraped = samples(exposition)
    outcomes = {
        dict(labels)["outcome"]: value
        for (name, labels), value in scraped.items()
        if name == "crawler_recrawl_pages_total"
    }
    assert outcomes == {
        "unchanged_304": 2,
        **dict.fromkeys(
            ("unchanged_same_digest", "changed", "new", "failed", "unlinked", "not_due"), 0
        ),
    }
    assert scraped[("crawler_recrawl_previous_pages", ())] == 3
    saved = sum(r["bytes"] for r in read_records(tmp_path / "pages.jsonl"))
    assert scraped[("crawler_recrawl_saved_body_bytes_total", ())] == saved > 0


async def test_an_api_crawl_says_where_its_dashboard_listens_on_a_port_it_chose(
    site: Site, tmp_path: Path
) -> None:
    """With dashboard="127.0.0.1:0", the port chosen was only in a log line."""
    from crawler import Crawler

    site.page("/", "Home", ["/a"])
    site.page("/a", "A")
    settings = Settings(seeds="-", ignore_robots=True, dashboard="127.0.0.1:0")
    async with Crawler([site.url + "/"], settings) as crawler:
        url = crawler.dashboard_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        assert not url.endswith(":0/")
        async for _page in crawler:
            async with aiohttp.ClientSession() as session, session.get(url + "metrics") as got:
                assert got.status == 200
                names = {f.name for f in text_string_to_metric_families(await got.text())}
            assert {"crawler_body_bytes", "crawler_errors"} <= names
            break


async def test_a_long_crawl_s_pages_per_second_history_is_sent_once_and_bounded(
    site: Site, tmp_path: Path
) -> None:
    """With --stats, a rate sample is kept every 10 s: 8,640 a day. Every event (one a
    second, to each open page) carried them all, though the page reads them once."""
    from crawler import Crawler
    from crawler.observe.dashboard import HISTORY_POINTS, Dashboard, Fixed, listen

    site.page("/", "Home")
    settings = Settings(seeds="-", ignore_robots=True, dashboard="127.0.0.1:0")
    async with Crawler([site.url + "/"], settings) as crawler:
        await crawler.crawl()
        figures = crawler.dashboard_figures
    assert figures is not None
    day = [{"t_s": 10.0 * i, "records": 100 * i} for i in range(8640)]
    waiting = Fixed({**figures, "rate_history": day})
    async with (
        Dashboard(waiting, settings, listen("127.0.0.1:0"), announce=False) as dashboard,
        aiohttp.ClientSession() as session,
        session.get(f"{dashboard.url}events") as response,
    ):
        events = []
        async for line in response.content:
            if line.startswith(b"data: "):
                events.append(line)
            if len(events) == 2:
                break
    first, second = (json.loads(event.removeprefix(b"data: ")) for event in events)
    assert first["rate_history"] == day[-HISTORY_POINTS:]
    assert "rate_history" not in second
    assert len(events[0]) < 40_000 and len(events[1]) < 4_000


async def test_with_javascript_off_the_page_says_so_and_links_the_figures_as_text(
    site: Site, tmp_path: Path
) -> None:
    """It showed 'connecting' and dashes, for good."""
    from crawler import Crawler

    release = held_page(site, "/", [])
    settings = Settings(seeds="-", ignore_robots=True, dashboard="127.0.0.1:0", quiet=True)
    async with Crawler([site.url + "/"], settings) as crawler:
        crawl = asyncio.create_task(crawler.crawl())
        assert crawler.dashboard_url is not None
        async with Chromium(tmp_path / "profile") as browser:
            tab = await browser.new_tab()
            await tab.send("Emulation.setScriptExecutionDisabled", value=True)
            await tab.open(crawler.dashboard_url)
            await tab.send("Emulation.setScriptExecutionDisabled", value=False)
            text = await tab.evaluate("document.body.innerText")
            links = await tab.evaluate("[...document.links].map(a => a.pathname)")
            await tab.close()
        release.set()
        await crawl
    assert "needs JavaScript" in text
    assert "/metrics" in links


async def test_a_crawl_stopped_with_urls_still_queued_is_not_said_finished(
    site: Site, tmp_path: Path
) -> None:
    """At --max-pages, or on Ctrl-C, the page said 'crawl finished' over 2 URLs queued."""
    release = held_page(site, "/", ["/a", "/b"])
    async with (
        dashboard_crawl(tmp_path, site, "--max-pages", "1") as (process, url),
        Chromium(tmp_path / "profile") as browser,
    ):
        tab = await browser.new_tab()
        await tab.open(url)
        await tab.until("document.getElementById('state').textContent === 'live'")
        release.set()
        assert await process.wait() == 0
        state = await tab.until(
            "document.getElementById('state').className === 'state done'"
            " && document.getElementById('state').textContent"
        )
        assert state == "crawl stopped, 2 URLs not fetched"
        assert (await tab.figures())["queued"] == "2"
        assert tab.errors == []
        await tab.close()


async def test_a_crawl_stopped_with_a_request_in_flight_is_not_said_finished(
    site: Site, tmp_path: Path
) -> None:
    """A request abandoned at --drain-timeout, with nothing queued: 'crawl finished'."""

    async def hang(_request: web.Request) -> web.Response:
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    site.page("/", "home", ["/slow"])
    site.handle("/slow", hang)
    asked = site.hits_reached(2)
    settings = Settings(
        seeds="-", ignore_robots=True, dashboard="127.0.0.1:0", quiet=True, drain_timeout=0.2
    )
    async with api_crawl_watched([site.url + "/"], settings, tmp_path) as (crawler, crawl, tab):
        await tab.until("document.getElementById('state').textContent === 'live'")
        await asyncio.wait_for(asked.wait(), 30)
        crawler.stop()
        await crawl
        state = await tab.until(
            "document.getElementById('state').className === 'state done'"
            " && document.getElementById('state').textContent"
        )
        assert state == "crawl stopped, 1 URL not fetched"
        assert tab.errors == []


async def test_the_claims_of_every_host_are_in_the_stats_files_last_write_only(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-pages-per-host counts the claims of every host: 27 MB of JSON at 10^6
    hosts. Each event, a second to each open page, carried them all, and so did the
    stats file every 10 s; only its last write, at the end, keeps them."""
    from crawler import Crawler
    from crawler.observe import progress

    monkeypatch.setattr(progress, "STATS_EVERY_S", 0.01)
    release = held_page(site, "/", ["/a", "/b"])
    site.page("/a", "a")
    site.page("/b", "b")
    stats = tmp_path / "stats.json"
    settings = Settings(
        seeds="-", ignore_robots=True, dashboard="127.0.0.1:0", quiet=True,
        max_pages_per_host=5, stats=str(stats),
    )  # fmt: skip
    async with Crawler([site.url + "/"], settings) as crawler:
        crawl = asyncio.create_task(crawler.crawl())
        assert crawler.dashboard_url is not None
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{crawler.dashboard_url}events") as response,
        ):
            async for line in response.content:
                if line.startswith(b"data: "):
                    first = json.loads(line.removeprefix(b"data: "))
                    break
        assert "claims_per_host" not in first and "claims_per_host" not in crawler.figures()
        while not stats.exists():
            await asyncio.sleep(0.01)
        assert "claims_per_host" not in json.loads(stats.read_text())
        release.set()
        await crawl
    host = site.url.removeprefix("http://")
    assert json.loads(stats.read_text())["claims_per_host"] == {host: 3}


async def test_the_dashboard_shows_hosts_and_urls_in_unicode_and_titles_as_text(
    site: Site, tmp_path: Path
) -> None:
    """The busiest hosts and the last errors were shown in Punycode, as no browser
    shows a host, and an error page by its URL alone, though it had a title. The site
    is the crawl's proxy, so that it answers for an IDN host."""
    release = held_page(site, "/held", [])
    site.page("/", "home", ["/broken", "/deep", "/held"])
    site.page("/broken", "broken", headers={"Content-Encoding": "gzip"})  # not gzip
    hostile = "<img src=x onerror=alert(1)> 深"
    deep = "<div>" * 20_000  # read with its markup bounded: error html_too_complex
    site.page("/deep", body=f"<title>{hostile.replace('<', '&lt;')}</title>{deep}")
    settings = Settings(
        seeds="-", ignore_robots=True, dashboard="127.0.0.1:0", quiet=True, proxy=site.url,
        retries=0,
    )  # fmt: skip
    seeds = ["http://xn--fiq228c.xn--fiqs8s/"]
    async with api_crawl_watched(seeds, settings, tmp_path) as (_, crawl, tab):
        await tab.until("document.querySelectorAll('#errors tbody tr').length === 2")
        errors = await tab.evaluate(
            "[...document.querySelectorAll('#errors tbody tr')].map(r => r.cells[3].innerText)"
        )
        assert sorted(errors) == ["http://中文.中国/broken", f"http://中文.中国/deep\n{hostile}"]
        assert await tab.evaluate("document.querySelectorAll('img').length") == 0
        hosts = await tab.evaluate(
            "[...document.querySelectorAll('#hosts tbody tr')].map(r => r.cells[0].innerText)"
        )
        assert hosts == ["中文.中国"]
        release.set()
        await crawl
        assert tab.errors == []
