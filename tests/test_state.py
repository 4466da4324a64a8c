"""--state DIR: kill -9 at any moment, resume, and every page is output exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web

from tests.conftest import Site, read_records

PAGES = 300
FAN_OUT = 8  # page i links to 8i+1 .. 8i+8, so every page is within depth 3


def build_graph_site(site: Site, delay_s: float = 0.01) -> list[str]:
    """A site of PAGES pages with a tree for reachability plus cross links and cycles."""
    rng = random.Random(7)

    async def page(request: web.Request) -> web.Response:
        n = int(request.path.rsplit("/", 1)[1])
        children = [FAN_OUT * n + i for i in range(1, FAN_OUT + 1) if FAN_OUT * n + i < PAGES]
        cross = [rng_links[n][i] for i in range(3)]
        links = "".join(f'<a href="/p/{m}">{m}</a>' for m in [*children, *cross, 0])
        await asyncio.sleep(delay_s)
        return web.Response(text=f"<title>page {n}</title>{links}", content_type="text/html")

    rng_links = [[rng.randrange(PAGES) for _ in range(3)] for _ in range(PAGES)]
    for n in range(PAGES):
        site.handle(f"/p/{n}", page)
    return [f"{site.url}/p/{n}" for n in range(PAGES)]


class Run:
    """The CLI in a child process, crawling `site` with a state directory."""

    def __init__(self, site: Site, tmp_path: Path, *extra: str) -> None:
        self.site, self.tmp_path, self.extra = site, tmp_path, extra
        self.output = tmp_path / "pages.jsonl"
        self.state = tmp_path / "state"
        self.seeds = tmp_path / "seeds.txt"
        self.seeds.write_text(f"{site.url}/p/0\n")

    async def start(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "crawler",
            str(self.seeds),
            "-o",
            str(self.output),
            "--state",
            str(self.state),
            "--concurrency",
            "8",
            "--per-host",
            "8",
            "--quiet",
            *self.extra,
            stderr=asyncio.subprocess.PIPE,
        )

    async def until_done(self) -> tuple[int, str]:
        process = await self.start()
        _, err = await process.communicate()
        return process.returncode, err.decode()

    async def interrupted_after(self, hits: int, how: signal.Signals) -> int:
        """Start a run and send it `how` once the server has seen `hits` more requests."""
        reached = self.site.hits_reached(len(self.site.hits) + hits)
        process = await self.start()
        waiter = asyncio.ensure_future(reached.wait())
        finished = asyncio.ensure_future(process.wait())
        await asyncio.wait({waiter, finished}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if process.returncode is None:
            process.send_signal(how)
        await process.communicate()
        return process.returncode


def assert_each_page_once(records: list[dict], pages: list[str]) -> None:
    counts = Counter(r["url"] for r in records)
    assert sorted(counts) == sorted(pages)
    assert set(counts.values()) == {1}
    assert all(r["status"] == 200 and r["error"] is None for r in records)


async def test_kill_9_at_random_moments_loses_and_repeats_nothing(site: Site, tmp_path):
    pages = build_graph_site(site)
    run = Run(site, tmp_path)
    rng = random.Random(int(os.environ.get("KILL_SEED", "2026")))  # vary it to stress

    kills = 0
    for _ in range(4):
        code = await run.interrupted_after(rng.randrange(5, 70), signal.SIGKILL)
        kills += code == -signal.SIGKILL
    code, err = await run.until_done()

    assert code == 0, err
    assert kills >= 3
    assert_each_page_once(read_records(run.output), pages)
    refetched = sum(n - 1 for path, n in site.paths().items() if path.startswith("/p/"))
    assert refetched <= kills * 8  # at most what was in flight at each kill


async def test_a_torn_last_line_is_repaired_on_resume(site: Site, tmp_path):
    pages = build_graph_site(site)
    run = Run(site, tmp_path)
    await run.interrupted_after(40, signal.SIGKILL)
    with run.output.open("ab") as output:
        output.write(b'{"url": "http://127.0.0.1/torn", "sta')

    code, err = await run.until_done()

    assert code == 0, err
    assert_each_page_once(read_records(run.output), pages)


async def test_sigint_exits_130_and_leaves_a_resumable_state(site: Site, tmp_path):
    pages = build_graph_site(site, delay_s=0.02)
    run = Run(site, tmp_path)

    assert await run.interrupted_after(30, signal.SIGINT) == 130
    partial = read_records(run.output)
    build_graph_site(site, delay_s=0)  # slow only to be interrupted mid-crawl
    code, _ = await run.until_done()

    assert 0 < len(partial) < PAGES
    assert code == 0
    assert_each_page_once(read_records(run.output), pages)


async def test_sigterm_exits_143(site: Site, tmp_path):
    build_graph_site(site, delay_s=0.02)
    run = Run(site, tmp_path)

    assert await run.interrupted_after(30, signal.SIGTERM) == 143


async def test_a_finished_crawl_run_again_says_it_is_complete_and_touches_nothing(
    site: Site, tmp_path
):
    pages = build_graph_site(site, delay_s=0)
    stats = tmp_path / "stats.json"
    run = Run(site, tmp_path, "--stats", str(stats))
    assert (await run.until_done())[0] == 0
    hits = len(site.hits)
    before = [(path.read_bytes(), path.stat().st_mtime_ns) for path in (run.output, stats)]

    code, err = await run.until_done()

    assert code == 0
    assert (
        err == f"crawler: crawl in {run.state} is complete ({PAGES} records); --fresh starts over\n"
    )
    assert len(site.hits) == hits
    assert [(path.read_bytes(), path.stat().st_mtime_ns) for path in (run.output, stats)] == before
    assert_each_page_once(read_records(run.output), pages)


async def test_a_crawl_that_reached_max_pages_is_complete_until_max_pages_is_raised(
    site: Site, tmp_path
):
    build_graph_site(site, delay_s=0)
    assert (await Run(site, tmp_path, "--max-pages", "10").until_done())[0] == 0

    code, err = await Run(site, tmp_path, "--max-pages", "10").until_done()
    assert code == 0 and "is complete (10 records)" in err

    code, err = await Run(site, tmp_path, "--max-pages", "25").until_done()
    assert code == 0 and "complete" not in err
    assert len(read_records(tmp_path / "pages.jsonl")) == 25


async def test_a_crawl_stopped_by_ctrl_c_is_not_complete(site: Site, tmp_path):
    build_graph_site(site, delay_s=0.02)
    run = Run(site, tmp_path)
    assert await run.interrupted_after(30, signal.SIGINT) == 130
    build_graph_site(site, delay_s=0)  # slow only to be interrupted mid-crawl

    code, err = await run.until_done()

    assert code == 0 and "complete" not in err
    assert len(read_records(run.output)) == PAGES


async def test_a_resume_with_other_settings_is_refused(site: Site, tmp_path):
    build_graph_site(site, delay_s=0)
    run = Run(site, tmp_path)
    await run.interrupted_after(20, signal.SIGKILL)
    before = run.output.read_bytes()

    changed = Run(site, tmp_path, "--max-depth", "2")
    code, err = await changed.until_done()

    assert code == 2
    assert "max-depth" in err and "--force-resume" in err
    assert run.output.read_bytes() == before


async def test_force_resume_and_fresh(site: Site, tmp_path):
    pages = build_graph_site(site, delay_s=0)
    await Run(site, tmp_path).interrupted_after(20, signal.SIGKILL)

    code, _ = await Run(
        site, tmp_path, "--exclude", "nothing-matches", "--force-resume"
    ).until_done()
    assert code == 0
    assert_each_page_once(read_records(tmp_path / "pages.jsonl"), pages)

    code, _ = await Run(site, tmp_path, "--fresh", "--max-pages", "10").until_done()
    assert code == 0
    assert len(read_records(tmp_path / "pages.jsonl")) == 10


async def test_an_output_file_cut_outside_the_crawler_is_refused(site: Site, tmp_path):
    build_graph_site(site, delay_s=0)
    run = Run(site, tmp_path)
    await run.interrupted_after(50, signal.SIGKILL)
    run.output.write_bytes(b"")

    code, err = await run.until_done()

    assert code == 2
    assert "changed outside the crawler" in err


async def test_max_pages_counts_across_resumes(site: Site, tmp_path):
    build_graph_site(site, delay_s=0.01)
    run = Run(site, tmp_path, "--max-pages", "100")
    await run.interrupted_after(40, signal.SIGKILL)

    code, _ = await run.until_done()

    assert code == 0
    assert len(read_records(run.output)) == 100
    assert json.loads(run.output.read_text().splitlines()[-1])["url"]


async def test_a_second_sigint_quits_at_once_and_the_state_still_resumes(site: Site, tmp_path):
    pages = build_graph_site(site, delay_s=0.05)
    run = Run(site, tmp_path)
    reached = site.hits_reached(20)
    process = await run.start()
    await reached.wait()
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGINT)
    await process.communicate()

    assert process.returncode == 130
    build_graph_site(site, delay_s=0)  # slow only to be interrupted mid-crawl
    code, _ = await run.until_done()
    assert code == 0
    assert_each_page_once(read_records(run.output), pages)


async def test_a_damaged_state_directory_is_refused_with_one_line(site: Site, tmp_path):
    build_graph_site(site, delay_s=0)
    run = Run(site, tmp_path)
    await run.interrupted_after(20, signal.SIGKILL)
    (run.state / "crawl.sqlite").write_bytes(b"this is not a database" * 100)
    for leftover in ("crawl.sqlite-wal", "crawl.sqlite-shm"):
        (run.state / leftover).unlink(missing_ok=True)

    code, err = await run.until_done()

    assert code == 2
    assert err.count("\n") == 1 and "--fresh" in err and "Traceback" not in err


def build_mixed_site(site: Site, other: Site) -> None:
    """The graph site, plus 404s, broken responses and pages on a second host."""
    build_graph_site(site, delay_s=0.005)

    async def garbage(request: web.Request) -> web.StreamResponse:
        request.transport.write(b"NOT HTTP AT ALL\r\n\r\n")
        request.transport.close()
        return web.Response()

    async def extra_links(request: web.Request) -> web.Response:
        n = int(request.path.rsplit("/", 1)[1])
        links = [f"/missing/{n}", f"/bad/{n}", f"{other.url}/q/{n}", f"/p/{n}"]
        return web.Response(
            text="".join(f'<a href="{href}">x</a>' for href in links), content_type="text/html"
        )

    for n in range(0, PAGES, 5):
        site.handle(f"/x/{n}", extra_links)
        site.handle(f"/bad/{n}", garbage)
        other.page(f"/q/{n}", f"q{n}", body="q" * n)
    # page n of the graph links to /x/n when n is a multiple of 5
    original = site.routes["/p/0"]

    async def with_extra(request: web.Request) -> web.Response:
        response = await original(request)
        n = int(request.path.rsplit("/", 1)[1])
        if n % 5 == 0:
            response.text = response.text + f'<a href="/x/{n}">x</a>'
        return response

    for n in range(PAGES):
        site.handle(f"/p/{n}", with_extra)


FIGURES_EXACT_AFTER_RESUMES = (
    "records",
    "statuses",
    "errors",
    "bytes",
    "truncated",
    "depths",
    "hosts_top",
    "host_count",
)


async def test_kill_9_and_resumes_leave_the_figures_of_an_uninterrupted_crawl(
    site: Site, site2: Site, tmp_path
):
    build_mixed_site(site, site2)
    options = ("--allow-host", "127.0.0.2", "--allow-private-addresses", "--retries", "0")
    (tmp_path / "clean").mkdir()
    clean = Run(site, tmp_path / "clean", *options, "--stats", str(tmp_path / "clean.json"))
    assert (await clean.until_done())[0] == 0
    (tmp_path / "killed").mkdir()
    killed = Run(site, tmp_path / "killed", *options, "--stats", str(tmp_path / "killed.json"))
    for hits in (15, 120, 250):  # early (before the first checkpoint), then twice later
        assert await killed.interrupted_after(hits, signal.SIGKILL) == -signal.SIGKILL
    assert (await killed.until_done())[0] == 0

    expected = json.loads((tmp_path / "clean.json").read_text())
    found = json.loads((tmp_path / "killed.json").read_text())
    assert expected["errors"] == {"invalid_response": PAGES // 5}
    assert expected["host_count"] == 2
    for name in FIGURES_EXACT_AFTER_RESUMES:
        assert found[name] == expected[name], name
    for name in ("urls", "bytes", "slices", "capacity", "fp_rate"):
        assert found["visited"][name] == expected["visited"][name], name
    assert found["visited"]["expected_missed_urls"] == pytest.approx(
        expected["visited"]["expected_missed_urls"], rel=0.2
    )
