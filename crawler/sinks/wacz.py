"""--wacz FILE: the crawl packaged as WACZ 1.1.1 (specs.webrecorder.net/wacz/1.1.1/),
the ZIP that ReplayWeb.page opens and pywb imports (`wb-manager add --unpack-wacz`).

    archive/NAME.warc.gz     the crawl's WARC files, stored as they are (already gzip), and
                             those of earlier crawls its revisits refer to (a recrawl's)
    indexes/index.cdx.gz     their CDXJ lines (crawler/sinks/cdxj.py), merged and sorted, in
                             gzip members of 1024 lines, stored
    indexes/index.idx        a line per member: its first key, offset, length and sha256;
                             what ReplayWeb.page binary-searches to read one member of the index
    pages/pages.jsonl        a header line, then each page (a recrawl's unchanged ones too):
                             id, url, ts (RFC 3339), title, and
                             its text (`main_text`, else `text`) when the crawl extracted one
    datapackage.json         every file's path, size and sha256, and the WACZ version
    datapackage-digest.json  the sha256 of datapackage.json

The pages are kept as the crawl goes in STATE/wacz-pages.jsonl with --state,
appended and committed as -o is (its length is the sink's position), so that a
crawl resumed from --state lists each page once; without --state, in a file of the
crawl's own in DIR, deleted once the crawl is packaged. The package is made when the crawl
closes, from what is committed: written to FILE.partial, flushed to disk, then renamed
to FILE. A crawl killed while packaging leaves FILE.partial, never a FILE that looks
whole; resuming it makes the package again.

A recrawl's revisit records (a 304, or a payload archived before) refer to captures
in earlier crawls' WARC files, found in the --warc and --since-warc directories by
their indexes: the package holds each file with a capture of a payload a revisit in it
refers to, and those its own revisits refer to in turn, so that it replays on its own.

Large crawls: the ZIP is ZIP64 where it must be (an entry or the whole file past 4 GiB),
which Python's zipfile, pywb and ReplayWeb.page read. Packaging copies every WARC byte
once into FILE, so it needs as much free disk again as the WARC files take.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import os
import time
import uuid
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from itertools import islice
from pathlib import Path
from typing import Any

from crawler import __version__
from crawler.errors import AFTER_THE_FETCH
from crawler.fetch import HTML_TYPES, media_type
from crawler.files import check_writable
from crawler.page import Page
from crawler.sinks import WriteFailed
from crawler.sinks.cdxj import WARC_SUFFIX, index_path
from crawler.sinks.jsonl import JsonlSink
from crawler.sinks.warc import WarcSink, not_modified_revisit

log = logging.getLogger(__name__)

WACZ_VERSION = "1.1.1"
PAGES_SUFFIX = ".pages.jsonl"
STATE_PAGES = "wacz-pages.jsonl"  # in the --state directory
LINES_PER_BLOCK = 1024  # as py-wacz and ArchiveWeb.page write them
_COPY_BYTES = 1 << 20
_GZIP_WBITS = 31
_MODE = 0o644 << 16  # rw-r--r-- for unzip


def page_entry(page: Page) -> dict[str, Any] | None:
    """The pages.jsonl entry of an HTML page archived with a 2xx status, or as a 304's
    revisit of such a capture (a recrawl's unchanged page); None for others.

    A page whose fetch failed is none: its body did not come whole (cut off,
    undecodable), or its last exchange is a redirect to what failed, which would be
    listed. One whose fetch went well and what came after failed (a hook) is one."""
    response = page.response
    if page.kind != "page" or response is None or not response.exchanges:
        return None
    if page.error is not None and page.error not in AFTER_THE_FETCH:
        return None
    if not_modified_revisit(page):  # a 304 has no type: its capture's is carried over
        # Without the capture (a previous crawl with no archive), it replays as a 304.
        listed = media_type(page.content_type) in HTML_TYPES and page.capture is not None
    else:
        listed = page.is_html and page.status is not None and 200 <= page.status < 300
    if not listed:
        return None
    final = response.exchanges[-1]
    entry: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "url": final.url,
        "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(final.fetched_at))),
    }
    if page.title:
        entry["title"] = page.title
    text = page.fields.get("main_text", page.fields.get("text"))
    if text is not None:
        entry["text"] = text
    return entry


class WaczSink:
    """Lists the crawl's pages as it goes; packages the crawl into FILE when closed."""

    def __init__(
        self,
        path: str,
        warc: WarcSink,
        resume_at: int | None = None,
        earlier_dirs: Sequence[str] = (),
        state: str | None = None,
    ) -> None:
        self.path = Path(path)
        check_writable(str(self.path), replaced=True)  # now, not when the crawl is over
        self._warc = warc
        self._earlier_dirs = [warc.directory, *map(Path, earlier_dirs)]
        self.pages_path, self._scratch = _pages_path(warc, resume_at, state)
        self._pages = JsonlSink(str(self.pages_path), resume_at)
        self._closed = False

    @property
    def position(self) -> int:
        return self._pages.position

    def write(self, page: Page) -> None:
        entry = page_entry(page)
        if entry is not None:
            self._pages.write_record(entry)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pages.close()
        warc = self._warc
        own = [warc.directory / name for name in warc.files]
        log.info("packaging the crawl as %s", self.path)  # a few seconds a GiB of WARC
        write_wacz(self.path, with_referred_files(own, self._earlier_dirs), self.pages_path)
        if self._scratch:  # no crawl will resume to list more
            self.pages_path.unlink(missing_ok=True)
        log.info("packaged the crawl as %s (%s bytes)", self.path, f"{self.path.stat().st_size:,}")


def _pages_path(warc: WarcSink, resume_at: int | None, state: str | None) -> tuple[Path, bool]:
    """Where the crawl's pages are listed as it goes, and whether only until it is
    packaged (a crawl without --state is never resumed).

    Its own file: another crawl may write into the same --warc DIR under the same
    prefix (a crawl resumed after it would have cut the other's list at its own
    length, and listed it). In the --state directory, which goes with the crawl, or
    in DIR named after the crawl's run; a crawl begun by a version that listed them
    in DIR/PREFIX.pages.jsonl goes on there."""
    legacy = warc.directory / f"{warc.prefix}{PAGES_SUFFIX}"
    if state is None:
        return warc.directory / f"{warc.prefix}-{warc.run}{PAGES_SUFFIX}", True
    path = Path(state) / STATE_PAGES
    if resume_at is not None and not path.exists() and legacy.exists():
        return legacy, False
    return path, False


def with_referred_files(files: Sequence[Path], directories: Sequence[Path]) -> list[Path]:
    """`files`, then the WARC files in `directories` that hold a capture of a payload a
    revisit record of theirs refers to, and so on for those files' own revisits.

    By payload digest, as replay tools find a revisit's capture, in the files' CDXJ
    indexes (crawler/sinks/cdxj.py): a file with another capture of the same payload is
    taken too, which replays as well."""
    included = {path.resolve() for path in files}
    kept = list(files)
    wanted: set[str] = set()
    held: set[str] = set()
    for path in files:
        refers, holds = _payload_digests(index_path(path.parent, path.name))
        wanted |= refers
        held |= holds
    wanted -= held
    candidates: dict[Path, tuple[set[str], set[str]]] = {}
    if wanted:  # a first crawl's revisits refer to its own captures: nothing to look for
        for directory in dict.fromkeys(directories):
            for path in sorted(directory.glob(f"*{WARC_SUFFIX}")):
                index = index_path(path.parent, path.name)
                if path.resolve() not in included and index.exists():
                    candidates[path] = _payload_digests(index)
                    included.add(path.resolve())
    while wanted:
        found = [path for path, (_, holds) in candidates.items() if holds & wanted]
        if not found:
            break  # captures no directory holds: their revisits will not replay
        for path in found:
            refers, holds = candidates.pop(path)
            kept.append(path)
            wanted |= refers
            held |= holds
        wanted -= held
    if wanted:
        log.warning(
            "the --wacz package lacks the captures of %d payloads its revisits refer to: "
            "give the directory of the earlier crawl's WARC files with --since-warc",
            len(wanted),
        )
    return kept


def _payload_digests(index: Path) -> tuple[set[str], set[str]]:
    """The payload digests the revisit lines of the CDXJ `index` refer to, and those
    its other lines (captures) hold; none if there is no index. A line that is not
    CDXJ (another tool's index beside a WARC file in the directory) holds none."""
    refers: set[str] = set()
    holds: set[str] = set()
    if not index.exists():
        return refers, holds
    with open(index, "rb") as lines:
        for line in lines:
            try:
                fields = json.loads(line.split(b" ", 2)[2])
            except (IndexError, ValueError):
                continue
            digest = fields.get("digest") if isinstance(fields, dict) else None
            if isinstance(digest, str):
                (refers if fields.get("mime") == "warc/revisit" else holds).add(digest)
    return refers, holds


def write_wacz(
    path: Path, warc_files: Sequence[Path], pages: Path, lines_per_block: int = LINES_PER_BLOCK
) -> None:
    """Package `warc_files`, their indexes and the `pages` list as the WACZ `path`."""
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "wb") as raw:
            with zipfile.ZipFile(raw, "w", allowZip64=True) as wacz:
                _write_entries(wacz, warc_files, pages, lines_per_block, path.stem)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise WriteFailed(f"cannot write --wacz {path}: {exc.strerror or exc}") from None
    except BaseException:  # a second Ctrl-C: the package is made again on resume
        partial.unlink(missing_ok=True)
        raise


def _write_entries(
    wacz: zipfile.ZipFile,
    warc_files: Sequence[Path],
    pages: Path,
    lines_per_block: int,
    title: str,
) -> None:
    resources = [
        _add(wacz, f"archive/{warc.name}", _chunks(warc), size_bytes=warc.stat().st_size)
        for warc in warc_files
    ]
    indexes = [index_path(warc.parent, warc.name) for warc in warc_files]
    indexes = [index for index in indexes if index.exists()]
    blocks: list[bytes] = []
    with ExitStack() as stack:
        lines = heapq.merge(*(stack.enter_context(open(index, "rb")) for index in indexes))
        index_bytes = sum(index.stat().st_size for index in indexes)
        members = _compressed(lines, lines_per_block, blocks)
        resources.append(_add(wacz, "indexes/index.cdx.gz", members, size_bytes=index_bytes))
    meta = {"format": "cdxj-gzip-1.0", "filename": "index.cdx.gz"}
    idx = [f"!meta 0 {json.dumps(meta)}\n".encode(), *blocks]
    resources.append(_add(wacz, "indexes/index.idx", idx, zipfile.ZIP_DEFLATED))
    pages_bytes = pages.stat().st_size
    resources.append(
        _add(wacz, "pages/pages.jsonl", _pages(pages), zipfile.ZIP_DEFLATED, pages_bytes)
    )
    package = {
        "profile": "data-package",
        "wacz_version": WACZ_VERSION,
        "title": title,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "software": f"crawler/{__version__}",
        "resources": resources,
    }
    package_json = json.dumps(package, indent=2).encode()
    _add(wacz, "datapackage.json", [package_json], zipfile.ZIP_DEFLATED)
    digest = {"path": "datapackage.json", "hash": _sha256(package_json)}
    _add(wacz, "datapackage-digest.json", [json.dumps(digest, indent=2).encode()])


def _add(
    wacz: zipfile.ZipFile,
    name: str,
    chunks: Iterable[bytes],
    compression: int = zipfile.ZIP_STORED,
    size_bytes: int = 0,
) -> dict[str, Any]:
    """Write the entry `name`; its datapackage resource (name, path, sha256, size)."""
    info = zipfile.ZipInfo(name, date_time=time.gmtime()[:6])
    info.compress_type = compression
    info.external_attr = _MODE
    digest = hashlib.sha256()
    size = 0
    # An entry that may pass 4 GiB must be declared ZIP64 before its data is written;
    # `size_bytes` is the size of what it is made from (a gzip member or a deflated
    # file is never much larger than that).
    with wacz.open(info, "w", force_zip64=size_bytes >= zipfile.ZIP64_LIMIT // 2) as out:
        for chunk in chunks:
            out.write(chunk)
            digest.update(chunk)
            size += len(chunk)
    base = name.rsplit("/", 1)[-1]
    return {
        "name": base.lower(),
        "path": name,
        "hash": "sha256:" + digest.hexdigest(),
        "bytes": size,
    }


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(_COPY_BYTES):
            yield chunk


def _compressed(
    lines: Iterator[bytes], lines_per_block: int, blocks: list[bytes]
) -> Iterator[bytes]:
    """The index as gzip members of `lines_per_block` lines; each member's .idx line
    (its first line's key and timestamp, offset, length, sha256) appended to `blocks`."""
    offset = 0
    while block := list(islice(lines, lines_per_block)):
        member = zlib.compress(b"".join(block), 6, wbits=_GZIP_WBITS)
        # The key and timestamp, as wabac.js reads them (up to " {"): a key may hold a
        # "{" (a query keeps it), where cdxj-indexer's cut at the first "{" would fall.
        prefix = b" ".join(block[0].split(b" ", 2)[:2])
        entry = {"offset": offset, "length": len(member), "digest": _sha256(member)}
        blocks.append(prefix + b" " + json.dumps(entry).encode() + b"\n")
        offset += len(member)
        yield member
    if not offset:  # no capture: an empty member, as a gzip file is at least one (gzip -t)
        yield zlib.compress(b"", 6, wbits=_GZIP_WBITS)


def _pages(pages: Path) -> Iterator[bytes]:
    """pages.jsonl: its header line (which says whether pages have text), then the pages."""
    header: dict[str, Any] = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
    with open(pages, "rb") as f:
        if any(b'"text":' in line for line in f):
            header["hasText"] = True  # ReplayWeb.page then searches the pages' text
    yield json.dumps(header).encode() + b"\n"
    yield from _chunks(pages)


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
