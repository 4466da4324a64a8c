"""What the user sees on stderr while and after crawling, and the --stats file."""

from __future__ import annotations

import sys
from types import TracebackType

from crawler.config import Settings
from crawler.engine import Crawl


class Reporter:
    def __init__(self, crawl: Crawl, settings: Settings) -> None:
        self._crawl = crawl
        self._settings = settings

    async def __aenter__(self) -> Reporter:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def summary(self) -> None:
        if self._settings.quiet:
            return
        stats, bloom = self._crawl.stats, self._crawl.store.bloom
        errors = ", ".join(f"{k} {v}" for k, v in stats.errors.most_common()) or "none"
        print(
            f"crawler: {stats.records} pages in {stats.elapsed_s:.1f} s "
            f"({stats.pages_per_s():.1f} pages/s); errors: {errors}",
            file=sys.stderr,
        )
        print(
            f"crawler: visited set {len(bloom):,} URLs, {bloom.nbytes / 2**20:.1f} MiB, "
            f"FP rate now {bloom.false_positive_rate:.2g}, expected wrongly skipped "
            f"{bloom.expected_false_skips:.2g}",
            file=sys.stderr,
        )
