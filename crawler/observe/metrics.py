"""The crawl's figures in the Prometheus text format, for /metrics.

A collector in a `CollectorRegistry` of the crawl's own (two crawls in one process
never clash) turns one `Stats.snapshot()` into metric families when scraped: the
counters are the crawl's own, not copies kept up to date page by page, so a crawl
nobody scrapes pays nothing for them. Names are in base units with the
conventional suffixes (`_total`, `_seconds`, `_bytes`, `_ratio`). With --redis,
every metric carries the process's `member` label, so that Prometheus sums them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal, get_args

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from crawler.stats import CrawlStats, RecrawlFigures

Figures = Callable[[], CrawlStats]
# A recrawl's records by outcome, each once (the summary's "checked" and "unchanged"
# are sums of these).
RecrawlOutcome = Literal[
    "unchanged_304", "unchanged_same_digest", "changed", "new", "failed", "unlinked", "not_due"
]
RECRAWL_OUTCOMES: tuple[RecrawlOutcome, ...] = get_args(RecrawlOutcome)


class CrawlCollector(Collector):
    """Metric families made from the figures `figures()` returns at each scrape."""

    def __init__(self, figures: Figures, member: str | None = None) -> None:
        self._figures = figures
        self._member = {"member": member} if member else {}

    def collect(self) -> Iterator[Metric]:
        f = self._figures()
        yield self._labelled(
            CounterMetricFamily,
            "crawler_records",
            "Records written, by HTTP status ('none': no response)",
            "status",
            f["statuses"],
        )
        yield self._labelled(
            CounterMetricFamily,
            "crawler_errors",
            "Records with an error, by kind",
            "kind",
            f["errors"],
        )
        yield self._labelled(
            CounterMetricFamily,
            "crawler_dropped_urls",
            "URLs not followed, by the trap rule or limit that dropped them",
            "rule",
            f["dropped"],
        )
        yield self._labelled(
            CounterMetricFamily, "crawler_depth_records", "Records by depth", "depth", f["depths"]
        )
        yield self._one(
            CounterMetricFamily, "crawler_body_bytes", "Response body bytes read", f["bytes"]
        )
        yield self._one(
            CounterMetricFamily,
            "crawler_truncated_records",
            "Records whose body was cut at --max-bytes, or whose compressed stream ended early",
            f["truncated"],
        )
        yield self._one(CounterMetricFamily, "crawler_retries", "Fetches tried again", f["retries"])
        yield self._one(
            GaugeMetricFamily, "crawler_frontier_urls", "URLs queued to fetch", f["queued"]
        )
        yield self._one(
            GaugeMetricFamily, "crawler_in_flight_requests", "Requests in flight", f["in_flight"]
        )
        yield self._one(
            GaugeMetricFamily,
            "crawler_held_pages",
            "Fetched pages waiting for shallower ones (breadth-first gate)",
            f["held"],
        )
        yield self._one(
            GaugeMetricFamily,
            "crawler_held_waiting_on_pages",
            "Pages, queued or in flight, that the held pages wait for",
            f["held_for"],
        )
        yield self._one(GaugeMetricFamily, "crawler_hosts", "Hosts with records", f["host_count"])
        visited = f["visited"]
        yield self._one(
            GaugeMetricFamily, "crawler_visited_urls", "URLs in the visited set", visited["urls"]
        )
        yield self._one(
            GaugeMetricFamily,
            "crawler_visited_false_positive_ratio",
            "Estimated chance that a new URL is taken for a visited one",
            visited["fp_rate"],
        )
        yield self._one(
            GaugeMetricFamily,
            "crawler_visited_bytes",
            "Memory of the visited set",
            visited["bytes"],
        )
        yield self._one(
            GaugeMetricFamily,
            "crawler_elapsed_seconds",
            "Time the crawl has run, earlier runs of a resumed crawl included",
            f["elapsed_s"],
        )
        yield self._fetch_duration(f)
        if "recrawl" in f:
            yield from self._recrawl(f["recrawl"])

    def _recrawl(self, recrawl: RecrawlFigures) -> Iterator[Metric]:
        """--since and --revisit: what became of the previous crawl's pages."""
        outcomes: dict[str, int] = {name: recrawl[name] for name in RECRAWL_OUTCOMES}
        yield self._labelled(
            CounterMetricFamily,
            "crawler_recrawl_pages",
            "Records of a recrawl by what they found: unchanged_304, unchanged_same_digest, "
            "changed, new, failed (no response), unlinked (--fetch-gone), not_due (--revisit)",
            "outcome",
            outcomes,
        )
        yield self._one(
            CounterMetricFamily,
            "crawler_recrawl_saved_body_bytes",
            "Body bytes not downloaded, the previous crawl's, for pages that answered 304",
            recrawl["body_bytes_saved"],
        )
        yield self._one(
            GaugeMetricFamily,
            "crawler_recrawl_previous_pages",
            "Pages of the previous crawl (or round)",
            recrawl["previous_pages"],
        )
        if recrawl["gone"] is not None:
            yield self._one(
                GaugeMetricFamily,
                "crawler_recrawl_gone_pages",
                "Previous pages no link reaches now, or that failed",
                recrawl["gone"],
            )

    def _fetch_duration(self, f: CrawlStats) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            "crawler_fetch_duration_seconds",
            "Time from a request's start to its page, redirects included",
            labels=list(self._member),
        )
        cumulative, buckets = 0, []
        for bound, count in f["fetch_ms_buckets"].items():
            cumulative += count
            le = "+Inf" if bound == "+Inf" else _seconds(bound)
            buckets.append((le, cumulative))
        family.add_metric(list(self._member.values()), buckets, f["fetch_ms_sum"] / 1000)
        return family

    def _one(self, kind: type[Any], name: str, documentation: str, value: float) -> Metric:
        family = kind(name, documentation, labels=list(self._member))
        family.add_metric(list(self._member.values()), value)
        return family  # type: ignore[no-any-return]

    def _labelled(
        self, kind: type[Any], name: str, documentation: str, label: str, values: dict[str, int]
    ) -> Metric:
        family = kind(name, documentation, labels=[*self._member, label])
        for key, value in values.items():
            family.add_metric([*self._member.values(), key], value)
        return family  # type: ignore[no-any-return]


def _seconds(bound_ms: str) -> str:
    return f"{int(bound_ms) / 1000:g}"


def registry_of(figures: Figures, member: str | None = None) -> CollectorRegistry:
    """A registry of the crawl's own holding its collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CrawlCollector(figures, member))
    return registry
