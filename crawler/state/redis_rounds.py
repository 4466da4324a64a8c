"""--revisit DIR with --redis URL: the rounds that the processes of one crawl share.

Round N of crawl ID is a shared crawl of its own, `ID.rN` (its own visited set and
queues in Redis), so a URL is fetched at most once in the round, by the process that
owns its host; the round is over when it is over in every process, as any --redis
crawl is. `crawler:{ID}:round` holds the round being crawled: the first process to
finish round N moves it to N+1, and a process (re)started joins the round it holds.

Each page of round N goes, as the row a recrawl needs (crawler/state/redis_rows.py),
into the round's hash `pages` (visit key -> row), and round N+1 reads that hash as
its previous crawl: the page's schedule (due_at, interval), its validators, the
fields a page not fetched keeps, and the WARC capture its revisit records refer to
(record id, date, URI), whichever process owns its host then and whichever wrote
the capture. Beside it, `first_due` (when round N+1 begins), `lastmod_wrong` (hosts
whose sitemap <lastmod> proved wrong), `warc_files` (the names of the WARC files
rows name by an id) and, once the round is over, `pages_total`.

A row is moved, not copied: round N+1's record script writes the page's row and
deletes round N's (in one step), so Redis holds about one round's rows, not two.
What is left of round N's hash when round N+1's links are crawled is its pages no
link reached: --fetch-gone queues those (crawler/state/redis.py, `serve`). A
process killed mid-round loses nothing: its URLs go to the others, and a page it
recorded but did not commit is fetched again with the row it left as its previous
one. Round N-1's keys are dropped when round N+1 begins.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import cast

import redis

from crawler.config import ConfigError, redact_url
from crawler.history import Previous
from crawler.state.redis_rows import previous_of_row
from crawler.urls import visit_key

ROUND_ID = re.compile(r"(.+)\.r(\d{5,})")

# ARGV: the crawl's round key, the round just over, that round's prefix. Moves the
# round on, once, noting how many pages the round just over had: the next one moves
# its rows out as it goes.
_ADVANCE_LUA = r"""
if tonumber(redis.call('GET', ARGV[1]) or '1') == tonumber(ARGV[2]) then
  redis.call('SET', ARGV[1], tonumber(ARGV[2]) + 1)
  redis.call('SET', ARGV[3] .. 'pages_total', redis.call('HLEN', ARGV[3] .. 'pages'))
  return 1
end
return 0
"""


def round_crawl_id(crawl_id: str, number: int) -> str:
    """The shared crawl of round `number` of crawl `crawl_id`."""
    return f"{crawl_id}.r{number:05d}"


def split_round(crawl_id: str) -> tuple[str, int]:
    """The crawl and round number a `round_crawl_id` names."""
    match = ROUND_ID.fullmatch(crawl_id)
    assert match is not None  # the rounds' loop named it
    return match[1], int(match[2])


def round_prefix(crawl_id: str) -> str:
    return f"crawler:{{{crawl_id}}}:"


class SharedHistory:
    """The previous round of a shared --revisit crawl, read from its `pages` hash.

    A page's row is moved, not copied, into this round's hash when its record is
    written (crawler/state/redis.py's record script), so Redis holds about one
    round's rows, not two, and what is left of the previous round's at the end of
    the link crawl is its pages no link reached."""

    def __init__(
        self,
        row_of: Callable[[str], Awaitable[bytes | None]],
        rows: Callable[[int], Awaitable[tuple[int, list[tuple[str, bytes]]]]],
        pages: int,
        lastmod_wrong: set[str],
        warc_files: dict[str, str],
    ) -> None:
        self._row_of = row_of  # visit key -> its row, on the store's connection
        self._rows = rows  # a cursor -> the next cursor and some (key, row)s: HSCAN
        self.pages = pages
        self._lastmod_wrong = lastmod_wrong
        self._warc_files = warc_files  # id -> name (crawler/state/redis_rows.py)

    async def take(self, url: str) -> Previous | None:
        key = visit_key(url)
        packed = await self._row_of(key)
        return previous_of_row(key, packed, self._warc_files) if packed is not None else None

    def prefetch(self, urls: Sequence[str]) -> None:
        """Nothing: a URL queued here is mostly fetched by the owner of its host."""

    def trusts_lastmod(self, host: str) -> bool:
        return host not in self._lastmod_wrong

    async def unreached(self, claimed: Callable[[str], bool]) -> AsyncIterator[list[str]]:
        """The URLs of the rows left in the previous round's hash whose visit key is not
        `claimed`: its pages no link reached, and those not moved yet."""
        cursor = None
        while cursor != 0:
            cursor, rows = await self._rows(cursor or 0)
            urls = []
            for key, packed in rows:
                previous = None if claimed(key) else previous_of_row(key, packed, {})
                if previous is not None:
                    urls.append(previous.url)
            if urls:
                yield urls


def _own(directory: Path) -> int:
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(
            f"--revisit {directory} is in use by another crawler; with --redis, give each "
            "process its own DIR"
        ) from None
    return fd


def read_previous_round(
    client: redis.Redis, crawl_id: str, number: int
) -> tuple[int, set[str], dict[str, str]] | None:
    """How many pages round `number - 1` had, its hosts of wrong <lastmod>, and its
    WARC files by id; None for the first round."""
    if number <= 1:
        return None
    prefix = round_prefix(round_crawl_id(crawl_id, number - 1))
    total = cast("bytes | None", client.get(prefix + "pages_total"))
    pages = int(total) if total is not None else client.hlen(prefix + "pages")
    hosts = cast("set[bytes]", client.smembers(prefix + "lastmod_wrong"))
    files = cast("dict[bytes, bytes]", client.hgetall(prefix + "warc_files"))
    warc_files = {file_id.decode(): name.decode() for file_id, name in files.items()}
    return pages, {host.decode() for host in hosts}, warc_files


class SharedRounds:
    """The round a shared --revisit crawl is in, and the move to the next one; a Redis
    that cannot be reached is a ConfigError, as when a --redis crawl starts. Each
    process has a DIR of its own, which it holds (flock) while it runs: two writing
    one round's file would mix their records."""

    def __init__(self, url: str, crawl_id: str, directory: Path) -> None:
        self._lock_fd = _own(directory)
        self.crawl_id = crawl_id
        self._shown_url = redact_url(url)  # for messages: no password
        self._key = round_prefix(crawl_id) + "round"
        try:
            self._client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        except ValueError as exc:
            raise ConfigError(f"--redis {self._shown_url}: {exc}") from None

    def round_crawl_id(self, number: int) -> str:
        return round_crawl_id(self.crawl_id, number)

    def current(self) -> int:
        """The round being crawled (the first, if none has begun)."""
        with self._redis():
            self._client.setnx(self._key, 1)
            return int(cast("bytes", self._client.get(self._key)))

    def finished(self, number: int) -> None:
        """Round `number` is over: the next one begins, and the one before it, which
        no round reads any more, is dropped."""
        with self._redis():
            just_over = round_prefix(round_crawl_id(self.crawl_id, number))
            if self._client.eval(_ADVANCE_LUA, 0, self._key, number, just_over) and number > 1:
                self._drop(round_crawl_id(self.crawl_id, number - 1))

    def first_due(self, number: int) -> str | None:
        """When the first page of round `number` is due again (ISO 8601)."""
        key = round_prefix(round_crawl_id(self.crawl_id, number)) + "first_due"
        with self._redis():
            due = cast("bytes | None", self._client.get(key))
        return due.decode() if due is not None else None

    @contextlib.contextmanager
    def _redis(self) -> Iterator[None]:
        try:
            yield
        except redis.RedisError as exc:
            raise ConfigError(f"cannot use Redis at {self._shown_url}: {exc}") from None

    def _drop(self, crawl_id: str) -> None:
        # The round's own keys, and its visited set's shards ("crawler:{ID:bfJ}:...").
        for pattern in (f"crawler:{{{crawl_id}}}:*", f"crawler:{{{crawl_id}:bf*"):
            keys = list(self._client.scan_iter(match=pattern, count=1000))
            for start in range(0, len(keys), 1000):
                self._client.delete(*keys[start : start + 1000])
