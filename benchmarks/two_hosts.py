"""Head-of-line blocking, measured: a slow host must not hold up a fast one.

Two sites on 127.0.0.1 and 127.0.0.2. The first says `Crawl-delay: 1` in
robots.txt and has a few pages; the second has no delay and many pages. One
crawl of both, through the CLI. Printed per host, from the servers' own clocks:
requests, when the first and last arrived, the smallest gap between two, and
the pages per second while the host was being crawled.

    python benchmarks/two_hosts.py [--slow-pages 5] [--fast-pages 500] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from aiohttp import web


async def serve(host: str, pages: int, crawl_delay: float | None) -> tuple[web.AppRunner, list]:
    arrivals: list[tuple[float, str]] = []

    async def handle(request: web.Request) -> web.Response:
        arrivals.append((time.monotonic(), request.path))
        if request.path == "/robots.txt":
            rules = f"User-agent: *\nCrawl-delay: {crawl_delay}\n" if crawl_delay else ""
            return web.Response(text=rules, status=200 if rules else 404)
        links = (
            "".join(f'<a href="/p{n}">p{n}</a>' for n in range(pages))
            if request.path == "/"
            else ""
        )
        return web.Response(text=f"<title>{request.path}</title>{links}", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, 8080).start()
    return runner, arrivals


def report(name: str, arrivals: list[tuple[float, str]], origin: float) -> None:
    times = [t - origin for t, path in arrivals]
    pages = [t for t, path in arrivals if path != "/robots.txt"]
    gaps = [b - a for a, b in pairwise(sorted(times))]
    span = max(pages) - min(pages)
    rate = (len(pages) - 1) / span if span > 0 else float("inf")
    print(
        f"{name:<26} {len(arrivals):>8} {min(times):>9.3f} {max(times):>9.3f} "
        f"{min(gaps):>9.3f} {rate:>10.1f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow-pages", type=int, default=5)
    parser.add_argument("--fast-pages", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    slow, slow_arrivals = await serve("127.0.0.1", args.slow_pages, crawl_delay=1.0)
    fast, fast_arrivals = await serve("127.0.0.2", args.fast_pages, crawl_delay=None)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            seeds = Path(scratch, "seeds.txt")
            seeds.write_text("http://127.0.0.1:8080/\nhttp://127.0.0.2:8080/\n")
            started = time.monotonic()
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "crawler",
                str(seeds),
                "-o",
                str(Path(scratch, "o.jsonl")),
                "--quiet",
                "--concurrency",
                str(args.concurrency),
            )
            await process.wait()
            total = time.monotonic() - started
    finally:
        await slow.cleanup()
        await fast.cleanup()
    print(
        f"one crawl of both hosts, --concurrency {args.concurrency}, {total:.2f} s in all "
        "(times in s from the crawler's start)"
    )
    print(f"{'host':<26} {'requests':>8} {'first':>9} {'last':>9} {'min gap':>9} {'pages/s':>10}")
    report("127.0.0.1 (Crawl-delay 1)", slow_arrivals, started)
    report("127.0.0.2 (no delay)", fast_arrivals, started)


if __name__ == "__main__":
    asyncio.run(main())
