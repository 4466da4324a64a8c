"""A page's row in a shared --revisit round's `pages` hash (crawler/state/redis_rounds.py):
what the next round needs of it, in as few bytes of Redis as it takes.

The row holds what a recrawl needs (crawler/history.py's `page_row`: validators,
digest, the fields a 304 keeps, the page's WARC record and schedule) and the capture
a revisit refers to (record id, date, URI). It is a JSON array, made small, then
deflated:

- the URL is left out when it is its key (the visit key), as it mostly is;
- the WARC file that holds the page's record is named by an id (`warc_file_id`);
- the fields a 304 keeps are JSON within the array, not a string of JSON, escaped;
- times are integers: milliseconds (a record's) or microseconds (a WARC-Date)
  since 1970, when they are in the form the crawler writes them, else text;
- a capture's record id is its UUID, without the `<urn:uuid:...>` around it, and
  its URI is left out when it is the page's;
- deflate starts from a dictionary of what most rows hold (RFC 1951's preset
  dictionary): a row of a few hundred bytes is too short to repeat it itself.

benchmarks/redis_rounds_memory.py measures it: 0.5 of the JSON rows of before.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from crawler.history import Capture, Previous, page_row, previous_of
from crawler.page import Page
from crawler.urls import host_of

try:
    from isal import isal_zlib as _zlib
except ImportError:  # as in crawler/sinks/warc.py: isal's deflate is 5x faster
    import zlib as _zlib  # type: ignore[no-redef]  # the same functions, slower

# The first byte of a row of this format. Versions before it wrote a row as the JSON
# array of `page_row`'s fields after the key, the 304's fields a string: those are
# read too, so that a crawl upgraded between rounds keeps its history.
ROW_FORMAT = b"\x02"
_JSON_ROW = b"["
# Part of the format: another dictionary is another ROW_FORMAT.
_DICTIONARY = (
    b'"description":null,"canonical":null,"content_type":"text/html","bytes":,"links":["/'
    b',null,"sha1:+00:00",", GMT","Mon, Tue, Wed, Thu, Fri, Sat, Sun, Jan Feb Mar Apr May '
    b'Jun Jul Aug Sep Oct Nov Dec 2026.warc.gz",[null,200,'
)
_RAW_DEFLATE = -15  # wbits: no zlib header or checksum, 6 bytes a row
_UUID_URN = (b"<urn:uuid:", b">")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS, _US = timedelta(milliseconds=1), timedelta(microseconds=1)
_RECORD_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")  # page.py's
_WARC_DATE = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")  # sinks/warc.py's


def record_args(page: Page) -> tuple[str, bytes, str, str, str, str]:
    """What the record script (crawler/state/redis.py) stores of a page: its visit
    key, its row, its due_at, its host if its sitemap <lastmod> proved wrong, and the
    id and name of the WARC file that holds its record (or "")."""
    record = page.record()
    key, url, status, fetched_at, digest, etag, last_modified, kept, *warc, interval_s = page_row(
        record
    )[:12]
    due, capture = record.get("due_at"), page.capture
    row = [
        None if url == key else url,
        status,
        _record_time(fetched_at),
        digest,
        etag,
        last_modified,
        orjson.Fragment(kept) if kept is not None else None,
        [warc_file_id(warc[0]), *warc[1:]] if warc[0] is not None else None,
        interval_s,
        _record_time(due),
        record.get("lastmod_right"),
        _capture_row(capture, url) if capture is not None else None,
    ]
    deflate = _zlib.compressobj(1, _zlib.DEFLATED, _RAW_DEFLATE, zdict=_DICTIONARY)
    packed = ROW_FORMAT + deflate.compress(orjson.dumps(row)) + deflate.flush()
    wrong = host_of(url) if record.get("lastmod_right") is False else ""
    file = warc[0] or ""
    return key, packed, due or "", wrong, warc_file_id(file) if file else "", file


def warc_file_id(name: str) -> str:
    """A WARC file's name in a row: 12 hex digits of its hash, which the round's
    `warc_files` hash maps back to it (a crawl writes a few files a round, not
    millions: no two of them will share an id)."""
    return hashlib.blake2b(name.encode(), digest_size=6).hexdigest()


def previous_of_row(key: str, packed: bytes, warc_files: dict[str, str]) -> Previous | None:
    """The `Previous` of a row `record_args` made, its WARC file named by `warc_files`
    (id -> name), or of an older version's JSON row; None for a row of another format."""
    if packed.startswith(_JSON_ROW):
        return _previous_of_json_row(key, packed)
    if not packed.startswith(ROW_FORMAT):
        return None
    inflate = _zlib.decompressobj(_RAW_DEFLATE, zdict=_DICTIONARY)
    row = orjson.loads(inflate.decompress(packed[1:]) + inflate.flush())
    url, status, fetched_at, digest, etag, last_modified, kept, warc, *schedule, capture = row
    url = url or key
    interval_s, due, lastmod_right = schedule
    return Previous(
        url,
        status,
        _iso_time(fetched_at),
        digest,
        etag,
        last_modified,
        orjson.dumps(kept) if kept is not None else None,
        (warc_files[warc[0]], warc[1], warc[2]) if warc and warc[0] in warc_files else None,
        interval_s,
        _iso_time(due) if due is not None else None,
        lastmod_right,
        _capture_of(capture, url) if capture is not None else None,
    )


def _previous_of_json_row(key: str, packed: bytes) -> Previous | None:
    try:
        row = orjson.loads(packed)
        if row[6] is not None:
            row[6] = row[6].encode()
        return previous_of((key, *row, None, None, None))  # it held no capture
    except (AttributeError, TypeError, ValueError, IndexError):  # orjson's errors are ValueErrors
        return None


def _record_time(iso: str | None) -> int | str | None:
    if iso is None or _RECORD_TIME.fullmatch(iso) is None:
        return iso
    return (datetime.fromisoformat(iso) - _EPOCH) // _MS


def _iso_time(value: int | str) -> str:
    if isinstance(value, str):
        return value
    return (_EPOCH + value * _MS).isoformat(timespec="milliseconds")


def _capture_row(capture: Capture, url: str) -> list[Any]:
    record_id, date = capture.record_id, capture.date
    start, end = _UUID_URN
    if record_id.startswith(start) and record_id.endswith(end):
        record_id = record_id[len(start) : -len(end)]
    when: int | str = date.decode()
    if _WARC_DATE.fullmatch(date) is not None:
        when = (datetime.fromisoformat(date.decode()) - _EPOCH) // _US
    uri = capture.uri.decode()
    return [record_id.decode(), when, None if uri == url else uri]


def _capture_of(row: list[Any], url: str) -> Capture:
    record_id, when, uri = row
    whole = record_id.encode()
    if not record_id.startswith("<"):
        whole = _UUID_URN[0] + whole + _UUID_URN[1]
    if isinstance(when, int):
        when = (_EPOCH + when * _US).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return Capture(whole, (uri or url).encode(), when.encode())
