"""The pages the breadth-first gate holds (crawler/engine.py), kept small or on disk.

A held page waits, fetched and parsed, until every shallower page is finished;
a host with a long Crawl-delay can keep thousands waiting. Whole, with its 30
links as strings, a page of the broad web takes about 3.7 KB. When nothing will
read its response (no --warc, no API consumer) its record is all its commit
needs, so it is kept as its record and links to follow, as JSON, compressed:
about 600 bytes, and 1 KB with its request (benchmarks/README.md, "Broad
crawls"). Packing and unpacking take about 12 us each, once per held page.

With a --state directory, the packed pages past the first `IN_MEMORY` go, with
their requests, to a scratch database there (`held.sqlite`, no journal: a crash
loses nothing it holds, for a held page is not committed and its URL is still
queued), so a long hold costs disk, not memory.
"""

from __future__ import annotations

import zlib
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from crawler.frontier import Request
from crawler.page import Page

if TYPE_CHECKING:
    import sqlite3

# zlib's fastest level: a page's record with its links shrinks about 4x all the same.
_LEVEL = 1
IN_MEMORY = 500  # held pages kept in memory when the others can go to disk
SPILL_FILE = "held.sqlite"

Held = tuple[Request, Page, list[str]]  # a page, and the links it will claim


class HeldPages:
    """Held pages by depth, first in first out at each (those in memory first);
    `len()` of them, and the bytes of those in memory."""

    def __init__(self, spill_directory: str | None = None) -> None:
        self._by_depth: dict[int, deque[tuple[Request, Page | bytes, list[str]]]] = {}
        self.in_memory = 0  # held pages in memory, whole or packed
        self._spilled: dict[int, int] = {}  # depth -> pages on disk
        self._spill_path = Path(spill_directory) / SPILL_FILE if spill_directory else None
        self._db: sqlite3.Connection | None = None
        self._spill_seq = 0
        self.nbytes = 0  # bodies of the whole pages in memory, and the packed ones

    def __len__(self) -> int:
        return self.in_memory + sum(self._spilled.values())

    def shallowest(self) -> int | None:
        if not self._spilled:
            return min(self._by_depth) if self._by_depth else None
        return min([*self._by_depth, *self._spilled])

    def add(
        self, request: Request, page: Page, follow: list[str], pack: bool, spill: bool = True
    ) -> None:
        """Hold `page`: packed if `pack` (only its record and its request's URL, depth,
        seq and redirect hops will be read), and then on disk if the memory's share
        is full and `spill`; whole otherwise."""
        packed = _packed(page, follow, request) if pack else None
        if packed is None:
            self._keep(request, page, follow)
        elif spill and self.in_memory >= IN_MEMORY and self._spill_path is not None:
            self._to_disk(request.depth, packed)
        else:
            self._keep(request, packed, [])

    def pop(self, depth: int) -> Held:
        """The next page held at `depth` (some must be)."""
        pages = self._by_depth.get(depth)
        if not pages:
            return _unpacked(self._from_disk(depth))
        request, kept, follow = pages.popleft()
        if not pages:
            del self._by_depth[depth]
        self.in_memory -= 1
        self.nbytes -= _size(kept)
        if isinstance(kept, bytes):
            _, page, follow = _unpacked(kept)
        else:
            page = kept
        return request, page, follow

    def close(self) -> None:
        """Drop what is on disk (nothing is, once every held page is committed)."""
        if self._db is not None:
            self._db.close()
            self._db = None
            assert self._spill_path is not None
            self._spill_path.unlink(missing_ok=True)
        self._spilled.clear()

    def _keep(self, request: Request, kept: Page | bytes, follow: list[str]) -> None:
        self._by_depth.setdefault(request.depth, deque()).append((request, kept, follow))
        self.in_memory += 1
        self.nbytes += _size(kept)

    def _to_disk(self, depth: int, packed: bytes) -> None:
        if self._db is None:
            self._db = self._open()
        self._spill_seq += 1
        self._db.execute("INSERT INTO held VALUES (?, ?, ?)", (depth, self._spill_seq, packed))
        self._spilled[depth] = self._spilled.get(depth, 0) + 1

    def _from_disk(self, depth: int) -> bytes:
        assert self._db is not None
        seq, packed = self._db.execute(
            "SELECT seq, packed FROM held WHERE depth = ? ORDER BY seq LIMIT 1", (depth,)
        ).fetchone()
        self._db.execute("DELETE FROM held WHERE depth = ? AND seq = ?", (depth, seq))
        left = self._spilled[depth] - 1
        if left:
            self._spilled[depth] = left
        else:
            del self._spilled[depth]
        return bytes(packed)

    def _open(self) -> sqlite3.Connection:
        assert self._spill_path is not None
        self._spill_path.unlink(missing_ok=True)  # a crashed crawl's
        import sqlite3  # only when pages spill, with --state

        db = sqlite3.connect(self._spill_path, isolation_level=None)
        # Scratch: nothing to recover after a crash, and the OS caches the pages.
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("PRAGMA cache_size=-1024")  # KiB
        db.execute(
            "CREATE TABLE held (depth INTEGER, seq INTEGER, packed BLOB, "
            "PRIMARY KEY (depth, seq)) WITHOUT ROWID"
        )
        return db


def _size(kept: Page | bytes) -> int:
    return len(kept) if isinstance(kept, bytes) else len(kept.body)


def _packed(page: Page, follow: list[str], request: Request) -> bytes | None:
    """`page`'s record, `follow` and what the commit reads of `request`, compressed;
    None if the record has a lone surrogate, which JSON cannot carry as is (the
    output sink replaces it; the page stays whole)."""
    asked = (request.url, request.depth, request.referrer, request.seq, request.kind, request.hops)
    try:
        return zlib.compress(orjson.dumps((asked, page.record(), follow)), _LEVEL)
    except orjson.JSONEncodeError:
        return None


def _unpacked(packed: bytes) -> Held:
    (url, depth, referrer, seq, kind, hops), record, follow = orjson.loads(zlib.decompress(packed))
    return Request(url, depth, referrer, seq, kind, hops=hops), Page.from_record(record), follow
