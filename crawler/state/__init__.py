"""Where a crawl lives: its visited set, frontier, figures and sinks, behind one `Store` protocol.

`MemoryStore` keeps everything in memory; `DiskStore` keeps it in a --state
directory, safe against `kill -9`. The engine sees only the protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from crawler.bloom import BloomFilter
from crawler.config import Settings
from crawler.cookies import CookieJar
from crawler.frontier import Frontier, Request
from crawler.page import Page
from crawler.sinks import Sinks
from crawler.stats import Stats


class Visited(Protocol):
    def add(self, key: str) -> bool: ...
    def add_many(self, keys: Sequence[str]) -> list[bool]: ...


class Store(Protocol):
    """Where the crawl keeps what it must not lose: visited set, frontier, output."""

    visited: Visited
    bloom: BloomFilter
    frontier: Frontier
    stats: Stats  # restored on resume
    resumed: bool
    complete: bool  # resumed, and nothing is left to do
    sinks: Sinks  # made by open_sinks(); a resumed crawl's reopened at their committed positions

    def commit(
        self, done: Request | None, page: Page | None, new: list[Request], claimed: list[str]
    ) -> None:
        """Atomically: hand `done`'s `page` to the sinks, queue `new`, and make the
        visited-set claims of `new` and of the redirect targets `claimed` permanent;
        then count the page in `stats`, so that saved figures match the saved records."""

    def keep_cookies(self, jar: CookieJar) -> None:
        """Restore `jar` if a resumed crawl saved one; save it with the state from now on."""

    def close(self) -> None: ...


def open_store(settings: Settings, seeds: Sequence[str]) -> Store:
    """The store the settings ask for; ConfigError if a state directory cannot be used."""
    from crawler.state.disk import DiskStore
    from crawler.state.memory import MemoryStore

    if settings.state:
        return DiskStore(settings, seeds)
    return MemoryStore(settings)
