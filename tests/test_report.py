"""The live status line: one line at any width from 60 columns up, fields dropped by priority."""

from __future__ import annotations

import asyncio
import fcntl
import io
import os
import pty
import re
import signal
import struct
import sys
import termios
from typing import Any

import pyte
import pytest
from aiohttp import web
from rich.console import Console

from crawler.observe.progress import render_status, status_line, summary_table
from tests.conftest import Site


def figures(**changes: Any) -> dict[str, Any]:
    base = {
        "records": 123_456,
        "pages_per_s": 2_345.6,
        "elapsed_s": 3_725.0,
        "queued": 1_234_567,
        "in_flight": 64,
        "held": 2_000,
        "held_for": 1,
        "errors": {"timeout": 12_000, "connection_error": 345},
        "host_count": 1,
        "visited": {"urls": 9_876_543, "fp_rate": 2.5e-7},
    }
    return {**base, **changes}


def rendered(width: int, max_pages: int = 0, **changes: Any) -> list[str]:
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=True)
    console.print(render_status(figures(**changes), max_pages, width))
    return console.export_text().rstrip("\n").split("\n")


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("max_pages", [0, 200_000])
def test_the_line_fits_the_width_without_wrapping(width: int, max_pages: int) -> None:
    [line] = rendered(width, max_pages)
    assert len(line) < width
    text = line.rstrip().split(" ", 1)[1] if max_pages else line.rstrip()
    every_field = status_line(figures(), max_pages).split(", ")
    shown = text.split(", ")
    assert shown[0] == "123,456 pages"
    assert set(shown) <= set(every_field)  # whole fields, none cut short


def test_fields_are_dropped_least_important_first() -> None:
    [wide] = rendered(200)
    [mid] = rendered(80)
    [narrow] = rendered(60)
    for field in ("in flight", "host", "visited", "queued", "errors", "held for"):
        assert field in wide
    assert "visited" not in mid and "host" not in mid
    assert "2,000 held for 1 slow page" in mid
    assert narrow.startswith("123,456 pages, 1:02:05 elapsed, 2,345.6/s")
    assert "in flight" not in narrow


def test_max_pages_shows_a_bar_a_percentage_and_an_eta_before_the_text() -> None:
    [line] = rendered(80, max_pages=200_000)
    bar, _, text = line.partition(" ")
    assert set(bar) <= {"━", "╸", "╺"} and len(bar) == 10
    assert text.startswith("123,456 pages, 62%, ETA 0:32")  # 76,544 pages at 2,345.6/s
    assert "elapsed" not in text


def test_with_redis_max_pages_goes_by_every_process_s_pages() -> None:
    """A process with a third of the pages showed 33% when the crawl was over."""
    shared = {"records": 150_000, "processes": 3}
    [line] = rendered(80, max_pages=200_000, records=50_000, all_processes=shared)
    # 75%, not 25%; 50,000 pages left at 3 times this process's 2,345.6/s
    assert line.partition(" ")[2].startswith("50,000 pages, 75%, ETA 0:07")


def test_with_redis_the_summary_says_how_many_pages_every_process_wrote() -> None:
    totals: Any = {
        "records": 50_000, "elapsed_s": 100.0, "pages_per_s": 500.0, "statuses": {},
        "errors": {}, "dropped": {}, "bytes": 0, "truncated": 0, "retries": 0,
        "depth_inexact": 0, "all_processes": {"records": 150_000, "processes": 3},
        "visited": {
            "urls": 3, "bytes": 1024, "slices": 1, "fp_rate": 1e-9, "target_fp_rate": 1e-6,
            "expected_missed_urls": 0.0,
        },
    }  # fmt: skip
    rows = summary_table(totals).splitlines()
    assert re.split(r"  +", rows[1].strip())[:2] == ["pages", "50,000"]
    assert re.split(r"  +", rows[2].strip()) == [
        "all processes", "150,000", "pages of the crawl shared by --redis"
    ]  # fmt: skip


def test_one_host_one_error_one_slow_page_are_singular() -> None:
    line = status_line(figures(records=1, host_count=1, errors={"timeout": 1}, held_for=1))
    assert line.startswith("1 page,")
    assert "1 host," in line and "1 error," in line and "1 slow page" in line
    line = status_line(figures(host_count=2, errors={}, held_for=3))
    assert "2 hosts" in line and "0 errors" in line and "3 slow pages" in line


def test_held_pages_show_only_while_some_are_held() -> None:
    assert "held" not in status_line(figures(held=0, held_for=0))


class Terminal:
    """The CLI on a pseudo-terminal of 80 x 24, its screen as a terminal would show it."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.screen = pyte.Screen(80, 24)
        self.stream = pyte.ByteStream(self.screen)
        self.shown = ""  # everything written, escapes removed as pyte saw them
        self._wanted: tuple[str, asyncio.Event] | None = None

    async def start(self) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawler", *self.args, stderr=slave, stdout=slave, env=env
        )
        os.close(slave)
        self._master = master
        self._closed = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self._master)
            os.close(self._master)
            self._closed.set()
            return
        self.stream.feed(data)
        if self._wanted is not None and self._wanted[0] in self.lines():
            self._wanted[1].set()

    def lines(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    async def shows(self, text: str) -> None:
        event = asyncio.Event()
        self._wanted = (text, event)
        if text in self.lines():
            return
        await event.wait()

    async def finished(self) -> int:
        await self._closed.wait()
        return await self.process.wait()


async def test_the_live_line_is_cleared_after_ctrl_c(site: Site, tmp_path):
    async def page(request: web.Request) -> web.Response:
        n = int(request.path.strip("/") or 0)
        await asyncio.sleep(0.2)
        links = "".join(f'<a href="/{n * 10 + i}">x</a>' for i in range(1, 11))
        return web.Response(text=links, content_type="text/html")

    site.handle("/", page)
    for n in range(1, 1000):
        site.handle(f"/{n}", page)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    terminal = Terminal(str(seeds), "-o", str(tmp_path / "out.jsonl"), "--drain-timeout", "1")
    await terminal.start()

    await asyncio.wait_for(terminal.shows(" elapsed, "), 30)
    terminal.process.send_signal(signal.SIGINT)
    code = await asyncio.wait_for(terminal.finished(), 30)

    assert code == 130
    screen = terminal.lines()
    assert "interrupted: finishing requests in flight" in screen
    assert "crawler: summary" in screen
    assert re.search(r"\d pages, .*elapsed", screen) is None, screen


@pytest.mark.parametrize(
    ("expected", "shown"), [(0.0, "≈ 0"), (1e-7, "≈ 0"), (0.374, "≈ 0.37"), (12.4, "≈ 12")]
)
def test_the_summary_says_plainly_how_many_urls_the_visited_set_may_have_skipped(
    expected: float, shown: str
) -> None:
    totals: Any = {
        "records": 3, "elapsed_s": 1.0, "pages_per_s": 3.0, "statuses": {"200": 3},
        "errors": {}, "dropped": {}, "bytes": 300, "truncated": 0, "retries": 0,
        "depth_inexact": 0,
        "visited": {
            "urls": 3, "bytes": 1024, "slices": 1, "fp_rate": 1e-9, "target_fp_rate": 1e-6,
            "expected_missed_urls": expected,
        },
    }  # fmt: skip
    summary = summary_table(totals)
    row = re.search(r"\n  false positives +(.*)", summary)
    assert row is not None
    assert re.split(r"  +", row[1]) == [shown, "URLs the visited set may have wrongly skipped"]
