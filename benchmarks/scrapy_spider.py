"""The Scrapy side of crawl_bench.py: crawl one site, write JSON lines like ours.

Runs with the Python of the Scrapy venv that crawl_bench.py creates; Scrapy is
never a dependency of the project.

    benchmarks/out/scrapy-venv/bin/python benchmarks/scrapy_spider.py SEED_URL OUT.jsonl
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from peer_cli import arguments
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response


class SiteSpider(scrapy.Spider):
    """Follows every http(s) link; the offsite filter keeps it on the seed's host."""

    name = "site"

    def __init__(self, seed: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed = seed
        # A host without the port: Scrapy's offsite filter ignores ports.
        self.allowed_domains = [urlsplit(seed).hostname]

    async def start(self) -> AsyncIterator[scrapy.Request]:
        # Not start_urls: those bypass the duplicate filter, so the seed would be fetched
        # again when a page links back to it.
        yield scrapy.Request(self.seed)

    def parse(self, response: Response) -> Iterator[dict[str, Any] | scrapy.Request]:
        # Fragments dropped and each link once per page, as our crawler does.
        hrefs = response.css("a::attr(href)").getall()
        links = list(dict.fromkeys(response.urljoin(href).partition("#")[0] for href in hrefs))
        links = [link for link in links if link.startswith(("http://", "https://"))]
        yield {
            "url": response.url,
            "status": response.status,
            "depth": response.meta["depth"],
            "title": response.css("title::text").get(),
            "links": links,
            "fetched_at": time.time(),
        }
        for link in links:
            yield scrapy.Request(link)


def settings(output: str, concurrency: int, max_depth: int) -> dict[str, Any]:
    """Scrapy at its fastest for one local host, matched to our crawler's limits."""
    return {
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
        "ROBOTSTXT_OBEY": False,
        "AUTOTHROTTLE_ENABLED": False,
        "DOWNLOAD_DELAY": 0,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "DEPTH_LIMIT": max_depth,
        "LOG_LEVEL": "INFO",
        "USER_AGENT": "scrapy-bench",
        "FEEDS": {output: {"format": "jsonlines", "encoding": "utf8", "overwrite": True}},
    }


def main() -> None:
    args = arguments(__doc__.split("\n\n")[0])
    process = CrawlerProcess(settings(args.output, args.concurrency, args.max_depth))
    process.crawl(SiteSpider, seed=args.seed)
    process.start()


if __name__ == "__main__":
    main()
