"""Sitemaps: what a sitemap file yields, and that hostile ones stay bounded."""

from __future__ import annotations

import gzip
import time
import zlib

from crawler.sitemaps import SITEMAP_MAX_BYTES, parse_sitemap, sitemaps_of

SM = "http://127.0.0.1:8000/sitemap.xml"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(*entries: str, ns: str = NS) -> str:
    xmlns = f' xmlns="{ns}"' if ns else ""
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset{xmlns}>{"".join(entries)}</urlset>'


def url(loc: str, lastmod: str | None = None) -> str:
    extra = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
    return f"<url><loc>{loc}</loc>{extra}</url>"


def gzip_bomb(inflated_bytes: int, start: bytes = b"<urlset>") -> bytes:
    """A gzip stream of `start` and then `inflated_bytes` spaces, about 1,000 times smaller.

    Full flushes make each MiB of spaces compress to the same bytes, so the bomb is built
    by repeating one block instead of compressing gigabytes.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = compressor.compress(start) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(b" " * (1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return head + block * (inflated_bytes >> 20)


async def test_a_urlset_gives_canonical_pages_with_their_lastmod():
    body = urlset(
        url(" http://127.0.0.1:8000/a#top ", "2024-05-01"),
        url("/relative"),
        url("http://127.0.0.1:8000/b", "x" * 100),  # no date is that long
        url("javascript:alert(1)"),
    )

    sitemap = await parse_sitemap(SM, body.encode())

    assert sitemap.pages == [
        ("http://127.0.0.1:8000/a", "2024-05-01"),
        ("http://127.0.0.1:8000/relative", None),
        ("http://127.0.0.1:8000/b", None),
    ]
    assert (sitemap.entries, sitemap.error, sitemap.sitemaps) == (4, None, [])


async def test_elements_are_matched_by_local_name_whatever_the_namespace():
    prefixed = (
        '<sm:urlset xmlns:sm="http://example.org/other">'
        "<sm:url><sm:loc>http://h/1</sm:loc><sm:lastmod>2020</sm:lastmod></sm:url></sm:urlset>"
    )
    for body in (urlset(url("http://h/1", "2020"), ns=""), prefixed):
        sitemap = await parse_sitemap(SM, body.encode())
        assert sitemap.pages == [("http://h/1", "2020")], body


async def test_an_image_sitemaps_own_loc_is_not_a_page():
    body = urlset(
        "<url><loc>http://h/page</loc><image:image xmlns:image='x'>"
        "<image:loc>http://h/photo.jpg</image:loc></image:image></url>"
    )

    sitemap = await parse_sitemap(SM, body.encode())

    assert sitemap.pages == [("http://h/page", None)]


async def test_an_index_gives_sitemaps_not_pages():
    body = (
        f'<sitemapindex xmlns="{NS}"><sitemap><loc>/s1.xml</loc><lastmod>2024</lastmod>'
        "</sitemap><sitemap><loc>http://other/s2.xml.gz</loc></sitemap></sitemapindex>"
    )

    sitemap = await parse_sitemap(SM, body.encode())

    assert sitemap.sitemaps == ["http://127.0.0.1:8000/s1.xml", "http://other/s2.xml.gz"]
    assert sitemap.pages == []


async def test_gzip_is_recognized_by_content_and_a_text_sitemap_by_its_lack_of_markup():
    text = "\ufeffhttp://h/1\r\n\n  https://h/2  \nnot a url\nftp://h/3\nhttp://h/4"

    for body in (text.encode(), gzip.compress(text.encode())):
        sitemap = await parse_sitemap(SM, body)
        assert sitemap.pages == [("http://h/1", None), ("https://h/2", None), ("http://h/4", None)]


async def test_a_sitemap_declared_in_gbk_is_read_in_gbk():
    body = urlset(url("http://h/新闻/北京", "2024-01-02")).replace("UTF-8", "GBK").encode("gbk")

    sitemap = await parse_sitemap(SM, body)

    assert sitemap.pages == [("http://h/%E6%96%B0%E9%97%BB/%E5%8C%97%E4%BA%AC", "2024-01-02")]


async def test_an_unknown_encoding_is_an_invalid_sitemap():
    sitemap = await parse_sitemap(SM, urlset().replace("UTF-8", "no-such-codec").encode())

    assert sitemap.error == "sitemap_invalid"


async def test_billion_laughs_is_refused_at_the_first_entity_declaration():
    entities = "".join(f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10))
    body = (
        f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY lol0 "lol">{entities}]>'
        + urlset(url("http://h/&lol9;"), ns="").split("?>", 1)[1]
    )
    started = time.monotonic()

    sitemap = await parse_sitemap(SM, body.encode())

    assert (sitemap.error, sitemap.pages) == ("sitemap_invalid", [])
    assert time.monotonic() - started < 1


async def test_an_external_entity_is_never_read(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("http://h/leaked")
    for doctype in (
        f'<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file://{secret}">]>',
        f'<!DOCTYPE urlset [<!ENTITY % p SYSTEM "file://{secret}"> %p;]>',
    ):
        body = f'<?xml version="1.0"?>{doctype}<urlset><url><loc>&xxe;</loc></url></urlset>'
        sitemap = await parse_sitemap(SM, body.encode())
        assert (sitemap.error, sitemap.pages) == ("sitemap_invalid", []), doctype


async def test_a_broken_sitemap_keeps_the_urls_read_before_the_break():
    body = urlset(url("http://h/1"), url("http://h/2"))[:-20] + "<oops></url></urlset>"

    sitemap = await parse_sitemap(SM, body.encode())

    assert sitemap.error == "sitemap_invalid"
    assert sitemap.pages == [("http://h/1", None)]


async def test_60000_urls_are_cut_at_50000():
    body = urlset(*(url(f"http://h/{n}") for n in range(60_000)))

    sitemap = await parse_sitemap(SM, body.encode())

    assert len(sitemap.pages) == 50_000
    assert sitemap.pages[-1] == ("http://h/49999", None)
    assert (sitemap.error, sitemap.truncated) == ("sitemap_too_large", True)


async def test_a_gzip_bomb_is_inflated_only_up_to_the_cap():
    bomb = gzip_bomb(10 << 30)  # 10 GiB inflated, from about 10 MB
    started = time.monotonic()

    sitemap = await parse_sitemap(SM, bomb)

    assert sitemap.error == "sitemap_too_large"
    # Inflating 10 GiB takes a minute; 50 MB, well under a second on an idle core.
    assert time.monotonic() - started < 10


async def test_a_large_plain_body_is_cut_at_the_byte_cap_with_its_urls_so_far():
    body = urlset(*(url(f"http://h/{n}") for n in range(1000))).encode()

    sitemap = await parse_sitemap(SM, body, max_bytes=len(body) // 2)

    assert sitemap.error == "sitemap_too_large"
    assert 400 < len(sitemap.pages) <= 500
    assert SITEMAP_MAX_BYTES == 50 * 1024 * 1024


async def test_concatenated_gzip_members_are_all_read():
    body = gzip.compress(b"http://h/1\n") + gzip.compress(b"http://h/2\n")

    sitemap = await parse_sitemap(SM, body)

    assert sitemap.pages == [("http://h/1", None), ("http://h/2", None)]


async def test_corrupt_gzip_is_a_decoding_error():
    body = gzip.compress(urlset(url("http://h/1")).encode())
    sitemap = await parse_sitemap(SM, body[:12] + b"garbage" + body[19:])

    assert sitemap.error == "decoding_error"


def test_robots_sitemap_lines_are_resolved_and_deduplicated():
    origin = "http://127.0.0.1:8000"
    lines = ["/s1.xml", " http://127.0.0.1:8000/s1.xml ", "http://other/s.xml", "http://"]

    assert sitemaps_of(origin, lines) == [f"{origin}/s1.xml", "http://other/s.xml"]


def test_without_robots_sitemap_lines_sitemap_xml_is_guessed():
    assert sitemaps_of("http://127.0.0.1:8000", []) == ["http://127.0.0.1:8000/sitemap.xml"]
