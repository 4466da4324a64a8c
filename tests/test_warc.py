"""--warc DIR and --text: every exchange archived as WARC/1.1 that real readers accept."""

from __future__ import annotations

import asyncio
import base64
import gzip
import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from aiohttp import web
from fastwarc.warc import ArchiveIterator as FastArchiveIterator
from hypothesis import given
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser
from warcio.archiveiterator import ArchiveIterator

from crawler import Crawler
from crawler.fetch import sha1_base32
from crawler.parse import collapse_whitespace, visible_text
from crawler.sinks.warc import REVISIT_PROFILE
from tests.archive_tools import run_tool
from tests.conftest import TEST_SETTINGS, Site, by_url, crawl, html, read_records
from tests.test_state import Run, assert_each_page_once, build_graph_site
from tests.test_traps import raw

REVISIT = REVISIT_PROFILE.decode()


def warc_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.warc.gz"), key=lambda p: p.name.rsplit("-", 1)[1])


def read_archive(directory: Path) -> list[dict[str, Any]]:
    """Every record of every file, read by warcio, checked by `warcio check` and FastWARC."""
    files = warc_files(directory)
    assert files
    records = []
    for path in files:
        check = subprocess.run(
            [sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stdout + check.stderr
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                headers = record.rec_headers
                records.append(
                    {
                        "file": path.name,
                        "offset": None,
                        "type": record.rec_type,
                        "uri": headers.get_header("WARC-Target-URI"),
                        "headers": headers,
                        "http": record.http_headers,
                        "payload": record.raw_stream.read(),
                    }
                )
        with open(path, "rb") as f:
            fast = []
            for record in FastArchiveIterator(f, parse_http=False):
                assert record.verify_block_digest()
                fast.append((record.record_type, record.headers.get("WARC-Target-URI")))
        mine = [(r["type"], r["uri"]) for r in records if r["file"] == path.name]
        assert [(str(t), uri) for t, uri in fast] == mine
    return records


def record_at(directory: Path, file: str, offset: int, length: int) -> Any:
    """The one record at `offset`: seek, inflate one gzip member, parse it with warcio."""
    with open(directory / file, "rb") as f:
        f.seek(offset)
        member = f.read(length)
    data = gzip.decompress(member)  # exactly one member: trailing bytes would be a bug
    return next(iter(ArchiveIterator(io.BytesIO(data))))


async def test_every_exchange_has_a_request_and_a_response_and_offsets_open_them(
    site: Site, tmp_path: Path
) -> None:
    site.page("/", "Home", ["/a", "/moved", "/same1", "/same2"])
    site.page("/a", "A", ["/"])
    site.redirect("/moved", "/b")
    site.page("/b", "B")
    same = html("Same", ["/"])
    site.page("/same1", body=same)
    site.page("/same2", body=same)
    site.page("/robots.txt", content_type="text/plain", body="User-agent: *\nAllow: /\n")
    warc = tmp_path / "warc"
    records = by_url(await crawl(tmp_path, [site.url + "/"], warc=str(warc), ignore_robots=False))
    archive = read_archive(warc)
    types = Counter(r["type"] for r in archive)
    assert types["warcinfo"] == 1
    fetched = {site.url + p for p in ["/", "/a", "/moved", "/b", "/same1", "/same2", "/robots.txt"]}
    requests = [r["uri"] for r in archive if r["type"] == "request"]
    responses = [r for r in archive if r["type"] in ("response", "revisit")]
    assert Counter(requests) == Counter(fetched) == Counter(r["uri"] for r in responses)
    by_id = {r["headers"].get_header("WARC-Record-ID"): r for r in archive}
    for response in responses:
        request = by_id[response["headers"].get_header("WARC-Concurrent-To")]
        assert request["type"] == "request"
        assert request["headers"].get_header("WARC-Concurrent-To") == response[
            "headers"
        ].get_header("WARC-Record-ID")
        assert response["headers"].get_header("WARC-IP-Address") == "127.0.0.1"
        assert response["headers"].get_header("WARC-Payload-Digest").startswith("sha1:")
    revisits = [r for r in archive if r["type"] == "revisit"]
    assert len(revisits) == 1
    revisit = revisits[0]["headers"]
    assert revisit.get_header("WARC-Profile") == REVISIT
    # WARC 1.1, 6.7.2: "A WARC-Truncated header with reason 'length' shall be used for
    # any identical-digest truncation" (the block is the head alone), as Heritrix writes.
    assert revisit.get_header("WARC-Truncated") == "length"
    original = by_id[revisit.get_header("WARC-Refers-To")]
    assert original["type"] == "response"
    assert revisit.get_header("WARC-Refers-To-Target-URI") == original["uri"]
    assert revisit.get_header("WARC-Refers-To-Date") == original["headers"].get_header("WARC-Date")
    assert revisits[0]["payload"] == b""  # the payload is not stored twice
    redirect = next(r for r in responses if r["uri"] == site.url + "/moved")
    assert redirect["http"].get_statuscode() == "302"
    for url, record in records.items():
        opened = record_at(warc, record["warc_file"], record["warc_offset"], record["warc_length"])
        assert opened.rec_type in ("response", "revisit")
        final = record["final_url"] or url
        assert opened.rec_headers.get_header("WARC-Target-URI") == final
        assert opened.rec_headers.get_header("WARC-Payload-Digest") == record["content_digest"]


async def test_a_retried_page_keeps_every_attempt_and_a_sitemap_is_archived_like_a_page(
    site: Site, tmp_path: Path
) -> None:
    attempts = []

    async def flaky(_request: web.Request) -> web.Response:
        attempts.append(1)
        if len(attempts) == 1:
            return web.Response(status=503, text="busy", headers={"Retry-After": "0"})
        return web.Response(text=html("Back"), content_type="text/html")

    site.page("/", "Home", ["/flaky"])
    site.handle("/flaky", flaky)
    site.page("/robots.txt", content_type="text/plain", body="Sitemap: /map.xml\n")
    site.page(
        "/map.xml",
        content_type="application/xml",
        body='<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{site.url}/</loc></url></urlset>",
    )
    warc = tmp_path / "warc"
    records = by_url(
        await crawl(
            tmp_path,
            [site.url + "/"],
            warc=str(warc),
            ignore_robots=False,
            sitemaps=True,
            retries=1,
        )
    )
    archive = read_archive(warc)
    flaky_responses = [
        r for r in archive if r["type"] == "response" and r["uri"].endswith("/flaky")
    ]
    assert [r["http"].get_statuscode() for r in flaky_responses] == ["503", "200"]
    flaky_record = records[site.url + "/flaky"]
    opened = record_at(
        warc, flaky_record["warc_file"], flaky_record["warc_offset"], flaky_record["warc_length"]
    )
    assert opened.http_headers.get_statuscode() == "200"
    sitemap = records[site.url + "/map.xml"]
    assert sitemap["kind"] == "sitemap"
    opened = record_at(warc, sitemap["warc_file"], sitemap["warc_offset"], sitemap["warc_length"])
    assert opened.rec_headers.get_header("WARC-Target-URI") == site.url + "/map.xml"
    assert b"<urlset" in opened.content_stream().read()


async def test_warcinfo_says_what_crawled_and_keeps_secrets_out(site: Site, tmp_path: Path) -> None:
    site.page("/", "Home")
    warc = tmp_path / "warc"
    await crawl(
        tmp_path,
        [site.url + "/"],
        warc=str(warc),
        header=(("X-Api-Key", "s3cret-value"), ("Accept-Language", "fr")),
    )
    (info,) = [r for r in read_archive(warc) if r["type"] == "warcinfo"]
    fields = dict(line.split(": ", 1) for line in info["payload"].decode().splitlines())
    assert fields["software"].startswith("crawler/")
    assert fields["robots"] == "ignore"
    settings = json.loads(fields["crawler-settings"])
    assert settings["header"] == [["X-Api-Key", "<redacted>"], ["Accept-Language", "fr"]]
    assert "s3cret-value" not in info["payload"].decode()


async def test_a_gzip_stream_cut_short_is_read_as_far_as_it_goes_and_archived_as_received(
    site: Site, tmp_path: Path
) -> None:
    body = html("Cut", body='<a href="/next">next</a>' + "word " * 2000).encode()
    cut = gzip.compress(body)[:-40]  # the last block's end and the trailer lost
    site.page("/", body=cut, headers={"Content-Encoding": "gzip"})
    site.page("/empty", body=b"", headers={"Content-Encoding": "gzip"})
    site.page("/next", "Next")
    warc = tmp_path / "warc"

    records = by_url(await crawl(tmp_path, [site.url + "/", site.url + "/empty"], warc=str(warc)))

    record = records[site.url + "/"]
    # Browsers show what the stream held; the record says it is not the whole body.
    assert (record["title"], record["error"], record["truncated"]) == ("Cut", None, True)
    assert 0 < record["bytes"] < len(body)
    assert records[site.url + "/next"]["title"] == "Next"
    assert records[site.url + "/empty"]["truncated"] is False
    archive = {r["uri"]: r for r in read_archive(warc) if r["type"] == "response"}
    response = archive[site.url + "/"]
    assert response["payload"] == cut
    assert response["headers"].get_header("WARC-Truncated") is None  # every byte is there


async def test_a_body_cut_before_its_length_is_archived_as_received_marked_disconnect(
    site: Site, tmp_path: Path
) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n"
    site.handle("/cut", raw(head + b"<title>cut</title>"))  # then the connection closes
    site.page("/", "Home", ["/cut"])
    warc = tmp_path / "warc"

    records = by_url(await crawl(tmp_path, [site.url + "/"], warc=str(warc)))

    assert records[site.url + "/cut"]["error"] == "connection_error"
    archive = read_archive(warc)
    assert [r["type"] for r in archive if r["uri"] == site.url + "/cut"] == ["request", "response"]
    [cut] = [r for r in archive if r["uri"] == site.url + "/cut" and r["type"] == "response"]
    # WARC 1.1 5.13: "disconnect" (network disconnect); the head says what came.
    assert cut["headers"].get_header("WARC-Truncated") == "disconnect"
    assert cut["payload"] == b"<title>cut</title>"
    assert cut["http"].get_header("Content-Length") == "18"
    assert cut["http"].get_header("X-Crawler-Content-Length") == "5000"


async def test_a_body_cut_off_by_the_timeout_is_archived_as_received_marked_time(
    site: Site, tmp_path: Path
) -> None:
    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.content_length = 5000
        await response.prepare(request)
        await response.write(b"<title>slow</title>")
        for _ in range(100):  # until the crawler hangs up
            await asyncio.sleep(0.05)
            await response.write(b".")
        return response

    site.handle("/", trickle)
    warc = tmp_path / "warc"

    [record] = await crawl(tmp_path, [site.url + "/"], warc=str(warc), timeout=0.5)

    assert (record["status"], record["error"]) == (200, "timeout")
    [cut] = [r for r in read_archive(warc) if r["type"] == "response"]
    # WARC 1.1 5.13: "time" (exceeds configured max time); the head says what came.
    assert cut["headers"].get_header("WARC-Truncated") == "time"
    assert cut["payload"].startswith(b"<title>slow</title>.")
    assert cut["http"].get_header("Content-Length") == str(len(cut["payload"]))
    assert cut["http"].get_header("X-Crawler-Content-Length") == "5000"


async def test_a_body_that_cannot_be_decoded_is_archived_as_received(
    site: Site, tmp_path: Path
) -> None:
    corrupt = b"no gzip at all " * 5000  # past the first read, to be read on after it failed
    unknown = bytes(range(256)) * 4  # a coding the crawler cannot undo
    site.page("/", "Home", ["/corrupt", "/zstd"])
    site.page("/corrupt", body=corrupt, headers={"Content-Encoding": "gzip"})
    site.page("/zstd", body=unknown, headers={"Content-Encoding": "zstd"})
    warc = tmp_path / "warc"

    records = by_url(await crawl(tmp_path, [site.url + "/"], warc=str(warc)))

    assert records[site.url + "/corrupt"]["error"] == "decoding_error"
    assert records[site.url + "/zstd"]["error"] == "decoding_error"
    archive = {r["uri"]: r for r in read_archive(warc) if r["type"] == "response"}
    for path, sent in (("/corrupt", corrupt), ("/zstd", unknown)):
        response = archive[site.url + path]
        assert response["payload"] == sent
        assert response["headers"].get_header("WARC-Truncated") is None
        assert response["http"].get_header("Content-Length") == str(len(sent))


async def test_gzip_payload_stays_gzip_and_chunked_and_truncated_bodies_are_marked(
    site: Site, tmp_path: Path
) -> None:
    body = html("Zipped", body="word " * 2000).encode()
    zipped = gzip.compress(body)

    async def gzip_page(_request: web.Request) -> web.Response:
        return web.Response(
            body=zipped, headers={"Content-Encoding": "gzip", "Content-Type": "text/html"}
        )

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for part in (b"<title>Chunked</title>", b"<p>one</p>", b"<p>two</p>"):
            await response.write(part)
        await response.write_eof()
        return response

    site.page("/", "Home", ["/zipped", "/chunked", "/big"])
    site.handle("/zipped", gzip_page)
    site.handle("/chunked", chunked)
    site.page("/big", body="x" * 50_000, content_type="text/plain")
    warc = tmp_path / "warc"
    records = by_url(await crawl(tmp_path, [site.url + "/"], warc=str(warc), max_bytes=20_000))
    archive = {r["uri"]: r for r in read_archive(warc) if r["type"] == "response"}
    assert archive[site.url + "/zipped"]["payload"] == zipped
    assert records[site.url + "/zipped"]["title"] == "Zipped"
    chunked_record = archive[site.url + "/chunked"]
    assert chunked_record["http"].get_header("Transfer-Encoding") is None
    assert chunked_record["http"].get_header("X-Crawler-Transfer-Encoding") == "chunked"
    payload = b"<title>Chunked</title><p>one</p><p>two</p>"
    assert chunked_record["http"].get_header("Content-Length") == str(len(payload))
    assert chunked_record["payload"] == payload
    big = archive[site.url + "/big"]
    assert big["headers"].get_header("WARC-Truncated") == "length"
    assert big["payload"] == b"x" * 20_000
    # The head says the length kept, as for a chunked body, and keeps the server's.
    assert big["http"].get_header("Content-Length") == "20000"
    assert big["http"].get_header("X-Crawler-Content-Length") == "50000"
    assert records[site.url + "/big"]["truncated"] is True


async def test_files_rotate_at_the_maximum_size_each_with_its_warcinfo(
    site: Site, tmp_path: Path
) -> None:
    pages = [f"/p{n}" for n in range(30)]
    site.page("/", "Home", pages)
    for n, path in enumerate(pages):
        site.page(path, body=html(f"Page {n}", body=f"unique {n} " * 300))
    warc = tmp_path / "warc"
    records = await crawl(
        tmp_path, [site.url + "/"], warc=str(warc), warc_max_size=8192, warc_prefix="small"
    )
    files = warc_files(warc)
    assert len(files) > 3
    assert all(p.name.startswith("small-") for p in files)
    archive = read_archive(warc)
    for path in files:
        in_file = [r for r in archive if r["file"] == path.name]
        assert in_file[0]["type"] == "warcinfo"
        assert [r["type"] for r in in_file].count("warcinfo") == 1
        responses = [r for r in in_file if r["type"] == "response"]
        assert path.stat().st_size <= 8192 or len(responses) == 1
    assert len(records) == 31
    for record in records:
        opened = record_at(warc, record["warc_file"], record["warc_offset"], record["warc_length"])
        assert opened.rec_headers.get_header("WARC-Target-URI") == record["url"]


async def test_text_leaves_out_scripts_styles_and_head_and_keeps_blocks_as_lines(
    site: Site, tmp_path: Path
) -> None:
    page = (
        '<html lang="en-GB"><head><title>T</title><style>.x{color:red}</style>'
        '<meta name="description" content="  A   page. "><link rel="canonical" href="/c?b=2&a=1">'
        "<script>var secret = 1;</script></head><body><h1>Big <em>news</em></h1>"
        "<script>alert('no')</script><p>First   line\n of text.</p><noscript>enable js</noscript>"
        "<template><p>hidden</p></template><style>p{}</style><ul><li>one</li><li>two</li></ul>"
        "</body></html>"
    )
    site.page("/", body=page)
    site.page("/data.json", body="{}", content_type="application/json")
    gbk = "<head><meta charset=gbk><title>中文</title></head><body><p>你好，世界</p></body>"
    site.page("/gbk", body=gbk.encode("gbk"), content_type="text/html")
    records = by_url(
        await crawl(
            tmp_path, [site.url + "/", site.url + "/data.json", site.url + "/gbk"], text=True
        )
    )
    home = records[site.url + "/"]
    assert home["text"] == "Big news\nFirst line of text.\none\ntwo"
    assert home["lang"] == "en-GB"
    assert home["description"] == "A page."
    assert home["canonical"] == site.url + "/c?a=1&b=2" or home["canonical"].startswith(
        site.url + "/c?"
    )
    assert "text" not in records[site.url + "/data.json"]
    assert records[site.url + "/gbk"]["text"] == "你好，世界"


async def test_lang_falls_back_to_the_content_language_pragma_and_header_as_html_says(
    site: Site, tmp_path
) -> None:
    # Many Chinese sites name their language only in <meta http-equiv=Content-Language>,
    # or in the HTTP header: lang was null for them. <html lang=""> says "unknown".
    pragma = '<meta http-equiv="Content-Language" content="zh-CN">'
    site.page("/pragma", body=f"<head>{pragma}<title>a</title></head><p>中文")
    site.page("/header", body="<p>中文", headers={"Content-Language": "zh-TW"})
    site.page("/list", body="<p>中文", headers={"Content-Language": "zh-TW, en"})
    site.page(
        "/unknown",
        body=f'<html lang=""><head>{pragma}</head><p>x',
        headers={"Content-Language": "en"},
    )
    site.page("/attribute", body=f'<html lang="zh-HK"><head>{pragma}</head><p>x')
    paths = ["/pragma", "/header", "/list", "/unknown", "/attribute"]

    records = by_url(await crawl(tmp_path, [site.url + path for path in paths], text=True))

    langs = {path: records[site.url + path]["lang"] for path in paths}
    assert langs == {
        "/pragma": "zh-CN",
        "/header": "zh-TW",
        "/list": None,
        "/unknown": None,
        "/attribute": "zh-HK",
    }


def test_text_leaves_out_hidden_elements_nested_in_each_other_and_in_inline_ones() -> None:
    tree = LexborHTMLParser(
        "<p>a<noscript><b>x</b><noscript>y</noscript>z</noscript>b</p>"
        "<span><script>s</script>t</span><div>x<template><p>t</template><style>p{}</style>"
        "y<b><noscript><i>q</i></noscript>w</b></div>"
    )
    assert visible_text(tree) == "ab\nt\nxyw"


def test_text_keeps_a_line_whole_across_empty_inline_elements() -> None:
    # Sphinx writes an empty <span class="target"> before each PEP it cites: 212 of the
    # Python docs' 528 pages had lines broken there.
    tree = LexborHTMLParser(
        '<p>See <a href="#v">annotation</a>, <span class="target" id="index-0"></span>'
        '<a href="/pep-0484/"><strong>PEP 484</strong></a>\nand <span id="i"></span><b><i></i></b>'
        '<a href="/pep-0526/">PEP 526</a>.</p><p>Next<a id="top"></a></p>'
    )
    assert visible_text(tree) == "See annotation, PEP 484 and PEP 526.\nNext"


@given(st.text(alphabet=st.sampled_from(" \t\n\r\f\xa0a—\U0001f600"), max_size=40))
def test_whitespace_collapses_to_single_spaces_and_nothing_else_changes(text: str) -> None:
    # Characters past U+00FF among them: the text then takes str's wider storage.
    assert collapse_whitespace(text) == re.sub("[ \t\n\r\f]+", " ", text)


async def test_text_leaves_the_tree_that_hooks_and_api_users_see_as_it_was(
    site: Site, tmp_path: Path
) -> None:
    page = "<html><body><p>Hello <b>world</b></p><script>var x = 1;</script></body></html>"
    site.page("/", body=page)
    seen: list[str] = []

    def on_page(page: Any) -> None:
        seen.append(page.tree.html)

    settings = replace(TEST_SETTINGS, text=True)
    async with Crawler([site.url + "/"], settings, on_page=on_page) as crawler:
        pages = [page async for page in crawler]
    (page,) = pages
    assert page.fields["text"] == "Hello world"
    assert page.tree.css_first("script") is not None and page.tree.css_first("b") is not None
    assert seen == [page.tree.html]


async def test_without_text_there_is_no_text_but_description_and_digest_are_there(
    site: Site, tmp_path: Path
) -> None:
    site.page("/", body='<head><meta name="description" content="D"></head><p>x</p>')
    (record,) = await crawl(tmp_path, [site.url + "/"])
    assert "text" not in record and "warc_file" not in record
    assert record["description"] == "D"
    assert record["content_digest"].startswith("sha1:")


async def test_kill_9_then_resume_leaves_no_torn_record_and_no_page_twice(
    site: Site, tmp_path: Path
) -> None:
    urls = build_graph_site(site)
    warc = tmp_path / "warc"
    run = Run(site, tmp_path, "--warc", str(warc), "--warc-max-size", "20000")
    await run.interrupted_after(120, signal.SIGKILL)
    code, err = await run.until_done()
    assert code == 0, err
    records = read_records(run.output)
    assert sorted(r["url"] for r in records) == sorted(urls)
    archive = read_archive(warc)  # warcio check passes on every file: nothing torn
    responses = Counter(r["uri"] for r in archive if r["type"] in ("response", "revisit"))
    committed = {(r["warc_file"], r["warc_offset"]) for r in records}
    assert len(committed) == len(records)
    for record in records:
        opened = record_at(warc, record["warc_file"], record["warc_offset"], record["warc_length"])
        assert opened.rec_headers.get_header("WARC-Target-URI") == record["url"]
    pages = {u: n for u, n in responses.items() if "/p/" in u}
    assert set(pages) == set(urls)
    assert max(pages.values()) == 1, "a page was archived twice"


async def test_a_resumed_crawl_leaves_another_crawls_files_in_its_directory_alone(
    site: Site, tmp_path: Path
) -> None:
    pages = build_graph_site(site, delay_s=0)
    warc = tmp_path / "warc"
    options = ("--warc", str(warc), "--warc-max-size", "4096")  # a file or two a page
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = Run(site, tmp_path / "a", *options), Run(site, tmp_path / "b", *options)
    assert await first.interrupted_after(3, signal.SIGINT) == 130  # stopped, to resume
    first_files = {path.name for path in warc_files(warc)}
    code, err = await second.until_done()  # the same DIR and prefix, files of later serials
    assert code == 0, err
    second_files = {path.name for path in warc_files(warc)} - first_files
    assert len(second_files) > len(first_files)

    code, err = await first.until_done()

    assert code == 0, err
    assert second_files <= {path.name for path in warc_files(warc)}, "the other crawl's files"
    for record in read_records(second.output):
        opened = record_at(warc, record["warc_file"], record["warc_offset"], record["warc_length"])
        assert opened.rec_headers.get_header("WARC-Target-URI") == record["url"]
    assert_each_page_once(read_records(first.output), pages)


async def test_revisits_point_to_a_capture_made_before_a_resume(site: Site, tmp_path: Path) -> None:
    same = html("Same", ["/p/0", "/p/1"])
    site.page("/p/0", body=same)
    site.page("/p/1", body=same)
    warc = tmp_path / "warc"
    run = Run(site, tmp_path, "--warc", str(warc), "--max-pages", "1")
    code, err = await run.until_done()
    assert code == 0, err
    run.extra = ("--warc", str(warc))
    code, err = await run.until_done()
    assert code == 0, err
    archive = read_archive(warc)
    original = next(r for r in archive if r["type"] == "response" and r["uri"].endswith("/p/0"))
    revisit = next(r for r in archive if r["type"] == "revisit" and r["uri"].endswith("/p/1"))
    refers_to = revisit["headers"].get_header("WARC-Refers-To")
    assert refers_to == original["headers"].get_header("WARC-Record-ID")


async def test_a_state_directory_of_an_older_format_is_refused_in_one_line(
    site: Site, tmp_path: Path
) -> None:
    site.page("/", "Home")
    run = Run(site, tmp_path)
    code, err = await run.until_done()
    assert code == 0, err
    with sqlite3.connect(run.state / "crawl.sqlite") as db:
        db.execute("UPDATE meta SET value = '2' WHERE name = 'schema'")
    db.close()
    code, err = await run.until_done()
    assert code == 2
    assert err.count("\n") == 1 and "state format 2" in err and "--fresh" in err


@given(st.binary(min_size=20, max_size=20))
def test_sha1_base32_is_the_standard_base32_of_the_digest(digest):
    assert sha1_base32(digest) == "sha1:" + base64.b32encode(digest).decode("ascii")


def test_a_forked_process_draws_record_ids_of_its_own():
    from crawler.sinks import warc

    warc._record_id()  # the buffer holds 255 more ids: a child must not reuse them
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(writer, b"\n".join(warc._record_id() for _ in range(10)))
        finally:
            os._exit(0)
    os.close(writer)
    ours = {warc._record_id() for _ in range(10)}
    with os.fdopen(reader, "rb") as pipe:
        theirs = set(pipe.read().split(b"\n"))
    os.waitpid(pid, 0)
    assert len(theirs) == 10 and not ours & theirs


async def test_an_error_page_is_stored_whole_so_pywb_indexes_its_status(
    site: Site, tmp_path: Path
) -> None:
    same = html("Same", ["/"])
    site.page("/", "Home", ["/gone1", "/gone2", "/ok1", "/ok2"])
    site.page("/gone1", status=404, body="<title>Not found</title>")
    site.page("/gone2", status=404, body="<title>Not found</title>")
    site.page("/ok1", body=same)
    site.page("/ok2", body=same)
    warc = tmp_path / "warc"
    await crawl(tmp_path, [site.url + "/"], warc=str(warc))
    archive = read_archive(warc)
    kinds = {r["uri"]: r["type"] for r in archive if r["type"] in ("response", "revisit")}
    assert kinds[site.url + "/gone1"] == kinds[site.url + "/gone2"] == "response"
    assert sorted([kinds[site.url + "/ok1"], kinds[site.url + "/ok2"]]) == ["response", "revisit"]
    index = {line["url"]: line for line in pywb_cdxj(warc_files(warc))}
    assert index[site.url + "/gone1"]["status"] == index[site.url + "/gone2"]["status"] == "404"
    # pywb indexes a 2xx revisit without its status, and takes it from the original
    assert {index[site.url + "/ok1"]["mime"], index[site.url + "/ok2"]["mime"]} == {
        "text/html",
        "warc/revisit",
    }


def pywb_cdxj(files: list[Path]) -> list[dict[str, Any]]:
    """pywb's own index of `files` (its cdx-indexer), each line's JSON."""
    lines = run_tool("cdx-indexer", "-j", *map(str, files)).splitlines()
    return [json.loads(line.split(" ", 2)[2]) for line in lines]


async def test_an_index_that_cannot_be_finished_is_the_crawls_failure_and_the_rest_closes(
    site: Site, tmp_path: Path
) -> None:
    # A disk that fills fails the sorting of the WARC file's index as the crawl closes:
    # that error escaped close() (a traceback from the CLI), the JSONL file was left
    # open, and the index's half-written copy stayed beside it.
    site.page("/", "home", ["/a"])
    site.page("/a", "a")
    warc, output = tmp_path / "warc", tmp_path / "out.jsonl"

    def block_the_index_rewrite(page: Any) -> None:
        for index in warc.glob("*.cdxj"):  # robots.txt's line, then the pages': unsorted
            index.with_name(f"{index.name}.tmp").mkdir(exist_ok=True)

    settings = replace(TEST_SETTINGS, warc=str(warc), output=str(output), ignore_robots=False)
    crawler = Crawler([f"{site.url}/"], settings, on_page=block_the_index_rewrite)
    try:
        async with crawler:
            await crawler.crawl()
    except Exception as exc:
        assert exc is crawler.failure
    assert "cannot write" in str(crawler.failure)
    assert [r["title"] for r in read_records(output)] == ["home", "a"]
