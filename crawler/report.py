"""What the user sees on stderr while and after crawling, and the --stats file.

All three are made from one `snapshot()`: a live status line (rich) when stderr
is a terminal, a plain status line every 10 s when it is not, a JSON file every
10 s with --stats, and the summary table at the end. --quiet silences the
status and the summary; the stats file is still written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from types import TracebackType
from typing import IO, Any

from crawler.config import Settings
from crawler.engine import Crawl

LIVE_REFRESH_S = 0.25
PLAIN_EVERY_S = 10.0
STATS_EVERY_S = 10.0


def snapshot(crawl: Crawl, exact: bool = False) -> dict[str, Any]:
    """The crawl's figures now. `exact` measures the visited set's fill (slower)."""
    stats, bloom, scheduler = crawl.stats, crawl.store.bloom, crawl.scheduler
    figures = stats.as_dict()
    figures["queued"] = scheduler.queued if scheduler else len(crawl.store.frontier)
    figures["in_flight"] = scheduler.in_flight if scheduler else 0
    figures["visited"] = {
        "urls": len(bloom),
        "bytes": bloom.nbytes,
        "slices": bloom.slice_count,
        "capacity": bloom.capacity,
        "target_fp_rate": bloom.error_rate,
        "fp_rate": bloom.false_positive_rate if exact else bloom.predicted_false_positive_rate,
        "expected_missed_urls": bloom.expected_missed_urls,
    }
    return figures


def _status_line(figures: dict[str, Any]) -> str:
    visited = figures["visited"]
    return (
        f"{figures['records']:,} pages, {figures['pages_per_s']:.1f}/s, "
        f"{figures['queued']:,} queued, {figures['in_flight']} in flight, "
        f"{sum(figures['errors'].values()):,} errors, {figures['host_count']:,} hosts, "
        f"visited {visited['urls']:,} (FP {visited['fp_rate']:.1g})"
    )


def summary_table(figures: dict[str, Any]) -> str:
    visited = figures["visited"]
    errors = figures["errors"]
    rows = [
        (
            "pages",
            f"{figures['records']:,}",
            f"{figures['pages_per_s']:.1f} pages/s over {figures['elapsed_s']:.2f} s",
        ),
        *(
            ("no response" if status == "none" else f"status {status}", f"{count:,}", "")
            for status, count in sorted(figures["statuses"].items())
        ),
        (
            "errors",
            f"{sum(errors.values()):,}",
            ", ".join(f"{kind} {n:,}" for kind, n in sorted(errors.items(), key=lambda kv: -kv[1])),
        ),
        (
            "dropped",
            f"{sum(figures['dropped'].values()):,}",
            ", ".join(f"{kind} {n:,}" for kind, n in sorted(figures["dropped"].items())),
        ),
        (
            "data",
            _size(figures["bytes"]),
            f"{figures['truncated']:,} truncated, {figures['retries']:,} retries",
        ),
        (
            "visited set",
            f"{visited['urls']:,} URLs",
            f"{_size(visited['bytes'])} in {visited['slices']} slice(s), "
            f"FP rate now {visited['fp_rate']:.2g} (target {visited['target_fp_rate']:g})",
        ),
        (
            "missed",
            f"{visited['expected_missed_urls']:.2g}",
            "new URLs expected to be taken for seen ones and skipped",
        ),
    ]
    width = max(len(label) for label, _, _ in rows)
    value_width = max(len(value) for _, value, _ in rows)
    lines = [
        f"  {label:<{width}}  {value:>{value_width}}  {note}".rstrip()
        for label, value, note in rows
    ]
    return "crawler: summary\n" + "\n".join(lines)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.2f} GiB"


def write_json_atomically(path: str, figures: dict[str, Any]) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(figures, f, indent=2, ensure_ascii=False)
    os.replace(temporary, path)


class Reporter:
    """Runs beside the crawl: progress on stderr and the --stats file."""

    def __init__(self, crawl: Crawl, settings: Settings, stream: IO[str] = sys.stderr) -> None:
        self._crawl = crawl
        self._settings = settings
        self._stream = stream
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Reporter:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        live = None
        if not self._settings.quiet and self._stream.isatty():
            live = _LiveStatus(self._stream, self._settings.max_pages)
        next_plain = next_stats = loop.time() + PLAIN_EVERY_S
        try:
            while True:
                await asyncio.sleep(LIVE_REFRESH_S if live else 1.0)
                now = loop.time()
                if live:
                    live.show(snapshot(self._crawl))
                elif not self._settings.quiet and now >= next_plain:
                    print(f"crawler: {_status_line(snapshot(self._crawl))}", file=self._stream)
                    next_plain = now + PLAIN_EVERY_S
                if now >= next_stats:
                    self._crawl.stats.sample_rate()
                    self._write_stats()
                    next_stats = now + STATS_EVERY_S
        finally:
            if live:
                live.stop()

    def _write_stats(self) -> None:
        if self._settings.stats:
            try:
                write_json_atomically(self._settings.stats, snapshot(self._crawl, exact=True))
            except OSError as exc:
                print(
                    f"crawler: warning: cannot write {self._settings.stats}: {exc.strerror}",
                    file=self._stream,
                )

    def finish(self) -> None:
        """The crawl is over: final stats file and summary."""
        self._crawl.stats.sample_rate()
        self._write_stats()
        if not self._settings.quiet:
            print(summary_table(snapshot(self._crawl, exact=True)), file=self._stream)


class _LiveStatus:
    """One status line, and a bar when --max-pages gives a total, redrawn in place."""

    def __init__(self, stream: IO[str], total: int) -> None:
        from rich.console import Console
        from rich.live import Live

        self._total = total
        self._live = Live(console=Console(file=stream), auto_refresh=False, transient=True)
        self._live.start()

    def show(self, figures: dict[str, Any]) -> None:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.text import Text

        line = Text(_status_line(figures))
        if self._total:
            bar = ProgressBar(total=self._total, completed=figures["records"], width=40)
            self._live.update(Group(bar, line), refresh=True)
        else:
            self._live.update(line, refresh=True)

    def stop(self) -> None:
        self._live.stop()
