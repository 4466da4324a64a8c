"""What the user sees on stderr while and after crawling, and the --stats file.

All three are made from one `Stats.snapshot()`: a live status line (rich) when stderr
is a terminal, a plain status line every 10 s when it is not, a JSON file every
10 s with --stats, and the summary table at the end. --quiet silences the
status and the summary; the stats file is still written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from types import TracebackType
from typing import IO, TYPE_CHECKING, Protocol, Self

from crawler.config import Settings, silence
from crawler.files import write_whole
from crawler.stats import CrawlStats, RecrawlFigures

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

log = logging.getLogger(__name__)

LIVE_REFRESH_S = 0.25
PLAIN_EVERY_S = 10.0
STATS_EVERY_S = 10.0


class Figures(Protocol):
    """The figures now; `exact` measures the visited set's fill (slower) and samples the
    rate; `per_host` (by default as `exact`) adds every host's claims."""

    def __call__(self, exact: bool, per_host: bool | None = None) -> CrawlStats: ...


def count(n: int, noun: str) -> str:
    """`n` `noun`s, in the singular for 1."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def _toward_max_pages(figures: CrawlStats) -> tuple[int, float]:
    """The pages --max-pages counts, and how fast they come: with --redis, those of every
    process, at this one's pace scaled by the others' share so far."""
    records, rate = figures["records"], figures["pages_per_s"]
    if "all_processes" not in figures:
        return records, rate
    everyone = figures["all_processes"]["records"]
    return everyone, rate * everyone / records if records else 0.0


def _status_fields(figures: CrawlStats, max_pages: int) -> list[tuple[int, str]]:
    """The status line's fields in display order, each with its priority (0 is kept longest)."""
    records, rate = figures["records"], figures["pages_per_s"]
    fields = [(0, count(records, "page"))]
    if max_pages:
        done, per_s = _toward_max_pages(figures)
        left = max_pages - done
        fields.append((1, f"{min(done / max_pages, 1):.0%}"))
        fields.append((3, f"ETA {_clock(left / per_s) if per_s > 0 and left > 0 else '-'}"))
    else:
        fields.append((3, f"{_clock(figures['elapsed_s'])} elapsed"))
    fields += [
        (2, f"{rate:,.1f}/s"),
        (5, f"{figures['queued']:,} queued"),
        (7, f"{figures['in_flight']:,} in flight"),
    ]
    if figures["held"]:
        slow = count(figures["held_for"], "slow page")
        fields.append((4, f"{figures['held']:,} held for {slow}"))
    fields += [
        (6, count(sum(figures["errors"].values()), "error")),
        (8, count(figures["host_count"], "host")),
        (9, f"visited {figures['visited']['urls']:,} (FP {figures['visited']['fp_rate']:.1g})"),
    ]
    return fields


def status_line(figures: CrawlStats, max_pages: int = 0, width: int | None = None) -> str:
    """The crawl's progress in one line of at most `width` characters, if given: the
    fields that do not fit are left out, least important first."""
    fields = _status_fields(figures, max_pages)
    while width is not None and len(fields) > 1 and len(", ".join(t for _, t in fields)) > width:
        fields.remove(max(fields))
    return ", ".join(text for _, text in fields)[: width or None]


def _not_fetched(queued: int, in_flight: int) -> str:
    """What the URLs a crawl stopped short of were doing: queued, or in flight past
    --drain-timeout (abandoned, with no record)."""
    urls = "URL" if queued + in_flight == 1 else "URLs"
    if not in_flight:
        return f"{urls} still queued when the crawl stopped"
    return f"{urls} still queued ({queued:,}) or in flight ({in_flight:,}) when the crawl stopped"


def summary_table(figures: CrawlStats) -> str:
    visited = figures["visited"]
    errors = figures["errors"]
    rows = [
        (
            "pages",
            f"{figures['records']:,}",
            f"{figures['elapsed_s']:.2f} s in all; {figures['pages_per_s']:.1f} pages/s "
            "in this run",
        ),
        *(
            [("all processes", f"{everyone['records']:,}", "pages of the crawl shared by --redis")]
            if (everyone := figures.get("all_processes"))
            else []
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
        *(
            [("not fetched", f"{queued + in_flight:,}", _not_fetched(queued, in_flight))]
            if (queued := figures.get("queued", 0)) + (in_flight := figures.get("in_flight", 0))
            else []
        ),
        (
            "data",
            _size(figures["bytes"]),
            f"{figures['truncated']:,} truncated, {figures['retries']:,} retries",
        ),
        *(
            [
                (
                    "depths inexact",
                    f"{figures['depth_inexact']:,}",
                    "URLs claimed deeper before a shallower page linked them (--gate-timeout, "
                    "or the breadth-first hold full)",
                )
            ]
            if figures["depth_inexact"]
            else []
        ),
        *_recrawl_rows(figures.get("recrawl")),
        (
            "visited set",
            f"{visited['urls']:,} URLs",
            f"{_size(visited['bytes'])} in {visited['slices']} slice(s), "
            f"FP rate now {visited['fp_rate']:.2g} (target {visited['target_fp_rate']:g})",
        ),
        (
            "false positives",
            _about(visited["expected_missed_urls"]),
            "URLs the visited set may have wrongly skipped",
        ),
    ]
    width = max(len(label) for label, _, _ in rows)
    value_width = max(len(value) for _, value, _ in rows)
    lines = [
        f"  {label:<{width}}  {value:>{value_width}}  {note}".rstrip()
        for label, value, note in rows
    ]
    return "crawler: summary\n" + "\n".join(lines)


def _recrawl_rows(recrawl: RecrawlFigures | None) -> list[tuple[str, str, str]]:
    """--since: what became of the previous crawl's pages. `gone` is not known with links
    left unfollowed (see stats.links_left), under which a page not reached may be."""
    if recrawl is None:
        return []
    unchanged = recrawl["unchanged_304"] + recrawl["unchanged_same_digest"]
    return [
        (
            "checked",
            f"{recrawl['checked']:,}",
            f"of the previous crawl's {recrawl['previous_pages']:,} pages",
        ),
        (
            "unchanged",
            f"{unchanged:,}",
            f"{recrawl['unchanged_304']:,} answered 304, "
            f"{recrawl['unchanged_same_digest']:,} the same body again",
        ),
        ("changed", f"{recrawl['changed']:,}", "another body or another status"),
        ("new", f"{recrawl['new']:,}", "not in the previous crawl"),
        (
            ("gone", f"{recrawl['gone']:,}", "previous pages no link reaches now, or that failed")
            if recrawl["gone"] is not None
            else ("gone", "-", "not known: links were not followed (limits, or a stop)")
        ),
        ("saved", _size(recrawl["body_bytes_saved"]), "of bodies not downloaded (304s)"),
        *(
            [("not due", f"{recrawl['not_due']:,}", "--revisit: carried over, not requested")]
            if recrawl["not_due"]
            else []
        ),
        *(
            [
                (
                    "unlinked",
                    f"{recrawl['unlinked']:,}",
                    f"gone pages fetched (--fetch-gone): {recrawl['unlinked_404_410']:,} "
                    "answered 404 or 410",
                )
            ]
            if recrawl["unlinked"]
            else []
        ),
    ]


def _about(expected: float) -> str:
    """An expected count, as plainly as its size allows: ≈ 0, ≈ 0.37, ≈ 12."""
    if expected < 0.005:
        return "≈ 0"
    return f"≈ {expected:.2g}" if expected < 10 else f"≈ {expected:,.0f}"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.2f} GiB"


def write_json_atomically(path: str, figures: CrawlStats) -> None:
    write_whole(path, json.dumps(figures, indent=2, ensure_ascii=False).encode("utf-8"))


class _BesideTheCrawl:
    """A task that runs beside the crawl for as long as the `async with` lasts."""

    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
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
        raise NotImplementedError


class StatsFile(_BesideTheCrawl):
    """The --stats file: the crawl's figures every STATS_EVERY_S and at the end."""

    def __init__(self, path: str, figures: Figures) -> None:
        self._path = path
        self._figures = figures

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await super().__aexit__(kind, exc, tb)
        self._write(last=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            self._write(last=False)

    def _write(self, last: bool) -> None:
        """Every host's claims only in the `last` write: at 10^6 hosts they are 27 MB."""
        try:
            write_json_atomically(self._path, self._figures(True, per_host=last))
        except OSError as exc:
            log.warning("cannot write %s: %s", self._path, exc.strerror)


class Reporter(_BesideTheCrawl):
    """Progress on stderr, beside the crawl."""

    def __init__(self, figures: Figures, settings: Settings, stream: IO[str] | None = None) -> None:
        """`stream`: stderr as it is now, if not given (the CLI may have replaced it)."""
        self._figures = figures
        self._settings = settings
        self._stream = stream if stream is not None else sys.stderr
        self._live: LiveStatus | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        if not self._settings.quiet and self._stream.isatty():
            from rich.console import Console

            self._live = LiveStatus(Console(file=self._stream), self._settings.max_pages)
        live = self._live
        next_plain = loop.time() + PLAIN_EVERY_S
        try:
            while True:
                await asyncio.sleep(LIVE_REFRESH_S if live else 1.0)
                now = loop.time()
                if live:
                    live.show(self._figures(False))
                elif not self._settings.quiet and now >= next_plain:
                    line = status_line(self._figures(False), self._settings.max_pages)
                    self._say(f"crawler: {line}")
                    next_plain = now + PLAIN_EVERY_S
        finally:
            self.clear()

    def clear(self) -> None:
        """Take the live status line off the screen, if it is there."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def finish(self) -> None:
        """The crawl is over: the summary."""
        if not self._settings.quiet:
            self._say(summary_table(self._figures(True)))

    def _say(self, text: str) -> None:
        try:
            print(text, file=self._stream, flush=True)
        except OSError:  # its reader went away, or its disk is full
            silence(self._stream)


def render_status(figures: CrawlStats, max_pages: int, width: int) -> RenderableType:
    """The live status line for a terminal `width` columns wide."""
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    width -= 1  # writing the last column wraps the line on some terminals
    if not max_pages:
        return Text(status_line(figures, width=width), no_wrap=True)
    bar_width = 20 if width >= 100 else 10
    line = Table.grid(padding=(0, 1))
    line.add_row(
        ProgressBar(max_pages, _toward_max_pages(figures)[0], width=bar_width),
        Text(status_line(figures, max_pages, width - bar_width - 1), no_wrap=True),
    )
    return line


class LiveStatus:
    """One status line redrawn in place, fitted to the terminal's width; with --max-pages,
    a bar before it. Cleared when stopped."""

    def __init__(self, console: Console, max_pages: int) -> None:
        from rich.live import Live

        self._console = console
        self._max_pages = max_pages
        self._live = Live(console=console, auto_refresh=False, transient=True)
        self._live.start()

    def show(self, figures: CrawlStats) -> None:
        self._live.update(self.render(figures), refresh=True)

    def render(self, figures: CrawlStats) -> RenderableType:
        return render_status(figures, self._max_pages, self._console.width)

    def stop(self) -> None:
        self._live.stop()
