"""When a page is due again: the adaptive schedule, and the rounds of --revisit DIR.

The schedule has the shape of Nutch's AdaptiveFetchSchedule: each page has an
interval; a fetch that finds the page changed shortens it by `dec_rate`, one that
finds it unchanged lengthens it by `inc_rate`, and it stays within
[`min_interval_s`, `max_interval_s`]. A page first seen starts at `interval_s`.
(Nutch's optional sync-delta, which shifts the next fetch toward the page's last
modification time, is left out: Last-Modified is too often the time of serving.)

--revisit DIR crawls in rounds that never end. Round N writes DIR/round-N.jsonl,
keeps its state (for kill -9) in DIR/round-N.state, and is a recrawl from round
N-1 (or from --since PREV, for the first): pages not due yet are not requested,
and their record, links included, is carried over, so the pages under them are
still reached; due pages are asked for conditionally. Each record gets
`revisit_interval_s` and `due_at`. A round over, the next starts when the first
page falls due.

A sitemap's <lastmod> is a hint: a page not due whose <lastmod> is later than its
last fetch is fetched anyway, if its host's hints have proved right. Each fetch
of a page with a <lastmod> checks it (`lastmod_right`: did it say "changed" just
when the page had changed?), and a host whose last check on some page was wrong
is not trusted until that page's hint proves right again.

Rerun with the same DIR, the crawl goes on where it was: in the round a kill cut
short, or waiting for the next. Once round N has begun, round N-1's state and the
index of round N-2's records are deleted: the rounds' records alone pile up.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROUND_NAME = re.compile(r"round-(\d{5,})\.jsonl")


@dataclass(frozen=True)
class AdaptiveSchedule:
    """How long until a page is due again, from how long it was and what was found."""

    interval_s: float  # a page's first interval
    min_interval_s: float
    max_interval_s: float
    inc_rate: float = 0.2
    dec_rate: float = 0.2

    def next_interval_s(self, interval_s: float | None, changed: bool | None) -> float:
        """The interval after a fetch: `changed` True, False, or None (new, or no answer)."""
        if interval_s is None:
            interval_s = self.interval_s
        elif changed is True:
            interval_s *= 1.0 - self.dec_rate
        elif changed is False:
            interval_s *= 1.0 + self.inc_rate
        return min(max(interval_s, self.min_interval_s), self.max_interval_s)


def due_at(now_s: float, interval_s: float) -> str:
    """The ISO 8601 UTC time `interval_s` after `now_s` (a time.time())."""
    return datetime.fromtimestamp(now_s + interval_s, UTC).isoformat(timespec="milliseconds")


def is_due(due: str | None, now_s: float | None = None) -> bool:
    """Whether a page due at `due` (ISO 8601, or None: no schedule yet) is due now."""
    if due is None:
        return True
    return datetime.fromisoformat(due).timestamp() <= (time.time() if now_s is None else now_s)


def seconds_until(when: str | None) -> float:
    """Seconds from now until `when` (ISO 8601); 0 if past or None."""
    if when is None:
        return 0.0
    return max(0.0, datetime.fromisoformat(when).timestamp() - time.time())


def lastmod_after(lastmod: str, fetched_at: str) -> bool | None:
    """Whether a sitemap's <lastmod> (W3C Datetime) is later than a fetch (ISO 8601,
    UTC); None if it cannot be read. A date without a time is its midnight, UTC."""
    try:
        modified = datetime.fromisoformat(lastmod)
        fetched = datetime.fromisoformat(fetched_at)
    except ValueError:
        return None
    if modified.tzinfo is None:
        modified = modified.replace(tzinfo=UTC)
    return modified > fetched


@dataclass(frozen=True)
class Round:
    """One round of --revisit DIR: its number, output, state, and the crawl it recrawls."""

    number: int
    output: Path
    state: Path
    since: Path | None


def rounds_in(directory: Path) -> list[int]:
    """The numbers of the rounds DIR holds, in order."""
    if not directory.is_dir():
        return []
    numbers = (ROUND_NAME.fullmatch(path.name) for path in directory.iterdir())
    return sorted(int(match[1]) for match in numbers if match)


def drop_spent(directory: Path, number: int) -> None:
    """Delete what round `number`, begun, leaves of no use: the state of the round before
    (over), and the index of the records of the one before that (the previous crawl of
    the round before). A crawl without end must not fill the disk; the records stay."""
    from crawler.history import index_beside

    shutil.rmtree(_round_file(directory, number - 1, ".state"), ignore_errors=True)
    index_beside(round_output(directory, number - 2)).unlink(missing_ok=True)


def round_paths(directory: Path, number: int, first_since: str | None) -> Round:
    previous = round_output(directory, number - 1)
    since = previous if number > 1 else (Path(first_since) if first_since else None)
    return Round(
        number,
        round_output(directory, number),
        _round_file(directory, number, ".state"),
        since,
    )


def round_output(directory: Path, number: int) -> Path:
    """The records of round `number` of the --revisit crawl in `directory`."""
    return _round_file(directory, number, ".jsonl")


def _round_file(directory: Path, number: int, suffix: str) -> Path:
    return directory / f"round-{number:05d}{suffix}"
