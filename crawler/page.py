"""Page: one URL attempted, carried from fetch through parse, hooks and every sink.

A `Page` holds the record's fields as attributes, the response it came from
(raw bytes included) and, for HTML, the parsed tree. `page.record()` is the JSON
record the CLI writes: every sink and every API user sees the same object.
"""

from __future__ import annotations

import builtins
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from selectolax.lexbor import LexborHTMLParser

from crawler.charset import decode_html_as
from crawler.errors import ErrorKind

if TYPE_CHECKING:
    from crawler.fetch import Response
    from crawler.history import Capture, Previous


_MILLISECONDS = [f".{ms:03d}+00:00" for ms in range(1000)]


class _UtcClock:
    """The time as ISO 8601 in UTC, to the millisecond; the date and second formatted
    once a second (datetime's isoformat took 2 us, a fair part of a page's record)."""

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def now(self) -> str:
        t = time.time()
        second = int(t)
        if second != self._second:
            self._second = second
            self._prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return self._prefix + _MILLISECONDS[int((t - second) * 1000)]


_now = _UtcClock().now


# The standard fields of a record, each an attribute of a Page.
RECORD_FIELDS = (
    "url",
    "final_url",
    "status",
    "depth",
    "referrer",
    "fetched_at",
    "elapsed_ms",
    "content_type",
    "bytes",
    "content_digest",
    "etag",
    "last_modified",
    "title",
    "description",
    "canonical",
    "links",
    "error",
    "truncated",
    "kind",
)

_record_values = attrgetter(*RECORD_FIELDS)

_STR_OR_NONE = (str, type(None))
# The types each standard field may have, as the stats, sinks and a later --since read it
# (a bool is no number): a hook that sets another must not break the record or the figures.
RECORD_TYPES: dict[str, tuple[type, ...]] = {
    "url": (str,),
    "final_url": _STR_OR_NONE,
    "status": (int, type(None)),
    "depth": (int,),
    "referrer": _STR_OR_NONE,
    "fetched_at": (str,),
    "elapsed_ms": (int, float, type(None)),
    "content_type": _STR_OR_NONE,
    "bytes": (int, type(None)),
    "content_digest": _STR_OR_NONE,
    "etag": _STR_OR_NONE,
    "last_modified": _STR_OR_NONE,
    "title": _STR_OR_NONE,
    "description": _STR_OR_NONE,
    "canonical": _STR_OR_NONE,
    "links": (list,),
    "error": (ErrorKind, type(None)),  # one the README names: read back by ErrorKind()
    "truncated": (bool,),
    "kind": (str,),
}

# The fields the crawler adds to some records (with an option, or for some pages), beside
# the standard ones: an `on_page` hook may write neither kind.
CRAWLER_FIELDS = (
    *("nofollow", "noindex", "sitemap_urls", "sitemap_lastmod"),
    *("changed", "not_due", "revisit_interval_s", "due_at", "lastmod_right"),
    *("text", "lang", "main_text", "markdown", "metadata", "simhash", "near_duplicate_of"),
    *("warc_file", "warc_offset", "warc_length"),
)


@dataclass(slots=True, eq=False)
class Page:
    """One URL attempted: what was asked, what came back, and what was found in it."""

    url: str  # canonical, as requested
    depth: int
    referrer: str | None
    final_url: str | None = None  # where redirects ended; None if no response arrived
    status: int | None = None
    fetched_at: str = field(default_factory=_now)
    elapsed_ms: float | None = None
    content_type: str | None = None
    bytes: int | None = None
    content_digest: str | None = None  # "sha1:" base32 of the body as it came
    etag: str | None = None  # the response's validators, as sent, for a conditional request
    last_modified: str | None = None
    title: str | None = None
    description: str | None = None  # <meta name=description>
    canonical: str | None = None  # <link rel=canonical>, absolute and canonical
    links: list[str] = field(default_factory=list)
    error: ErrorKind | None = None
    truncated: bool = False
    kind: str = "page"  # or "sitemap" (--sitemaps)
    fields: dict[str, Any] = field(default_factory=dict)  # added by options and hooks
    response: Response | None = field(default=None, repr=False)
    previous: Previous | None = field(default=None, repr=False)  # --since: the last crawl's
    # --warc: the archived capture of its payload (a revisit's is the one it refers to)
    capture: Capture | None = field(default=None, repr=False)
    # --since: the previous crawl's URLs its redirects reached, which have no record of
    # their own (a link to one finds it claimed), and are not gone; set when committed
    previous_hops: int = field(default=0, repr=False)
    _tree: LexborHTMLParser | None = field(default=None, repr=False)
    _text: str | None = field(default=None, repr=False)
    _encoding: str | None = field(default=None, repr=False)

    @property
    def body(self) -> builtins.bytes:  # `bytes` in here is the field
        """The body as read, after Content-Encoding; b"" when nothing was read."""
        return self.response.body if self.response is not None else b""

    @property
    def is_html(self) -> bool:
        return self.response is not None and self.response.is_html

    def text(self) -> str | None:
        """The HTML body decoded as the title is (BOM, charset, <meta>, UTF-8); None if not HTML."""
        if self._text is None and self.is_html:
            self._text, self._encoding = decode_html_as(self.body, self.content_type)
        return self._text

    @property
    def encoding(self) -> str:
        """The Python codec the HTML body was decoded with ("utf-8" if not HTML)."""
        if self._encoding is None:
            self.text()
        return self._encoding or "utf-8"

    @property
    def tree(self) -> LexborHTMLParser | None:
        """The selectolax (Lexbor) tree of an HTML page, parsed once, on first use."""
        if self._tree is None and self.is_html:
            self._tree = LexborHTMLParser(self.text() or "")
        return self._tree

    @tree.setter
    def tree(self, tree: LexborHTMLParser) -> None:
        self._tree = tree

    def release(self) -> None:
        """Drop the parsed tree and decoded text (a page held for a while keeps neither);
        both come back if asked."""
        self._tree = self._text = None

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Page:
        """The page a JSON record was made from (without its response)."""
        standard = {name: record[name] for name in RECORD_FIELDS if name in record}
        if standard.get("error") is not None:
            standard["error"] = ErrorKind(standard["error"])
        extra = {name: value for name, value in record.items() if name not in RECORD_FIELDS}
        return cls(**standard, fields=extra)

    def record(self) -> dict[str, Any]:
        """The JSON record: the standard fields in their order, then the added ones."""
        record = dict(zip(RECORD_FIELDS, _record_values(self), strict=True))
        if self.fields:
            record.update(self.fields)
        return record
