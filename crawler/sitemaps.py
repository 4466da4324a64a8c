"""Sitemaps: where a host's are (robots.txt, /sitemap.xml) and what one lists, bounded and safe.

A sitemap is input from strangers, so reading one is bounded in every dimension:

- gzip (by content, whatever the name or Content-Type) is inflated chunk by chunk and
  stopped at `SITEMAP_MAX_BYTES` of output (the sitemaps.org limit, 50 MB), so a
  gzip bomb costs 50 MB of inflating, never more, and never 50 MB held at once;
- XML goes through expat fed in those chunks, with the handlers defusedxml installs:
  an entity declaration or an external entity aborts the parse (no billion laughs,
  no XXE), and no DTD or entity is ever fetched;
- at most `SITEMAP_MAX_URLS` (50,000) entries are kept; past either limit the
  sitemap is cut, what was read before stays, and `error` says `sitemap_too_large`.

The standard library's expat is used directly rather than defusedxml or lxml: the same
protection without a dependency, a parser that takes the body in pieces as they are
inflated, and no tree built for a document of which we keep two fields per entry.
Element names are matched by local name (`loc`, `sm:loc`, `{ns}loc` alike), since
many sitemaps use another namespace or none, and `loc` counts only as a direct
child of `url` or `sitemap`, so image and video sitemaps' own `loc`s are not pages.
An RSS 2.0 or Atom feed, which sitemaps.org accepts as a sitemap, lists its items' links.
Expat knows UTF-8, UTF-16, ISO-8859-1 and ASCII; a sitemap declared in another
encoding (GBK, Shift_JIS...), or undeclared and not UTF-8 (then in its Content-Type's
charset or the one its bytes suggest), is decoded by Python's codec and handed over as UTF-8.
A body that does not start with "<" is a text sitemap: one URL per line.
"""

from __future__ import annotations

import asyncio
import codecs
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NoReturn
from xml.parsers import expat

from crawler.charset import charset_from_content_type, decode_as, decoder_for, guessed_encoding
from crawler.errors import ErrorKind
from crawler.frontier import SITEMAP, Request
from crawler.urls import canonicalize, origin_of, without_userinfo

SITEMAP_MAX_URLS = 50_000
SITEMAP_MAX_BYTES = 50 * 1024 * 1024  # uncompressed, per file
_CHUNK_BYTES = 256 * 1024  # inflated and parsed between two turns of the event loop
_MAX_LASTMOD_CHARS = 64  # a W3C datetime is at most 32; longer is not a date
_MAX_LINE_BYTES = 64 * 1024  # a text sitemap's line longer than this is no URL we take
_GZIP_MAGIC = b"\x1f\x8b"
_EXPAT_ENCODINGS = frozenset({"utf-8", "utf-16", "latin-1", "ascii"})  # codecs' names
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']""")
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_BOMS = (codecs.BOM_UTF8, *_UTF16_BOMS)


@dataclass(slots=True)
class Sitemap:
    """What one sitemap file listed: pages with their lastmod, or (an index) sitemaps."""

    url: str
    pages: list[tuple[str, str | None]] = field(default_factory=list)  # canonical URL, lastmod
    sitemaps: list[str] = field(default_factory=list)  # canonical URLs
    error: ErrorKind | None = None  # SITEMAP_TOO_LARGE, SITEMAP_INVALID or DECODING_ERROR
    entries: int = 0  # <url> and <sitemap> entries or text lines read, canonical or not

    @property
    def truncated(self) -> bool:
        return self.error == ErrorKind.SITEMAP_TOO_LARGE


def sitemaps_of(origin: str, robots_sitemaps: Iterable[str]) -> list[str]:
    """The sitemaps of `origin`: its robots.txt `Sitemap:` lines, or else /sitemap.xml."""
    robots_url = f"{origin}/robots.txt"
    listed = (canonicalize(line.strip(), robots_url) for line in robots_sitemaps)
    return list(dict.fromkeys(without_userinfo(url) for url in listed if url is not None)) or [
        f"{origin}/sitemap.xml"
    ]


class _TooLarge(Exception):
    pass


class _Invalid(Exception):
    pass


class _Entries:
    """Collects a sitemap's entries up to the cap, canonical against the sitemap's URL."""

    def __init__(self, sitemap: Sitemap, max_urls: int) -> None:
        self.sitemap = sitemap
        self._max_urls = max_urls

    def add(self, loc: str, lastmod: str | None, is_sitemap: bool) -> None:
        sitemap = self.sitemap
        if sitemap.entries >= self._max_urls:
            raise _TooLarge
        sitemap.entries += 1
        url = canonicalize(loc.strip(), sitemap.url)
        if url is None:
            return
        url = without_userinfo(url)
        if is_sitemap:
            sitemap.sitemaps.append(url)
            return
        if lastmod is not None:
            lastmod = lastmod.strip()
            if not lastmod or len(lastmod) > _MAX_LASTMOD_CHARS:
                lastmod = None
        sitemap.pages.append((url, lastmod))


@dataclass(frozen=True, slots=True)
class _Format:
    """Where a kind of XML sitemap keeps its entries, by the local names of its elements."""

    entry_depth: int  # of an entry's element, the root being 1
    entries: dict[str, str]  # an entry's element -> "url" (a page) or "sitemap"
    fields: dict[str, str]  # an entry's child element -> "loc" or "lastmod", by its text
    link_href: bool = False  # the loc is the href of a <link rel=alternate> (Atom)


_SITEMAP_FORMAT = _Format(
    2, {"url": "url", "sitemap": "sitemap"}, {"loc": "loc", "lastmod": "lastmod"}
)
# sitemaps.org takes an RSS 2.0 or Atom feed as a sitemap too: each item's link is a page.
_FEED_FORMATS = {
    "rss": _Format(3, {"item": "url"}, {"link": "loc"}),
    "feed": _Format(2, {"entry": "url"}, {"updated": "lastmod"}, link_href=True),
}


class _XmlReader:
    """An expat parser that refuses entity declarations and keeps `loc` and `lastmod`."""

    def __init__(self, entries: _Entries, first_chunk: bytes, content_type: str | None) -> None:
        self._entries = entries
        self._decoder = _decoder_for(first_chunk, content_type)
        parser = self._parser = expat.ParserCreate()
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.EntityDeclHandler = _refuse
        parser.UnparsedEntityDeclHandler = _refuse
        parser.ExternalEntityRefHandler = _refuse
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._text
        parser.buffer_text = True
        self._depth = 0
        self._format = _SITEMAP_FORMAT  # or a feed's, by the root element
        self._entry: str | None = None  # "url" or "sitemap", while inside one
        self._field: str | None = None  # "loc" or "lastmod", while inside one
        self._text_parts: list[str] = []
        self._loc: str | None = None
        self._lastmod: str | None = None

    def feed(self, chunk: bytes, final: bool = False) -> None:
        try:
            if self._decoder is None:
                self._parser.Parse(chunk, final)
            else:
                self._parser.Parse(self._decoder.decode(chunk, final), final)
        except expat.ExpatError as exc:
            raise _Invalid(str(exc)) from None

    def _start(self, name: str, attributes: dict[str, str]) -> None:
        depth = self._depth = self._depth + 1
        local = name.rpartition(":")[2]
        form = self._format
        if depth == 1:
            self._format = _FEED_FORMATS.get(local, _SITEMAP_FORMAT)
        elif depth == form.entry_depth and local in form.entries:
            self._entry, self._loc, self._lastmod = form.entries[local], None, None
        elif depth == form.entry_depth + 1 and self._entry is not None:
            if local in form.fields:
                self._field = form.fields[local]
                self._text_parts = []
            elif (
                form.link_href
                and local == "link"
                and self._loc is None
                and attributes.get("rel", "alternate") == "alternate"
            ):
                self._loc = attributes.get("href")

    def _end(self, _name: str) -> None:
        depth, entry_depth = self._depth, self._format.entry_depth
        if depth == entry_depth + 1 and self._field is not None:
            text = "".join(self._text_parts)
            if self._field == "loc":
                self._loc = text
            else:
                self._lastmod = text
            self._field = None
        elif depth == entry_depth and self._entry is not None:
            if self._loc is not None:
                self._entries.add(self._loc, self._lastmod, self._entry == "sitemap")
            self._entry = None
        self._depth -= 1

    def _text(self, text: str) -> None:
        if self._field is not None:
            self._text_parts.append(text)


def _refuse(*_args: object) -> NoReturn:
    raise _Invalid("entity declarations and external entities are not allowed")


def _decoder_for(first_chunk: bytes, content_type: str | None) -> codecs.IncrementalDecoder | None:
    """A decoder to UTF-8 if the XML is in an encoding that expat cannot read itself: the
    one it declares, else, if it is no UTF-8, the Content-Type's charset or the one its
    bytes suggest, as for a page: Chinese sites write sitemaps in GBK without a
    declaration, and expat stopped at their first byte, so none of it was read. (A
    charset=ISO-8859-1 that servers give text/xml by default is not let spoil UTF-8.)"""
    if first_chunk.startswith(_BOMS):
        return None
    match = _XML_ENCODING.match(first_chunk[:1024])
    label = match.group(1).decode("ascii") if match is not None else None
    if label is None:
        label = _undeclared_unless_utf8(first_chunk, content_type)
        if label is None:
            return None
    try:
        # A label as the Encoding Standard reads it, as browsers do: "GB2312", which Chinese
        # sites declare and write in GBK, is GBK (Python's gb2312 codec lacks 镕 and more).
        name = codecs.lookup(decoder_for(label) or label).name
        b" ".decode(name, "replace")  # base64, zlib, rot13, hex: codecs, but not for text
    except LookupError:
        raise _Invalid(f"unknown encoding {label!r}") from None
    if name in _EXPAT_ENCODINGS:
        return None
    return codecs.getincrementaldecoder(name)("replace")


def _undeclared_unless_utf8(first_chunk: bytes, content_type: str | None) -> str | None:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(first_chunk)  # a cut character is UTF-8
    except UnicodeDecodeError:
        return charset_from_content_type(content_type) or guessed_encoding(first_chunk)
    return None


class _TextReader:
    """One URL per line; blank lines and lines that are not http(s) URLs are skipped.
    sitemaps.org asks for UTF-8; a line that is not (a Chinese site's file saved in GBK)
    is read in the Content-Type's charset or the encoding the file's bytes suggest, as
    a page is: its U+FFFDs made a URL of the site that no link has, a 404 each."""

    def __init__(self, entries: _Entries, first_chunk: bytes, content_type: str | None) -> None:
        self._entries = entries
        self._first_chunk = first_chunk
        self._content_type = content_type
        self._legacy: str | None = None  # the encoding of lines that are no UTF-8, once seen
        self._partial: list[bytes] = []  # the current line, up to _MAX_LINE_BYTES
        self._partial_bytes = 0

    def feed(self, chunk: bytes, final: bool = False) -> None:
        lines = chunk.split(b"\n")
        if len(lines) > 1:
            self._line(b"".join([*self._partial, lines[0]]))
            self._partial, self._partial_bytes = [], 0
            for line in lines[1:-1]:
                self._line(line)
        last = lines[-1]
        if final:
            self._line(b"".join([*self._partial, last]))
        elif self._partial_bytes <= _MAX_LINE_BYTES:
            self._partial.append(last)
            self._partial_bytes += len(last)

    def _line(self, line: bytes) -> None:
        line = line.strip().removeprefix(codecs.BOM_UTF8)
        if len(line) <= _MAX_LINE_BYTES and line[:8].lower().startswith((b"http://", b"https://")):
            self._entries.add(self._decoded(line), None, is_sitemap=False)

    def _decoded(self, line: bytes) -> str:
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError:
            if self._legacy is None:
                charset = charset_from_content_type(self._content_type)
                self._legacy = charset or guessed_encoding(self._first_chunk)
            return decode_as(line, self._legacy)


def _inflated(body: bytes, max_bytes: int) -> Iterator[bytes]:
    """`body` in chunks, gunzipped if it is gzip, and no more than `max_bytes` + 1 bytes:
    a byte past the limit says the body was larger, and nothing more is inflated."""
    if not body.startswith(_GZIP_MAGIC):
        for start in range(0, min(len(body), max_bytes + 1), _CHUNK_BYTES):
            yield body[start : min(start + _CHUNK_BYTES, max_bytes + 1)]
        return
    left = max_bytes + 1
    data = body
    while data and left > 0:  # one gzip member per turn: gzip files may be concatenated
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while data and left > 0 and not inflater.eof:
            chunk = inflater.decompress(data, min(_CHUNK_BYTES, left))
            data = inflater.unconsumed_tail
            left -= len(chunk)
            if chunk:
                yield chunk
        data = inflater.unused_data if inflater.eof else b""
        if data and not data.startswith(_GZIP_MAGIC):
            return  # trailing garbage after the last member


async def parse_sitemap(
    url: str,
    body: bytes,
    cut: bool = False,
    max_urls: int = SITEMAP_MAX_URLS,
    max_bytes: int = SITEMAP_MAX_BYTES,
    content_type: str | None = None,
) -> Sitemap:
    """What the sitemap at `url` lists; `cut`: the body was cut at the fetch's size cap;
    `content_type`: the response's, whose charset tells an undeclared XML's encoding.

    Never raises for what the body holds: a broken sitemap keeps the entries read
    before the break and names it in `error`. Between chunks it lets other tasks
    run, so a 50 MB sitemap does not stall the crawl.
    """
    sitemap = Sitemap(url)
    entries = _Entries(sitemap, max_urls)
    reader: _XmlReader | _TextReader | None = None
    size = 0
    try:
        for chunk in _inflated(body, max_bytes):
            size += len(chunk)
            if size > max_bytes:
                chunk = chunk[: len(chunk) - (size - max_bytes)]
            if reader is None:
                reader = _reader_for(entries, chunk, content_type)
            reader.feed(chunk)
            if size > max_bytes:
                raise _TooLarge
            await asyncio.sleep(0)
        if cut:
            raise _TooLarge
        if reader is not None:
            reader.feed(b"", final=True)
    except _TooLarge:
        sitemap.error = ErrorKind.SITEMAP_TOO_LARGE
    except _Invalid:
        sitemap.error = ErrorKind.SITEMAP_INVALID
    except zlib.error:
        sitemap.error = ErrorKind.DECODING_ERROR
    return sitemap


def _reader_for(
    entries: _Entries, first_chunk: bytes, content_type: str | None
) -> _XmlReader | _TextReader:
    start = first_chunk.removeprefix(codecs.BOM_UTF8).lstrip()
    if start.startswith(b"<") or first_chunk.startswith(_UTF16_BOMS):
        return _XmlReader(entries, first_chunk, content_type)
    return _TextReader(entries, first_chunk, content_type)


def in_robots(request: Request, robots_sitemaps: Sequence[str]) -> list[Request]:
    """Sitemap requests for the host of a ROBOTS `request`, from its robots.txt's
    Sitemap lines (with robots.txt as referrer), or else its guessed /sitemap.xml."""
    origin = origin_of(request.url)
    urls = sitemaps_of(origin, robots_sitemaps)
    referrer = request.url if robots_sitemaps else None
    return [Request(url, request.depth, referrer, kind=SITEMAP) for url in urls]


def listed_in(request: Request, sitemap: Sitemap, pages_too: bool) -> list[Request]:
    """What the sitemap of `request` lists, as requests: the sitemaps of an index at its
    depth, and (if `pages_too`) pages one deeper, with their lastmod."""
    found = [Request(url, request.depth, request.url, kind=SITEMAP) for url in sitemap.sitemaps]
    if pages_too:
        depth = request.depth + 1
        found += [Request(url, depth, request.url, lastmod=t) for url, t in sitemap.pages]
    return found
