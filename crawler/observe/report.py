"""`python -m crawler report pages.jsonl [--stats FILE] -o report.html`: one HTML file.

The report is a single file that opens offline: its style, its chart-drawing
script (static/charts.js, the dashboard's) and its data are inside it. Its charts
are drawn by that script as the page loads; its tables are plain HTML.

The records are streamed, twice at most, and never held: the first pass counts
and keeps what is bounded (the slowest and largest pages, up to MAX_BROKEN broken
URLs and MAX_REDIRECTS redirects, a count per second of the crawl, per host,
language and, up to MAX_CONTENT_TYPES, content type) and finds content digests
seen before with a Bloom filter (about 2.4 bytes a record); the second pass, only
if there are broken links or repeated digests, finds the pages that link to each
broken URL and the URLs of up to MAX_DUPLICATE_GROUPS repeated digests.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import html
import os
import sys
import zlib
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from crawler.bloom import BloomFilter
from crawler.config import (
    STDOUT,
    ConfigError,
    OneLineParser,
    mistyped_field,
    print_error,
    print_stderr,
    silence,
)
from crawler.files import check_writable, same_file, write_whole
from crawler.observe.display import display_host, display_url
from crawler.stats import LATENCY_BUCKETS_MS

STATIC = Path(__file__).parent / "static"
TOP = 50  # rows in the slowest, largest and duplicate tables
HOSTS_CHARTED = 15
MAX_BROKEN = 2000  # broken URLs whose referrers are looked for; more are counted
MAX_REFERRERS = 10  # linking pages listed per broken URL
MAX_DUPLICATE_URLS = 10  # URLs listed per repeated digest
MAX_DUPLICATE_GROUPS = 20_000  # repeated digests whose URLs are looked for
MAX_REDIRECTS = 500
MAX_TITLE_SHOWN = 200  # characters of a page's title under its link
MAX_CONTENT_TYPES = 1000  # counted apart; the others together
OTHER_CONTENT_TYPES = "(other types)"
SIZE_BUCKETS = (1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)
TIME_POINTS = 240  # pages over time: at most this many points
DIGEST_FP_RATE = 1e-4  # of the Bloom filter that finds repeated digests


@dataclass
class Broken:
    status: int
    error: str | None
    referrer: str | None  # the page the crawl found it on
    title: str | None  # an error page's own, as "404 Not Found"
    linked_from: list[str] = field(default_factory=list)
    links: int = 0  # links to it, from every page


@dataclass
class Figures:
    """What the records say, counted in one pass."""

    records: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    depths: Counter[int] = field(default_factory=Counter)
    content_types: Counter[str] = field(default_factory=Counter)
    hosts: Counter[str] = field(default_factory=Counter)
    languages: Counter[str] = field(default_factory=Counter)
    per_second: Counter[str] = field(default_factory=Counter)  # "YYYY-MM-DDTHH:MM:SS" -> records
    latency: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))
    sizes: list[int] = field(default_factory=lambda: [0] * (len(SIZE_BUCKETS) + 1))
    bytes: int = 0
    # heaps of TOP: (figure, record number, URL, title); the number breaks ties
    slowest: list[tuple[float, int, str, str | None]] = field(default_factory=list)
    largest: list[tuple[int, int, str, str | None]] = field(default_factory=list)
    broken: dict[str, Broken] = field(default_factory=dict)
    broken_count: int = 0
    # (URL, where it ended, status, the title of the page there)
    redirects: list[tuple[str, str, int | None, str | None]] = field(default_factory=list)
    redirect_count: int = 0
    repeated_digests: set[str] = field(default_factory=set)
    repeats: int = 0  # pages whose body an earlier page had (up to the filter's errors)
    duplicates: dict[str, list[str]] = field(default_factory=dict)  # digest -> URLs
    duplicate_titles: dict[str, str] = field(default_factory=dict)  # digest -> a page's
    duplicate_counts: Counter[str] = field(default_factory=Counter)
    recrawl: Counter[str] = field(default_factory=Counter)  # --since, --revisit: "changed"...
    bad_lines: int = 0

    def count(self, record: dict[str, Any], seen_digests: BloomFilter) -> None:
        self.records += 1
        n = self.records
        url = record.get("url") or ""
        title = record.get("title")
        status = record.get("status")
        self.statuses["none" if status is None else str(status)] += 1
        error = record.get("error")
        if error:
            self.errors[error] += 1
        self.depths[record.get("depth") or 0] += 1
        content_type = record.get("content_type")
        if content_type:
            kind = content_type.partition(";")[0].strip().lower()
            if kind not in self.content_types and len(self.content_types) >= MAX_CONTENT_TYPES:
                kind = OTHER_CONTENT_TYPES  # a server that makes up a type a page
            self.content_types[kind] += 1
        self.hosts[_host(url)] += 1
        language = record.get("lang")
        if language:
            self.languages[language] += 1
        if "changed" in record or record.get("not_due"):
            self._count_recrawled(record)
        fetched_at = record.get("fetched_at")
        if fetched_at and not record.get("not_due"):  # a page not due was fetched rounds ago
            self.per_second[fetched_at[:19]] += 1
        elapsed_ms = record.get("elapsed_ms")
        if elapsed_ms is not None:
            self.latency[bisect_left(LATENCY_BUCKETS_MS, elapsed_ms)] += 1
            _keep_top(self.slowest, (elapsed_ms, n, url, title))
        size = record.get("bytes")
        if size is not None:
            if not _carried(record):
                self.bytes += size
            self.sizes[bisect_left(SIZE_BUCKETS, size)] += 1
            _keep_top(self.largest, (size, n, url, title))
        if status is not None and status >= 400:
            self.broken_count += 1
            if len(self.broken) < MAX_BROKEN:
                self.broken[url] = Broken(status, error, record.get("referrer"), title)
        final_url = record.get("final_url")
        redirect_status = status is not None and 300 <= status < 400 and status != 304
        if (final_url and final_url != url) or redirect_status:
            self.redirect_count += 1
            if len(self.redirects) < MAX_REDIRECTS:
                self.redirects.append((url, final_url or "", status, title))
        digest = _content_digest(record)
        if digest and not seen_digests.add(digest):
            self.repeats += 1
            if len(self.repeated_digests) < MAX_DUPLICATE_GROUPS:
                self.repeated_digests.add(digest)

    def _count_recrawled(self, record: dict[str, Any]) -> None:
        """A record of a recrawl, counted as its summary counts it (crawler/stats.py)."""
        recrawl = self.recrawl
        changed = record.get("changed")
        if record.get("not_due"):
            recrawl["not_due"] += 1
        elif changed is None:  # not in the previous crawl, or no answer now
            recrawl["new"] += record.get("status") is not None
        elif changed:
            recrawl["changed"] += 1
        else:
            recrawl["unchanged"] += 1
            if record.get("status") == 304:
                recrawl["unchanged_304"] += 1
                recrawl["body_bytes_saved"] += record.get("bytes") or 0

    def link(self, record: dict[str, Any]) -> None:
        """Second pass: the page's links to broken URLs, and its digest if repeated."""
        url = record.get("url") or ""
        if self.broken:
            for link in record.get("links") or ():
                broken = self.broken.get(link)
                if broken is not None:
                    broken.links += 1
                    if len(broken.linked_from) < MAX_REFERRERS and url not in broken.linked_from:
                        broken.linked_from.append(url)
        digest = _content_digest(record)
        if digest in self.repeated_digests:
            self.duplicate_counts[digest] += 1
            urls = self.duplicates.setdefault(digest, [])
            if len(urls) < MAX_DUPLICATE_URLS:
                urls.append(url)
            title = record.get("title")
            if title and digest not in self.duplicate_titles:
                self.duplicate_titles[digest] = title


def _content_digest(record: dict[str, Any]) -> str | None:
    """The digest of a page's content: of 2xx responses with a body (a redirect's empty
    body is no content)."""
    status = record.get("status")
    if status is None or not 200 <= status < 300 or not record.get("bytes"):
        return None
    digest: str | None = record.get("content_digest")
    return digest


def _carried(record: dict[str, Any]) -> bool:
    """Whether the record's body was not downloaded: a 304's, or a page not due's, are
    the previous crawl's."""
    return bool(record.get("not_due")) or (
        record.get("status") == 304 and record.get("changed") is False
    )


def _keep_top(heap: list[Any], item: tuple[Any, ...]) -> None:
    if len(heap) < TOP:
        heapq.heappush(heap, item)
    elif item > heap[0]:
        heapq.heapreplace(heap, item)


def _host(url: str) -> str:
    return url.partition("://")[2].partition("/")[0]


def read_records(path: str, figures: Figures) -> Iterator[dict[str, Any]]:
    """The records of a JSONL file, one at a time; lines that are not JSON objects are
    counted in `figures.bad_lines` (a crawl cut short may leave half a line)."""
    times: set[str] = set()  # the fetched_at seconds read: one a second of the crawl
    for line in _lines(path):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            figures.bad_lines += line.strip() != b""
            continue
        if _is_record(record, times):
            yield record
        else:
            figures.bad_lines += 1


def _lines(path: str) -> Iterator[bytes]:
    """The file's lines; gzip-compressed, as many keep old crawls' records (and as
    --since reads them), uncompressed as read."""
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            f.seek(0)
            yield from f
            return
        f.seek(0)
        try:
            with gzip.open(f) as lines:
                yield from lines
        except EOFError:
            raise ConfigError(f"{path} is cut short: its gzip stream ends early") from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise ConfigError(f"{path} begins as gzip but is not gzip data ({exc})") from None


Number = (int, float)
# The fields the report reads, with the types a crawl writes them in (each may be null).
RECORD_FIELDS: dict[str, type | tuple[type, ...]] = {
    "url": str,
    "title": str,
    "final_url": str,
    "status": int,
    "depth": int,
    "referrer": str,
    "fetched_at": str,
    "elapsed_ms": Number,
    "content_type": str,
    "bytes": int,
    "content_digest": str,
    "error": str,
    "lang": str,
    "links": list,
    "changed": bool,
    "not_due": bool,
}
# The same for the --stats file (a dict's values, for "dropped" and "visited").
STATS_FIELDS: dict[str, type | tuple[type, ...]] = {
    "records": int,
    "elapsed_s": Number,
    "pages_per_s": Number,
    "retries": int,
    "dropped": dict,
    "visited": dict,
    "recrawl": dict,
}


def _mistyped_stats_field(stats: dict[str, Any]) -> str | None:
    wrong = mistyped_field(stats, STATS_FIELDS)
    if wrong is None and not all(map(_is_count, (stats.get("dropped") or {}).values())):
        wrong = "dropped"
    if wrong is None and not _is_count((stats.get("visited") or {}).get("urls", 0)):
        wrong = "visited"
    gone = (stats.get("recrawl") or {}).get("gone")
    if wrong is None and gone is not None and not _is_count(gone):
        wrong = "recrawl"
    return wrong


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_record(record: Any, times: set[str]) -> bool:
    """A JSON object with the types a crawl's record has where the report reads it
    (`times`: the fetched_at seconds known good)."""
    return (
        isinstance(record, dict)
        and mistyped_field(record, RECORD_FIELDS) is None
        and all(isinstance(link, str) for link in record.get("links") or ())
        and _is_time(record.get("fetched_at"), times)
    )


def _is_time(fetched_at: str | None, times: set[str]) -> bool:
    """Whether a record's fetched_at (if any) is a time the chart of pages over time
    can place: an ISO 8601 date and time, as a crawl writes it. Its second is read
    once, and added to `times`."""
    if not fetched_at or (second := fetched_at[:19]) in times:
        return True
    try:
        datetime.fromisoformat(second)
    except ValueError:
        return False
    times.add(second)
    return True


def analyse(path: str) -> Figures:
    """Everything the report shows, from the records at `path`, in bounded memory."""
    figures = Figures()
    seen_digests = BloomFilter(1_000_000, DIGEST_FP_RATE)  # grows with the crawl
    for record in read_records(path, figures):
        figures.count(record, seen_digests)
    if figures.broken or figures.repeated_digests:
        bad_lines = figures.bad_lines
        for record in read_records(path, figures):
            figures.link(record)
        figures.bad_lines = bad_lines
    return figures


def _pages_over_time(per_second: Counter[str]) -> list[list[float]]:
    """(seconds since the first record, records per second) in at most TIME_POINTS steps."""
    if not per_second:
        return []
    times = sorted((_seconds(stamp), n) for stamp, n in per_second.items())
    start, end = times[0][0], times[-1][0]
    step = max(1.0, (end - start + 1) / TIME_POINTS)
    buckets: Counter[int] = Counter()
    for t, n in times:
        buckets[int((t - start) / step)] += n
    points = [[round(i * step, 1), round(buckets[i] / step, 2)] for i in range(max(buckets) + 1)]
    if len(points) == 1:  # a crawl within one second: its rate over that second
        points.append([step, points[0][1]])
    return points


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _chart_data(figures: Figures) -> dict[str, Any]:
    latency_labels = [f"≤{ms}" for ms in LATENCY_BUCKETS_MS] + ["more"]
    size_labels = [f"≤{_size(b)}" for b in SIZE_BUCKETS] + ["more"]
    return {
        "time": _pages_over_time(figures.per_second),
        "statuses": _labelled(figures.statuses, lambda s: "no response" if s == "none" else s),
        "depths": [[str(d), n] for d, n in sorted(figures.depths.items())],
        "content_types": figures.content_types.most_common(15),
        "hosts": [[display_host(h), n] for h, n in figures.hosts.most_common(HOSTS_CHARTED)],
        "errors": figures.errors.most_common(15),
        "latency": list(zip(latency_labels, figures.latency, strict=True)),
        "sizes": list(zip(size_labels, figures.sizes, strict=True)),
        "languages": figures.languages.most_common(15),
    }


def _labelled(counts: Counter[str], label: Any) -> list[list[Any]]:
    return [[label(key), n] for key, n in counts.most_common()]


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" or n == int(n) else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"


def _records(count: int) -> str:
    return f"{count:,} record{'' if count == 1 else 's'}"


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _link(url: str, title: str | None = None) -> str:
    """A link to `url`, its host shown as browsers show it, and the page's title under it."""
    return f'<a href="{_e(url)}" rel="noreferrer">{_e(display_url(url))}</a>{_title(title)}'


def _title(title: str | None) -> str:
    """A page's title, as a line under what names the page; '' for none."""
    if not title or not title.strip():
        return ""
    shown = title if len(title) <= MAX_TITLE_SHOWN else title[: MAX_TITLE_SHOWN - 1] + "…"
    return f'<div class="title">{_e(shown)}</div>'


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], table_id: str) -> str:
    """An HTML table; cells are given as HTML. A header ending in '#' is a number column."""
    head = "".join(
        f'<th class="n">{h[:-1]}</th>' if h.endswith("#") else f"<th>{h}</th>" for h in headers
    )
    numeric = [h.endswith("#") for h in headers]
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"n" if numeric[i] else "url"}">{cell}</td>' for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    if not rows:
        body = f'<tr><td colspan="{len(headers)}" class="muted">none</td></tr>'
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _section(title: str, content: str, note: str = "", wide: bool = True) -> str:
    note_html = f'<p class="muted">{_e(note)}</p>' if note else ""
    width = "wide" if wide else ""
    return f'<section class="{width}"><h2>{_e(title)}</h2>{content}{note_html}</section>'


def _tile(name: str, value: str, label: str, bad: bool = False) -> str:
    return (
        f'<div class="tile{" bad" if bad else ""}"><div class="value" data-figure="{name}">'
        f'{_e(value)}</div><div class="label">{_e(label)}</div></div>'
    )


def _tiles(figures: Figures, stats: dict[str, Any] | None) -> str:
    tiles = [
        _tile("records", f"{figures.records:,}", "records"),
        _tile("errors", f"{sum(figures.errors.values()):,}", "errors", bad=True),
        _tile("broken", f"{figures.broken_count:,}", "4xx and 5xx", bad=True),
        _tile("redirects", f"{figures.redirect_count:,}", "redirected"),
        _tile("hosts", f"{len(figures.hosts):,}", "hosts"),
        _tile("bytes", _size(figures.bytes), "body bytes downloaded"),
    ]
    if figures.recrawl:
        recrawl = figures.recrawl
        tiles += [
            _tile("changed", f"{recrawl['changed']:,}", "changed"),
            _tile(
                "unchanged",
                f"{recrawl['unchanged']:,}",
                f"unchanged ({recrawl['unchanged_304']:,} answered 304)",
            ),
            _tile("new", f"{recrawl['new']:,}", "new"),
            _tile("saved", _size(recrawl["body_bytes_saved"]), "body bytes saved by 304s"),
        ]
        if recrawl["not_due"]:
            tiles.append(_tile("not_due", f"{recrawl['not_due']:,}", "not due (not requested)"))
    if stats:
        visited = stats.get("visited", {})
        tiles += [
            _tile("elapsed", f"{stats.get('elapsed_s', 0):,.1f} s", "crawl time (stats file)"),
            _tile("rate", f"{stats.get('pages_per_s', 0):,.1f}", "pages/s (stats file)"),
            _tile("retries", f"{stats.get('retries', 0):,}", "retries (stats file)"),
            _tile(
                "dropped",
                f"{sum(stats.get('dropped', {}).values()):,}",
                "URLs dropped (stats file)",
            ),
            _tile("visited", f"{visited.get('urls', 0):,}", "visited URLs (stats file)"),
        ]
        gone = (stats.get("recrawl") or {}).get("gone")
        if gone is not None:  # pages no record shows: the previous crawl's, not reached
            tiles.append(_tile("gone", f"{gone:,}", "gone from the previous crawl (stats file)"))
    return f'<section class="wide"><div class="tiles">{"".join(tiles)}</div></section>'


def _chart(chart_id: str, title: str, kind: str, wide: bool = False) -> str:
    return _section(
        title, f'<div class="chart-box" id="chart-{chart_id}" data-kind="{kind}"></div>', wide=wide
    )


def render(figures: Figures, source: str, stats: dict[str, Any] | None) -> str:
    """The report as one HTML document."""
    charts = [
        _chart("time", "Pages per second, by time since the first record", "line", wide=True),
        _chart("statuses", "Records by HTTP status", "bars"),
        _chart("depths", "Records by depth (links from a seed)", "histogram"),
        _chart("content_types", "Records by content type", "bars"),
        _chart("hosts", f"Records per host (the {HOSTS_CHARTED} with the most)", "bars"),
        _chart("errors", "Errors by kind", "bars"),
        _chart("latency", "Records by fetch time (ms)", "histogram"),
        _chart("sizes", "Records by body size", "histogram"),
    ]
    if figures.languages:
        charts.append(_chart("languages", "Pages by language", "bars"))
    broken_rows = [
        [
            _link(url, b.title),
            _e(b.status),
            f"{b.links:,}",
            '<ul class="refs">'
            + "".join(f"<li>{_link(u)}</li>" for u in (b.linked_from or [b.referrer or ""]))
            + "</ul>",
        ]
        for url, b in sorted(figures.broken.items(), key=lambda kv: (-kv[1].links, kv[0]))
    ]
    broken_note = (
        f"{figures.broken_count - len(figures.broken):,} more not listed."
        if figures.broken_count > len(figures.broken)
        else ""
    )
    redirect_rows = [
        [_link(a), _link(b, title) if b else "", _e(s)] for a, b, s, title in figures.redirects
    ]
    redirect_note = (
        "Where each redirected URL ended; the hops between are in the WARC archive (--warc)."
        + (
            f" {figures.redirect_count - len(figures.redirects):,} more not listed."
            if figures.redirect_count > len(figures.redirects)
            else ""
        )
    )
    slowest = [[_link(u, t), f"{ms:,.0f}"] for ms, _, u, t in sorted(figures.slowest, reverse=True)]
    largest = [[_link(u, t), _size(n)] for n, _, u, t in sorted(figures.largest, reverse=True)]
    groups = sorted(((n, d) for d, n in figures.duplicate_counts.items() if n > 1), reverse=True)
    duplicate_rows = [
        [
            _e(digest) + _title(figures.duplicate_titles.get(digest)),
            f"{n:,}",
            '<ul class="refs">'
            + "".join(f"<li>{_link(u)}</li>" for u in figures.duplicates[digest])
            + "</ul>",
        ]
        for n, digest in groups[:TOP]
    ]
    tables = [
        _section(
            "Broken links",
            _table(["URL", "status#", "links to it#", "linked from"], broken_rows, "broken"),
            broken_note,
        ),
        _section(
            "Redirects",
            _table(["URL", "ended at", "status#"], redirect_rows, "redirects"),
            redirect_note,
        ),
        _section("Slowest pages", _table(["URL", "ms#"], slowest, "slowest"), wide=False),
        _section("Largest pages", _table(["URL", "size#"], largest, "largest"), wide=False),
        _section(
            "Duplicate content",
            _table(["content digest", "pages#", "URLs"], duplicate_rows, "duplicates"),
            f"{figures.repeats:,} pages repeat the body of another (2xx responses with the "
            f"same content digest); the largest groups of the first {MAX_DUPLICATE_GROUPS:,}."
            if groups
            else "",
        ),
    ]
    if figures.languages:
        languages = [[_e(lang), f"{n:,}"] for lang, n in figures.languages.most_common()]
        tables.append(
            _section(
                "Languages", _table(["language", "pages#"], languages, "languages"), wide=False
            )
        )
    notes = []
    if figures.bad_lines:
        notes.append(f"{figures.bad_lines:,} lines that are not JSON records were skipped.")
    if stats and stats.get("records") not in (None, figures.records):
        notes.append(
            f"The stats file counts {_records(stats['records'])}; the file has {figures.records:,}."
        )
    # Every '<' escaped, not only '</': a server's header holding '<!--<script>' put the
    # HTML parser in a state where the block's '</script>' closed nothing
    data = orjson.dumps(_chart_data(figures)).decode().replace("<", "\\u003c")
    style = (STATIC / "observe.css").read_text("utf-8")
    script = (STATIC / "charts.js").read_text("utf-8") + (STATIC / "report.js").read_text("utf-8")
    script = script.replace("</", "<\\/")
    title = f"{_e(source)}, {_records(figures.records)}"
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>crawl report: {_e(os.path.basename(source))}</title>
<link rel="icon" href="data:,">
<style>{style}</style>
</head>
<body>
<header><h1>crawl report</h1><span class="note">{title}</span></header>
<main>
{_tiles(figures, stats)}
{"".join(charts)}
{"".join(tables)}
</main>
<footer>{" ".join(_e(n) for n in notes)} Made by <code>python -m crawler report</code>.</footer>
<script type="application/json" id="report-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = OneLineParser(
        prog="crawler report",
        description="Turn a crawl's JSON lines (and its --stats file) into one HTML report.",
    )
    parser.add_argument(
        "records", metavar="PAGES.jsonl", help="the crawl's records (-o), or them gzip-compressed"
    )
    parser.add_argument("--stats", metavar="FILE", help="the crawl's --stats file")
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default="report.html",
        help="default report.html; - for stdout",
    )
    return parser.parse_all(argv)


def _read_stats(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            stats = orjson.loads(f.read())
    except OSError as exc:
        raise ConfigError(f"cannot read --stats {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError:
        raise ConfigError(f"--stats {path} is not a stats file (not JSON)") from None
    if not isinstance(stats, dict) or "records" not in stats:
        raise ConfigError(f"--stats {path} is not a stats file (no records count)")
    wrong = _mistyped_stats_field(stats)
    if wrong is not None:
        raise ConfigError(f"--stats {path} is not a stats file (its {wrong} is not a crawl's)")
    return stats


def main(argv: Sequence[str]) -> int:
    """The report subcommand; its exit code."""
    try:
        arguments = _arguments(argv)
        _check_paths(arguments)
        stats = _read_stats(arguments.stats) if arguments.stats else None
        figures = analyse(arguments.records)
        if not figures.records and figures.bad_lines:
            raise ConfigError(
                f"{arguments.records} is not a crawl's JSONL output: "
                f"none of its {figures.bad_lines:,} lines is a JSON record"
            )
        report = render(figures, arguments.records, stats).encode("utf-8")
        if arguments.output == STDOUT:  # as the crawl's -o -, not a file named "-"
            sys.stdout.buffer.write(report)
            sys.stdout.buffer.flush()
        else:
            write_whole(arguments.output, report)
    except ConfigError as exc:
        print_error(str(exc))
        return 2
    except BrokenPipeError:  # -o /dev/stdout, and its reader stopped reading (`| head`)
        silence(sys.stderr)
        return 0
    except OSError as exc:
        verb = "write" if exc.filename == arguments.output else "read"
        print_error(f"cannot {verb} {exc.filename}: {exc.strerror}")
        return 2
    where = "on stdout" if arguments.output == STDOUT else f"in {arguments.output}"
    print_stderr(f"crawler: report of {_records(figures.records)} {where}")
    return 0


def _instead(directory: str) -> str:
    """What to give in place of a crawl's `directory`, if it is one: a --revisit crawl's
    rounds, or a --state directory's output."""
    from crawler.revisit import round_output, rounds_in
    from crawler.state.disk import DATABASE

    rounds = rounds_in(Path(directory))
    if rounds:
        last = round_output(Path(directory), rounds[-1])
        return f" of a --revisit crawl; give one of its rounds' records, such as {last}"
    if os.path.isfile(os.path.join(directory, DATABASE)):
        return " of a crawl's state; give the records the crawl wrote (its -o file)"
    return ""


def _check_paths(arguments: argparse.Namespace) -> None:
    """The records and the stats file can be read, and -o overwrites neither."""
    if arguments.records == "-":  # read twice: a stream will not do
        raise ConfigError("the records must be a file (the report reads them twice), not -")
    if os.path.isdir(arguments.records):
        raise ConfigError(
            f"cannot read {arguments.records}: it is a directory{_instead(arguments.records)}"
        )
    if not os.path.isfile(arguments.records):
        raise ConfigError(f"cannot read {arguments.records}: no such file")
    if not arguments.output:
        raise ConfigError("-o must not be empty")
    if arguments.output == STDOUT:
        if sys.stdout is None:
            raise ConfigError("stdout is closed; write the report with -o FILE")
        return
    for label, path in (("records file", arguments.records), ("--stats file", arguments.stats)):
        if path and same_file(arguments.output, path):
            raise ConfigError(f"-o {arguments.output} is the {label}; refusing to overwrite it")
    check_writable(arguments.output, replaced=True)
