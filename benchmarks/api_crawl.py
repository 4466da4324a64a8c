"""A crawl through the Python API, as crawl_bench.py's `--api` contender runs it.

    python benchmarks/api_crawl.py SEEDS OUTPUT [--concurrency N] [--max-depth N]

Each page goes through an `on_page` hook that returns one field, and the loop
writes `page.record()` as a JSON line: what a user of the API would do, and
what the CLI's output should equal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

import orjson

from crawler import Crawler, Page, Settings


def link_count(page: Page) -> dict[str, int]:
    return {"link_count": len(page.links)}


async def crawl(seeds: list[str], output: Path, settings: Settings) -> None:
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        async with Crawler(seeds, settings, on_page=link_count) as crawler:
            async for page in crawler:
                os.write(fd, orjson.dumps(page.record(), option=orjson.OPT_APPEND_NEWLINE))
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seeds", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-depth", type=int, default=50)
    args = parser.parse_args()
    seeds = args.seeds.read_text(encoding="utf-8").split()
    settings = Settings(
        concurrency=args.concurrency,
        per_host=args.concurrency,
        max_depth=args.max_depth,
        ignore_robots=True,
    )
    asyncio.run(crawl(seeds, args.output, settings))


if __name__ == "__main__":
    main()
