"""The ceilings crawl_bench.py compares crawlers with: a bare aiohttp fetch loop.

A queue of the site's manifest URLs and N workers, each doing GET and reading
the body; with --parse, each page's `a[href]` are also extracted with
selectolax (Lexbor) and joined to the page URL with yarl (three times faster
than urllib.parse.urljoin here), with no deduplication. No
crawler can do less work per page with this stack, so these are upper bounds.
Prints one JSON object: pages fetched, pages with status 200, links joined.

    python benchmarks/fetch_ceiling.py MANIFEST.json [--concurrency 64] [--parse]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import aiohttp
from selectolax.lexbor import LexborHTMLParser
from yarl import URL


async def fetch_all(urls: list[str], concurrency: int, parse: bool) -> dict[str, int]:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for url in urls:
        queue.put_nowait(url)
    counts = {"pages": 0, "ok": 0, "links": 0}

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            url = queue.get_nowait()
            async with session.get(url) as response:
                body = await response.read()
                status = response.status
            if parse:
                base = URL(url)
                links = [
                    str(base.join(URL(node.attributes["href"] or "")))
                    for node in LexborHTMLParser(body).css("a[href]")
                ]
                counts["links"] += len(links)
            counts["pages"] += 1
            counts["ok"] += status == 200

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifest", type=Path, help="manifest.json of a generated site")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--parse", action="store_true", help="also extract and join links")
    args = parser.parse_args()
    urls = json.loads(args.manifest.read_text(encoding="utf-8"))["urls"]
    try:  # the same event loop our crawler runs on by default
        import uvloop
    except ImportError:
        run = asyncio.run
    else:
        run = uvloop.run
    print(json.dumps(run(fetch_all(urls, args.concurrency, args.parse))))


if __name__ == "__main__":
    main()
