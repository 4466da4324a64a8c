"""The frontier: URLs waiting to be fetched, one FIFO per host, behind a small interface.

`MemoryFrontier` keeps them in deques. `SqliteFrontier` keeps them in a SQLite
table and holds only a bounded buffer per host in memory, so a frontier of
millions of URLs does not grow the process; the state directory uses it.
Both give the same order: first in, first out within a host, which with depth
growing by one per link makes the crawl breadth-first.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from crawler.urls import host_of

if TYPE_CHECKING:
    from crawler.fetch import Exchange

# What a request fetches. A "robots" request fetches nothing: robots.txt is read before
# any request of its host is handed out, and this one turns its Sitemap lines into
# "sitemap" requests (crawler/sitemaps.py).
PAGE, SITEMAP, ROBOTS = "page", "sitemap", "robots"


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


class SqliteFrontier:
    """Rows in a `frontier` table of a connection the caller commits; a buffer per host.

    A row stays until the state directory's checkpoint deletes it once its page is
    done, so after a crash every URL that was queued or in flight is queued again.
    """

    def __init__(self, db: sqlite3.Connection, buffer_per_host: int = 64) -> None:
        self._db = db
        self._buffer_size = buffer_per_host
        db.executescript(_SCHEMA)
        columns = {row[1] for row in db.execute("PRAGMA table_info(frontier)")}
        for column in _ADDED_COLUMNS:
            if column not in columns:
                db.execute(f"ALTER TABLE frontier ADD COLUMN {column} TEXT")
        self._buffers: dict[str, deque[Request]] = {}
        self._unbuffered: dict[str, int] = {}  # rows on disk not yet in a buffer
        self._after: dict[str, int] = {}  # last seq read into the buffer
        self._size = 0
        for host, count in db.execute("SELECT host, count(*) FROM frontier GROUP BY host"):
            self._unbuffered[host] = count
            self._size += count
        self._last_seq = db.execute("SELECT max(seq) FROM frontier").fetchone()[0] or 0

    def push(self, requests: Iterable[Request]) -> None:
        for request in requests:
            host = request.host
            self._last_seq += 1
            request.seq = self._last_seq
            kind = None if request.kind == PAGE else request.kind
            self._db.execute(
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
            buffer = self._buffers.setdefault(host, deque())
            if not self._unbuffered.get(host) and len(buffer) < self._buffer_size:
                buffer.append(request)
                self._after[host] = request.seq
            else:
                self._unbuffered[host] = self._unbuffered.get(host, 0) + 1
            self._size += 1

    def _fill(self, host: str) -> deque[Request]:
        buffer = self._buffers.setdefault(host, deque())
        if not buffer and self._unbuffered.get(host):
            rows = self._db.execute(
                "SELECT seq, url, depth, referrer, kind, lastmod FROM frontier "
                "WHERE host = ? AND seq > ? ORDER BY seq LIMIT ?",
                (host, self._after.get(host, 0), self._buffer_size),
            )
            for seq, url, depth, referrer, kind, lastmod in rows:
                buffer.append(Request(url, depth, referrer, seq, kind or PAGE, lastmod))
                self._after[host] = seq
            self._unbuffered[host] -= len(buffer)
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
        if not buffer and not self._unbuffered.get(host):
            del self._buffers[host]
            self._unbuffered.pop(host, None)
        return request

    def hosts(self) -> list[str]:
        return [
            h
            for h in {*self._buffers, *self._unbuffered}
            if self._buffers.get(h) or self._unbuffered.get(h)
        ]

    def queued_for(self, host: str) -> int:
        return len(self._buffers.get(host, ())) + self._unbuffered.get(host, 0)

    def depths(self) -> Counter[int]:
        """How many requests are queued at each depth."""
        rows = self._db.execute("SELECT depth, count(*) FROM frontier GROUP BY depth")
        return Counter(dict(rows))

    def __len__(self) -> int:
        return self._size
