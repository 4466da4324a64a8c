"""Where a response's head and body end, as browsers read them: aiohttp's protocol for a
connection, which hands its parser (llhttp, strict) a head it refused again, the way a
browser takes it.

RFC 9112 lets a user agent read more than llhttp does, and browsers do:

- a Content-Length given twice with one value, or as a list of one value ("5, 5"), is
  that value (6.3); two different values stay an error (the parser refuses them);
- Transfer-Encoding and Content-Length together: a chunked Transfer-Encoding wins (6.3),
  and the connection is closed after, as a message that might be smuggling one; one
  that is not chunked ("identity", of RFC 2616) leaves the body to the Content-Length,
  as Chromium and Firefox frame it (RFC 9112 would read it to the connection's close,
  which a keep-alive server never does: the page was a timeout);
- a status line's "HTTP" is read in any case, as Chromium reads it ("http/1.1 200 OK");
- whitespace between a field name and its colon is dropped, as a proxy must (5.1), and
  a line with no colon or no name is skipped, as Chromium and Firefox skip it;
- a 1xx interim response (100 Continue, 103 Early Hints) is a head alone, and the
  response after it is read as any other (a 304 after a 103, too);
- a 204 or a 304 ends with its head, whatever its headers say (6.3): a server that sends
  a body after one anyway (a script that prints its page whatever the status) had aiohttp
  read those bytes as the next response on the connection. The bytes are dropped, and
  the connection is closed rather than reused.

Most heads are read once, by llhttp, as they come: a head is only looked at here when
llhttp refuses it (or for a 204 or 304), so the pages a crawl reads cost nothing more.
A refusal is caught before aiohttp closes the connection; the head is then written
again, and a new parser reads it. A head that is split over several reads and refused
in a later one is read again whole, as one refused in its first read is.

A chunked body is given to llhttp too, but its reads are kept until it ends: llhttp
refuses a bare LF after a chunk's size, which Chromium and curl read (RFC 9112 lets a
recipient end a head's lines at a LF, 2.2, and says nothing of it for a chunk's, 7.1),
and such a body is then decoded again from its start, by aiohttp's own decoder.

Bytes past a response that come after the next request went out on its connection are
no response: they are dropped, and the next response is read from its status line.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, cast

from aiohttp.client_exceptions import ClientPayloadError
from aiohttp.client_proto import ResponseHandler
from aiohttp.helpers import DEFAULT_CHUNK_SIZE, BaseTimerContext
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError
from aiohttp.http_parser import HeadersParser, HttpPayloadParser, PayloadState
from aiohttp.streams import StreamReader

# A head still unended past this is refused, as Chromium refuses one past 256 KiB
# (ERR_RESPONSE_HEADERS_TOO_BIG): it counts a head's bytes, not its fields.
MAX_HEAD_BYTES = 256 << 10
_BODILESS_STATUSES = (b"204", b"304")
# A 204 or a 304 that announces a body, which a server that sends one after it does.
_ANNOUNCED_BODY = re.compile(
    rb"\n(?:content-length[ \t]*:[ \t]*0*[1-9]|transfer-encoding[ \t]*:)", re.I
)
_CONTENT_LENGTH = b"content-length"
# A status line past the start of what came (bytes of the response before it, sent late).
_STATUS_LINE_START = re.compile(rb"\n(?=http/\d)", re.I)
_TRANSFER_ENCODING = b"transfer-encoding"
# The keywords of aiohttp's ResponseHandler.set_response_params, in order.
_PARAMETERS = tuple(inspect.signature(ResponseHandler.set_response_params).parameters)[1:]


def head_end(data: bytes | bytearray, start: int = 0) -> int:
    """Where the head in `data` ends, past its empty line (CRLF or, RFC 9112 2.2, a bare
    LF), or -1; looked for from `start`."""
    crlf = data.find(b"\n\r\n", start)
    lf = data.find(b"\n\n", start)
    if lf < 0:
        return crlf + 3 if crlf >= 0 else -1
    return crlf + 3 if 0 <= crlf < lf else lf + 2


def browser_head(head: bytes) -> tuple[bytes, bool, int | None]:
    """`head` (up to its empty line) with its fields as browsers read them, for llhttp;
    whether the connection must be closed after its response; and the length of its
    body, if a Content-Length alone gives it."""
    lines = head.split(b"\n")
    status_line = lines[0].rstrip(b"\r")
    if status_line[:5].upper() == b"HTTP/":  # Chromium reads the name in any case
        status_line = b"HTTP/" + status_line[5:]
    version, space, rest = status_line.partition(b" ")
    kept = [version + space + rest.lstrip(b" ")]  # Chromium skips spaces before the code
    lengths: list[bytes] = []
    length_at = -1  # where the first Content-Length was, to put its one value back
    codings: list[bytes] = []
    coding_at = -1  # where the first Transfer-Encoding was, to put it back
    for raw in lines[1:]:
        line = raw.rstrip(b"\r")
        if not line:
            break
        if line[0] in b" \t":  # obs-fold, which llhttp reads
            kept.append(line)
            continue
        name, colon, value = line.partition(b":")
        name = name.rstrip(b" \t")
        if not colon or not name:
            continue
        lower = name.lower()
        if lower == _CONTENT_LENGTH:
            if length_at < 0:
                length_at = len(kept)
            lengths.append(value.strip(b" \t"))
        elif lower == _TRANSFER_ENCODING:
            if coding_at < 0:
                coding_at = len(kept)
            codings.append(value)
        else:
            kept.append(name + b":" + value)
    # Chromium frames a body by its Content-Length unless a Transfer-Encoding says chunked.
    chunked = any(c.strip(b" \t").lower() == b"chunked" for v in codings for c in v.split(b","))
    body_bytes = None
    inserts = []
    if codings and (chunked or not lengths):
        inserts.append((coding_at, [b"Transfer-Encoding:" + value for value in codings]))
    if lengths and not chunked:
        values = {part.strip(b" \t") for length in lengths for part in length.split(b",")}
        if len(values) == 1 and (only := values.pop()).isdigit():
            lengths, body_bytes = [only], int(only)
        inserts.append((length_at, [b"Content-Length: " + length for length in lengths]))
    for at, fields in sorted(inserts, reverse=True):  # the later first, the earlier's place kept
        kept[at:at] = fields
    kept += [b"", b""]
    return b"\r\n".join(kept), bool(codings) and bool(lengths), body_bytes


class _Past:
    """The payload of a response whose body a second decoder reads from its start: it
    is given only what comes past what the first decoder gave it."""

    def __init__(self, payload: StreamReader) -> None:
        self._payload = payload
        self._given = payload.total_bytes

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        if self._given:
            past = data[self._given :]
            self._given = max(0, self._given - len(data))
            if not past:
                return False
            data = past
        return self._payload.feed_data(data, len(data))

    def feed_eof(self) -> None:
        self._payload.feed_eof()

    def begin_http_chunk_receiving(self) -> None:
        if not self._given:
            self._payload.begin_http_chunk_receiving()

    def end_http_chunk_receiving(self) -> None:
        if not self._given:
            self._payload.end_http_chunk_receiving()

    def set_exception(self, exc: BaseException, *cause: BaseException) -> None:
        """Nothing: the protocol gives the payload the error aiohttp's readers expect."""


class BrowserFramedResponseHandler(ResponseHandler):
    """aiohttp's protocol for a connection, reading a head llhttp refuses as browsers do.

    aiohttp makes a parser for each request: which parser's response is being read
    says whether its head is still to come.
    """

    def __init__(self, loop: Any) -> None:
        super().__init__(loop)
        self._passed: object = None  # the parser whose head went to aiohttp, body to come
        self._ended: object = None  # the parser whose response was a 204 or 304, read
        # The parser whose reads go through `_tried_read`, not straight to llhttp: a head
        # llhttp has read part of, a chunked body, or one the decoder reads.
        # (Few attributes: past 30, CPython 3.11's instances share no keys, and every
        # attribute of aiohttp's protocol is read slower.)
        self._tried: object = None
        self._tried_read: Callable[[object, bytes], None] = self._more_head
        # That response's reads, its head on (a head in pieces: one, grown), to read again.
        self._reads: list[bytes | bytearray] = []
        self._head = bytearray()  # the start of a response's head, until enough has come
        self._params: tuple[Any, ...] = ()  # aiohttp's for this response's parser
        self._trying = False  # a refusal now is caught, not the connection's end
        self._refused = False
        self._rewriting = False  # the head coming is one llhttp refused

    def set_response_params(
        self,
        *,
        timer: BaseTimerContext | None = None,
        skip_payload: bool = False,
        read_until_eof: bool = False,
        auto_decompress: bool = True,
        read_timeout: float | None = None,
        read_bufsize: int = DEFAULT_CHUNK_SIZE,
        timeout_ceil_threshold: float = 5,
        max_line_size: int = 8190,
        max_field_size: int = 8190,
        max_headers: int = 128,
    ) -> None:
        # aiohttp's signature written out (a test holds it to aiohttp's): taking and passing
        # on **params cost 8,000 instructions a response, 0.4% of a page.
        self._params = (
            timer,
            skip_payload,
            read_until_eof,
            auto_decompress,
            read_timeout,
            read_bufsize,
            timeout_ceil_threshold,
            max_line_size,
            max_field_size,
            max_headers,
        )
        ResponseHandler.set_response_params(
            self,
            timer=timer,
            skip_payload=skip_payload,
            read_until_eof=read_until_eof,
            auto_decompress=auto_decompress,
            read_timeout=read_timeout,
            read_bufsize=read_bufsize,
            timeout_ceil_threshold=timeout_ceil_threshold,
            max_line_size=max_line_size,
            max_field_size=max_field_size,
            max_headers=max_headers,
        )

    def _new_parser(self) -> None:
        """A parser for the response being read, as aiohttp made the one it replaces."""
        params = dict(zip(_PARAMETERS, self._params, strict=True))
        ResponseHandler.set_response_params(self, **params)

    def set_exception(self, exc: BaseException, *cause: BaseException) -> None:
        if self._trying:
            self._refused = True
            return
        super().set_exception(exc, *cause)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is self._passed:
            ResponseHandler.data_received(self, data)
        elif parser is self._ended:
            if data:  # nothing may follow a bodiless response
                self._close_now()
        elif parser is self._tried:
            self._tried_read(parser, data)
        elif self._head:
            searched = len(self._head) - 2  # the empty line may have begun in the last bytes
            self._head += data
            self._read_head(parser, bytes(self._head), searched)
        else:
            self._read_head(parser, data, 0)

    def _read_head(self, parser: object, data: bytes, searched: int) -> None:
        """`data`, which begins a response's head, to aiohttp: at once unless the head
        must be seen whole (a 1xx, 204 or 304, or one llhttp refused), then once it has."""
        status = data[9:12]
        if not self._rewriting and status not in _BODILESS_STATUSES and data[9:10] != b"1":
            if len(data) < 12:
                self._head[:] = data
                return
            if self._head:  # it came in pieces
                self._head.clear()
            # As browsers read it, if llhttp refuses it (llhttp stops at its first error).
            if self._refuses(data):
                self._head_refused(data)
                return
            try:
                chunked = self._buffer[-1][0][0].chunked
            except IndexError:  # the head goes on in the next reads: they are tried too
                self._tried, self._tried_read = parser, self._more_head
                self._reads[:] = [bytearray(data)]
                return
            if chunked:
                self._reads[:] = [data]
                self._chunk_read(parser)
            else:
                self._passed = parser
            return
        end = head_end(data, max(searched, 0))
        if end < 0:
            if len(data) < MAX_HEAD_BYTES:
                self._head[:] = data
                return
            end = len(data)  # for aiohttp to refuse
        self._head.clear()
        rewriting, self._rewriting = self._rewriting, False
        stray = False
        if rewriting:
            head, close, body_bytes = browser_head(data[:end])
            if close:
                self.force_close()
            data, end = head + data[end:], len(head)
            # Bytes past the Content-Length (a page longer than it says) are no response of
            # their own (RFC 9112 6.3): dropped, as browsers drop them, not the page with them.
            final = status[:1] != b"1" or status == b"101"
            if final and body_bytes is not None and len(data) > end + body_bytes:
                stray, data = True, data[: end + body_bytes]
        if status[:1] == b"1" and status != b"101":  # interim: the final head follows
            if rewriting:
                ResponseHandler.data_received(self, data[:end])
            elif self._refuses(data[:end]):
                self._head_refused(data[:end])
            self._rewriting = rewriting
            if len(data) > end:  # read as this response's head was (its parser may be new)
                self._read_head(self._parser, data[end:], 0)
            return
        if status not in _BODILESS_STATUSES:
            self._passed = parser
            ResponseHandler.data_received(self, data)
            if stray:
                self._close_now()
            return
        self._ended = parser
        ResponseHandler.data_received(self, data[:end])
        if len(data) > end or _ANNOUNCED_BODY.search(data, 0, end):
            self._close_now()

    def _head_refused(self, data: bytes) -> None:
        """`data`, which begins a head llhttp refused, read again by a new parser.

        On a reused connection, bytes that begin no status line are the end of the
        response before, sent late (past its Content-Length): they are dropped, and the
        response is read from its status line, which may come in a later read. A server
        that sends no status line after them (no HTTP) has its bytes refused when it
        closes the connection."""
        reused = self._passed is not None or self._ended is not None
        status_line = _STATUS_LINE_START.search(data) if reused else None
        if not reused or data.lstrip(b"\r\n")[:5].upper() == b"HTTP/":
            self._read_refused(data)
        elif status_line is not None:
            self._new_parser()
            self._read_head(self._parser, data[status_line.end() :], 0)
        elif len(data) < MAX_HEAD_BYTES:
            self._new_parser()
            self._head[:] = data  # with what comes next, read again
        else:
            self._read_refused(data)

    def _more_head(self, parser: object, data: bytes) -> None:
        """`data`, which goes on with a head llhttp has read the start of, to aiohttp;
        if llhttp refuses it, the head so far is read again as browsers do."""
        head = self._reads[0]
        head += data
        if len(head) > MAX_HEAD_BYTES:
            self._tried = None
            self._reads.clear()
            self._close_now()
            ResponseHandler.set_exception(self, BadHttpMessage("Response head too long"))
            return
        refused = self._refuses(data)
        if not refused and not self._buffer:
            return
        self._tried = None
        if refused:
            self._reads.clear()
            self._read_refused(bytes(head))
        elif self._buffer[-1][0][0].chunked:
            self._chunk_read(parser)
        else:  # the head is read: the body follows untried
            self._passed = parser
            self._reads.clear()

    def _more_chunked(self, parser: object, data: bytes) -> None:
        """`data`, more of a chunked body, to llhttp; read from the body's start by a
        decoder that reads a bare LF in its framing if llhttp refuses one."""
        self._reads.append(data)
        if self._refuses(data):
            self._decode_leniently(parser)
        else:
            self._chunk_read(parser)

    def _chunk_read(self, parser: object) -> None:
        """What follows llhttp's read of more of a chunked body: nothing if the body
        ended; more reads, tried; or, if the last read ends with an empty line that
        llhttp read as no end ("0\\n\\n"), the decoder that reads it."""
        if self._payload is None or self._payload.is_eof():
            self._tried, self._passed = None, parser
            self._reads.clear()
        elif self._reads[-1].endswith(b"\n\n"):
            self._decode_leniently(parser)
        else:
            self._tried, self._tried_read = parser, self._more_chunked

    def _decode_leniently(self, parser: object) -> None:
        """The chunked body of the response read so far (self._reads, its head on),
        which llhttp refused, read by aiohttp's own decoder from its start. That one
        ends a size line or a chunk's data at a LF with or without a CR before it, as
        Chromium and curl do; llhttp refuses a bare LF after a size, and reads a last
        chunk of "0\\n\\n" as no end. The payload is given what comes past what llhttp
        gave it, and the connection is closed after."""
        assert self._payload is not None  # the head was read
        response = b"".join(self._reads)
        self._reads.clear()
        decoder = HttpPayloadParser(
            cast(StreamReader, _Past(self._payload)),  # what the decoder calls of one
            chunked=True,
            auto_decompress=False,
            lax=True,
            headers_parser=HeadersParser(lax=True),
        )
        self._tried, self._tried_read = parser, functools.partial(self._decode, decoder)
        self.force_close()
        self._decode(decoder, parser, response[head_end(response) :])

    def _decode(self, decoder: HttpPayloadParser, parser: object, data: bytes) -> None:
        """More of a chunked body to the `decoder` reading it, dropped once the body ends:
        nothing may follow it on the connection."""
        try:
            ended = decoder.feed_data(data, b"\n")[0] is PayloadState.PAYLOAD_COMPLETE
        except HttpProcessingError as exc:  # a body no browser reads either
            self._close_now()
            ended = True
            if self._buffer:  # its head not yet taken: refused whole, as llhttp refused it
                self._buffer.clear()
                ResponseHandler.set_exception(self, exc)
            else:  # as llhttp's error in a body is given
                assert self._payload is not None
                cut = ClientPayloadError(f"Response payload is not completed: {exc!r}")
                self._payload.set_exception(cut, exc)
        if ended:
            self._tried, self._ended = None, parser

    def _refuses(self, data: bytes) -> bool:
        """Whether llhttp refuses `data`, which it is given; a refusal is caught."""
        transport, self.transport = self.transport, None  # aiohttp closes one it refuses
        self._trying = True
        try:
            ResponseHandler.data_received(self, data)
        finally:
            self.transport = transport
            self._trying = False
        refused, self._refused = self._refused, False
        return refused

    def _read_refused(self, data: bytes) -> None:
        """`data`, which begins a response llhttp refused, read again by a new parser: its
        head as browsers read it, or, if llhttp refused its chunked body, not its head,
        the body by a decoder that reads what llhttp does not."""
        self._new_parser()
        end = head_end(data)
        if end > 0 and b"chunked" in data[:end].lower():
            if not self._refuses(data[:end]):
                if self._buffer[-1][0][0].chunked:
                    self._reads[:] = [data]
                    self._decode_leniently(self._parser)
                    return
                self._buffer.clear()  # read again below, as a refused head is
            self._new_parser()
        self._rewriting = True
        self._read_head(self._parser, data, 0)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._head:  # a head the server never ended: aiohttp's to refuse
            head = bytes(self._head)
            self._head.clear()
            self._passed = self._parser
            ResponseHandler.data_received(self, head)
        super().connection_lost(exc)

    def _close_now(self) -> None:
        self.force_close()
        if self.transport is not None:
            self.transport.close()
