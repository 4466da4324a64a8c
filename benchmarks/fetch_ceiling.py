"""The ceilings crawl_bench.py compares crawlers with: a bare aiohttp fetch loop.

A queue of the site's manifest URLs and N workers, each doing GET and reading
the body; with --parse, each page's `a[href]` are also extracted with
selectolax (Lexbor) and joined to the page URL with yarl (three times faster
than urllib.parse.urljoin here), with no deduplication. No
crawler can do less work per page with this stack, so these are upper bounds.
With --validators CRAWL.jsonl, each GET is conditional on the ETag and
Last-Modified that crawl's record of the URL gives, as a recrawl's is, and only a
page sent whole is parsed: the ceiling of a recrawl (recrawl_bench.py).
Prints one JSON object: pages fetched, pages with status 200, links joined.

    python benchmarks/fetch_ceiling.py MANIFEST.json [--concurrency 64] [--parse]
        [--validators CRAWL.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import aiohttp
from selectolax.lexbor import LexborHTMLParser
from yarl import URL


async def fetch_all(
    urls: list[str], concurrency: int, parse: bool, validators: dict[str, dict[str, str]]
) -> dict[str, int]:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for url in urls:
        queue.put_nowait(url)
    counts = {"pages": 0, "ok": 0, "not_modified": 0, "links": 0}

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            url = queue.get_nowait()
            async with session.get(url, headers=validators.get(url)) as response:
                body = await response.read()
                status = response.status
            if parse and body:
                base = URL(url)
                links = [
                    str(base.join(URL(node.attributes["href"] or "")))
                    for node in LexborHTMLParser(body).css("a[href]")
                ]
                counts["links"] += len(links)
            counts["pages"] += 1
            counts["ok"] += status == 200
            counts["not_modified"] += status == 304

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return counts


def conditional_headers(crawl: Path) -> dict[str, dict[str, str]]:
    """For each URL a crawl fetched with a 2xx, the headers that make a GET of it conditional."""
    headers = {}
    with crawl.open(encoding="utf-8") as records:
        for line in records:
            record = json.loads(line)
            if not 200 <= (record.get("status") or 0) < 300:
                continue
            conditions = {"If-None-Match": record.get("etag")}
            conditions["If-Modified-Since"] = record.get("last_modified")
            headers[record["url"]] = {name: v for name, v in conditions.items() if v}
    return headers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifest", type=Path, help="manifest.json of a generated site")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--parse", action="store_true", help="also extract and join links")
    parser.add_argument(
        "--validators", type=Path, help="a crawl's JSONL: send its ETag and Last-Modified"
    )
    args = parser.parse_args()
    urls = json.loads(args.manifest.read_text(encoding="utf-8"))["urls"]
    validators = {} if args.validators is None else conditional_headers(args.validators)
    try:  # the same event loop our crawler runs on by default
        import uvloop
    except ImportError:
        run = asyncio.run
    else:
        run = uvloop.run
    print(json.dumps(run(fetch_all(urls, args.concurrency, args.parse, validators))))


if __name__ == "__main__":
    main()
