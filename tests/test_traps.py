"""Servers that misbehave: every bad response becomes a record and the crawl goes on."""

from __future__ import annotations

import asyncio
import os
import socket

from aiohttp import web

from tests.conftest import Site, by_url, crawl, html


def raw(response: bytes, then_wait_s: float = 0.0):
    """A handler that writes `response` to the socket as it is, then closes it."""

    async def handler(request: web.Request) -> web.StreamResponse:
        request.transport.write(response)
        if then_wait_s:
            await asyncio.sleep(then_wait_s)
        request.transport.close()
        await asyncio.sleep(1)
        return web.Response()

    return handler


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_every_trap_gives_one_record_and_the_good_pages_are_still_crawled(
    site: Site, tmp_path
):
    traps = {
        "/short-body": raw(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
            b"Content-Length: 5000\r\n\r\n<title>cut</title>"
        ),
        "/garbage": raw(b"\x00\x01\x02 this is not http\r\n\r\n"),
        "/huge-header": raw(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"),
        "/bad-chunks": raw(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\nnope\r\n"
        ),
        "/bad-gzip": raw(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
            b"Content-Encoding: gzip\r\nContent-Length: 10\r\n\r\nnot gzip!!"
        ),
    }
    for path, handler in traps.items():
        site.handle(path, handler)
    site.page("/binary", body=os.urandom(50_000), content_type="text/html")
    site.page("/nonsense-charset", "caf\xe9", content_type="text/html; charset=no-such-thing")
    site.page("/empty", body=b"")
    site.page("/no-content", status=204, body=b"")
    site.page("/fine", "fine")
    refused = f"http://127.0.0.1:{closed_port()}/"
    site.page(
        "/", "index", [*traps, "/binary", "/nonsense-charset", "/empty", "/no-content", "/fine"]
    )

    records = by_url(await crawl(tmp_path, [site.url + "/", refused], timeout=2))

    errors = {url.removeprefix(site.url): r["error"] for url, r in records.items()}
    assert errors == {
        "/": None,
        "/short-body": "connection_error",
        "/garbage": "invalid_response",
        "/huge-header": "invalid_response",
        "/bad-chunks": "invalid_response",
        "/bad-gzip": "decoding_error",
        "/binary": None,
        "/nonsense-charset": None,
        "/empty": None,
        "/no-content": None,
        "/fine": None,
        refused: "connection_error",
    }
    assert records[site.url + "/nonsense-charset"]["title"] == "café"
    assert records[site.url + "/fine"]["title"] == "fine"


async def test_a_trickling_server_is_cut_off_by_the_total_timeout(site: Site, tmp_path):
    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        for _ in range(100):
            await response.write(b"<p>.")
            await asyncio.sleep(0.1)
        return response

    site.handle("/", trickle)

    [record] = await crawl(tmp_path, [site.url + "/"], timeout=0.5)

    assert (record["status"], record["error"]) == (200, "timeout")


async def test_an_endless_link_space_stops_at_the_depth_limit(site: Site, tmp_path):
    async def calendar(request: web.Request) -> web.Response:
        day = int(request.query.get("day", "0"))
        links = [f"/calendar?day={day + 1}", f"/calendar?day={day + 1}&session={day}"]
        return web.Response(text=html(f"day {day}", links), content_type="text/html")

    site.handle("/calendar", calendar)

    records = await crawl(tmp_path, [site.url + "/calendar?day=0"], max_depth=4)

    assert max(r["depth"] for r in records) == 4
    assert len(records) == 1 + 2 * 4  # both pages of a day link to the same two of the next


async def test_a_page_with_ten_thousand_links_lists_them_all(site: Site, tmp_path):
    site.page("/", "many", [f"/p{n}" for n in range(10_000)])

    [record] = await crawl(tmp_path, [site.url + "/"], max_depth=0)

    assert len(record["links"]) == 10_000
