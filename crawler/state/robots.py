"""robots.txt rules kept in a --state directory's SQLite, so that a resumed crawl reuses them.

One row per origin: robots.txt as fetched (zlib-compressed, NULL when everything
is allowed), the Crawl-delay it asks of the crawler's product token, and when the
rules expire, in Unix time (RFC 9309 2.4: "Crawlers SHOULD NOT use the cached
version for more than 24 hours"). Rules are written as soon as they are read, in
a transaction of their own, so a kill after that never fetches them again; rules
that say robots.txt could not be had are not kept: they last only a minute.
"""

from __future__ import annotations

import sqlite3
import time

from crawler.politeness import RobotsRules
from crawler.sinks import WriteFailed

_SCHEMA = """
CREATE TABLE IF NOT EXISTS robots (
    origin TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    packed BLOB,
    crawl_delay_s REAL NOT NULL,
    expires_at REAL NOT NULL
) WITHOUT ROWID;
"""


class SqliteRobotsRules:
    """The `robots` table of a state directory's connection (a `RulesTable`)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        db.executescript(_SCHEMA)

    def get(self, origin: str, agent: str) -> RobotsRules | None:
        row = self._db.execute(
            "SELECT packed, crawl_delay_s, expires_at FROM robots WHERE origin = ? AND agent = ?",
            (origin, agent),
        ).fetchone()
        if row is None:
            return None
        packed, crawl_delay_s, expires_at = row
        left_s = expires_at - time.time()
        if left_s <= 0:
            return None
        return RobotsRules(
            packed=packed,
            expires_at=time.monotonic() + left_s,
            crawl_delay_s=crawl_delay_s,
            restored=True,
        )

    def put(self, origin: str, agent: str, rules: RobotsRules) -> None:
        expires_at = time.time() + (rules.expires_at - time.monotonic())
        try:
            self._db.execute(
                "INSERT OR REPLACE INTO robots VALUES (?, ?, ?, ?, ?)",
                (origin, agent, rules.packed, rules.crawl_delay_s, expires_at),
            )
        except sqlite3.Error as exc:
            raise WriteFailed(f"cannot keep robots.txt rules in the crawl state: {exc}") from None
