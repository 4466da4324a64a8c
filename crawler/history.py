"""A previous crawl, indexed on disk: validators, digests, links and WARC references.

`--since PREV` names the crawl to recrawl from: its JSONL output, or its --state
directory (whose committed output is read). The first recrawl indexes it in
SQLite, beside it (`PREV.history.sqlite`, or `history.sqlite` in the state
directory), streaming the records and the WARC files' record heads, so memory
stays bounded whatever its size; later recrawls reuse the index while the output
it came from is unchanged. A page's row is found by its visit key, as the visited
set finds it, and rows are looked up in batches when links are queued, not one by
one when they are fetched.

What a row gives a recrawl (`Previous`): the validators for a conditional request,
the payload digest to tell a changed page from an unchanged one, the record (title,
links and the rest) that stands in for a page that answers 304, and the place of
its capture in the previous crawl's WARC files, for a revisit record to refer to.
"""

from __future__ import annotations

import codecs
import contextlib
import email.utils
import fcntl
import glob
import gzip
import hashlib
import logging
import os
import sqlite3
import sys
import tempfile
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import orjson

from crawler.config import ConfigError, mistyped_field
from crawler.errors import AFTER_THE_FETCH
from crawler.fetch import HTML_TYPES, NOT_MODIFIED, REDIRECT_STATUSES, media_type
from crawler.page import CRAWLER_FIELDS, RECORD_FIELDS
from crawler.urls import host_of, origin_of, visit_key, visit_keys

log = logging.getLogger(__name__)

HISTORY_FORMAT = 17  # the index's own layout: another is rebuilt, never misread
STATE_SCHEMA = 4  # crawler/state/disk.py SCHEMA_VERSION: the state directories we read
# What a record needs to serve as history: older outputs lack content_digest.
NEEDED_FIELDS = ("url", "status", "depth", "content_digest", "fetched_at")
# Fields a 304 page takes from the previous record, beside the standard ones.
CARRIED_FIELDS = ("title", "description", "canonical", "links", "content_type", "bytes")
# --text's and --extract's, if the previous crawl had them (near_duplicate_of is found
# again from the simhash, among this crawl's pages).
CARRIED_EXTRA = (
    *("text", "lang", "nofollow", "noindex"),
    *("main_text", "markdown", "metadata", "simhash"),
)
# The types a crawl writes the fields a recrawl reads in; each but url may be null.
FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "url": str,
    "final_url": str,
    "status": int,
    "depth": int,
    "fetched_at": str,
    "content_digest": str,
    "etag": str,
    "last_modified": str,
    "title": str,
    "description": str,
    "canonical": str,
    "links": list,
    "content_type": str,
    "bytes": int,
    "text": str,
    "lang": str,
    "nofollow": bool,
    "noindex": bool,
    "main_text": str,
    "markdown": str,
    "metadata": dict,
    "simhash": str,
    "error": str,
    "kind": str,
    "changed": bool,
    "warc_file": str,
    "warc_offset": int,
    "warc_length": int,
    "revisit_interval_s": (int, float),
    "due_at": str,
    "lastmod_right": bool,
}
_BATCH = 500  # keys a query asks for at once (SQLite allows 32,766 parameters)
# Rows an executemany() inserts at once: SQLite lets go of the GIL between rows, but a
# thread beside an event loop (crawler/api.py) gets it back only between batches, and
# 10,000 rows stalled the loop for 60-90 ms; 1,000 build no slower.
_INSERT_BATCH = 1000
_MAP_BYTES = 256 * 2**20
_BUILDING = ".tmp"  # the suffix of an index being built
_CACHE_MAX = 100_000  # prefetched rows kept for queued URLs; past it, looked up when fetched
# Queued URLs looked up together: a page's commit queues one or two new URLs, and a
# query for each took 8% of a recrawl's CPU.
_PREFETCH_BATCH = 64

_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE pages (
    key TEXT PRIMARY KEY,
    url TEXT,
    status INTEGER,
    fetched_at TEXT,
    digest TEXT,
    etag TEXT,
    last_modified TEXT,
    record BLOB,
    warc_file TEXT,
    warc_offset INTEGER,
    warc_length INTEGER,
    interval_s REAL,
    due_at TEXT,
    lastmod_right INTEGER,
    depth INTEGER
) WITHOUT ROWID;
CREATE TABLE lastmod_wrong (host TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE aliases (key TEXT PRIMARY KEY, of TEXT) WITHOUT ROWID;
CREATE TABLE captures (
    file TEXT,
    offset INTEGER,
    record_id BLOB,
    uri BLOB,
    date BLOB,
    PRIMARY KEY (file, offset)
) WITHOUT ROWID;
"""
_COLUMNS_READ = """
       p.url, p.status, p.fetched_at, p.digest, p.etag, p.last_modified, p.record,
       p.warc_file, p.warc_offset, p.warc_length, p.interval_s, p.due_at, p.lastmod_right,
       c.record_id, c.uri, c.date"""
_CAPTURE = "LEFT JOIN captures c ON c.file = p.warc_file AND c.offset = p.warc_offset"
_SELECT = f"SELECT p.key, {_COLUMNS_READ} FROM pages p {_CAPTURE} WHERE p.key IN ({{}})"
# The URLs a previous page's redirects ended at, on its origin (/docs -> /docs/): a link
# straight to one now finds the page there (it was new, fetched and archived whole).
_SELECT_ALIASED = (
    f"SELECT a.key, {_COLUMNS_READ} FROM aliases a JOIN pages p ON p.key = a.of {_CAPTURE} "
    "WHERE a.key IN ({})"
)


@dataclass(frozen=True, slots=True)
class Capture:
    """An archived payload, as WARC header values: the record a revisit refers to."""

    record_id: bytes
    uri: bytes
    date: bytes

    def refers_to(self) -> list[tuple[bytes, bytes]]:
        """A revisit's fields naming this capture."""
        return [
            (b"WARC-Refers-To", self.record_id),
            (b"WARC-Refers-To-Target-URI", self.uri),
            (b"WARC-Refers-To-Date", self.date),
        ]


@dataclass(frozen=True, slots=True)
class Previous:
    """What the previous crawl saw at one URL."""

    url: str
    status: int | None
    fetched_at: str
    digest: str | None
    etag: str | None
    last_modified: str | None  # None if it was later than the fetch (see _usable)
    record: bytes | None  # the fields a 304 keeps, for a 2xx page (see _kept)
    warc: tuple[str, int, int] | None  # its record's warc_file, warc_offset, warc_length
    interval_s: float | None  # --revisit: its schedule
    due_at: str | None
    lastmod_right: bool | None  # --revisit: whether its sitemap <lastmod> last told true
    capture: Capture | None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def final_url(self) -> str:
        """Where the previous fetch ended, after redirects: the URL its validators are for
        (a 2xx's; see _kept)."""
        if self.record is None or b'"final_url":' not in self.record:  # as a key, if at all
            return self.url
        final_url: str = orjson.loads(self.record).get("final_url", self.url)
        return final_url

    def at_final_url(self) -> Previous:
        """This page as seen at the URL its redirects ended at, as if fetched there."""
        if self.record is None:
            return replace(self, url=self.final_url)
        fields = orjson.loads(self.record)
        url = fields.pop("final_url", self.url)
        return replace(self, url=url, record=orjson.dumps(fields))

    def validators(self, wanted: Sequence[str] = ()) -> dict[str, str]:
        """The conditional request's headers, for `final_url`: only for a 2xx, and not
        for an HTML page whose record lacks a field of `wanted` that parsing it gives
        (--text's, --extract's): a 304 would carry none, now or in any later recrawl."""
        if not self.ok or (wanted and self._html_without(wanted)):
            return {}
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers

    def _html_without(self, wanted: Sequence[str]) -> bool:
        if self.record is None:
            return False
        fields = orjson.loads(self.record)
        html = media_type(fields.get("content_type")) in HTML_TYPES
        return html and not all(name in fields for name in wanted)

    def changed_to(self, status: int | None, digest: str | None, final_url: str) -> bool | None:
        """Whether the page changed since: None if nothing came back now; a status unlike
        before is a change, and so is a 2xx page that now redirects, or elsewhere. A
        redirect not followed now (its target had a link of its own first) to where its
        redirects ended before is no change: its target has its own record."""
        if status is None:
            return None
        if status in REDIRECT_STATUSES and self.ok and final_url == self.final_url != self.url:
            return False
        moved = self.ok and final_url != self.final_url
        return status != self.status or digest != self.digest or moved

    def contradicted_by(self, etag: str | None) -> bool:
        """Whether a 304 naming `etag` says "not modified" of something else than the
        entity tag asked about (weakly compared, RFC 9110 8.8.3.2): not to be trusted."""
        asked = self.validators().get("If-None-Match")
        return asked is not None and etag is not None and _opaque(asked) != _opaque(etag)

    def revisit_fields(self) -> dict[str, Any]:
        """The fields a record not due again keeps: its schedule, its WARC record."""
        fields: dict[str, Any] = {"revisit_interval_s": self.interval_s, "due_at": self.due_at}
        if self.lastmod_right is not None:
            fields["lastmod_right"] = self.lastmod_right
        if self.warc is not None:
            fields["warc_file"], fields["warc_offset"], fields["warc_length"] = self.warc
        return fields

    def fields(self) -> dict[str, Any]:
        """The previous record's fields that a page answering 304 keeps."""
        if self.record is None:
            return {}
        fields: dict[str, Any] = orjson.loads(self.record)
        fields.pop("final_url", None)  # a 304's is the URL that answered it
        links = fields.get("links")
        if links:
            origin = origin_of(self.url)
            fields["links"] = [origin + link if link[0] == "/" else link for link in links]
        return fields


def _opaque(etag: str) -> str:
    etag = etag.strip()
    return etag[2:] if etag.startswith("W/") else etag


def _usable(last_modified: str | None, fetched_at: str) -> str | None:
    """A Last-Modified later than the fetch is one the server must not send (RFC 9110
    8.8.2.2): as If-Modified-Since it could hide every change until then. Checked
    once, when the index is built (parsing the date took 50 us)."""
    if last_modified and _not_after(last_modified, fetched_at):
        return last_modified
    return None


_MONTHS = {
    name: f"{number:02d}"
    for number, name in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}


def _not_after(http_date: str, iso_time: str) -> bool:
    # The IMF-fixdate every current server sends ("Sun, 06 Nov 1994 08:49:37 GMT"),
    # compared as text; parsing it with email.utils took 20 us.
    if len(http_date) == 29 and http_date.endswith(" GMT") and iso_time.endswith("+00:00"):
        month = _MONTHS.get(http_date[8:11])
        if month is not None:
            stamp = f"{http_date[12:16]}-{month}-{http_date[5:7]}T{http_date[17:25]}"
            return stamp <= iso_time[:19]
    try:
        modified = email.utils.parsedate_to_datetime(http_date)
        fetched = datetime.fromisoformat(iso_time)
    except (TypeError, ValueError, IndexError):
        return False
    return modified.tzinfo is not None and modified <= fetched


class PreviousCrawl(Protocol):
    """What a recrawl asks of the crawl before it: a `History`, or the previous round
    of a --revisit crawl shared through Redis (crawler/state/redis_rounds.py)."""

    pages: int

    async def take(self, url: str) -> Previous | None: ...
    def prefetch(self, urls: Sequence[str]) -> None: ...
    def trusts_lastmod(self, host: str) -> bool: ...
    def unreached(self, claimed: Callable[[str], bool]) -> AsyncIterator[list[str]]: ...


class Unreached(Protocol):
    """Where --fetch-gone finds the previous pages that no link reached."""

    def unreached(self, claimed: Callable[[str], bool]) -> AsyncIterator[list[str]]: ...


@dataclass(frozen=True, slots=True)
class InScope:
    """The previous pages no link reached, of those this crawl's scope allows (hosts,
    --include, --exclude): --fetch-gone must not ask for what the crawl would not."""

    previous: PreviousCrawl
    allowed: Callable[[list[str]], list[str]]

    async def unreached(self, claimed: Callable[[str], bool]) -> AsyncIterator[list[str]]:
        async for urls in self.previous.unreached(claimed):
            if urls := self.allowed(urls):
                yield urls


class History:
    """The index of a previous crawl; `lookup_many` by URL. A recrawl shallower than it
    (`max_depth`) follows no link to its deeper pages: they are neither among its `pages`
    nor unreached (gone), though a shorter path may reach them now."""

    def __init__(self, path: Path, max_depth: int | None = None) -> None:
        self.path = path
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        # Pages read in place, not copied through SQLite's own 2 MB cache, which a history
        # outgrows at 5,000 URLs: a lookup took 12 us a URL, 7 mapped. The map is of the
        # file's first _MAP_BYTES, pages the system may drop: memory stays bounded.
        self._db.execute(f"PRAGMA mmap_size={_MAP_BYTES}")
        meta = dict(self._db.execute("SELECT name, value FROM meta"))
        self._max_depth = max_depth
        depths = orjson.loads(meta["depths"])  # pages by depth
        self.pages = sum(n for d, n in depths.items() if max_depth is None or int(d) <= max_depth)
        self.has_warc = meta["warc"] != ""
        # The WARC files its records name, if no directory given held them all
        self.unfound_warc_files: list[str] = (
            [] if self.has_warc else orjson.loads(meta["warc_files"])
        )
        self._cache: dict[str, Previous | None] = {}
        self._pending: dict[str, None] = {}  # queued URLs to look up in the next batch
        # --revisit: hosts whose sitemap <lastmod> was last found wrong on some page
        self._lastmod_wrong = {
            host for (host,) in self._db.execute("SELECT host FROM lastmod_wrong")
        }

    def trusts_lastmod(self, host: str) -> bool:
        """Whether `host`'s sitemap <lastmod> has proved right on every page it was tried."""
        return host not in self._lastmod_wrong

    def lookup_many(self, urls: Sequence[str]) -> dict[str, Previous]:
        """The rows of the `urls` the previous crawl had (by visit key)."""
        keys = dict(zip(visit_keys(list(urls)), urls, strict=True))
        found: dict[str, Previous] = {}
        key_list = list(keys)
        for start in range(0, len(key_list), _BATCH):
            chunk = key_list[start : start + _BATCH]
            query = _SELECT.format(",".join("?" * len(chunk)))
            for row in self._db.execute(query, chunk):
                found[keys[row[0]]] = previous_of(row)
            unfound = [key for key in chunk if keys[key] not in found]
            if unfound:
                query = _SELECT_ALIASED.format(",".join("?" * len(unfound)))
                for row in self._db.execute(query, unfound):
                    found[keys[row[0]]] = previous_of(row).at_final_url()
        return found

    def prefetch(self, urls: Sequence[str]) -> None:
        """Look up newly queued URLs in batches, for `take` when they are fetched."""
        if len(self._cache) + len(self._pending) + len(urls) > _CACHE_MAX:
            return
        self._pending.update(dict.fromkeys(urls))
        if len(self._pending) >= _PREFETCH_BATCH:
            self._look_up_pending()

    async def take(self, url: str) -> Previous | None:
        """`url`'s row: prefetched if it was, else looked up now."""
        if url in self._pending:
            self._look_up_pending()
        if url in self._cache:
            return self._cache.pop(url)
        return self.lookup_many([url]).get(url)

    def _look_up_pending(self) -> None:
        pending = list(self._pending)
        self._pending.clear()
        found = self.lookup_many(pending)
        for url in pending:
            self._cache[url] = found.get(url)

    async def unreached(self, claimed: Callable[[str], bool]) -> AsyncIterator[list[str]]:
        """The previous crawl's page URLs whose visit key is not `claimed`, in batches."""
        rows = self._db.execute(
            "SELECT key, url FROM pages WHERE depth <= ?",
            (self._max_depth if self._max_depth is not None else sys.maxsize,),
        )
        while batch := rows.fetchmany(_INSERT_BATCH):
            urls = [url for key, url in batch if not claimed(key)]
            if urls:
                yield urls

    def earliest_due(self) -> str | None:
        """--revisit: when the first page is due (ISO 8601), or None if none has a time."""
        row = self._db.execute("SELECT min(due_at) FROM pages").fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self._db.close()


def previous_of(row: tuple[Any, ...]) -> Previous:
    """The `Previous` of a pages row (joined with its capture's three columns)."""
    _, url, status, fetched_at, digest, etag, last_modified, record = row[:8]
    warc_file, warc_offset, warc_length, interval_s, due, lastmod_right, rid, uri, date = row[8:]
    warc = (warc_file, warc_offset, warc_length) if warc_file is not None else None
    capture = Capture(rid, uri, date) if rid is not None else None
    return Previous(
        url,
        status,
        fetched_at,
        digest,
        etag,
        last_modified,
        record,
        warc,
        interval_s,
        due,
        None if lastmod_right is None else bool(lastmod_right),
        capture,
    )


@dataclass(frozen=True, slots=True)
class Source:
    """What PREV names: the JSONL to read (up to `length` bytes, or all of it decompressed
    if `gzipped`), and where the index goes."""

    jsonl: Path
    length: int
    index: Path
    gzipped: bool = False


def open_history(prev: str, warc_dirs: Sequence[str], max_depth: int | None = None) -> History:
    """The index of the crawl at `prev`, built if needed; ConfigError if `prev` is no
    usable crawl (then nothing is written). `warc_dirs`: where its WARC files may be;
    `max_depth`: the recrawl's (see History)."""
    source = _writable(_source(Path(prev)), prev)
    stamp = f"{HISTORY_FORMAT}:{source.jsonl.resolve()}:{source.length}:{_mtime(source.jsonl)}"
    if not _index_matches(source.index, stamp, warc_dirs):
        _build(source, stamp, warc_dirs, prev)
    history = History(source.index, max_depth)
    if warc_dirs and history.unfound_warc_files:
        log.warning(
            "--since %s: its WARC files (such as %s) are in none of %s: nothing archived now "
            "can refer to them, so 304s are archived as bare 304s, which replay empty, "
            "and unchanged pages whole",
            prev,
            history.unfound_warc_files[0],
            ", ".join(warc_dirs),
        )
    return history


def _source(prev: Path) -> Source:
    label = f"--since {prev}"
    if not prev.exists():
        raise ConfigError(f"{label}: no such file or directory")
    if prev.is_dir():
        return _state_source(prev, label)
    size = prev.stat().st_size
    if size == 0:
        raise ConfigError(f"{label} is empty: not a crawl's JSONL output")
    with open(prev, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"  # kept compressed, as many keep old outputs
    return Source(prev, size, index_beside(prev), gzipped)


def _writable(source: Source, prev: str) -> Source:
    """`source`, its index moved to the user's cache if PREV's directory is read-only
    (an archive's storage): there it is kept for later recrawls of the same PREV."""
    directory = source.index.parent
    if os.access(directory, os.W_OK):
        return source
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    cache = cache / "crawler" / "history"
    with contextlib.suppress(OSError):  # then refused below, naming it
        cache.mkdir(parents=True, exist_ok=True)
    if not os.access(cache, os.W_OK):
        raise ConfigError(f"--since {prev}: cannot write its index in {directory} nor {cache}")
    name = hashlib.sha1(str(source.index.resolve()).encode()).hexdigest()[:20]
    return replace(source, index=cache / f"{name}.history.sqlite")


def index_beside(jsonl: Path) -> Path:
    """Where the index of a crawl's JSONL output goes: beside it."""
    return jsonl.with_name(jsonl.name + ".history.sqlite")


def _state_source(directory: Path, label: str) -> Source:
    database = directory / "crawl.sqlite"
    if not database.is_file():
        raise ConfigError(f"{label} is a directory but not a crawl's --state directory")
    lock = directory / "lock"
    if lock.exists():
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"{label}: a crawler is running in it") from None
        finally:
            os.close(fd)
    try:
        db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            meta = dict(db.execute("SELECT name, value FROM meta"))
            last = db.execute("SELECT positions FROM log ORDER BY seq DESC LIMIT 1").fetchone()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise ConfigError(f"{label}: not a crawl's state ({exc})") from None
    schema = int(meta.get("schema", 0))
    if schema != STATE_SCHEMA:
        raise ConfigError(
            f"{label} was written by another version of the crawler (state format {schema}, "
            f"this one reads {STATE_SCHEMA})"
        )
    output = meta.get("output_path")
    if not output or last is None:
        raise ConfigError(f"{label}: the crawl wrote no output file to recrawl from")
    committed = int(orjson.loads(last[0]).get("jsonl", 0))
    path = Path(output)
    size = path.stat().st_size if path.exists() else -1
    if size < committed:
        raise ConfigError(
            f"{label}: its output {path} is cut short ({max(size, 0):,} bytes of "
            f"{committed:,} committed)"
        )
    return Source(path, committed, directory / "history.sqlite")


def _mtime(path: Path) -> int:
    return path.stat().st_mtime_ns


def _index_matches(index: Path, stamp: str, warc_dirs: Sequence[str]) -> bool:
    """Whether `index` was built from the same output, and knows the captures of its
    WARC files if `warc_dirs` now hold them (an index built without them has none)."""
    if not index.exists():
        return False
    try:
        db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
        try:
            meta = dict(db.execute("SELECT name, value FROM meta"))
        finally:
            db.close()
    except sqlite3.Error:
        return False
    if meta.get("source") != stamp:
        return False
    files = orjson.loads(meta["warc_files"])
    return meta["warc"] != "" or _warc_directory(files, warc_dirs) is None


def _build(source: Source, stamp: str, warc_dirs: Sequence[str], prev: str) -> None:
    """Index `source` into a temporary file, renamed into place once whole."""
    _sweep_builds(source.index)
    fd, temporary = _locked_temporary(source.index)
    try:
        db = sqlite3.connect(temporary, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")
            db.executescript(_SCHEMA)
            db.execute("BEGIN")
            depths, warc_files = _index_pages(db, source, prev)
            warc_dir = _index_captures(db, warc_files, warc_dirs, prev)
            db.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [
                    ("source", stamp),
                    ("depths", orjson.dumps(depths).decode()),
                    ("warc", warc_dir),
                    ("warc_files", orjson.dumps(sorted(warc_files)).decode()),
                ],
            )
            db.execute("COMMIT")
        finally:
            db.close()
        os.replace(temporary, source.index)
    except BaseException:
        os.unlink(temporary)
        raise
    finally:
        os.close(fd)
    pages = sum(depths.values())
    log.info("indexed %s pages of the previous crawl in %s", f"{pages:,}", source.index)


def _locked_temporary(index: Path) -> tuple[int, str]:
    """A new temporary file for `index`'s build, open and locked while the build lives:
    a build killed (kill -9) leaves one that no process holds, which the next removes."""
    while True:
        fd, temporary = tempfile.mkstemp(prefix=index.name, suffix=_BUILDING, dir=index.parent)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:  # not swept by another build between its making and lock
            return fd, temporary
        os.close(fd)


def _sweep_builds(index: Path) -> None:
    """Remove the temporary files of `index`'s builds that were killed; those of builds
    still running (another process's, on the same PREV) are locked, and stay."""
    for path in index.parent.glob(glob.escape(index.name) + "*" + _BUILDING):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # gone already
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path.unlink(missing_ok=True)
        except OSError:  # locked: a live build's (or not ours to remove)
            pass
        finally:
            os.close(fd)


def _raw_lines(source: Source, prev: str) -> Iterator[bytes]:
    """The lines of the JSONL, as far as `length` (the last one cut there, if it goes
    past), or to the end of its gzip stream."""
    if source.gzipped:
        yield from _gzip_lines(source.jsonl, prev)
        return
    with open(source.jsonl, "rb") as f:
        left = source.length
        for line in f:
            if left <= 0:
                return
            left -= len(line)
            yield line if left >= 0 else line[:left]


def _gzip_lines(path: Path, prev: str) -> Iterator[bytes]:
    try:
        with gzip.open(path, "rb") as f:
            yield from f
    except EOFError:
        raise ConfigError(f"--since {prev} is cut short: its gzip stream ends early") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise ConfigError(f"--since {prev} begins as gzip but is not gzip data ({exc})") from None


def _lines(source: Source, prev: str) -> Iterator[tuple[dict[str, Any], str]]:
    """The records of the JSONL, each with its visit key; ConfigError for what is not a
    crawl's."""
    # The field names and value types of records found well typed: a crawl's records come
    # in a few such shapes, and checking each field of each record took a third of the build.
    well_typed: set[tuple[tuple[str, ...], tuple[type, ...]]] = set()
    number = 0
    for number, line in enumerate(_raw_lines(source, prev), 1):
        if not line.endswith(b"\n"):
            raise ConfigError(f"--since {prev} is cut short: line {number} is incomplete")
        if number == 1 and line.startswith(codecs.BOM_UTF8):  # saved by a Windows editor
            line = line[len(codecs.BOM_UTF8) :]
        if line.isspace():  # a blank line an editor or a `cat` left: no record
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise ConfigError(
                f"--since {prev}: line {number} is not JSON; not a crawl's JSONL output"
            ) from None
        if not isinstance(record, dict) or "url" not in record:
            raise ConfigError(f"--since {prev}: line {number} is not a crawl's record")
        shape = (tuple(record), tuple(map(type, record.values())))
        if shape not in well_typed:
            _check_fields(record, number, prev)
            if len(well_typed) < _SHAPES_MAX:
                well_typed.add(shape)
        links = record.get("links")
        try:
            if links and not set(map(type, links)) <= {str}:
                raise ValueError("a link not a string")
            url = record["url"]
            if "://" not in url:  # no host: finding its origin raised IndexError
                raise ValueError("no scheme://")
            key = visit_key(url)  # ValueError: no scheme://host/ before its path
        except ValueError:
            wrong = "url" if links is None or set(map(type, links)) <= {str} else "links"
            raise _mistyped(record, wrong, number, prev) from None
        yield record, key
    if number and not well_typed:  # every line blank: a record would have left its shape
        raise ConfigError(f"--since {prev} has no record: not a crawl's JSONL output")


_NEVER_NULL = ("url", "depth", "fetched_at")
_SHAPES_MAX = 4096  # a JSONL of ever new shapes is checked record by record, in bounded memory


def _check_fields(record: dict[str, Any], number: int, prev: str) -> None:
    """ConfigError if `record` lacks a field a recrawl needs, or has one a recrawl reads
    of another type than a crawl writes it in (which ended the recrawl in a traceback,
    or went on into the new records)."""
    missing = [name for name in NEEDED_FIELDS if name not in record]
    if missing:
        raise ConfigError(
            f"--since {prev} was written by an older version of the crawler: "
            f"its records have no {', '.join(missing)}"
        )
    wrong = mistyped_field(record, FIELD_TYPES, _NEVER_NULL)
    if wrong is not None:
        raise _mistyped(record, wrong, number, prev)


def _mistyped(record: dict[str, Any], field: str, number: int, prev: str) -> ConfigError:
    return ConfigError(
        f"--since {prev}: line {number} is not a crawl's record "
        f"(its {field} is {orjson.dumps(record[field]).decode()[:40]})"
    )


def _index_pages(
    db: sqlite3.Connection, source: Source, prev: str
) -> tuple[dict[str, int], set[str]]:
    """Insert a row per page; their count by depth, and the WARC files the records name."""
    warc_files: set[str] = set()
    lastmod_wrong: set[str] = set()  # hosts; as many as the crawl has at most
    rows: list[tuple[Any, ...]] = []
    aliases: list[tuple[str, str]] = []
    for record, key in _lines(source, prev):
        if record.get("kind", "page") != "page":
            continue
        warc_file = record.get("warc_file")
        if warc_file:
            warc_files.add(warc_file)
        if record.get("lastmod_right") is False:
            lastmod_wrong.add(host_of(record["url"]))
        rows.append((*page_row(record, key), record["depth"]))
        if (alias := _alias(record, key, rows[-1][2])) is not None:
            aliases.append(alias)
        if len(rows) >= _INSERT_BATCH:
            _insert(db, rows)
            db.executemany("INSERT OR REPLACE INTO aliases VALUES (?, ?)", aliases)
            aliases.clear()
    _insert(db, rows)
    db.executemany("INSERT OR REPLACE INTO aliases VALUES (?, ?)", aliases)
    db.executemany("INSERT INTO lastmod_wrong VALUES (?)", [(host,) for host in lastmod_wrong])
    depths = {str(d): n for d, n in db.execute("SELECT depth, count(*) FROM pages GROUP BY depth")}
    return depths, warc_files


def _alias(record: dict[str, Any], key: str, status: Any) -> tuple[str, str] | None:
    """The key of the URL a 2xx page's redirects ended at on its own origin, and the
    page's (`key`): its validators and fields are that URL's (the links kept relative
    to the origin, they are read back there). `status`: its row's."""
    final_url, url = record.get("final_url"), record["url"]
    if not final_url or final_url == url or not isinstance(status, int):
        return None
    if not 200 <= status < 300:
        return None
    if origin_of(final_url) != origin_of(url):
        return None
    return visit_key(final_url), key


def page_row(record: dict[str, Any], key: str | None = None) -> tuple[Any, ...]:
    """A record's row in the pages table: what a recrawl needs of it. `key`: its URL's
    visit key, if known."""
    status = record["status"]
    if status == NOT_MODIFIED and record.get("changed") is False and not record.get("error"):
        status = 200  # a 304 stood for the 200 before it, whose fields it carried on
    kept = _kept(record) if isinstance(status, int) and 200 <= status < 300 else None
    # The validators of a body that did not come whole (cut off, undecodable) are not
    # sent back: a 304 would say unchanged a page the crawl never had, every time after.
    error = record.get("error")
    whole = not error or error in AFTER_THE_FETCH
    return (
        key if key is not None else visit_key(record["url"]),
        record["url"],
        status,
        record["fetched_at"],
        record["content_digest"],
        record.get("etag") if whole else None,
        _usable(record.get("last_modified"), record["fetched_at"]) if whole else None,
        kept,
        record.get("warc_file"),
        record.get("warc_offset"),
        record.get("warc_length"),
        record.get("revisit_interval_s"),
        record.get("due_at"),
        record.get("lastmod_right"),
    )


_NOT_HOOKS = frozenset(RECORD_FIELDS).union(CRAWLER_FIELDS)
_CARRIED = (*CARRIED_FIELDS, *CARRIED_EXTRA)


def _kept(record: dict[str, Any]) -> bytes:
    """What a 304 takes from `record`, as JSON; links on the page's own origin without it
    (a page's links are mostly its site's: half the bytes, where zlib took 20 us a row)."""
    fields = {name: record[name] for name in _CARRIED if name in record}
    # An on_page hook's, found in the body as well: a 304 has none to find them in again
    if not _NOT_HOOKS.issuperset(record):
        fields.update((name, value) for name, value in record.items() if name not in _NOT_HOOKS)
    final_url = record.get("final_url")
    if final_url and final_url != record["url"]:  # redirected: its validators are for this
        fields["final_url"] = final_url
    if record.get("error"):  # a page parsed in part: parsing the same body again may not be
        fields["error"] = record["error"]
    if links := fields.get("links"):
        fields["links"] = orjson.Fragment(_relative_links(links, origin_of(record["url"])))
    return orjson.dumps(fields)


def _relative_links(links: list[str], origin: str) -> bytes:
    """`links` as a JSON array, those on `origin` cut to their paths. Cut in the JSON, where
    a quote not escaped begins or ends a string: a comprehension over the links took a
    third of a row's build."""
    array, prefix = orjson.dumps(links), f'"{origin}/'.encode()
    if b'\\"' not in array:  # no quote in a link (a canonical URL escapes them)
        return array.replace(prefix, b'"/')
    return array.replace(b"[" + prefix, b'["/').replace(b"," + prefix, b',"/')


_COLUMNS = (
    *("key", "url", "status", "fetched_at", "digest", "etag", "last_modified", "record"),
    *("warc_file", "warc_offset", "warc_length", "interval_s", "due_at", "lastmod_right"),
    "depth",
)
# A URL twice (outputs put together, one fetched again after its lease ran out): its
# latest fetch is the one a recrawl compares with, whatever the order of the lines.
_UPSERT = (
    f"INSERT INTO pages VALUES ({','.join('?' * len(_COLUMNS))}) ON CONFLICT (key) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in _COLUMNS[1:])
    + " WHERE excluded.fetched_at >= pages.fetched_at"
)


def _insert(db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    db.executemany(_UPSERT, rows)
    rows.clear()


def _index_captures(
    db: sqlite3.Connection, files: set[str], warc_dirs: Sequence[str], prev: str
) -> str:
    """Note the record heads of the WARC files the records name; the directory they
    were found in, or "" if none holds them all (then nothing is revisited)."""
    directory = _warc_directory(files, warc_dirs)
    if directory is None:
        return ""
    from crawler.sinks.warc import read_record_heads

    rows: list[tuple[Any, ...]] = []
    for name in sorted(files):
        path = directory / name
        end = 0
        for head in read_record_heads(path):
            end = head.offset + head.length
            rows.extend(_capture_rows(name, head.offset, head.fields))
            if len(rows) >= _INSERT_BATCH:
                db.executemany("INSERT OR REPLACE INTO captures VALUES (?,?,?,?,?)", rows)
                rows.clear()
        if end != path.stat().st_size:
            raise ConfigError(f"--since {prev}: WARC file {path} is cut short")
    db.executemany("INSERT OR REPLACE INTO captures VALUES (?,?,?,?,?)", rows)
    return str(directory)


def _warc_directory(files: Iterable[str], warc_dirs: Sequence[str]) -> Path | None:
    """The first of `warc_dirs` that holds all the WARC `files`; None if there are none."""
    files = list(files)
    if not files:
        return None
    return next((Path(d) for d in warc_dirs if all((Path(d) / f).is_file() for f in files)), None)


def _capture_rows(file: str, offset: int, fields: dict[bytes, bytes]) -> Iterable[tuple[Any, ...]]:
    """A response, or a revisit standing for the capture it refers to."""
    kind = fields.get(b"WARC-Type")
    if kind == b"response":
        ids = (fields[b"WARC-Record-ID"], fields[b"WARC-Target-URI"], fields[b"WARC-Date"])
    elif kind == b"revisit" and b"WARC-Refers-To" in fields:
        ids = (
            fields[b"WARC-Refers-To"],
            fields.get(b"WARC-Refers-To-Target-URI", fields[b"WARC-Target-URI"]),
            fields.get(b"WARC-Refers-To-Date", b""),
        )
    else:
        return ()
    return [(file, offset, *ids)]
