"""--warc's CDXJ index, as pywb writes and reads it: DIR/NAME.cdxj beside each DIR/NAME.warc.gz.

A line for each response and revisit record, the records pywb's indexer
(cdxj-indexer) indexes by default, with its fields, values and JSON, so that the
two agree line for line:

    SURT-key 14-digit-timestamp {"url": ..., "mime": ..., "status": ..., "digest": ...,
                                 "length": ..., "offset": ..., "filename": ...}

The key is the `surt` package's, which pywb uses; `mime` is the Content-Type's media
type (`warc/revisit` for a revisit), `digest` the record's WARC-Payload-Digest, and
`length` and `offset` the record's gzip member in `filename`.

While its WARC file is being written, an index's lines are in the order of the
records. Once that file is finished (the next one begun, or the crawl closed), its
lines are sorted, as pywb's binary search needs them: a directory of these files is an
index pywb reads as it is (`index_paths: DIR`).

Exactly once with --state: the index has no commit point of its own. A line is
written as soon as the WARC sink has written its record (a robots.txt exchange,
which no page's commit carries, included), and on resume the WARC sink's committed
position decides for both: the lines of records past the committed offset are
dropped, with the indexes of the WARC files the resume dropped.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import re
import time
from pathlib import Path

from crawler.fetch import Exchange
from crawler.page import Page
from crawler.sinks import WriteFailed, write_all
from crawler.sinks.warc import FILE_NAME, RecordLocation, WarcSink
from crawler.urls import DEFAULT_PORTS

INDEX_SUFFIX = ".cdxj"
WARC_SUFFIX = ".warc.gz"
_MEDIA_TYPE_END = re.compile(r"[;\s]")  # where cdxj-indexer cuts a Content-Type
_OFFSET = re.compile(rb'"offset": "(\d+)"')
# An http(s) URL with no userinfo, query or fragment, whose path's segments hold only
# characters `surt` leaves as they are but for case, none of them `.` or `..` or empty:
# `surt` keys its origin, then adds the path lowercased, less a trailing slash.
_PLAIN_URL = re.compile(r"(https?://[^/?#@%\\\s]+)(/|(?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+/?)")
# An origin whose host is a DNS name of letters, digits and hyphens (its last label not
# all digits) or a dotted-quad IPv4 address, and whose port has no leading zero: such a
# host `surt` only lowercases, strips of a leading `www`, `www1`..., and reverses.
_PLAIN_ORIGIN = re.compile(
    r"(https?)://"
    r"((?:[a-z0-9-]+\.)*[a-z0-9-]*[a-z-][a-z0-9-]*|(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}"
    r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"
    r"(?::([1-9]\d{0,4}))?",
    re.IGNORECASE,
)
_WWW = re.compile(r"www\d*\.")


def index_path(directory: Path, warc_file: str) -> Path:
    """The index of the WARC file `warc_file` in `directory`."""
    return directory / (warc_file.removesuffix(WARC_SUFFIX) + INDEX_SUFFIX)


def cdxj_line(exchange: Exchange, revisit: bool, location: RecordLocation) -> bytes:
    """The index line of the response (or revisit) record of `exchange` at `location`."""
    url = exchange.url.replace("\r", " ").replace("\n", " ")  # as the record's WARC-Target-URI
    fields: dict[str, str] = {"url": url}
    mime = "warc/revisit" if revisit else _media_type(exchange)
    if mime is not None:
        fields["mime"] = mime
    status = exchange.status_line.split(b" ")
    if len(status) > 1:
        fields["status"] = status[1].decode("latin-1")
    fields["digest"] = exchange.payload_digest
    fields["length"] = str(location.length)
    fields["offset"] = str(location.offset)
    fields["filename"] = location.file
    timestamp = _timestamp(int(exchange.fetched_at))
    return f"{surt_key(url)} {timestamp} {json.dumps(fields)}\n".encode()


def surt_key(url: str) -> str:
    """`surt.surt(url)`, pywb's key, with the origin's part computed once per origin
    for the URLs most crawls are made of. `surt` is pure Python and resolves a
    numeric host with getaddrinfo: 12 us a URL, a tenth of what a WARC record costs."""
    plain = _PLAIN_URL.fullmatch(url)
    if plain is None:
        return _surt(url)
    path = plain[2].lower()
    return _origin_key(plain[1]) + (path[:-1] if len(path) > 1 and path[-1] == "/" else path)


@functools.lru_cache(maxsize=4096)
def _origin_key(origin: str) -> str:
    """The key of `origin`'s root less its path: `1,0,0,127:8000)`; made here for the
    hosts most crawls are made of, as `surt` makes it, whose import takes 50-100 ms
    (it imports tldextract, and that requests)."""
    plain = _PLAIN_ORIGIN.fullmatch(origin)
    if plain is None or (plain[3] and int(plain[3]) > 65535):
        return _surt(origin + "/")[:-1]
    scheme, host, port = plain[1].lower(), plain[2].lower(), plain[3]
    host = host.removeprefix(www[0]) if (www := _WWW.match(host)) else host
    key = ",".join(reversed(host.split(".")))
    return key + (f":{port})" if port and port != DEFAULT_PORTS[scheme] else ")")


def _surt(url: str) -> str:
    import surt  # type: ignore[import-untyped]  # pywb's SURT keys, so that ours are the same

    return str(surt.surt(url))


@functools.lru_cache(maxsize=4)
def _timestamp(second: int) -> str:
    """A CDXJ line's 14-digit timestamp: formatted once a second."""
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(second))


def _media_type(exchange: Exchange) -> str | None:
    for name, value in exchange.raw_headers:
        if name.lower() == b"content-type":
            return _MEDIA_TYPE_END.split(value.decode("latin-1").strip(), maxsplit=1)[0]
    return None


def sort_index(path: Path) -> None:
    """Sort the lines of the index at `path` (if not sorted yet), atomically."""
    lines = path.read_bytes().splitlines(keepends=True)
    ordered = sorted(lines)
    if ordered != lines:
        _replace(path, ordered)


def _replace(path: Path, lines: list[bytes]) -> None:
    """Make `lines` the content of `path`: written aside, then renamed over it."""
    aside = path.with_name(path.name + ".tmp")
    try:
        aside.write_bytes(b"".join(lines))
        os.replace(aside, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a copy half written, on a full disk
            aside.unlink(missing_ok=True)
        raise WriteFailed(f"cannot write {path}: {exc.strerror}") from None


class CdxjSink:
    """Writes the index of each WARC file the WARC sink writes, as it writes its records."""

    def __init__(self, warc: WarcSink, resumed: bool = False) -> None:
        self.directory = warc.directory
        self._warc = warc
        self._file = ""  # the WARC file whose index is open
        self._path = Path()  # that index's path
        self._fd = -1
        if resumed:
            self._resume()
        warc.on_record = self.add

    @property
    def position(self) -> None:
        """None: the WARC sink's position is the index's too (see the module's docstring)."""
        return None

    def write(self, page: Page) -> None:
        """Nothing: each line was written with its record (`add`)."""

    def add(self, exchange: Exchange, revisit: bool, location: RecordLocation) -> None:
        """Index the record the WARC sink just wrote at `location`."""
        if location.file != self._file:
            self._finish()
            self._open(location.file)
        write_all(self._fd, cdxj_line(exchange, revisit, location), self._path)

    def close(self) -> None:
        self._finish()
        for warc_file in self._warc.files:  # a file that holds no capture: an empty index
            path = index_path(self.directory, warc_file)
            if not path.exists():
                _replace(path, [])

    def _open(self, warc_file: str) -> None:
        """Open the index of `warc_file`, to append to it until the file is finished."""
        self._file = warc_file
        self._path = path = index_path(self.directory, warc_file)
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise WriteFailed(f"cannot write {path}: {exc.strerror}") from None

    def _finish(self) -> None:
        """Close the open index, its WARC file finished, and sort it."""
        if self._fd < 0:
            return
        os.close(self._fd)
        self._fd = -1
        sort_index(self._path)

    def _resume(self) -> None:
        """Keep the lines of the records the resumed WARC sink kept, and nothing else."""
        warc = self._warc
        current = index_path(self.directory, warc.file)
        if current.exists():
            lines = current.read_bytes().splitlines(keepends=True)
            _replace(current, [line for line in lines if _committed(line, warc.offset)])
        self._open(warc.file)  # so that it is sorted when finished, even with no new line
        # The index of the file before was being sorted when the crawl stopped, or not yet.
        if len(warc.files) > 1:
            previous = index_path(self.directory, warc.files[-2])
            if previous.exists():
                sort_index(previous)
        for path in self.directory.glob(f"{glob.escape(warc.prefix)}-*{INDEX_SUFFIX}"):
            warc_name = path.name.removesuffix(INDEX_SUFFIX) + WARC_SUFFIX
            match = FILE_NAME.fullmatch(warc_name)
            if (
                match
                and match["prefix"] == warc.prefix
                and not (self.directory / warc_name).exists()
            ):
                path.unlink()  # its WARC file, begun after the last commit, is gone


def _committed(line: bytes, end: int) -> bool:
    """Whether `line` is whole and indexes a record before byte `end` of its WARC file."""
    match = _OFFSET.search(line)
    return line.endswith(b"\n") and match is not None and int(match[1]) < end
