"""Responses that break HTTP's rules, from a server that writes its bytes by hand: each
page gets a record, and no response spoils the next one on its connection."""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.client_proto import ResponseHandler

from crawler.framing import BrowserFramedResponseHandler
from tests.conftest import by_url, crawl
from tests.test_warc import read_archive


def response(status: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body


def page(title: str, links: tuple[str, ...] = ()) -> bytes:
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
    body = f"<html><head><title>{title}</title></head><body>{anchors}</body></html>".encode()
    return response("200 OK", {"Content-Type": "text/html", "Content-Length": str(len(body))}, body)


def status_and_title(record: dict[str, Any]) -> tuple[int | None, str | None]:
    return record["status"], record["title"]


PIECES_APART_S = 0.05


class RawSite:
    """A keep-alive HTTP/1.1 server answering each path with fixed bytes, as written."""

    def __init__(self) -> None:
        # A response in pieces is sent a moment apart, as a slow server sends it.
        self.responses: dict[str, bytes | list[bytes]] = {}
        self.connections = 0
        self.requests: list[str] = []
        self.closing: set[str] = set()  # paths after whose response the connection is closed
        # Bytes sent late after a path's response: once the next request on its connection came.
        self.late: dict[str, bytes] = {}
        self.served_on: dict[str, int] = {}  # path: the number of the connection it came on
        self._server: asyncio.Server | None = None
        self._tls: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        scheme = "https" if self._tls else "http"
        return f"{scheme}://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        late = b""
        try:
            while request_line := await reader.readline():
                while await reader.readline() not in (b"\r\n", b""):
                    pass
                path = request_line.split()[1].decode()
                self.requests.append(path)
                self.served_on[path] = self.connections
                writer.write(late)
                answer = self.responses.get(
                    path, response("404 Not Found", {"Content-Length": "0"})
                )
                first, *more = [answer] if isinstance(answer, bytes) else answer
                writer.write(first)
                for piece in more:
                    await writer.drain()
                    await asyncio.sleep(PIECES_APART_S)
                    writer.write(piece)
                late = self.late.get(path, b"")
                await writer.drain()
                if path in self.closing:
                    break
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def start(self, tls: ssl.SSLContext | None = None) -> RawSite:
        self._tls = tls
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


@pytest.fixture
async def raw_site() -> AsyncIterator[RawSite]:
    server = await RawSite().start()
    yield server
    await server.stop()


def test_the_protocol_takes_the_response_parameters_aiohttp_gives():
    """BrowserFramedResponseHandler writes aiohttp's set_response_params signature out
    (forwarding **params was 0.4% of a page): an aiohttp that changes it must fail here."""

    def keywords(function: Any) -> list[tuple[str, Any]]:
        parameters = inspect.signature(function).parameters.values()
        return [(parameter.name, parameter.default) for parameter in parameters]

    assert keywords(BrowserFramedResponseHandler.set_response_params) == keywords(
        ResponseHandler.set_response_params
    )


async def test_a_304_followed_by_a_body_spoils_neither_itself_nor_the_next_response(
    raw_site: RawSite, tmp_path
):
    raw_site.responses["/"] = page("index", ("/echoes", "/next"))
    # A script that prints its page whatever the status; RFC 9112 6.3: a 304 ends at its head.
    raw_site.responses["/echoes"] = response(
        "304 Not Modified", {"Content-Length": "9"}, b"the page!"
    )
    raw_site.responses["/next"] = page("next")

    records = by_url(await crawl(tmp_path, [raw_site.url + "/"], concurrency=1, per_host=1))

    assert raw_site.requests == ["/", "/echoes", "/next"]
    assert records[raw_site.url + "/echoes"]["status"] == 304
    assert status_and_title(records[raw_site.url + "/next"]) == (200, "next")
    assert raw_site.connections == 2  # the one the 304 came on was not used again


async def test_a_body_longer_than_its_content_length_is_read_to_its_length_and_the_rest_dropped(
    raw_site: RawSite, tmp_path
):
    """RFC 9112 6.3: bytes after a response are no response of their own (a script that
    prints a newline after its page's Content-Length was counted); browsers show the page."""
    raw_site.responses["/"] = page("index", ("/longer", "/next"))
    raw_site.responses["/longer"] = page("longer") + b"\n\n<!-- footer -->"
    raw_site.responses["/next"] = page("next")

    records = by_url(await crawl(tmp_path, [raw_site.url + "/"], concurrency=1, per_host=1))

    assert status_and_title(records[raw_site.url + "/longer"]) == (200, "longer")
    assert records[raw_site.url + "/longer"]["bytes"] == len(
        page("longer").partition(b"\r\n\r\n")[2]
    )
    assert status_and_title(records[raw_site.url + "/next"]) == (200, "next")
    assert raw_site.served_on["/next"] == raw_site.served_on["/longer"] + 1  # not used again


async def test_bytes_past_a_content_length_that_come_late_spoil_not_the_next_response(
    raw_site: RawSite, tmp_path
):
    """A page's stray bytes that come after the next request went out on its connection
    (a script that prints more after its page was sent) were read as the next response's
    start, and that page was an invalid_response. They are dropped, and the response read
    from its status line; a server that sends no HTTP at all stays an invalid_response."""
    raw_site.responses["/"] = page("index", ("/longer", "/next", "/garbage"))
    raw_site.responses["/longer"] = page("longer")
    raw_site.late["/longer"] = b"<!-- rendered in 3 ms -->\r\n\r\n"
    raw_site.responses["/next"] = page("next")
    raw_site.responses["/garbage"] = b"NOT HTTP AT ALL\r\n\r\n"
    raw_site.closing.add("/garbage")

    records = by_url(await crawl(tmp_path, [raw_site.url + "/"], concurrency=1, per_host=1))

    assert status_and_title(records[raw_site.url + "/longer"]) == (200, "longer")
    assert status_and_title(records[raw_site.url + "/next"]) == (200, "next")
    assert raw_site.requests.count("/next") == 1
    assert raw_site.served_on["/next"] == raw_site.served_on["/garbage"]  # a reused connection
    assert records[raw_site.url + "/garbage"]["error"] == "invalid_response"


async def test_a_head_browsers_read_is_read_when_llhttp_refuses_it_in_a_later_read(
    raw_site: RawSite, tmp_path
):
    """A head that came in pieces, its bad line in a later one, was refused there: the
    head is read again whole, as one refused in its first read is."""
    raw_site.responses["/"] = page("index", ("/no-colon", "/space", "/next"))
    raw_site.responses["/no-colon"] = [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n",
        b"This is not a header\r\nContent-Length: 17\r\n\r\n" + TITLED,
    ]
    raw_site.responses["/space"] = [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-",
        b"Length : 17\r\n",
        b"\r\n" + TITLED,
    ]
    raw_site.responses["/next"] = page("next")

    records = by_url(await crawl(tmp_path, [raw_site.url + "/"], concurrency=1, per_host=1))

    assert status_and_title(records[raw_site.url + "/no-colon"]) == (200, "ok")
    assert status_and_title(records[raw_site.url + "/space"]) == (200, "ok")
    assert status_and_title(records[raw_site.url + "/next"]) == (200, "next")


SELF_SIGNED = Path(__file__).parent / "data" / "tls" / "self-signed"


async def test_a_self_signed_certificate_is_an_ssl_error_unless_certificate_errors_are_ignored(
    tmp_path,
):
    """As curl's --insecure and Chromium's --ignore-certificate-errors: there was no way to
    crawl a site whose certificate no one vouches for (an intranet's, a device's)."""
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(f"{SELF_SIGNED}.pem", f"{SELF_SIGNED}.key")
    site = await RawSite().start(tls)
    site.responses["/"] = page("secure", ("/next",))
    site.responses["/next"] = page("next")
    url = site.url
    try:
        refused = by_url(await crawl(tmp_path, [url + "/"]))
        accepted = by_url(await crawl(tmp_path, [url + "/"], ignore_certificate_errors=True))
    finally:
        await site.stop()

    assert refused[url + "/"]["error"] == "ssl_error"
    assert site.requests == ["/", "/next"]  # those of the second crawl
    assert status_and_title(accepted[url + "/next"]) == (200, "next")


async def test_interim_responses_before_the_final_one_are_read_as_heads_alone(
    raw_site: RawSite, tmp_path
):
    hints = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
    raw_site.responses["/"] = page("index", ("/hinted", "/hinted-304", "/next"))
    raw_site.responses["/hinted"] = hints + hints + page("hinted")
    raw_site.responses["/hinted-304"] = hints + response(
        "304 Not Modified", {"Content-Length": "9"}, b"the page!"
    )
    raw_site.responses["/next"] = page("next")

    records = by_url(await crawl(tmp_path, [raw_site.url + "/"], concurrency=1, per_host=1))

    assert status_and_title(records[raw_site.url + "/hinted"]) == (200, "hinted")
    assert records[raw_site.url + "/hinted-304"]["status"] == 304  # was no status at all
    assert status_and_title(records[raw_site.url + "/next"]) == (200, "next")


async def test_a_body_without_content_type_is_html_if_browsers_sniff_it_so(
    raw_site: RawSite, tmp_path
):
    """WHATWG MIME Sniffing: after whitespace, <!-- or one of 16 tags, then a space or ">"."""
    bodies = {
        "/comment": b"<!-- generated --><title>comment</title>",
        "/spaced-title": b"\r\n  <TITLE>title</TITLE>",
        "/div": b"<div class=x><a href=/comment>c</a></div>",
        "/not-a-tag": b"<htmlx><title>no</title>",
        "/late": b" " * 600 + b"<html><title>no</title>",
    }
    for path, body in bodies.items():
        raw_site.responses[path] = response("200 OK", {"Content-Length": str(len(body))}, body)
    seeds = [raw_site.url + path for path in bodies if path != "/comment"]

    records = by_url(await crawl(tmp_path, seeds))

    titles = {url.removeprefix(raw_site.url): r["title"] for url, r in records.items()}
    assert titles == {
        "/comment": "comment",  # reached by the link on /div
        "/spaced-title": "title",
        "/div": None,
        "/not-a-tag": None,
        "/late": None,
    }


async def test_the_content_type_is_the_last_of_several_and_a_type_that_is_none_is_sniffed(
    raw_site: RawSite, tmp_path
):
    """Fetch's "extract a MIME type": of several values (fields, or a list in one), the
    last MIME type wins; MIME Sniffing sniffs a body whose type is none, or */*."""
    body = "<title>標題</title><meta charset=gbk>".encode("gbk")
    fields = {
        "/two-fields": ["text/plain", "text/html; charset=gbk"],
        "/a-list": ["text/plain, text/html; charset=gbk"],
        "/charset-kept": ["text/html; charset=gbk", "text/html"],
        "/not-a-type": ["html"],
        "/any": ["*/*"],
        "/plain": ["text/plain"],
    }
    for path, values in fields.items():
        head = "".join(f"Content-Type: {value}\r\n" for value in values)
        raw_site.responses[path] = (
            f"HTTP/1.1 200 OK\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
        )

    records = by_url(await crawl(tmp_path, [raw_site.url + path for path in fields]))

    titles = {path: records[raw_site.url + path]["title"] for path in fields}
    assert titles == {**dict.fromkeys(list(fields)[:-1], "標題"), "/plain": None}
    assert records[raw_site.url + "/two-fields"]["content_type"] == "text/html; charset=gbk"
    assert records[raw_site.url + "/charset-kept"]["content_type"] == "text/html; charset=gbk"


async def test_a_header_line_of_20_kb_is_read_as_browsers_read_it_and_one_of_1_mb_is_not(
    raw_site: RawSite, tmp_path
):
    long_policy = "default-src 'self' " + " ".join(f"https://cdn{n}.example" for n in range(900))
    raw_site.responses["/long"] = page("long").replace(
        b"\r\n\r\n", f"\r\nContent-Security-Policy: {long_policy}\r\n\r\n".encode(), 1
    )
    raw_site.responses["/huge"] = page("huge").replace(
        b"\r\n\r\n", b"\r\nX-Huge: " + b"a" * 2**20 + b"\r\n\r\n", 1
    )

    records = by_url(await crawl(tmp_path, [raw_site.url + "/long", raw_site.url + "/huge"]))

    assert len(long_policy) > 20_000
    assert status_and_title(records[raw_site.url + "/long"]) == (200, "long")
    assert records[raw_site.url + "/huge"]["error"] == "invalid_response"


async def test_a_head_of_1000_fields_is_read_as_browsers_read_it_and_one_of_300_kb_is_not(
    raw_site: RawSite, tmp_path
):
    """Chromium counts no fields, only a head's bytes (256 KiB at most); aiohttp refused
    a head of more than 128 fields."""
    fields = "".join(f"X-Field-{n}: {n}\r\n" for n in range(1000)).encode()
    raw_site.responses["/many"] = page("many").replace(b"\r\n", b"\r\n" + fields, 1)
    long_fields = "".join(f"X-Field-{n}: {'v' * 90}\r\n" for n in range(3000)).encode()
    raw_site.responses["/long"] = page("long").replace(b"\r\n", b"\r\n" + long_fields, 1)

    records = by_url(await crawl(tmp_path, [raw_site.url + "/many", raw_site.url + "/long"]))

    assert len(fields) > 16_000 and len(long_fields) > 300_000
    assert status_and_title(records[raw_site.url + "/many"]) == (200, "many")
    assert records[raw_site.url + "/long"]["error"] == "invalid_response"


TITLED = b"<title>ok</title>"


def raw(head: bytes, body: bytes = TITLED) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + head + b"\r\n" + body


async def test_heads_browsers_read_are_read_and_ambiguous_lengths_are_not(
    raw_site: RawSite, tmp_path
):
    """RFC 9112 6.3 and 5.1, as Chromium reads them; llhttp refused the first five, the
    status line in lowercase or with two spaces, and a Transfer-Encoding that is not
    chunked beside a Content-Length (read to the connection's close: a timeout). A length
    that is no 1*DIGIT ("+17") is an unrecoverable error for a user agent (RFC 9112 6.3):
    the response is discarded."""
    chunked = b"11\r\n" + TITLED + b"\r\n0\r\n\r\n"
    cases = {
        "/twice": raw(b"Content-Length: 17\r\ncontent-length: 17\r\n"),
        "/list": raw(b"Content-Length: 17, 17\r\n"),
        "/chunked-wins": raw(b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", chunked),
        "/space-before-colon": raw(b"Content-Length : 17\r\nX-Powered-By : PHP\r\n"),
        "/no-colon": raw(b"Content-Length: 17\r\nThis is not a header\r\n"),
        "/bare-lf": b"HTTP/1.1 200 OK\nContent-Type: text/html\nContent-Length: 17\n\n" + TITLED,
        "/folded": raw(b"X-Folded: a\r\n b\r\nContent-Length: 17\r\n"),
        "/no-reason": raw(b"Content-Length: 17\r\n").replace(b" OK", b"", 1),
        "/lowercase": raw(b"Content-Length: 17\r\n").replace(b"HTTP/1.1", b"http/1.1", 1),
        "/two-spaces": raw(b"Content-Length: 17\r\n").replace(b" 200", b"  200", 1),
        "/identity": raw(b"Transfer-Encoding: identity\r\nContent-Length: 17\r\n"),
        "/read-to-close": raw(b"").replace(b"HTTP/1.1", b"HTTP/1.0", 1),
        "/two-lengths": raw(b"Content-Length: 17\r\nContent-Length: 20\r\n"),
        "/length-list-differs": raw(b"Content-Length: 17, 20\r\n"),
        "/signed-length": raw(b"Content-Length: +17\r\n"),
    }
    raw_site.responses.update(cases)
    raw_site.responses["/"] = page("index", tuple(cases))
    raw_site.closing.add("/read-to-close")

    records = by_url(await crawl(tmp_path, [raw_site.url + "/"], concurrency=1, per_host=1))

    outcome = {
        path: (r["status"], r["title"], r["error"])
        for path in cases
        for r in [records[raw_site.url + path]]
    }
    read = (200, "ok", None)
    assert outcome == {
        **dict.fromkeys(list(cases)[:-3], read),
        **dict.fromkeys(list(cases)[-3:], (None, None, "invalid_response")),
    }
    # Not reused after one that might be smuggling another response (RFC 9112 6.1).
    for ambiguous in ("/chunked-wins", "/identity"):
        after = raw_site.requests[raw_site.requests.index(ambiguous) + 1]
        assert raw_site.served_on[after] == raw_site.served_on[ambiguous] + 1


async def test_a_final_101_to_a_get_is_an_invalid_response_and_two_locations_no_redirect(
    raw_site: RawSite, tmp_path
):
    """A GET asks for no upgrade, so a 101 can be no answer to it (RFC 9110 15.2.2);
    a redirect naming two different places is refused by Chromium
    (ERR_RESPONSE_HEADERS_MULTIPLE_LOCATION), and followed to neither."""
    raw_site.responses["/"] = page("index", ("/switch", "/two", "/next"))
    raw_site.responses["/switch"] = response(
        "101 Switching Protocols", {"Upgrade": "websocket", "Connection": "Upgrade"}
    )
    raw_site.closing.add("/switch")
    raw_site.responses["/two"] = (
        b"HTTP/1.1 302 Found\r\nLocation: /a\r\nLocation: /b\r\nContent-Length: 0\r\n\r\n"
    )
    raw_site.responses["/next"] = page("next")

    records = by_url(await crawl(tmp_path, [raw_site.url + "/"], concurrency=1, per_host=1))

    assert records[raw_site.url + "/switch"]["error"] == "invalid_response"
    assert records[raw_site.url + "/two"]["error"] == "invalid_redirect"
    assert "/a" not in raw_site.requests and "/b" not in raw_site.requests
    assert status_and_title(records[raw_site.url + "/next"]) == (200, "next")


async def test_a_chunked_body_with_bare_lfs_in_its_framing_is_read_as_browsers_read_it(
    raw_site: RawSite, tmp_path
):
    """Chromium and curl end a chunk's size line and its data at a LF without a CR;
    llhttp refused a bare LF after a size, and waited for more after a last "0\\n\\n"."""
    chunked = b"Transfer-Encoding: chunked\r\n"
    bodies = {
        "/lf-after-size": b"11\n" + TITLED + b"\r\n0\r\n\r\n",
        "/lf-after-data": b"11\r\n" + TITLED + b"\n0\r\n\r\n",
        "/lf-everywhere": b"11\n" + TITLED + b"\n0\n\n",
        "/lf-at-the-end": b"11\r\n" + TITLED + b"\r\n0\n\n",
        "/extension-and-trailer": b"11;v=1\r\n" + TITLED + b"\r\n0\r\nX-Sum: 1\r\n\r\n",
    }
    cases: dict[str, bytes | list[bytes]] = {path: raw(chunked, b) for path, b in bodies.items()}
    cases["/lf-in-a-later-read"] = [raw(chunked, b"11\r\n" + TITLED + b"\r\n"), b"3\nend\n0\n\n"]
    for path, answer in cases.items():
        raw_site.responses[path] = answer
        raw_site.responses[path + "/next"] = page("next")
    raw_site.responses["/"] = page("index", tuple(p for c in cases for p in (c, c + "/next")))
    warc = tmp_path / "warc"

    records = by_url(
        await crawl(tmp_path, [raw_site.url + "/"], concurrency=1, per_host=1, warc=str(warc))
    )

    outcome = {
        path: (
            *status_and_title(records[raw_site.url + path]),
            records[raw_site.url + path]["error"],
        )
        for path in cases
    }
    assert outcome == dict.fromkeys(cases, (200, "ok", None))
    assert all(
        status_and_title(records[raw_site.url + c + "/next"]) == (200, "next") for c in cases
    )
    archived = {r["uri"]: r["payload"] for r in read_archive(warc) if r["type"] == "response"}
    assert archived[raw_site.url + "/lf-after-size"] == TITLED  # the others are its revisits
    assert archived[raw_site.url + "/lf-in-a-later-read"] == TITLED + b"end"
