"""Records per host kept in a --state directory's SQLite, so that a broad crawl's
memory does not grow with every host it reaches.

The `hosts` table holds each host's count as of the last checkpoint; only the hosts
counted since then are in memory, with their whole counts, until `save` writes them
in the checkpoint's transaction. A kill loses no count: the records committed after
the checkpoint are counted again when the crawl resumes (crawler/state/disk.py).
"""

from __future__ import annotations

import heapq
import sqlite3

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
