"""The Crawlee for Python side of crawl_bench.py: crawl one site, write JSON lines like ours.

Tuned as its users would: `ParselCrawler`, concurrency fixed (min = desired = max),
storage in memory (`MemoryStorageClient`, nothing written under ./storage), and
each page's links resolved, stripped of fragments and deduplicated before any
`Request` is built: `enqueue_links()` builds a `Request` (a pydantic model, with
its unique key) for every `<a>` of the page, repeats included, which costs about
1.7 times the CPU of the whole crawl. The request queue's own deduplication does
the rest, as Scrapy's duplicate filter does. Items go to the in-memory dataset
with `push_data`, and are written out as JSON lines when the crawl is over.

    .venv/bin/python benchmarks/crawlee_crawler.py SEED_URL OUT.jsonl [--concurrency 64]
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from urllib.parse import urljoin, urlsplit

from crawlee import ConcurrencySettings
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
from crawlee.storage_clients import MemoryStorageClient
from peer_cli import arguments


async def crawl(seed: str, output: str, concurrency: int, max_depth: int) -> None:
    host = urlsplit(seed).netloc
    crawler = ParselCrawler(
        storage_client=MemoryStorageClient(),
        concurrency_settings=ConcurrencySettings(
            min_concurrency=concurrency,
            desired_concurrency=concurrency,
            max_concurrency=concurrency,
        ),
        max_crawl_depth=max_depth,
        max_request_retries=2,
        configure_logging=False,
    )

    @crawler.router.default_handler
    async def page(context: ParselCrawlingContext) -> None:
        url = context.request.loaded_url or context.request.url
        hrefs = context.selector.css("a::attr(href)").getall()
        links = list(dict.fromkeys(urljoin(url, href).partition("#")[0] for href in hrefs))
        links = [link for link in links if link.startswith(("http://", "https://"))]
        await context.push_data(
            {
                "url": context.request.url,
                "status": context.http_response.status_code,
                "depth": context.request.crawl_depth,
                "title": context.selector.css("title::text").get(),
                "links": links,
                "fetched_at": time.time(),
            }
        )
        same_host = [link for link in links if urlsplit(link).netloc == host]
        await context.add_requests(same_host)

    await crawler.run([seed])
    dataset = await crawler.get_dataset()
    with open(output, "w", encoding="utf-8") as out:
        async for item in dataset.iterate_items():
            out.write(json.dumps(item) + "\n")


def main() -> None:
    args = arguments(__doc__.split("\n\n")[0])
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(crawl(args.seed, args.output, args.concurrency, args.max_depth))


if __name__ == "__main__":
    main()
