"""Records per host, and --max-pages-per-host's claims, kept in a --state directory's
SQLite, so that a broad crawl's memory does not grow with every host it reaches.

The `hosts` table holds each host's count as of the last checkpoint; only the hosts
counted since then are in memory, with their whole counts, until `save` writes them
in the checkpoint's transaction. A kill loses no count: the records committed after
the checkpoint are counted again when the crawl resumes (crawler/state/disk.py).
"""

from __future__ import annotations

import heapq
import sqlite3
from collections import OrderedDict

from crawler.stats import TOP_HOSTS, by_records


class SqliteHostCounts:
    """The `hosts` table of a state directory's connection (a `HostCounts`)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._rows: int = db.execute("SELECT count(*) FROM hosts").fetchone()[0]
        self._since_save: dict[str, int] = {}  # host -> its whole count
        self._new = 0  # hosts of those without a row yet
        self._closed: tuple[int, list[tuple[str, int]]] | None = None

    def add(self, host: str) -> None:
        count = self._since_save.get(host)
        if count is None:
            row = self._db.execute("SELECT records FROM hosts WHERE host = ?", (host,)).fetchone()
            count = 0 if row is None else row[0]
            self._new += row is None
        self._since_save[host] = count + 1

    def most_common(self, n: int) -> list[tuple[str, int]]:
        if self._closed is not None:
            return self._closed[1][:n]
        # A host not counted since the save has its row's count; the n largest of
        # those, with the ones counted since, hold the n largest of all.
        top = dict(
            self._db.execute(
                "SELECT host, records FROM hosts ORDER BY records DESC, host LIMIT ?", (n,)
            )
        )
        top |= self._since_save
        return heapq.nsmallest(n, top.items(), key=by_records)

    def __len__(self) -> int:
        return self._closed[0] if self._closed is not None else self._rows + self._new

    def save(self) -> None:
        """Write the counts made since the last save: in the caller's transaction."""
        self._db.executemany("INSERT OR REPLACE INTO hosts VALUES (?, ?)", self._since_save.items())
        self._rows += self._new
        self._new = 0
        self._since_save.clear()

    def close(self) -> None:
        """Before the connection closes: keep what the crawl's last figures show."""
        self._closed = len(self), self.most_common(TOP_HOSTS)


class SqliteClaims:
    """The `claims` table of a state directory's connection (a `Claims`): the records
    each host has or will have under --max-pages-per-host.

    A host's count is read from its row when a link first asks about it, and kept while
    it is among the `MAX_CACHED` hosts asked about last (a page's links are mostly on a
    few hosts); a count changed is written by `save`, in the transaction of the commit
    that queues its URLs, so that a kill -9 loses none. At 10^6 hosts the counts of all
    in memory took 108 MiB; they are read from the table for the figures that give
    every host's (the summary, the stats file's last write).
    """

    MAX_CACHED = 4096

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._counts: OrderedDict[str, int] = OrderedDict()  # least recently asked first
        self._unsaved: set[str] = set()
        self._closed: dict[str, int] | None = None

    def __getitem__(self, host: str) -> int:
        count = self._counts.get(host)
        if count is not None:
            self._counts.move_to_end(host)
            return count
        row = self._db.execute("SELECT records FROM claims WHERE host = ?", (host,)).fetchone()
        count = self._counts[host] = 0 if row is None else row[0]
        return count

    def add(self, host: str) -> None:
        self._counts[host] = self[host] + 1
        self._unsaved.add(host)

    def figures(self) -> dict[str, int]:
        if self._closed is not None:
            return self._closed
        rows: dict[str, int] = dict(self._db.execute("SELECT host, records FROM claims"))
        return rows | {host: self._counts[host] for host in self._unsaved}

    def close(self) -> None:
        """Before the connection closes: keep every host's count for the crawl's last
        figures (the summary, the stats file's last write)."""
        self._closed = self.figures()

    def save(self) -> None:
        """Write the counts changed since the last save: in the caller's transaction.
        Then forget the counts of the hosts asked about least recently, past MAX_CACHED."""
        counts = self._counts
        if self._unsaved:
            self._db.executemany(
                "INSERT OR REPLACE INTO claims VALUES (?, ?)",
                [(host, counts[host]) for host in self._unsaved],
            )
            self._unsaved.clear()
        while len(counts) > self.MAX_CACHED:
            counts.popitem(last=False)
