"""Where a crawl keeps its visited set, frontier and output: in memory, or in --state DIR."""

from __future__ import annotations

from crawler.bloom import BloomFilter
from crawler.config import Settings
from crawler.frontier import MemoryFrontier, Request
from crawler.output import JsonlWriter
from crawler.stats import Stats


class MemoryStore:
    """Everything in memory; records go straight to the output."""

    resumed = False

    def __init__(self, settings: Settings, output: JsonlWriter) -> None:
        self.bloom = BloomFilter(settings.expected_urls, settings.fp_rate)
        self.visited = self.bloom
        self.frontier = MemoryFrontier()
        self.stats = Stats()
        self._output = output

    def commit(
        self, done: Request | None, line: bytes | None, new: list[Request], claimed: list[str]
    ) -> None:
        if line is not None:
            self._output.write(line)
        self.frontier.push(new)

    def close(self) -> None:
        self._output.close()


def open_store(settings: Settings, seeds: list[str]) -> MemoryStore:
    """The store the settings ask for; ConfigError if a state directory cannot be used."""
    return MemoryStore(settings, JsonlWriter(settings.output))
