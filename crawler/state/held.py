"""The pages the breadth-first gate holds, in a state directory: durable across kill -9.

The gate (crawler/engine.py, crawler/held.py) writes each page it holds, packed,
as a row of crawl.sqlite's `held` table, in a transaction of its own; the commit
of the page deletes the row in the transaction that commits it (crawler/state/disk.py). A
page is thus, at any moment, either queued or in flight (its frontier row, no
held row: fetched again after a crash, as in-flight pages are), held (both rows:
on resume, the frontier row is dropped and the page held again, not fetched), or
committed (its log row, no held row). So a crash makes again only the requests
that were in flight. With --warc, a page is archived as it is held, and the
row's transaction commits the archive's new position too: a page is archived
once, whenever the crash.

A held row's seq is its frontier row's, unique in the directory: the frontier
numbers new rows past the held ones' too (`last_seq`), once their rows are gone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from crawler.frontier import Request
from crawler.sinks import WriteFailed

# seq: the request's row in the frontier (unique in a state directory); hops: the
# redirect targets it claimed, newline-separated, claimed again on resume.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS held (
    seq INTEGER PRIMARY KEY,
    host TEXT NOT NULL,
    depth INTEGER NOT NULL,
    hops TEXT NOT NULL,
    packed BLOB NOT NULL
);
"""


class HeldTable:
    """The held pages of a state directory, in a connection of crawl.sqlite.

    A row is written when its page is held, in a transaction of its own, while the
    request's frontier row stays; `forget()` deletes it within the caller's commit
    of the page. On resume, `reclaim()` deletes the frontier rows of the requests
    held, so that they are held again instead of queued."""

    def __init__(
        self, db: sqlite3.Connection, log_positions: Callable[[], None] | None = None
    ) -> None:
        """`log_positions`: writes the sinks' positions, in the transaction of each row
        (with --warc, a held page is archived as it is held)."""
        self._db = db
        self._log_positions = log_positions
        db.executescript(_SCHEMA)
        self._seqs = {seq for (seq,) in db.execute("SELECT seq FROM held")}

    def __len__(self) -> int:
        return len(self._seqs)

    def keep(self, request: Request, packed: bytes) -> None:
        """Write `request`'s held page, `packed` (crawler/held.py), in a transaction of its own."""
        db = self._db
        try:
            db.execute("BEGIN")
            db.execute(
                "INSERT OR REPLACE INTO held VALUES (?, ?, ?, ?, ?)",
                (request.seq, request.host, request.depth, "\n".join(request.hops), packed),
            )
            if self._log_positions is not None:
                self._log_positions()
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise WriteFailed(f"cannot write a held page in the crawl state: {exc}") from None
        self._seqs.add(request.seq)

    def packed(self, seq: int) -> bytes:
        (packed,) = self._db.execute("SELECT packed FROM held WHERE seq = ?", (seq,)).fetchone()
        return bytes(packed)

    def forget(self, done: Request) -> None:
        """`done` is committed: its row goes, in the caller's transaction."""
        if done.seq in self._seqs:
            self._db.execute("DELETE FROM held WHERE seq = ?", (done.seq,))
            self._seqs.discard(done.seq)

    def reclaim(self) -> list[str]:
        """Take the held requests out of the frontier (on resume, before it is read);
        the redirect targets they had claimed."""
        self._db.execute("DELETE FROM frontier WHERE (host, seq) IN (SELECT host, seq FROM held)")
        return [
            hop
            for (hops,) in self._db.execute("SELECT hops FROM held WHERE hops != ''")
            for hop in hops.split("\n")
        ]

    @property
    def last_seq(self) -> int:
        return max(self._seqs, default=0)

    def rows(self) -> list[tuple[int, int]]:
        """(depth, seq) of every held page, in the order they were held at each depth."""
        return list(self._db.execute("SELECT depth, seq FROM held ORDER BY depth, seq"))
