"""A crawl kept in memory: nothing survives the process, records go straight to the sinks."""

from __future__ import annotations

from crawler.config import Settings
from crawler.cookies import CookieJar
from crawler.frontier import MemoryFrontier, Request
from crawler.page import Page
from crawler.sinks import open_sinks
from crawler.state import LocalStore, visited_set_in_memory
from crawler.stats import Stats


class MemoryStore(LocalStore):
    def __init__(self, settings: Settings) -> None:
        self.bloom = visited_set_in_memory(settings, settings.fp_rate)
        self.visited = self.bloom
        self.frontier = MemoryFrontier()
        self.stats = Stats()
        self.sinks = open_sinks(settings)
        super().__init__(settings)

    def save(
        self, done: Request | None, page: Page | None, new: list[Request], claimed: list[str]
    ) -> None:
        if page is not None:
            self.sinks.write(page)
        self.frontier.push(new)
        if page is not None and done is not None:
            self.stats.count(page, done.host)

    def keep_cookies(self, jar: CookieJar) -> None:
        """Cookies live and die with the crawl in memory."""

    def close(self) -> None:
        self.sinks.close()
