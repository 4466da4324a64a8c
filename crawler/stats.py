"""Named counters of a crawl, and the figures made from them."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, NotRequired, TypedDict

from crawler.page import Page

# Rate samples closer together than this replace each other: reading the figures
# often (an API user polling `stats`) keeps the history short and the last one current.
RATE_SAMPLE_MIN_S = 1.0


class RatePoint(TypedDict):
    t_s: float  # seconds since this run started
    records: int


class VisitedFigures(TypedDict):
    """The visited set (a Bloom filter, crawler/bloom.py)."""

    urls: int
    bytes: int
    slices: int
    capacity: int
    target_fp_rate: float
    fp_rate: float  # now: measured from the fill, or predicted from the counts if not exact
    expected_missed_urls: float  # new URLs the filter may have taken for seen ones


class CounterFigures(TypedDict):
    """What `Stats.as_dict()` gives: the crawl's counters, saved with a --state crawl."""

    records: int
    statuses: dict[str, int]  # by status code, "none" for no response
    errors: dict[str, int]  # by error kind (crawler.ErrorKind)
    bytes: int
    truncated: int
    retries: int
    sitemaps: int
    dropped: dict[str, int]  # URLs not followed, by trap rule or limit
    depth_inexact: int
    depths: dict[str, int]
    hosts_top: dict[str, int]  # the 20 hosts with most records
    host_count: int
    elapsed_s: float  # every run of the crawl, resumed ones included
    pages_per_s: float  # this run
    mean_fetch_ms: float | None
    rate_history: list[RatePoint]
    claims_per_host: NotRequired[dict[str, int]]  # with --max-pages-per-host


class CrawlStats(CounterFigures):
    """A crawl's figures, as the summary, the --stats file and `Crawler.stats` give them."""

    queued: int
    in_flight: int
    held: int  # pages waiting for shallower ones (breadth-first order)
    held_for: int  # the pages they wait for
    visited: VisitedFigures


class Stats:
    def __init__(self, restored: dict[str, Any] | None = None) -> None:
        self.started = time.monotonic()
        self.records = 0
        self.errors: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.depths: Counter[str] = Counter()
        self.hosts: Counter[str] = Counter()
        self.bytes = 0
        self.truncated = 0
        self.retries = 0
        self.sitemaps = 0  # sitemap files queued (--max-sitemaps counts them)
        self.dropped: Counter[str] = Counter()  # URLs not followed, by trap rule or limit
        # Records each host has, or will have, under --max-pages-per-host (empty without it).
        self.claims_per_host: Counter[str] = Counter()
        self.depth_inexact = 0  # links a page slower than --gate-timeout found claimed deeper
        self.fetch_ms = 0.0
        self.previous_runs_s = 0.0
        self.restored_records = 0
        self.rate_history: list[tuple[float, int]] = []  # (seconds since start, records)
        if restored:
            self._restore(restored)

    def count(self, page: Page, host: str) -> None:
        """One record was written."""
        self.records += 1
        if page.error:
            self.errors[str(page.error)] += 1  # a plain str, for any JSON encoder
        self.statuses["none" if page.status is None else str(page.status)] += 1
        self.depths[str(page.depth)] += 1
        self.hosts[host] += 1
        self.bytes += page.bytes or 0
        self.truncated += page.truncated
        self.fetch_ms += page.elapsed_ms or 0

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def pages_per_s(self) -> float:
        elapsed = self.elapsed_s
        return (self.records - self.restored_records) / elapsed if elapsed > 0 else 0.0

    def sample_rate(self) -> None:
        sample = (round(self.elapsed_s, 1), self.records)
        history = self.rate_history
        if history and sample[0] - history[-1][0] < RATE_SAMPLE_MIN_S:
            history[-1] = sample
        else:
            history.append(sample)

    def as_dict(self) -> CounterFigures:
        figures: CounterFigures = {
            "records": self.records,
            "statuses": dict(self.statuses),
            "errors": dict(self.errors),
            "bytes": self.bytes,
            "truncated": self.truncated,
            "retries": self.retries,
            "sitemaps": self.sitemaps,
            "dropped": dict(self.dropped),
            "depth_inexact": self.depth_inexact,
            "depths": dict(sorted(self.depths.items(), key=lambda kv: int(kv[0]))),
            "hosts_top": dict(self.hosts.most_common(20)),
            "host_count": len(self.hosts),
            "elapsed_s": round(self.elapsed_s + self.previous_runs_s, 3),
            "pages_per_s": round(self.pages_per_s(), 2),
            "mean_fetch_ms": round(self.fetch_ms / self.records, 1) if self.records else None,
            "rate_history": [{"t_s": t, "records": n} for t, n in self.rate_history],
        }
        if self.claims_per_host:
            figures["claims_per_host"] = dict(self.claims_per_host)
        return figures

    def _restore(self, saved: dict[str, Any]) -> None:
        self.records = self.restored_records = saved.get("records", 0)
        self.errors.update(saved.get("errors", {}))
        self.statuses.update(saved.get("statuses", {}))
        self.depths.update(saved.get("depths", {}))
        self.bytes = saved.get("bytes", 0)
        self.truncated = saved.get("truncated", 0)
        self.retries = saved.get("retries", 0)
        self.sitemaps = saved.get("sitemaps", 0)
        self.dropped.update(saved.get("dropped", {}))
        self.claims_per_host.update(saved.get("claims_per_host", {}))
        self.depth_inexact = saved.get("depth_inexact", 0)
        self.previous_runs_s = saved.get("elapsed_s", 0.0)
