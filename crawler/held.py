"""The pages the breadth-first gate holds (crawler/engine.py), kept small, and with --state durable.

A held page waits, fetched and parsed, until every shallower page is finished;
a host with a long Crawl-delay can keep thousands waiting. Whole, with its 30
links as strings, a page of the broad web takes about 3.7 KB. When nothing will
read its response (no API consumer, and no --warc, or --warc with --state, which
archives it as it is held) its record is all its commit needs, so it is kept as
its record and links to follow, as JSON, compressed:
about 600 bytes, and 1 KB with its request (benchmarks/README.md, "Broad
crawls"). Packing and unpacking take about 12 us each, once per held page.

With a --state directory, each packed page is also written, as it is held, to
the `held` table of crawl.sqlite (crawler/state/held.py), and its row is deleted in the
transaction that commits it: so a page held at a `kill -9` is held again on
resume, not fetched again. Those past the first `IN_MEMORY` are then read back
from there when their turn comes, so a long hold costs disk, not memory.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter, deque
from typing import TYPE_CHECKING

import orjson

from crawler.frontier import Request
from crawler.page import Page

if TYPE_CHECKING:
    from crawler.state.held import HeldTable

# zlib's fastest level: a page's record with its links shrinks about 4x all the same.
_LEVEL = 1
IN_MEMORY = 500  # held pages kept in memory when the others can wait on disk

Held = tuple[Request, Page, list[str]]  # a page, and the links it will claim


class HeldPages:
    """Held pages by depth, first in first out at each (those in memory first);
    `len()` of them, and the bytes of those in memory."""

    def __init__(self, table: HeldTable | None = None) -> None:
        self._by_depth: dict[int, deque[tuple[Request, Page | bytes, list[str]]]] = {}
        self.in_memory = 0  # held pages in memory, whole or packed
        self._table = table
        self._on_disk: dict[int, deque[int]] = {}  # depth -> seqs of pages only in the table
        self._on_disk_count = 0
        self.nbytes = 0  # bodies of the whole pages in memory, and the packed ones

    def __len__(self) -> int:
        return self.in_memory + self._on_disk_count

    def shallowest(self) -> int | None:
        if not self._on_disk:
            return min(self._by_depth) if self._by_depth else None
        return min([*self._by_depth, *self._on_disk])

    def restore(self) -> Counter[int]:
        """Hold again the pages a state directory's table holds (on resume); their
        count at each depth."""
        depths: Counter[int] = Counter()
        if self._table is not None:
            for depth, seq in self._table.rows():
                self._on_disk.setdefault(depth, deque()).append(seq)
                depths[depth] += 1
            self._on_disk_count += depths.total()
        return depths

    def add(
        self, request: Request, page: Page, follow: list[str], pack: bool, spill: bool = True
    ) -> None:
        """Hold `page`: packed if `pack` (only its record and its request's URL, depth,
        seq and redirect hops will be read), and then written to the table if there is
        one, and kept only there if the memory's share is full and `spill`; whole
        otherwise."""
        if not pack:
            self._keep(request, page, follow)
            return
        packed = _packed(page, follow, request)
        table = self._table
        if table is not None:
            table.keep(request, packed)
        if spill and self.in_memory >= IN_MEMORY and table is not None:
            self._on_disk.setdefault(request.depth, deque()).append(request.seq)
            self._on_disk_count += 1
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

    def _keep(self, request: Request, kept: Page | bytes, follow: list[str]) -> None:
        self._by_depth.setdefault(request.depth, deque()).append((request, kept, follow))
        self.in_memory += 1
        self.nbytes += _size(kept)

    def _from_disk(self, depth: int) -> bytes:
        assert self._table is not None
        seqs = self._on_disk[depth]
        seq = seqs.popleft()
        if not seqs:
            del self._on_disk[depth]
        self._on_disk_count -= 1
        return self._table.packed(seq)


def _size(kept: Page | bytes) -> int:
    return len(kept) if isinstance(kept, bytes) else len(kept.body)


def _packed(page: Page, follow: list[str], request: Request) -> bytes:
    """`page`'s record, `follow` and what the commit reads of `request`, compressed.
    A record with a lone surrogate, which orjson refuses (the output sink replaces
    it), goes as the standard library's JSON, escaped."""
    asked = (request.url, request.depth, request.referrer, request.seq, request.kind, request.hops)
    held = (asked, page.record(), follow)
    try:
        encoded = orjson.dumps(held)
    except orjson.JSONEncodeError:
        encoded = json.dumps(held).encode()
    return zlib.compress(encoded, _LEVEL)


def _unpacked(packed: bytes) -> Held:
    encoded = zlib.decompress(packed)
    try:
        held = orjson.loads(encoded)
    except orjson.JSONDecodeError:  # a lone surrogate's escape
        held = json.loads(encoded)
    (url, depth, referrer, seq, kind, hops), record, follow = held
    return Request(url, depth, referrer, seq, kind, hops=hops), Page.from_record(record), follow
