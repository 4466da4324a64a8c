"""The frontier: URLs waiting to be fetched, one FIFO per host, behind a small interface.

`MemoryFrontier` keeps them in deques. `SqliteFrontier` keeps them in a SQLite
table and holds only a bounded buffer per host in memory, so a frontier of
millions of URLs does not grow the process; the state directory uses it.
Both give the same order: first in, first out within a host, which with depth
growing by one per link makes the crawl breadth-first.
"""

from __future__ import annotations

import sys
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from crawler.urls import host_of

if TYPE_CHECKING:
    import sqlite3

    from crawler.fetch import Exchange

# What a request fetches. A "robots" request fetches nothing: robots.txt is read before
# any request of its host is handed out, and this one turns its Sitemap lines into
# "sitemap" requests (crawler/sitemaps.py).
PAGE, SITEMAP, ROBOTS = "page", "sitemap", "robots"
# With --since and --fetch-gone: a page of the previous crawl no link reaches now,
# fetched to tell a 404 or 410 from a page merely unlinked; its links are not followed.
UNLINKED = "unlinked"


@dataclass(slots=True)
class Request:
    url: str  # canonical, as first seen
    depth: int
    referrer: str | None
    seq: int = 0  # position in a disk frontier
    kind: str = PAGE
    lastmod: str | None = None  # the <lastmod> of the sitemap entry it came from
    # What an earlier attempt left: where to resume after redirects, and which
    # redirect targets it already claimed in the visited set.
    attempt: int = 0
    location: str | None = None
    redirects: int = 0
    hops: list[str] = field(default_factory=list)
    exchanges: tuple[Exchange, ...] = ()  # earlier attempts', with --warc

    @property
    def host(self) -> str:
        return host_of(self.url)


class Frontier(Protocol):
    def push(self, requests: Iterable[Request]) -> None: ...
    def depths(self) -> Counter[int]: ...
    def peek(self, host: str) -> Request | None: ...
    def pop(self, host: str) -> Request | None: ...
    def hosts(self) -> list[str]: ...
    def queued_for(self, host: str) -> int: ...
    def __len__(self) -> int: ...


class MemoryFrontier:
    def __init__(self) -> None:
        self._queues: dict[str, deque[Request]] = {}
        self._size = 0

    def push(self, requests: Iterable[Request]) -> None:
        for request in requests:
            queue = self._queues.get(request.host)
            if queue is None:
                queue = self._queues[request.host] = deque()
            queue.append(request)
            self._size += 1

    def peek(self, host: str) -> Request | None:
        queue = self._queues.get(host)
        return queue[0] if queue else None

    def pop(self, host: str) -> Request | None:
        queue = self._queues.get(host)
        if not queue:
            return None
        self._size -= 1
        request = queue.popleft()
        if not queue:
            del self._queues[host]
        return request

    def hosts(self) -> list[str]:
        return list(self._queues)

    def queued_for(self, host: str) -> int:
        return len(self._queues.get(host, ()))

    def depths(self) -> Counter[int]:
        """How many requests are queued at each depth."""
        return Counter(r.depth for queue in self._queues.values() for r in queue)

    def __len__(self) -> int:
        return self._size


# Keyed by (host, seq) without a rowid: the table is its own per-host index, so queuing
# and removing a URL each change one B-tree, not a table and an index.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS frontier (
    host TEXT NOT NULL,
    seq INTEGER NOT NULL,
    url TEXT NOT NULL,
    depth INTEGER NOT NULL,
    referrer TEXT,
    kind TEXT,  -- NULL for a page
    lastmod TEXT,
    PRIMARY KEY (host, seq)
) WITHOUT ROWID;
"""
# Columns added since the first version of the table, added to an older table on open.
_ADDED_COLUMNS = ("kind", "lastmod")
# A host's first read-ahead is short: in a broad crawl most hosts are asked about once
# before the read-ahead LRU drops them (10^4 hosts with work, 1,024 kept).
FIRST_READ_AHEAD = 2


class SqliteFrontier:
    """Rows in a `frontier` table of a connection the caller commits; a few hosts' heads
    in memory.

    A row stays until the state directory's checkpoint deletes it once its page is
    done, so after a crash every URL that was queued or in flight is queued again.

    In memory, per host with URLs queued, only two integers: how many rows it has
    not handed out, and the last one it did. The next rows of the hosts asked
    about most recently are read ahead, for at most `buffered_hosts` hosts: a
    crawl of 10^5 hosts holds a few thousand URLs in memory, not a buffer for
    each host. A host reads FIRST_READ_AHEAD rows, and twice as many each time it
    runs dry while kept, up to `buffer_per_host`: a host crawled fast gets long
    reads, and one of many hosts taken in turn does not read rows it will not
    use before it is dropped.
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        buffer_per_host: int = 16,
        buffered_hosts: int = 1024,
        last_seq: int = 0,
    ) -> None:
        """`last_seq`: new rows are numbered past it (and past the table's rows)."""
        self._db = db
        self._buffer_size = buffer_per_host
        self._buffered_hosts = buffered_hosts
        db.executescript(_SCHEMA)
        columns = {row[1] for row in db.execute("PRAGMA table_info(frontier)")}
        for column in _ADDED_COLUMNS:
            if column not in columns:
                db.execute(f"ALTER TABLE frontier ADD COLUMN {column} TEXT")
        # Least recently asked first; each holds its host's next rows, in order.
        self._buffers: OrderedDict[str, deque[Request]] = OrderedDict()
        self._read_ahead: dict[str, int] = {}  # the rows the last read of a kept host asked
        self._queued: dict[str, int] = {}  # rows not handed out yet, buffered or not
        self._after: dict[str, int] = {}  # the last seq handed out (or before the first row)
        self._size = 0
        for host, count, first in db.execute(
            "SELECT host, count(*), min(seq) FROM frontier GROUP BY host"
        ):
            self._queued[host] = count
            self._after[host] = first - 1
            self._size += count
        self._last_seq = max(
            db.execute("SELECT max(seq) FROM frontier").fetchone()[0] or 0, last_seq
        )

    def push(self, requests: Iterable[Request]) -> None:
        insert = self._db.execute
        for request in requests:
            host = request.host
            self._last_seq += 1
            request.seq = self._last_seq
            kind = None if request.kind == PAGE else request.kind
            insert(
                "INSERT INTO frontier (host, seq, url, depth, referrer, kind, lastmod) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    host,
                    request.seq,
                    request.url,
                    request.depth,
                    request.referrer,
                    kind,
                    request.lastmod,
                ),
            )
            queued = self._queued.get(host, 0)
            if not queued:
                host = sys.intern(host)  # one string for the host's keys here and elsewhere
                self._after[host] = request.seq - 1
            self._queued[host] = queued + 1
            buffer = self._buffers.get(host)
            # A buffer holds its host's first rows: append only if it holds them all.
            if buffer is not None and len(buffer) == queued < self._read_ahead[host]:
                buffer.append(request)
            self._size += 1

    def _fill(self, host: str) -> deque[Request] | None:
        """`host`'s buffer, read from the table if it is empty; None if nothing is queued."""
        if not self._queued.get(host):
            return None
        buffer = self._buffers.get(host)
        if buffer:
            self._buffers.move_to_end(host)
            return buffer
        rows = FIRST_READ_AHEAD if buffer is None else 2 * self._read_ahead[host]
        rows = self._read_ahead[host] = min(rows, self._buffer_size)
        buffer = self._buffers[host] = deque(
            Request(url, depth, referrer, seq, kind or PAGE, lastmod)
            for seq, url, depth, referrer, kind, lastmod in self._db.execute(
                "SELECT seq, url, depth, referrer, kind, lastmod FROM frontier "
                "WHERE host = ? AND seq > ? ORDER BY seq LIMIT ?",
                (host, self._after[host], rows),
            )
        )
        self._buffers.move_to_end(host)
        if len(self._buffers) > self._buffered_hosts:
            dropped, _ = self._buffers.popitem(last=False)  # its rows stay on disk
            del self._read_ahead[dropped]
        return buffer

    def peek(self, host: str) -> Request | None:
        buffer = self._fill(host)
        return buffer[0] if buffer else None

    def pop(self, host: str) -> Request | None:
        buffer = self._fill(host)
        if not buffer:
            return None
        self._size -= 1
        request = buffer.popleft()
        queued = self._queued[host] - 1
        if queued:
            self._queued[host] = queued
            self._after[host] = request.seq
        else:  # the next row pushed for this host says where it starts
            del self._queued[host], self._after[host]
            if self._buffers.pop(host, None) is not None:
                del self._read_ahead[host]
        return request

    def hosts(self) -> list[str]:
        return list(self._queued)

    def queued_for(self, host: str) -> int:
        return self._queued.get(host, 0)

    def depths(self) -> Counter[int]:
        """How many requests are queued at each depth."""
        rows = self._db.execute("SELECT depth, count(*) FROM frontier GROUP BY depth")
        return Counter(dict(rows))

    def __len__(self) -> int:
        return self._size
