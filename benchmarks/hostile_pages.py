"""Parse time and event-loop stall per page shape, before (Lexbor on the loop) and after
(crawler.htmlguard.HtmlParser), with a watchdog task that measures the loop's longest stall.

    python benchmarks/hostile_pages.py [--before-timeout-s 60] [--plain DIR] [--rounds 5]

"before" runs in a child process, stopped after --before-timeout-s: a 450,000-deep page does
not finish. Times are wall-clock seconds on a shared machine: rough, not exact.

With --plain DIR (say /usr/share/doc/python3.11/html, Debian's python3.11-doc), what plain
pages cost instead: CPU seconds (the process's, threads included) to parse every .html file
under DIR and read its links, before and after, the median of --rounds alternating rounds.
With --side before or --side after as well, one side once, to be counted by callgrind:

    valgrind --tool=callgrind python benchmarks/hostile_pages.py --plain DIR --side after
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

from crawler import htmlguard
from crawler.htmlguard import HtmlParser
from crawler.parse import parse_html

SHAPES = {
    "plain 10 MB": lambda: "<p>some text and <a href=/p>a link</a></p>\n" * 240_000,
    "nested 20,000": lambda: "<div>" * 20_000 + "x" + "</div>" * 20_000,
    "nested 100,000": lambda: "<div>" * 100_000 + "x" + "</div>" * 100_000,
    "nested 450,000": lambda: "<div>" * 450_000 + "x" + "</div>" * 450_000,
    "100,000 attributes": lambda: (
        "<div " + " ".join(f"a{i}" for i in range(100_000)) + "><a href=/p>x</a></div>"
    ),
    "20,000 options": lambda: "<select>" + "<option>x" * 20_000 + "</select><a href=/p>x</a>",
    "unclosed table 1e6 cells": lambda: "<table>" + "<tr><td>x" * 1_000_000,
    "500,000 <a>s": lambda: "<a href=/p>x" * 500_000,
}


def _parse_inline(html: str) -> None:
    parse_html(LexborHTMLParser(html))


def before_s(html: str, timeout_s: float) -> float | None:
    """Lexbor on the loop: the stall is the parse. None if it took over `timeout_s`."""
    child = multiprocessing.get_context("fork").Process(target=_parse_inline, args=(html,))
    started = time.perf_counter()
    child.start()
    child.join(timeout_s)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return time.perf_counter() - started


async def after(html: str) -> tuple[float, float, int, bool]:
    """(parse seconds, the loop's longest stall, links, bounded) with HtmlParser."""
    stall_s = 0.0
    running = True

    async def watchdog() -> None:
        nonlocal stall_s
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            stall_s = max(stall_s, now - last - 0.005)
            last = now

    dog = asyncio.create_task(watchdog())
    await asyncio.sleep(0.02)
    started = time.perf_counter()
    _, parsed, edited = await HtmlParser().parse(html)
    links = len(parsed.hrefs)
    parse_s = time.perf_counter() - started
    running = False
    await dog
    return parse_s, stall_s, links, edited


async def _parse_all_after(pages: list[str]) -> None:
    parser = HtmlParser()
    for page in pages:
        await parser.parse(page)


def plain_cost(directory: Path, rounds: int) -> None:
    pages = [path.read_text("utf-8", "replace") for path in sorted(directory.rglob("*.html"))]
    large = sum(len(page) > 32 * 1024 for page in pages)
    times: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(rounds):
        started = time.process_time()
        for page in pages:
            _parse_inline(page)
        times["before"].append(time.process_time() - started)
        started = time.process_time()
        asyncio.run(_parse_all_after(pages))
        times["after"].append(time.process_time() - started)
    before, after = (statistics.median(times[k]) for k in ("before", "after"))
    print(
        f"{len(pages)} pages ({large} over 32 KiB), {sum(map(len, pages)) / 1e6:.1f} M chars: "
        f"before {before:.3f} s, after {after:.3f} s CPU ({after / before - 1:+.1%}), "
        f"median of {rounds}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-timeout-s", type=float, default=60.0)
    parser.add_argument("--plain", type=Path, help="a directory of plain HTML pages")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--side", choices=("before", "after"))
    args = parser.parse_args()
    if args.plain and args.side:
        pages = [p.read_text("utf-8", "replace") for p in sorted(args.plain.rglob("*.html"))]
        if args.side == "before":
            for page in pages:
                _parse_inline(page)
        else:
            # Under callgrind a parse takes some 50 times as long, and would run past its
            # (wall-clock) budget: here plain pages' cost is counted, not that path's.
            htmlguard._BUDGET_BASE_S = float("inf")
            asyncio.run(_parse_all_after(pages))
        return
    if args.plain:
        plain_cost(args.plain, args.rounds)
        return
    print(
        f"{'shape':26} {'MB':>6} {'before: stall s':>16} {'after: parse s':>15} "
        f"{'stall s':>8} {'links':>7} bounded"
    )
    for name, make in SHAPES.items():
        html = make()
        before = before_s(html, args.before_timeout_s)
        parse_s, stall_s, links, edited = asyncio.run(after(html))
        shown = f"{before:.2f}" if before is not None else f"> {args.before_timeout_s:g}"
        print(
            f"{name:26} {len(html) / 1e6:6.2f} {shown:>16} {parse_s:15.2f} "
            f"{stall_s:8.3f} {links:7} {edited}"
        )


if __name__ == "__main__":
    main()
