"""One URL over HTTP: timeout, size cap, content decoding, redirects followed by hand.

A fetch never raises for anything the web does: timeouts, resets, garbage,
bombs and loops all come back as a `Response` whose `error` names the kind.
Whether a redirect is followed is asked of the caller for every hop, so each
target goes through the same scope and visited-set checks as a link.

Every response gets its payload digest (SHA-1 of the body as it came, before
content decoding). A fetcher made with `archive=True` also keeps, for each hop,
the `Exchange` a WARC archive needs: the request and the response head as they
went over the wire, the payload before content decoding, the peer's address and
the time.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import re
import ssl
import sys
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from multidict import CIMultiDictProxy

from crawler.errors import ErrorKind
from crawler.netguard import BlockedAddress
from crawler.urls import canonicalize, without_userinfo

try:
    import brotli
except ImportError:  # brotli is optional: without it we do not ask for "br"
    brotli = None

NOT_MODIFIED = 304
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_ERRORS = frozenset({ErrorKind.TIMEOUT, ErrorKind.CONNECTION_ERROR, ErrorKind.PROXY_ERROR})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
ACCEPT_ENCODING = "gzip, deflate, br" if brotli else "gzip, deflate"
_BrotliError: type[Exception] = brotli.error if brotli is not None else zlib.error
# No Content-Type: a body is HTML if it starts as WHATWG's MIME Sniffing says browsers
# sniff one ("identifying a resource with an unknown MIME type"): after whitespace, one
# of these tags, then a space or ">", within the first 512 bytes.
_HTML_SNIFFED = re.compile(
    rb"[\t\n\x0c\r ]*<(?:!doctype html|html|head|script|iframe|h1|div|font|table|a|style"
    rb"|title|b|body|br|p|!--)[ >]",
    re.I,
)
_SNIFF_BYTES = 512
_ESSENCE = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+/[!#$%&'*+.^_`|~0-9a-z-]+")
_UNKNOWN_TYPES = frozenset({"*/*", "unknown/unknown", "application/unknown"})
_HTTP_WHITESPACE = "\t\n\r "
# One value of a comma-separated header, quoted strings kept whole (Fetch's "get, decode,
# and split"); a charset parameter, named in any case.
_LIST_ITEM = re.compile(r'(?:[^,"]|"(?:\\.|[^"\\])*"?)+')
_CHARSET = re.compile(r";[\t\n\r ]*(charset=[^;]*)", re.I)
_CHUNK_BYTES = 65536
_REDIRECT_BODY_BYTES = 65536


@dataclass(frozen=True, slots=True)
class Hop:
    """What the caller says about a redirect target: follow it, or stop with this error;
    or (`elsewhere`) it is admitted, but to be followed later, by the caller's own
    request of it (another host's: from that host's slot, at its pace)."""

    follow: bool
    error: ErrorKind | None = None
    elsewhere: bool = False


Admit = Callable[[str, str], Awaitable[Hop]]  # (the URL redirecting, its target)


@dataclass(slots=True)
class Exchange:
    """One request and its response, as sent and received, for a WARC archive."""

    url: str
    fetched_at: float  # time.time() when the request went out
    request_head: bytes  # request line and headers as sent, ending with the blank line
    status_line: bytes  # e.g. b"HTTP/1.1 200 OK"
    raw_headers: tuple[tuple[bytes, bytes], ...]  # as received, in order
    payload: bytes  # the body still in its Content-Encoding, transfer coding removed
    payload_digest: str
    # Why the payload is not the whole body (WARC-Truncated): "length", cut at the
    # fetcher's max_bytes; "disconnect", the connection closed before the body's end;
    # "time", the timeout ran out while it came.
    truncated: str | None
    ip_address: str | None

    @property
    def ok(self) -> bool:
        """A 2xx response: the only kind whose payload may stand for another's."""
        return status_is_2xx(self.status_line)

    @property
    def not_modified(self) -> bool:
        """A 304: a conditional request's answer that the payload asked about is unchanged."""
        return _status_code(self.status_line) == b"%d" % NOT_MODIFIED


@dataclass(slots=True)
class Response:
    url: str  # the last URL requested
    status: int | None = None
    content_type: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    truncated: bool = False  # cut at the fetcher's max_bytes
    incomplete: bool = False  # its compressed stream ended before its end (a gzip cut short)
    error: ErrorKind | None = None
    redirects: int = 0  # hops followed so far, this attempt and earlier ones
    final_url: str | None = None  # where following stopped, if not at `url`
    moved_to: str | None = None  # a redirect target admitted to be fetched `elsewhere`
    hops: list[str] = field(default_factory=list)  # targets admitted during this attempt
    payload_digest: str | None = None  # "sha1:" base32 of the body before content decoding
    # No connection to the host gave an answer: refused, no address, the connect timed
    # out, or it hung up before a response (not a response that was slow to come)
    unreachable: bool = False
    # With archive=True: every exchange that led here, earlier attempts' first (the
    # engine prepends those), then this attempt's hops, this response's last.
    exchanges: list[Exchange] = field(default_factory=list)

    @property
    def retryable(self) -> bool:
        return self.error in RETRY_ERRORS or (self.error is None and self.status in RETRY_STATUSES)

    @property
    def media_type(self) -> str:
        return media_type(self.content_type)

    @property
    def is_html(self) -> bool:
        if self.media_type in HTML_TYPES:
            return True
        # MIME Sniffing: a type that is none (or */*, "unknown") is sniffed as if absent
        essence = self.media_type
        if _ESSENCE.fullmatch(essence) and essence not in _UNKNOWN_TYPES:
            return False
        return _HTML_SNIFFED.match(self.body, 0, _SNIFF_BYTES) is not None

    def retry_after_s(self, now: float | None = None) -> float | None:
        """Seconds the server asked us to wait (Retry-After), if it asked."""
        value = self.headers.get("Retry-After")
        if value is None:
            return None
        value = value.strip()
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))


class _Decoder:
    """Undo one content coding incrementally, never producing more than asked for."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        if encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj()
            self._raw_deflate_checked = False
        elif encoding == "br" and brotli is not None:
            self._brotli = brotli.Decompressor()
        else:
            raise ValueError(encoding)

    def decompress(self, data: bytes, limit: int) -> bytes:
        if self.encoding == "br":
            out: bytes = self._brotli.process(data, output_buffer_limit=limit)
            while len(out) < limit and not self._brotli.can_accept_more_data():
                out += self._brotli.process(b"", output_buffer_limit=limit - len(out))
            return out
        if self.encoding == "deflate" and not self._raw_deflate_checked and data:
            self._raw_deflate_checked = True
            if data[0] & 0x0F != 8:  # no zlib header: some servers send raw deflate
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        if self._zlib.unconsumed_tail:  # what `limit` held back last time comes first
            data = self._zlib.unconsumed_tail + data
        out = self._zlib.decompress(data, limit)
        while len(out) < limit and self._zlib.unconsumed_tail:
            out += self._zlib.decompress(self._zlib.unconsumed_tail, limit - len(out))
        return out

    @property
    def pending(self) -> bool:
        """Whether data given is held back by the last call's `limit`."""
        if self.encoding == "br":
            return not self._brotli.can_accept_more_data()
        return bool(self._zlib.unconsumed_tail)

    @property
    def finished(self) -> bool:
        """Whether the coded data reached its end (gzip's: its trailer)."""
        if self.encoding == "br":
            return bool(self._brotli.is_finished())
        return self._zlib.eof


class _Decoders:
    """Undo stacked content codings ("gzip, br": gzip applied first, undone last)."""

    def __init__(self, decoders: list[_Decoder]) -> None:
        self._decoders = decoders

    def decompress(self, data: bytes, limit: int) -> bytes:
        for decoder in self._decoders:
            data = decoder.decompress(data, limit)
        return data

    @property
    def pending(self) -> bool:
        return any(decoder.pending for decoder in self._decoders)

    @property
    def finished(self) -> bool:
        return all(decoder.finished for decoder in self._decoders)


class BadContentEncoding(Exception):
    """The body's Content-Encoding is unknown to us, or its data is corrupt."""


class BodyCut(Exception):
    """The body did not come whole: the connection closed (or the chunks broke off)
    before its end, or the timeout ran out while it came."""

    def __init__(self, payload: bytes, error: ErrorKind, truncated: str) -> None:
        super().__init__("the body ended before its end")
        self.payload = payload  # what came of it, as received
        self.error = error  # the page's
        self.truncated = truncated  # why, in WARC-Truncated's words


# IANA's HTTP Content Coding Registry but identity: one we cannot undo (zstd, compress)
# is a decoding_error. A word that is no coding ("utf-8", "none": a charset in the wrong
# header, which PHP scripts send) is passed over, as Chromium does, which shows the page.
_CONTENT_CODINGS = frozenset(
    [
        "aes128gcm",
        "br",
        "compress",
        "dcb",
        "dcz",
        "deflate",
        "exi",
        "gzip",
        "pack200-gzip",
        "x-compress",
        "x-gzip",
        "zstd",
    ]
)


def _decoder_for(content_encoding: str | None) -> _Decoder | _Decoders | None:
    """What undoes `content_encoding`: a list of codings in the order they were applied
    (RFC 9110 8.4), "identity" or a word that is no coding among them meaning none."""
    if not content_encoding:
        return None
    listed = (encoding.strip(" \t") for encoding in content_encoding.lower().split(","))
    encodings = [encoding for encoding in listed if encoding in _CONTENT_CODINGS]
    try:
        decoders = [_Decoder(encoding) for encoding in reversed(encodings)]
    except ValueError as exc:
        raise BadContentEncoding(str(exc)) from None
    if len(decoders) > 1:
        return _Decoders(decoders)
    return decoders[0] if decoders else None


async def _read_body(
    response: aiohttp.ClientResponse, max_bytes: int, raw: list[bytes]
) -> tuple[bytes, bool, bool]:
    """Up to `max_bytes` of decoded body; whether there was more; whether the body ended
    before its coded data did (a gzip stream cut short).

    If the body is encoded, the bytes as received are appended to `raw` (otherwise
    they are the body itself).
    """
    decoder = _decoder_for(response.headers.get("Content-Encoding"))
    parts: list[bytes] = []
    size = 0
    try:
        async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
            if decoder is not None:
                raw.append(chunk)
                chunk = _decoded(decoder, chunk, max_bytes + 1 - size)
            parts.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                break
    except aiohttp.ClientPayloadError:
        received = b"".join(raw if decoder is not None else parts)
        raise BodyCut(received, ErrorKind.CONNECTION_ERROR, "disconnect") from None
    except TimeoutError:
        received = b"".join(raw if decoder is not None else parts)
        raise BodyCut(received, ErrorKind.TIMEOUT, "time") from None
    else:
        # What a stacked coding's inner layer held back for `max_bytes`, let out.
        while decoder is not None and decoder.pending and size <= max_bytes:
            chunk = _decoded(decoder, b"", max_bytes + 1 - size)
            parts.append(chunk)
            size += len(chunk)
    body = b"".join(parts)
    if size > max_bytes:
        return body[:max_bytes], True, False
    return body, False, bool(raw) and decoder is not None and not decoder.finished


async def _rest_as_received(
    response: aiohttp.ClientResponse, max_bytes: int, raw: list[bytes]
) -> tuple[bytes, str | None]:
    """The body as received, up to `max_bytes`, `raw` holding what was read of it
    already; why it is not whole (WARC-Truncated), if it is not."""
    size = sum(map(len, raw))
    try:
        async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
            raw.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                return b"".join(raw)[:max_bytes], "length"
    except aiohttp.ClientPayloadError:
        return b"".join(raw), "disconnect"
    except TimeoutError:
        return b"".join(raw), "time"
    return b"".join(raw), None


def _decoded(decoder: _Decoder | _Decoders, data: bytes, limit: int) -> bytes:
    try:
        return decoder.decompress(data, limit)
    except (zlib.error, _BrotliError) as exc:
        raise BadContentEncoding(str(exc)) from None


_HTTP_PROXY_ERRORS = (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError)
# Connecting failed (refused, no address, a bad certificate), was reset, or timed out.
_UNREACHABLE = (
    aiohttp.ClientOSError,
    aiohttp.ConnectionTimeoutError,
    aiohttp.ServerDisconnectedError,
)


def _proxy_errors() -> tuple[type[Exception], ...]:
    """The errors of a proxy that could not be reached, or refused us. aiohttp_socks's
    exist only if it was imported, for a SOCKS proxy: importing it takes 20 ms."""
    socks = sys.modules.get("aiohttp_socks")
    if socks is None:
        return _HTTP_PROXY_ERRORS
    return (
        *_HTTP_PROXY_ERRORS,
        asyncio.IncompleteReadError,  # the proxy hung up during its handshake
        socks.ProxyError,
        socks.ProxyConnectionError,
        socks.ProxyTimeoutError,
    )


def _error_kind(exc: BaseException) -> ErrorKind:
    if isinstance(exc, BlockedAddress):  # refused before it went to a proxy
        return ErrorKind.BLOCKED_ADDRESS
    if isinstance(getattr(exc, "os_error", None), BlockedAddress):
        return ErrorKind.BLOCKED_ADDRESS
    if isinstance(exc, _proxy_errors()):
        return ErrorKind.PROXY_ERROR
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError is TimeoutError since 3.11
        return ErrorKind.TIMEOUT
    if isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError):
        return ErrorKind.SSL_ERROR
    if isinstance(exc, aiohttp.ClientResponseError | aiohttp.http_exceptions.HttpProcessingError):
        return ErrorKind.INVALID_RESPONSE
    if isinstance(exc, BadContentEncoding):
        return ErrorKind.DECODING_ERROR
    if isinstance(exc, ValueError):  # a URL or header aiohttp refuses
        return ErrorKind.INVALID_RESPONSE
    return ErrorKind.CONNECTION_ERROR


class PeerRecordingResponse(aiohttp.ClientResponse):
    """A response that notes the address it came from while the connection is open.

    By the time the caller reads the headers, a small body may already be in and
    the connection back in the pool, so the address is taken when the response starts.
    """

    ip_address: str | None = None

    async def start(self, connection: aiohttp.connector.Connection) -> aiohttp.ClientResponse:
        transport = connection.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        self.ip_address = peer[0] if peer else None
        return await super().start(connection)


def payload_digest(payload: bytes) -> str:
    """A WARC payload digest: SHA-1 in base32, the form archives and CDX indexes use."""
    return sha1_base32(hashlib.sha1(payload).digest())


# base64.b32encode is pure Python (6 us a digest here). Base32 is the 160-bit number's
# 32 groups of 5 bits: a few big-integer steps spread them one to a byte, each step
# moving the upper half of every group up (160 bits to two 80-bit groups 128 bits
# apart, ..., to 5-bit groups 8 bits apart), and bytes.translate spells them (1.7 us).
_BASE32 = bytes.maketrans(bytes(range(32)), b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")


def _spreading_steps() -> list[tuple[int, int]]:
    steps = []
    width, stride = 160, 256
    while width > 5:
        half_width, half_stride = width // 2, stride // 2
        lower_halves = sum(((1 << half_width) - 1) << (i * stride) for i in range(256 // stride))
        steps.append((lower_halves, half_stride - half_width))
        width, stride = half_width, half_stride
    return steps


_SPREADING_STEPS = _spreading_steps()


def sha1_base32(digest: bytes) -> str:
    """'sha1:' and the 20-byte `digest` in base32 (32 characters, no padding needed)."""
    bits = int.from_bytes(digest, "big")
    for lower_halves, shift in _SPREADING_STEPS:
        bits = (bits & lower_halves) | ((bits & ~lower_halves) << shift)
    return "sha1:" + bits.to_bytes(32, "big").translate(_BASE32).decode()


EMPTY_PAYLOAD_DIGEST = payload_digest(b"")


def _request_head(r: aiohttp.ClientResponse) -> bytes:
    """The request as the site got it, less its secrets: a proxy's credentials were for
    the proxy alone, and an Authorization header (a seed's user:password, a --header
    token) keeps its scheme and loses its credentials. Archives are shared; that the
    request was authenticated, and how, is what a reader needs to know of it."""
    info = r.request_info
    lines = [f"{info.method} {info.url.raw_path_qs} HTTP/1.1"]
    for name, value in info.headers.items():
        lowered = name.lower()
        if lowered == "authorization":
            scheme = value.strip().partition(" ")[0]
            lines.append(f"{name}: {scheme} <redacted>" if scheme else f"{name}: <redacted>")
        elif lowered != "proxy-authorization":
            lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


def _exchange(
    r: aiohttp.ClientResponse,
    url: str,
    fetched_at: float,
    payload: bytes,
    digest: str,
    truncated: str | None,
) -> Exchange:
    """The exchange of `url`: `r`'s head, and `payload`, what was received of its body,
    whose digest is `digest`."""
    version = r.version or aiohttp.HttpVersion11  # set once the status line was read
    status_line = f"HTTP/{version.major}.{version.minor} {r.status} {r.reason or ''}".rstrip()
    return Exchange(
        url=url,
        fetched_at=fetched_at,
        request_head=_request_head(r),
        status_line=status_line.encode("latin-1", "replace"),
        raw_headers=r.raw_headers,
        payload=payload,
        payload_digest=digest,
        truncated=truncated,
        ip_address=getattr(r, "ip_address", None),
    )


def content_type(values: list[str]) -> str | None:
    """The Content-Type browsers go by, of a response's Content-Type fields (Fetch's
    "extract a MIME type"): of several values (fields, or a list in one), the last that
    is a MIME type, keeping the charset of the one before it of the same type. Without
    one, the values as they are, which a body is sniffed past (see Response.is_html)."""
    chosen, essence, charset = None, "", ""
    for value in _LIST_ITEM.findall(", ".join(values)):
        value = value.strip(_HTTP_WHITESPACE)
        this = media_type(value)
        if not _ESSENCE.fullmatch(this) or this == "*/*":
            continue
        own = _CHARSET.search(value)
        if this != essence:
            charset = ""
        if own is not None:
            charset = own[1]
        elif charset:
            value = f"{value}; {charset}"
        chosen, essence = value, this
    return chosen or ", ".join(values) or None


def _other_locations(headers: Mapping[str, str], location: str) -> bool:
    """Whether a redirect names more than one place: Chromium follows it to none
    (ERR_RESPONSE_HEADERS_MULTIPLE_LOCATION)."""
    if not isinstance(headers, CIMultiDictProxy):
        return False
    return any(other != location for other in headers.getall("Location"))


def media_type(content_type: str | None) -> str:
    """The type/subtype of a Content-Type value, lowercased ("" if there is none)."""
    return (content_type or "").partition(";")[0].strip().lower()


def status_is_2xx(status_line: bytes) -> bool:
    """Whether an HTTP status line (b"HTTP/1.1 200 OK") says 2xx."""
    code = _status_code(status_line)
    return len(code) == 3 and code.startswith(b"2")


def _status_code(status_line: bytes) -> bytes:
    """The status code of an HTTP status line, as written (b"" if it has none)."""
    parts = status_line.split(None, 2)
    return parts[1] if len(parts) > 1 else b""


class Client(Protocol):
    def get(
        self, url: str, timeout: aiohttp.ClientTimeout, headers: Mapping[str, str] | None = None
    ) -> Any:
        """`async with` it for the response to a GET of `url`, redirects not followed."""


class Fetcher:
    """Fetches URLs over one shared client (crawler.session.Client); with `archive`,
    keeps each hop's `Exchange`."""

    def __init__(
        self,
        client: Client,
        timeout_s: float,
        max_bytes: int,
        max_redirects: int,
        archive: bool = False,
    ) -> None:
        self._client = client
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._max_bytes = max_bytes
        self._max_redirects = max_redirects
        self._archive = archive

    async def fetch(
        self,
        url: str,
        admit: Admit,
        redirects: int = 0,
        validators: Mapping[str, str] | None = None,
        validated: str | None = None,
    ) -> Response:
        """GET `url`, following redirects that `admit` allows, up to the redirect limit.

        `redirects` is how many hops an earlier attempt already followed to reach `url`;
        `validators` make the request for `validated` conditional, `url` or a hop (those
        of one URL's response say nothing of another's), and `url`'s if it is None.
        """
        if validated is None:
            validated = url
        hops: list[str] = []
        response = await self.get(url, validators if url == validated else None)
        exchanges = response.exchanges
        cookie_set = False
        while response.status in REDIRECT_STATUSES and response.error is None:
            cookie_set = cookie_set or "Set-Cookie" in response.headers
            location = response.headers.get("Location")
            if location is None:
                break
            target = canonicalize(location, base=response.url)
            if target is not None:  # a Location's user:password is not sent (see credentials)
                target = without_userinfo(target)
            if target is None or _other_locations(response.headers, location):
                response.error = ErrorKind.INVALID_REDIRECT
                break
            if redirects >= self._max_redirects:
                response.error = ErrorKind.TOO_MANY_REDIRECTS
                break
            # Back to a URL of this chain, once a cookie was set on the way: a login or a
            # cookie check, which answers once the cookie is sent, as browsers find.
            # Without a cookie, that is a loop, and following stops there.
            back = target == url or target in hops
            hop = Hop(follow=True) if back and cookie_set else await admit(response.url, target)
            if not hop.follow:
                response.final_url, response.error = target, hop.error
                break
            redirects += 1
            if not back:
                hops.append(target)
            if hop.elsewhere:
                response.moved_to = target
                break
            response = await self.get(target, validators if target == validated else None)
            exchanges.extend(response.exchanges)
        response.redirects, response.hops, response.exchanges = redirects, hops, exchanges
        return response

    async def get(self, url: str, validators: Mapping[str, str] | None = None) -> Response:
        """One GET, no redirects followed; conditional if `validators` are given."""
        response = Response(url)
        limit = self._max_bytes
        raw: list[bytes] = []
        fetched_at = time.time()
        try:
            async with self._client.get(url, self._timeout, validators) as r:
                response.status = r.status
                if r.status < 200:  # a final 1xx: a GET asks for no upgrade (RFC 9110 15.2)
                    response.error = ErrorKind.INVALID_RESPONSE
                    r.close()  # what follows is no HTTP the connection could go on with
                    return response
                if r.status == NOT_MODIFIED and not validators:
                    response.error = ErrorKind.INVALID_RESPONSE  # not modified since nothing
                response.headers = r.headers
                types = r.headers.getall("Content-Type", ())
                one = len(types) == 1 and "," not in types[0]
                response.content_type = types[0] if one else content_type(types)
                if r.status in REDIRECT_STATUSES:
                    limit = min(limit, _REDIRECT_BODY_BYTES)
                try:
                    body = await _read_body(r, limit, raw)
                except BodyCut as cut:  # kept for the archive, as Heritrix keeps it
                    response.error = cut.error
                    if self._archive:
                        received, why = cut.payload, cut.truncated
                        digest = payload_digest(received)
                        cut_short = _exchange(r, url, fetched_at, received, digest, why)
                        response.exchanges.append(cut_short)
                    return response
                except BadContentEncoding:
                    response.error = ErrorKind.DECODING_ERROR
                    if self._archive:  # the body as the server sent it, read on for it
                        as_sent, not_whole = await _rest_as_received(r, limit, raw)
                        digest = payload_digest(as_sent)
                        undecoded = _exchange(r, url, fetched_at, as_sent, digest, not_whole)
                        response.exchanges.append(undecoded)
                    return response
                response.body, response.truncated, response.incomplete = body
                payload = b"".join(raw) if raw else response.body
                # A 304's, a HEAD-like empty body's: hashed once, not per page of a recrawl
                digest = payload_digest(payload) if payload else EMPTY_PAYLOAD_DIGEST
                response.payload_digest = digest
                if self._archive:
                    truncated = "length" if response.truncated else None
                    exchange = _exchange(r, url, fetched_at, payload, digest, truncated)
                    response.exchanges.append(exchange)
        except (
            TimeoutError,
            aiohttp.ClientError,
            OSError,
            ValueError,
            BadContentEncoding,
            *_proxy_errors(),  # evaluated only when something was raised
        ) as exc:  # type: ignore[misc]  # mypy cannot read a starred tuple of classes here
            response.error = _error_kind(exc)
            response.unreachable = response.status is None and isinstance(exc, _UNREACHABLE)
        return response
