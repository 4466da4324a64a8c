"""The --warc sink: WARC/1.1 archives, DIR/<prefix>-<UTC timestamp>-<serial>.warc.gz.

Each file starts with a `warcinfo` record; every HTTP exchange becomes a `request`
record and a `response` record, or a `revisit` record when it is a 2xx whose
payload already is in the crawl's archive as a 2xx. An error page is always
stored whole: pywb indexes a revisit without its status, and the status of an
error page is the point of it. Each record is its own gzip member, so a reader can
seek to a record's offset and inflate just that record.

The block of a response is the HTTP message as received, status line and raw
headers, then the payload still in its Content-Encoding. aiohttp removes the
chunked transfer coding, so a chunked response is stored as Common Crawl stores
it and as warcio and pywb read it: the `Transfer-Encoding` header renamed to
`X-Crawler-Transfer-Encoding` (and any `Content-Length` beside it to
`X-Crawler-Content-Length`), and a `Content-Length` of the stored payload added.
A reader that saw `Transfer-Encoding: chunked` would try to undo chunks that are
no longer there; one that sees a Content-Length reads exactly the payload. A payload
cut at --max-bytes (`WARC-Truncated: length`) gets the same treatment: with the
server's Content-Length, pywb replayed a head promising more bytes than it had, and
the browser waited for them until it timed out.

The records are serialized here and compressed with ISA-L's deflate (the `isal`
package; zlib if it is missing): warcio took 10x and zlib 5x the CPU per page
(benchmarks/README.md).

Each page's exchanges (its earlier attempts', its redirect hops, its own) are
written when the page is committed; the place of its final response (or revisit)
record goes into the page's fields as `warc_file`, `warc_offset`, `warc_length`.
robots.txt exchanges, which no page carries, are written as they are fetched.
Each response or revisit record, once written, is told to `on_record`: the CDXJ
index (crawler/sinks/cdxj.py) writes its line then.

`position` is what a state directory commits: the current file and its length.
`WarcSink.resume` cuts that file back to it, deletes the files begun after it,
and reads the kept files' payload digests back, so revisits still point to the
first capture after a resume.

The revisit index (payload digest -> first capture) is the process's own: with
several processes on one crawl (--redis, where each adds its member id to the
prefix), a payload
first archived by another process is archived again, not written as a revisit.
Across the rounds of --revisit with --redis, a revisit refers to the previous
round's capture whoever wrote it: each page's `capture` (the record holding its
payload) goes into its row in Redis (crawler/state/redis_rows.py).
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crawler import __version__
from crawler.config import ConfigError, Settings, make_directory
from crawler.fetch import NOT_MODIFIED, Exchange, payload_digest, sha1_base32, status_is_2xx
from crawler.history import Capture
from crawler.page import Page
from crawler.sinks import write_all

try:
    from isal import isal_zlib as _deflate
except ImportError:  # isal has wheels for the common platforms; zlib is 5x slower
    import zlib as _deflate  # type: ignore[no-redef]  # the same functions, slower

# isal's stub types its error class as an instance of it.
_INFLATE_ERROR: type[Exception] = _deflate.error  # type: ignore[assignment]

WARC_VERSION = b"WARC/1.1"
REVISIT_PROFILE = b"http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
NOT_MODIFIED_PROFILE = b"http://netpreserve.org/warc/1.1/revisit/server-not-modified"
GZIP_LEVEL = 1  # ISA-L's level 1 compresses HTML as well as zlib's level 1, 5x faster
# A request record is a few hundred bytes: level 0 costs a fifth of level 1 on it.
REQUEST_GZIP_LEVEL = 0
_GZIP_WBITS = 31
_CRLF = b"\r\n"
_READ_BYTES = 1 << 20
_MAX_HEAD_BYTES = 1 << 16  # a WARC header and an HTTP status line fit
_WARCINFO_START_BYTES = 4096  # a warcinfo record's header and first field, deflated
FILE_NAME = re.compile(r"(?P<prefix>.+)-(?P<time>\d{17})-(?P<serial>\d{5,})\.warc\.gz")
# The warcinfo field naming the crawl that wrote a file, the same across its resumes:
# another crawl may write into the same DIR under the same prefix.
RUN_FIELD = "crawler-run"


@dataclass(frozen=True, slots=True)
class RecordLocation:
    """Where one record is: the file's name within DIR, and its gzip member's bytes;
    and the capture of its payload that a later revisit may refer to (the record
    itself, or the one a revisit refers to), if any."""

    file: str
    offset: int
    length: int
    capture: Capture | None = None


# Told of each response or revisit record as it is written: an index (crawler/sinks/cdxj.py).
OnRecord = Callable[[Exchange, bool, RecordLocation], None]


@dataclass(frozen=True, slots=True)
class NotModified:
    """A 304's revisit: the payload digest and capture of what it says is unchanged."""

    digest: str
    capture: Capture


class _WarcClock:
    """WARC-Date of a time: UTC, to the microsecond as WARC/1.1 allows; the date and
    second are formatted once a second (gmtime and a %-format took 3 us a record)."""

    def __init__(self) -> None:
        self._second = -1
        self._prefix = b""

    def date(self, timestamp: float) -> bytes:
        second = int(timestamp)
        if second != self._second:
            t = time.gmtime(second)
            self._second = second
            self._prefix = b"%04d-%02d-%02dT%02d:%02d:%02d." % t[:6]
        return self._prefix + b"%06dZ" % int((timestamp - second) * 1_000_000)


warc_date = _WarcClock().date


class _RecordIds:
    """Random (version 4) UUID URNs, made without uuid.UUID's slow constructor, from
    random bytes read 256 ids at a time (a system call an id took 2 us).

    A process forked with some of those bytes unread would draw the same ids as
    its parent: the child forgets them, and reads its own."""

    def __init__(self) -> None:
        self._random = b""
        self._used = 0

    def forget(self) -> None:
        self._random, self._used = b"", 0

    def next(self) -> bytes:
        if self._used == len(self._random):
            self._random, self._used = os.urandom(16 * 256), 0
        raw = bytearray(self._random[self._used : self._used + 16])
        self._used += 16
        raw[6] = raw[6] & 0x0F | 0x40
        raw[8] = raw[8] & 0x3F | 0x80
        x = raw.hex().encode("ascii")
        return b"<urn:uuid:%s-%s-%s-%s-%s>" % (x[:8], x[8:12], x[12:16], x[16:20], x[20:])


_record_ids = _RecordIds()
_record_id = _record_ids.next
os.register_at_fork(after_in_child=_record_ids.forget)


def _header_value(value: str) -> bytes:
    """A header value on one line: no CR or LF can end the header early."""
    return value.replace("\r", " ").replace("\n", " ").encode("utf-8")


def not_modified_revisit(page: Page) -> bool:
    """Whether `page` is a 304 that says its previous capture is unchanged: archived as a
    revisit of that capture, and replayed as it."""
    return page.status == NOT_MODIFIED and page.fields.get("changed") is False


def http_response_head(exchange: Exchange) -> bytes:
    """Status line and headers as received, chunked transfer coding and a payload cut
    at --max-bytes accounted for."""
    headers = exchange.raw_headers
    lines = _CRLF.join([exchange.status_line, *map(b": ".join, headers), b"", b""])
    # One search of the whole head first: a chunked response is the rare one.
    if not exchange.truncated and (
        b"chunked" not in lines.lower()
        or not any(
            name.lower() == b"transfer-encoding" and b"chunked" in value.lower()
            for name, value in headers
        )
    ):
        return lines
    renamed = [exchange.status_line]
    for name, value in headers:
        if name.lower() in (b"transfer-encoding", b"content-length"):
            name = b"X-Crawler-" + name
        renamed.append(name + b": " + value)
    renamed.append(b"Content-Length: " + str(len(exchange.payload)).encode("ascii"))
    return _CRLF.join(renamed) + _CRLF + _CRLF


def _serialize(lines: list[bytes], block: bytes) -> bytes:
    """One record, uncompressed: version, header lines (`Name: value`), length, block.

    One join of lines made with their names: a join per field, then one of the
    record, and the block copied twice, took 3x as long."""
    return _CRLF.join(
        [WARC_VERSION, *lines, b"Content-Length: %d" % len(block), b"", block, b"", b""]
    )


def _lines(fields: Sequence[tuple[bytes, bytes]]) -> list[bytes]:
    return [name + b": " + value for name, value in fields]


def _gzip(data: bytes, level: int = GZIP_LEVEL) -> bytes:
    return _deflate.compress(data, level, wbits=_GZIP_WBITS)


class WarcSink:
    """Writes a crawl's exchanges into rotating WARC files in one directory."""

    def __init__(
        self,
        directory: str,
        prefix: str,
        max_size_bytes: int,
        info: Mapping[str, str],
        serial: int = 0,
    ) -> None:
        self.directory = Path(directory)
        self.prefix = prefix
        self.max_size_bytes = max_size_bytes
        self._info = {RUN_FIELD: os.urandom(16).hex(), **info}
        self._serial = serial
        self._fd = -1
        self.file = ""
        self.offset = 0
        self._warcinfo_id = b""
        self._warcinfo_line = b""  # this file's records' WARC-Warcinfo-ID line
        self._path = Path()  # the current file's
        self._info_length = -1  # the current file's length with only its warcinfo
        self._first_captures: dict[str, Capture] = {}
        self.files: list[str] = []  # the crawl's files so far, in order, the current one last
        self.on_record: OnRecord | None = None  # (exchange, is_revisit, location)

    @property
    def run(self) -> str:
        """The id of the crawl run writing these files, as each file's warcinfo names it."""
        return self._info[RUN_FIELD]

    @property
    def position(self) -> list[str | int]:
        """The current file and its length: what a state directory commits."""
        return [self.file, self.offset]

    def write(self, page: Page) -> None:
        """Archive `page`'s exchanges; note where its final response record went.

        A recrawled page's payload may be in the previous crawl's archive: then an
        identical payload becomes a revisit of that capture, as a 304 does."""
        response = page.response
        if response is None or not response.exchanges:  # nothing was fetched
            return
        not_modified = None  # what a 304 to this crawl's conditional request stands for
        previous = page.previous
        if previous is not None and previous.ok and previous.capture and previous.digest:
            capture = previous.capture
            self._first_captures.setdefault(previous.digest, capture)
            not_modified = NotModified(previous.digest, capture)
        *earlier_exchanges, last = response.exchanges
        for exchange in earlier_exchanges:
            # A 304 not believed (it named another ETag) is archived as what it said, a
            # revisit: stored as a 304, pywb would replay it, empty, in place of the
            # page fetched after it in the same second.
            self.write_exchange(exchange, not_modified if exchange.not_modified else None)
        location = self.write_exchange(last, not_modified if not_modified_revisit(page) else None)
        page.fields["warc_file"] = location.file
        page.fields["warc_offset"] = location.offset
        page.fields["warc_length"] = location.length
        page.capture = location.capture

    def write_exchanges(self, exchanges: Sequence[Exchange]) -> RecordLocation | None:
        """Write each exchange's request and response; where the last response went."""
        location = None
        for exchange in exchanges:
            location = self.write_exchange(exchange)
        return location

    def start(self) -> None:
        """Begin the first file, so that even the first commit has a position."""
        self._make_room(0)

    def resume(self, file: str, offset: int) -> None:
        """Go on from a committed position: cut `file` back to `offset`, drop later files.

        The crawl's files are those its warcinfo records name as the same run as
        `file`'s, from its first (serial 0) file to `file`, in the order of their
        names' timestamps; other crawls' files in DIR are left alone, whatever their
        names. (A file of an older version, which names no run, is taken for this
        crawl's by its name alone, when `file` names none either.)
        """
        match = FILE_NAME.fullmatch(file)
        path = self.directory / file
        if match is None or not path.exists():
            raise FileNotFoundError(path)
        serial, stamp = int(match["serial"]), match["time"]
        run = _run_of(path)
        if run is not None:
            self._info[RUN_FIELD] = run
        kept: list[Path] = []
        for other, other_stamp, other_serial in sorted(self._own_files(), key=lambda f: f[1:]):
            if other_stamp > stamp and other_serial > serial:
                # Begun after the last commit, and holding nothing committed, if ours;
                # empty, it was cut before its warcinfo was written.
                if other.stat().st_size == 0 or _run_of(other) == run:
                    other.unlink()
            elif other_stamp <= stamp and (other == path or _run_of(other) == run):
                kept = [] if other_serial == 0 else kept
                kept.append(other)
        for kept_path in kept:
            self._learn_captures(kept_path, offset if kept_path == path else None)
        self._fd = os.open(path, os.O_WRONLY)
        os.ftruncate(self._fd, offset)
        os.lseek(self._fd, offset, os.SEEK_SET)
        self.file, self.offset, self._serial, self._path = file, offset, serial, path
        self.files = [kept_path.name for kept_path in kept]
        warcinfo = next(read_record_heads(path, offset))
        self._set_warcinfo_id(warcinfo.fields[b"WARC-Record-ID"])

    def write_exchange(
        self, exchange: Exchange, not_modified: NotModified | None = None
    ) -> RecordLocation:
        """Write `exchange`'s request and response (or revisit); where the latter went.

        `not_modified`: the exchange is a 304 to a conditional request, of the payload
        a previous crawl archived there."""
        date = warc_date(exchange.fetched_at)
        uri = _header_value(exchange.url)
        request_id, response_id = _record_id(), _record_id()
        common = [b"WARC-Target-URI: " + uri, b"WARC-Date: " + date]
        if exchange.ip_address:
            common.append(b"WARC-IP-Address: " + exchange.ip_address.encode("ascii"))
        head = http_response_head(exchange)
        digest = exchange.payload_digest
        block_digest = hashlib.sha1(head)
        # An error page is stored whole: its status must survive every reader (pywb
        # indexes an identical-payload revisit without one).
        first = self._first_captures.get(digest) if exchange.ok else None
        capture = first  # the capture of the payload, for a later crawl's revisits
        fields = [b"WARC-Record-ID: " + response_id, *common]
        if not_modified is not None:
            # No block (WARC 1.1, 6.7.3): a reader then serves the capture referred
            # to, headers and payload; with the 304's head as block, pywb replays the
            # 304, an empty page. The payload digest is the capture's, by which
            # replay tools find it.
            digest, first = not_modified.digest, not_modified.capture
            capture = first
            block = b""
            block_digest = hashlib.sha1(block)
            fields[:0] = [b"WARC-Type: revisit"]
            fields += [b"WARC-Profile: " + NOT_MODIFIED_PROFILE, *_lines(first.refers_to())]
        elif first is not None:
            # The head alone: "A WARC-Truncated header with reason 'length' shall be
            # used for any identical-digest truncation" (WARC 1.1, 6.7.2).
            block = head
            fields[:0] = [b"WARC-Type: revisit"]
            fields += [
                b"WARC-Profile: " + REVISIT_PROFILE,
                b"WARC-Truncated: length",
                *_lines(first.refers_to()),
            ]
        else:
            block = head + exchange.payload
            block_digest.update(exchange.payload)
            fields[:0] = [b"WARC-Type: response"]
            # An empty or cut payload, or an error page, is no original to point back to.
            if exchange.payload and not exchange.truncated and exchange.ok:
                capture = self._first_captures[digest] = Capture(response_id, uri, date)
        fields += [
            b"WARC-Concurrent-To: " + request_id,
            b"Content-Type: application/http; msgtype=response",
            b"WARC-Block-Digest: " + sha1_base32(block_digest.digest()).encode("ascii"),
            b"WARC-Payload-Digest: " + digest.encode("ascii"),
        ]
        if exchange.truncated and first is None and not_modified is None:
            fields.append(b"WARC-Truncated: " + exchange.truncated.encode("ascii"))
        fields.append(self._warcinfo_line)
        request = [
            b"WARC-Type: request",
            b"WARC-Record-ID: " + request_id,
            *common,
            b"WARC-Concurrent-To: " + response_id,
            b"Content-Type: application/http; msgtype=request",
            b"WARC-Block-Digest: " + payload_digest(exchange.request_head).encode("ascii"),
            self._warcinfo_line,
        ]
        request_member = _gzip(_serialize(request, exchange.request_head), REQUEST_GZIP_LEVEL)
        response_member = _gzip(_serialize(fields, block))
        self._make_room(len(request_member) + len(response_member))
        location = RecordLocation(
            self.file, self.offset + len(request_member), len(response_member), capture
        )
        self._write(request_member + response_member)  # one system call, not two
        if self.on_record is not None:
            if not_modified is not None:  # indexed as the record reads: no HTTP head
                exchange = replace(exchange, status_line=b"", raw_headers=(), payload_digest=digest)
            self.on_record(exchange, first is not None, location)
        return location

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _make_room(self, size: int) -> None:
        """Start a new file if there is none, or if `size` more bytes would overflow this one."""
        if self._fd >= 0 and (
            self.offset + size <= self.max_size_bytes or self.offset == self._info_length
        ):
            return
        self.close()
        self._serial += 1 if self.file else 0
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")[:17]
        self.file = f"{self.prefix}-{stamp}-{self._serial:05d}.warc.gz"
        self._path = self.directory / self.file
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self.files.append(self.file)
        self.offset = 0
        self._set_warcinfo_id(_record_id())
        block = "".join(f"{name}: {value}\r\n" for name, value in self._info.items())
        info = block.encode("utf-8")
        fields = [
            (b"WARC-Type", b"warcinfo"),
            (b"WARC-Record-ID", self._warcinfo_id),
            (b"WARC-Date", warc_date(datetime.now(UTC).timestamp())),
            (b"WARC-Filename", self.file.encode("utf-8")),
            (b"Content-Type", b"application/warc-fields"),
            (b"WARC-Block-Digest", payload_digest(info).encode("ascii")),
        ]
        self._write(_gzip(_serialize(_lines(fields), info)))
        self._info_length = self.offset

    def _set_warcinfo_id(self, record_id: bytes) -> None:
        self._warcinfo_id = record_id
        self._warcinfo_line = b"WARC-Warcinfo-ID: " + record_id

    def _write(self, data: bytes) -> None:
        write_all(self._fd, data, self._path)
        self.offset += len(data)

    def _own_files(self) -> Iterator[tuple[Path, str, int]]:
        """Files in DIR named as this writer names them: path, timestamp, serial."""
        for path in self.directory.glob(f"{glob.escape(self.prefix)}-*.warc.gz"):
            match = FILE_NAME.fullmatch(path.name)
            if match and match["prefix"] == self.prefix:
                yield path, match["time"], int(match["serial"])

    def _learn_captures(self, path: Path, end: int | None) -> None:
        """Note the payload digests of `path`'s response records (up to byte `end`)."""
        for head in read_record_heads(path, end):
            fields = head.fields
            if (
                fields.get(b"WARC-Type") != b"response"
                or b"WARC-Truncated" in fields
                or not status_is_2xx(head.http_status_line)
            ):
                continue
            digest = fields.get(b"WARC-Payload-Digest", b"").decode("ascii")
            if digest and fields.get(b"Content-Length") and digest not in self._first_captures:
                self._first_captures[digest] = Capture(
                    fields[b"WARC-Record-ID"], fields[b"WARC-Target-URI"], fields[b"WARC-Date"]
                )


def _run_of(path: Path) -> str | None:
    """The crawl run that wrote the file at `path`, as its warcinfo record names it."""
    with open(path, "rb") as f:
        deflated = f.read(_WARCINFO_START_BYTES)
    try:
        warcinfo = _deflate.decompressobj(_GZIP_WBITS).decompress(deflated)
    except _INFLATE_ERROR:  # not gzip: no file of ours
        return None
    field = RUN_FIELD.encode("ascii") + b": "
    start = warcinfo.find(_CRLF + field)
    if start < 0:
        return None
    start += len(_CRLF + field)
    return warcinfo[start : warcinfo.find(_CRLF, start)].decode("ascii", "replace")


@dataclass(frozen=True, slots=True)
class RecordHead:
    """One record of a file as read back: where its gzip member is, its WARC fields,
    and the first line of its block (an HTTP status line, for a response)."""

    offset: int
    length: int
    fields: dict[bytes, bytes]
    http_status_line: bytes


def read_record_heads(path: Path, end: int | None = None) -> Iterator[RecordHead]:
    """The head of each record in a file (up to byte `end`), streamed."""
    with open(path, "rb") as f:
        left = os.fstat(f.fileno()).st_size if end is None else end
        inflater = _deflate.decompressobj(_GZIP_WBITS)
        head = b""
        data = b""
        offset = fed = 0  # where the member starts; compressed bytes given to its inflater
        while data or left > 0:
            if not data:
                data = f.read(min(_READ_BYTES, left))
                left -= len(data)
                if not data:
                    break
            out = inflater.decompress(data)
            fed += len(data)
            if len(head) < _MAX_HEAD_BYTES and not _has_block_line(head):
                head += out
            data = b""
            if inflater.eof:
                data = inflater.unused_data
                length = fed - len(data)
                yield _record_head(head, offset, length)
                offset, fed = offset + length, 0
                inflater = _deflate.decompressobj(_GZIP_WBITS)
                head = b""


def _has_block_line(head: bytes) -> bool:
    """Whether `head` holds the WARC header and the block's first line."""
    end = head.find(_CRLF + _CRLF)
    return end >= 0 and head.find(_CRLF, end + 4) >= 0


def _record_head(head: bytes, offset: int, length: int) -> RecordHead:
    header, _, block = head.partition(_CRLF + _CRLF)
    fields: dict[bytes, bytes] = {}
    for line in itertools.islice(header.split(_CRLF), 1, None):
        name, _, value = line.partition(b": ")
        fields.setdefault(name, value)
    return RecordHead(offset, length, fields, block.partition(_CRLF)[0])


def warcinfo_fields(settings: Settings) -> dict[str, str]:
    """What the warcinfo record of each file says about the crawl that wrote it
    (no proxy password, no secret header values)."""
    chosen = {
        name: list(value) if isinstance(value, tuple) else value
        for name, value in vars(settings.redacted()).items()
        if value is not None and name != "config"
    }
    return {
        "software": f"crawler/{__version__}",
        "format": "WARC File Format 1.1",
        "conformsTo": "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "robots": "ignore" if settings.ignore_robots else "obey",
        "http-header-user-agent": settings.user_agent,
        "crawler-settings": json.dumps(chosen, ensure_ascii=False),
    }


def open_warc(settings: Settings, position: Sequence[Any] | None = None) -> WarcSink:
    """The sink for --warc DIR, DIR created if needed, going on from a committed
    `position` if given; ConfigError if it cannot be."""
    assert settings.warc is not None
    directory = make_directory(settings.warc, "--warc")
    if not os.access(directory, os.W_OK):
        raise ConfigError(f"cannot use --warc {directory}: not writable")
    sink = WarcSink(
        str(directory), settings.warc_prefix, settings.warc_max_size, warcinfo_fields(settings)
    )
    if position is None:
        sink.start()
        return sink
    file, offset = position
    try:
        sink.resume(file, int(offset))
    except FileNotFoundError:
        raise ConfigError(
            f"--warc {directory}: {file}, which the crawl was writing, "
            "is gone; give the same --warc DIR, or --fresh to start over"
        ) from None
    return sink
