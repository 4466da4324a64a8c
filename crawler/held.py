"""The pages the breadth-first gate holds (crawler/engine.py), kept small.

A held page waits, fetched and parsed, until every shallower page is finished;
a host with a long Crawl-delay can keep thousands waiting. Whole, with its 30
links as strings, a page of the broad web takes about 3.7 KB. When nothing will
read its response (no --warc, no API consumer) its record is all its commit
needs, so it is kept as its record and links to follow, as JSON, compressed:
about 600 bytes, and 1 KB with its request (benchmarks/README.md, "Broad
crawls"). Packing and unpacking take about 12 us each, once per held page.
"""

from __future__ import annotations

import zlib
from collections import deque

import orjson

from crawler.frontier import Request
from crawler.page import Page

# zlib's fastest level: a page's record with its links shrinks about 4x all the same.
_LEVEL = 1

Held = tuple[Request, Page, list[str]]  # a page, and the links it will claim


class HeldPages:
    """Held pages by depth, first in first out at each; `len()` of them and their bytes."""

    def __init__(self) -> None:
        self._by_depth: dict[int, deque[tuple[Request, Page | bytes, list[str]]]] = {}
        self._count = 0
        self.nbytes = 0  # bodies of the whole pages, and the packed ones

    def __len__(self) -> int:
        return self._count

    def shallowest(self) -> int | None:
        return min(self._by_depth) if self._by_depth else None

    def add(self, request: Request, page: Page, follow: list[str], pack: bool) -> None:
        """Hold `page`: packed if `pack` (only its record will be read), whole otherwise."""
        kept: Page | bytes = page
        if pack:
            kept = _packed(page, follow) or page
        self._by_depth.setdefault(request.depth, deque()).append(
            (request, kept, [] if isinstance(kept, bytes) else follow)
        )
        self._count += 1
        self.nbytes += _size(kept)

    def pop(self, depth: int) -> Held:
        """The first page held at `depth` (some must be)."""
        pages = self._by_depth[depth]
        request, kept, follow = pages.popleft()
        if not pages:
            del self._by_depth[depth]
        self._count -= 1
        self.nbytes -= _size(kept)
        if isinstance(kept, bytes):
            return (request, *_unpacked(kept))
        return request, kept, follow


def _size(kept: Page | bytes) -> int:
    return len(kept) if isinstance(kept, bytes) else len(kept.body)


def _packed(page: Page, follow: list[str]) -> bytes | None:
    """`page`'s record and `follow`, compressed; None if the record has a lone surrogate,
    which JSON cannot carry as is (the output sink replaces it; the page stays whole)."""
    try:
        return zlib.compress(orjson.dumps((page.record(), follow)), _LEVEL)
    except orjson.JSONEncodeError:
        return None


def _unpacked(packed: bytes) -> tuple[Page, list[str]]:
    record, follow = orjson.loads(zlib.decompress(packed))
    return Page.from_record(record), follow
