"""Named counters of a crawl, and the figures made from them.

`Stats.snapshot()` is the one source of every figure people see: the status line,
the summary, the --stats file, the dashboard and /metrics. Besides the counters it
reads the parts of the crawl that know the rest (the visited set, the frontier, the
host scheduler and the breadth-first gate), which the engine hands it with `watch()`.
"""

from __future__ import annotations

import heapq
import sys
import time
from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any, NotRequired, Protocol, TypedDict

from crawler.frontier import UNLINKED
from crawler.page import Page

_RECRAWL_COUNTERS = (
    "checked",
    "unchanged",
    "unchanged_304",
    "unchanged_same_digest",
    "changed",
    "new",
    "failed",
    "unlinked",
    "unlinked_404_410",
    "not_due",
    "reached_by_redirect",
    "body_bytes_saved",
)

# Rate samples closer together than this replace each other: reading the figures
# often (an API user polling `stats`) keeps the history short and the last one current.
RATE_SAMPLE_MIN_S = 1.0
# Past this many samples the older half of the history keeps every other one: the whole
# crawl's shape in a bounded list, the last samples (the dashboard's) as they were. It
# grew by one sample each write of the stats file, every 10 s, for the crawl's life, and
# each figures read (a --state checkpoint each second, the live line) copied it all.
RATE_HISTORY_POINTS = 1200
# Upper bounds of the fetch-time histogram (ms): a Prometheus histogram's `le` buckets.
LATENCY_BUCKETS_MS = (10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)
LAST_ERRORS = 20  # the most recent error records kept for the dashboard
LAST_ERROR_TITLE_CHARS = 200  # of such a record's title, as the report shows one
BUSIEST_HOSTS = 10
TOP_HOSTS = 20  # in the stats file's hosts_top
# Finding the hosts with most records reads every host's count (0.2 s at 10^6 hosts).
# Figures read often (the live line 4 times a second, the dashboard and a --state
# checkpoint each second) reuse the last answer for this many times what it cost, and
# a second at least, so that it takes at most 2% of the loop; exact figures ask anew.
TOP_HOSTS_REUSE = 50


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


class AllProcesses(TypedDict):
    """--redis: the shared crawl, over every process (read at each heartbeat)."""

    records: int  # written by every process, this one's included: what --max-pages counts
    processes: int  # live now


class RecrawlFigures(TypedDict):
    """--since: what became of the previous crawl's pages (README: Recrawling)."""

    checked: int  # pages of this crawl the previous one had
    unchanged: int
    unchanged_304: int
    unchanged_same_digest: int
    changed: int
    new: int
    failed: int  # no response now
    unlinked: int  # --fetch-gone
    unlinked_404_410: int
    not_due: int  # --revisit: carried over, not requested
    reached_by_redirect: int  # previous pages a redirect ended at (or went through)
    # previous pages not checked; None while links are left to follow (a crawl going on,
    # or stopped short), or other processes (--redis) check them too, before the end
    gone: int | None
    previous_pages: int
    body_bytes_saved: int


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
    fetch_ms_sum: float
    mean_fetch_ms: float | None
    fetch_ms_percentiles: dict[str, float | None]  # p50, p90, p99, from the histogram
    fetch_ms_buckets: dict[str, int]  # by upper bound in ms (LATENCY_BUCKETS_MS), and "+Inf"
    rate_history: list[RatePoint]
    claims_per_host: NotRequired[dict[str, int]]  # with --max-pages-per-host
    recrawl: NotRequired[RecrawlFigures]  # with --since
    all_processes: NotRequired[AllProcesses]  # with --redis


class CrawlStats(CounterFigures):
    """A crawl's figures, as the summary, the --stats file and `Crawler.stats` give them."""

    queued: int
    in_flight: int
    held: int  # pages waiting for shallower ones (breadth-first order)
    held_for: int  # the pages they wait for
    visited: VisitedFigures


class VisitedSet(Protocol):
    """The figures of the visited set (crawler.bloom.BloomFilter)."""

    def __len__(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def slice_count(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def error_rate(self) -> float: ...
    @property
    def false_positive_rate(self) -> float: ...
    @property
    def predicted_false_positive_rate(self) -> float: ...
    @property
    def expected_missed_urls(self) -> float: ...


class Queued(Protocol):
    """The frontier, as far as it is counted."""

    def __len__(self) -> int: ...
    def queued_for(self, host: str) -> int: ...


class Scheduling(Protocol):
    """The host scheduler (crawler.politeness.HostScheduler), as far as it is watched."""

    @property
    def queued(self) -> int: ...
    @property
    def in_flight(self) -> int: ...
    def host_view(self, host: str) -> dict[str, Any]: ...


class Holding(Protocol):
    """The breadth-first gate, as far as it is watched."""

    @property
    def held(self) -> int: ...
    def waiting_on(self) -> int: ...
    def slow_pages(self, limit: int) -> list[str]: ...


def checks_previous(page: Page) -> bool:
    """Whether `page` is one of the previous crawl's that a link reached: checked
    now, or carried over as not due (the rest of them are gone)."""
    if page.fields.get("not_due"):
        return True
    return page.kind != UNLINKED and page.fields.get("changed") is not None


def links_left(queued: int, in_flight: int, dropped: Mapping[str, int]) -> bool:
    """Whether links are left unfollowed, under which a previous page not reached may be:
    URLs queued or in flight (a crawl going on, or stopped by --max-pages or Ctrl-C), or
    dropped by --max-pages-per-host."""
    return bool(queued or in_flight or dropped.get("max_pages_per_host"))


def previous_reached(page: Page) -> int:
    """How many of the previous crawl's pages `page` shows are still there: itself, if
    `checks_previous`, and those its redirects reached."""
    return checks_previous(page) + page.previous_hops


class HostCounts(Protocol):
    """Records per host: in memory, or with --state in its SQLite
    (crawler/state/host_counts.py)."""

    def add(self, host: str) -> None: ...
    def most_common(self, n: int) -> list[tuple[str, int]]: ...
    def __len__(self) -> int: ...


def by_records(count: tuple[str, int]) -> tuple[int, str]:
    """The order of `most_common`: most records first, then by name, so that a crawl's
    top hosts do not depend on the order it reached them in."""
    host, records = count
    return -records, host


class Claims(Protocol):
    """--max-pages-per-host's records per host, had or to come: in memory, or with
    --state in its SQLite (crawler/state/host_counts.py)."""

    def __getitem__(self, host: str) -> int: ...
    def add(self, host: str) -> None: ...
    def figures(self) -> dict[str, int]:
        """Every host's (the summary, the stats file's last write)."""


class MemoryClaims(Counter[str]):
    def add(self, host: str) -> None:
        self[host] += 1

    def figures(self) -> dict[str, int]:
        return dict(self)


class MemoryHostCounts(Counter[str]):
    def add(self, host: str) -> None:
        self[sys.intern(host)] += 1  # the frontier's string for it, while it has work

    def most_common(self, n: int | None = None) -> list[tuple[str, int]]:
        return heapq.nsmallest(len(self) if n is None else n, self.items(), key=by_records)


class Stats:
    def __init__(self, restored: dict[str, Any] | None = None) -> None:
        self.started = time.monotonic()
        self.records = 0
        self.errors: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.depths: Counter[str] = Counter()
        self.hosts: HostCounts = MemoryHostCounts()
        self.bytes = 0
        self.truncated = 0
        self.retries = 0
        self.sitemaps = 0  # sitemap files queued (--max-sitemaps counts them)
        self.dropped: Counter[str] = Counter()  # URLs not followed, by trap rule or limit
        # Records each host has, or will have, under --max-pages-per-host (empty without it).
        self.claims_per_host: Claims = MemoryClaims()
        self.depth_inexact = 0  # links a page gone past (slow, or the hold full) claimed deeper
        self.fetch_ms = 0.0
        self.previous_runs_s = 0.0
        self.restored_records = 0
        self.rate_history: list[tuple[float, int]] = []  # (seconds since start, records)
        # Fetch times by LATENCY_BUCKETS_MS bucket; the last one is above them all.
        self.latency_counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.last_errors: deque[dict[str, Any]] = deque(maxlen=LAST_ERRORS)
        self.member: str | None = None  # this process's id in a crawl shared by --redis
        self.all_processes: AllProcesses | None = None  # and that crawl's figures
        self._visited: VisitedSet | None = None
        self._frontier: Queued | None = None
        self._scheduler: Scheduling | None = None
        self._gate: Holding | None = None
        self.previous_pages = 0  # --since: the previous crawl's pages
        self.shared = False  # other processes check the previous crawl's pages too
        self.previous_seen_everywhere: int | None = None  # by them all, once the crawl is over
        self.recrawl: Counter[str] = Counter()  # --since: what became of them
        self._top_hosts: list[tuple[str, int]] | None = None
        self._top_hosts_at = 0.0
        self._top_hosts_for_s = 0.0  # how long they are reused
        if restored:
            self._restore(restored)

    def count(self, page: Page, host: str) -> None:
        """One record was written."""
        self.records += 1
        if page.error:
            self.errors[str(page.error)] += 1  # a plain str, for any JSON encoder
            self.last_errors.append(
                {
                    "at": page.fetched_at,
                    "url": page.url,
                    # a page read whole, or as far as it came, has one (html_too_complex)
                    "title": page.title and page.title[:LAST_ERROR_TITLE_CHARS],
                    "error": str(page.error),
                    "status": page.status,
                }
            )
        self.statuses["none" if page.status is None else str(page.status)] += 1
        self.depths[str(page.depth)] += 1
        self.hosts.add(host)
        self.truncated += page.truncated
        if page.elapsed_ms is not None:
            self.fetch_ms += page.elapsed_ms
            self.latency_counts[bisect_left(LATENCY_BUCKETS_MS, page.elapsed_ms)] += 1
        if page.fields and ("changed" in page.fields or "not_due" in page.fields):
            self._count_recrawled(page)
        else:
            self.bytes += page.bytes or 0

    def _count_recrawled(self, page: Page) -> None:
        """A page of a recrawl: a 304's bytes are those it saved, not fetched."""
        recrawl = self.recrawl
        recrawl["reached_by_redirect"] += page.previous_hops
        if page.fields.get("not_due"):  # --revisit: carried over, not requested
            recrawl["not_due"] += 1
            return
        changed = page.fields["changed"]
        not_modified = page.status == 304 and changed is False
        if not_modified:
            recrawl["body_bytes_saved"] += page.bytes or 0
        else:
            self.bytes += page.bytes or 0
        if page.kind == UNLINKED:  # --fetch-gone: gone from the link graph, and from the site?
            recrawl["unlinked"] += 1
            recrawl["unlinked_404_410"] += page.status in (404, 410)
        elif changed is None:  # a URL the previous crawl did not have, or no answer now
            recrawl["new" if page.status is not None else "failed"] += 1
        else:
            recrawl["checked"] += 1
            recrawl["changed" if changed else "unchanged"] += 1
            if changed is False:
                recrawl["unchanged_304" if not_modified else "unchanged_same_digest"] += 1

    def watch(
        self, visited: VisitedSet, frontier: Queued, scheduler: Scheduling, gate: Holding
    ) -> None:
        """The parts of the crawl whose figures are part of every snapshot."""
        self._visited, self._frontier = visited, frontier
        self._scheduler, self._gate = scheduler, gate

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
            if len(history) > RATE_HISTORY_POINTS:
                del history[1 : len(history) // 2 : 2]  # the first sample stays

    def latency_percentile_ms(self, fraction: float) -> float | None:
        """The fetch time under which `fraction` of fetches took, interpolated within its
        bucket as Prometheus's histogram_quantile() does (None: no fetch yet; the last
        bound if it lies above it)."""
        total = sum(self.latency_counts)
        if not total:
            return None
        rank, seen, lower = fraction * total, 0, 0.0
        for bound, count in zip(LATENCY_BUCKETS_MS, self.latency_counts, strict=False):
            if count and seen + count >= rank:
                return round(lower + (bound - lower) * (rank - seen) / count, 1)
            seen, lower = seen + count, bound
        return float(LATENCY_BUCKETS_MS[-1])

    def snapshot(self, exact: bool = False, per_host: bool | None = None) -> CrawlStats:
        """The crawl's figures now. `exact` measures the visited set's fill (slower)
        and samples the rate for the history; `per_host` (by default as `exact`) gives
        the claims of every host."""
        visited, scheduler, gate = self._visited, self._scheduler, self._gate
        assert visited is not None and scheduler is not None and gate is not None, "not watched"
        if exact:
            self.sample_rate()
        return CrawlStats(
            **self.as_dict(exact, per_host=exact if per_host is None else per_host),
            queued=scheduler.queued,
            in_flight=scheduler.in_flight,
            held=gate.held,
            held_for=gate.waiting_on(),
            visited={
                "urls": len(visited),
                "bytes": visited.nbytes,
                "slices": visited.slice_count,
                "capacity": visited.capacity,
                "target_fp_rate": visited.error_rate,
                "fp_rate": visited.false_positive_rate
                if exact
                else visited.predicted_false_positive_rate,
                "expected_missed_urls": visited.expected_missed_urls,
            },
        )

    def top_hosts(self, fresh: bool = False) -> list[tuple[str, int]]:
        """The TOP_HOSTS hosts with the most records: found anew if `fresh`, else
        perhaps as they were a moment ago (TOP_HOSTS_REUSE)."""
        started = time.monotonic()
        top = self._top_hosts
        if top is None or fresh or started - self._top_hosts_at >= self._top_hosts_for_s:
            top = self._top_hosts = self.hosts.most_common(TOP_HOSTS)
            self._top_hosts_at = time.monotonic()
            self._top_hosts_for_s = max(1.0, TOP_HOSTS_REUSE * (self._top_hosts_at - started))
        return top

    def busiest_hosts(self, n: int = BUSIEST_HOSTS) -> list[dict[str, Any]]:
        """The `n` (at most TOP_HOSTS) hosts with the most records, each with its queue,
        requests in flight, delay or backoff and robots.txt state."""
        hosts = []
        for host, records in self.top_hosts()[:n]:
            view: dict[str, Any] = {"host": host, "records": records}
            if self._frontier is not None:
                view["queued"] = self._frontier.queued_for(host)
            if self._scheduler is not None:
                view |= self._scheduler.host_view(host)
            hosts.append(view)
        return hosts

    def slow_pages(self, limit: int = BUSIEST_HOSTS) -> list[str]:
        """URLs of the started pages that held pages wait for."""
        return self._gate.slow_pages(limit) if self._gate is not None else []

    def as_dict(self, exact: bool = False, per_host: bool = True) -> CounterFigures:
        """The counters; `exact`: the top hosts found anew (see `top_hosts`); `per_host`:
        with --max-pages-per-host's claims of every host, which the summary and the
        stats file's last write keep (with --state, read from its claims table), and the
        figures read often (the live line, the dashboard, the stats file every 10 s)
        leave out: at 10^6 hosts a copy took 55 ms, 27 MB of JSON."""
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
            "hosts_top": dict(self.top_hosts(exact)),
            "host_count": len(self.hosts),
            "elapsed_s": round(self.elapsed_s + self.previous_runs_s, 3),
            "pages_per_s": round(self.pages_per_s(), 2),
            "fetch_ms_sum": round(self.fetch_ms, 1),
            "fetch_ms_percentiles": {
                f"p{round(q * 100)}": self.latency_percentile_ms(q) for q in (0.5, 0.9, 0.99)
            },
            "fetch_ms_buckets": dict(
                zip([*map(str, LATENCY_BUCKETS_MS), "+Inf"], self.latency_counts, strict=True)
            ),
            "mean_fetch_ms": round(self.fetch_ms / self.records, 1) if self.records else None,
            "rate_history": [{"t_s": t, "records": n} for t, n in self.rate_history],
        }
        if per_host and (claims := self.claims_per_host.figures()):
            figures["claims_per_host"] = claims
        if self.previous_pages or self.recrawl:
            figures["recrawl"] = self.recrawl_figures()
        if self.all_processes is not None:
            figures["all_processes"] = self.all_processes
        return figures

    def recrawl_figures(self) -> RecrawlFigures:
        """--since: the previous crawl's pages checked, unchanged (304 or same digest),
        changed, gone from the link graph (not reached, or failed), and the new ones."""
        recrawl = self.recrawl
        seen: int | None = recrawl["checked"] + recrawl["not_due"] + recrawl["reached_by_redirect"]
        if self.shared:
            seen = self.previous_seen_everywhere
        elif (scheduler := self._scheduler) is not None and links_left(
            scheduler.queued, scheduler.in_flight, self.dropped
        ):
            seen = None
        previous = self.previous_pages
        return {
            "checked": recrawl["checked"],
            "unchanged": recrawl["unchanged"],
            "unchanged_304": recrawl["unchanged_304"],
            "unchanged_same_digest": recrawl["unchanged_same_digest"],
            "changed": recrawl["changed"],
            "new": recrawl["new"],
            "failed": recrawl["failed"],
            "unlinked": recrawl["unlinked"],
            "unlinked_404_410": recrawl["unlinked_404_410"],
            "not_due": recrawl["not_due"],
            "reached_by_redirect": recrawl["reached_by_redirect"],
            "gone": None if seen is None else max(0, previous - seen),
            "previous_pages": self.previous_pages,
            "body_bytes_saved": recrawl["body_bytes_saved"],
        }

    def unrecorded(self) -> dict[str, Any]:
        """The counters no record holds, which a --state crawl commits with each page."""
        return {"retries": self.retries, "dropped": self.dropped}

    def restore_unrecorded(self, saved: dict[str, Any]) -> None:
        """`unrecorded()` as the last commit saved it, where it is ahead of the figures
        of the last checkpoint."""
        self.retries = max(self.retries, saved.get("retries", 0))
        for rule, count in saved.get("dropped", {}).items():
            self.dropped[rule] = max(self.dropped[rule], count)

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
        self.claims_per_host = MemoryClaims(saved.get("claims_per_host", {}))
        self.depth_inexact = saved.get("depth_inexact", 0)
        self.fetch_ms = saved.get("fetch_ms_sum", 0.0)
        buckets = saved.get("fetch_ms_buckets", {})
        keys = [*map(str, LATENCY_BUCKETS_MS), "+Inf"]
        self.latency_counts = [buckets.get(key, 0) for key in keys]
        saved_recrawl = saved.get("recrawl", {})
        self.previous_pages = saved_recrawl.get("previous_pages", 0)
        self.recrawl.update(
            {name: saved_recrawl[name] for name in _RECRAWL_COUNTERS if name in saved_recrawl}
        )
        self.previous_runs_s = saved.get("elapsed_s", 0.0)
