"""Sitemaps: what a sitemap file yields, and that hostile ones stay bounded."""

from __future__ import annotations

import gzip
import itertools
import signal
import sqlite3
import time
import zlib
from dataclasses import replace

from crawler import Crawler
from crawler.frontier import SITEMAP, Request, SqliteFrontier
from crawler.sitemaps import SITEMAP_MAX_BYTES, parse_sitemap, sitemaps_of
from tests.conftest import TEST_SETTINGS, Site, by_url, crawl, read_records
from tests.test_state import Run, assert_each_page_once

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


async def test_an_rss_or_atom_feed_is_a_sitemap_of_its_items_links():
    # sitemaps.org: "You can provide an RSS 2.0 or Atom 0.3 or 1.0 feed" as a sitemap.
    rss = (
        '<?xml version="1.0"?><rss version="2.0"><channel><link>http://h/</link>'
        "<item><title>One</title><link>http://h/2024/one</link><pubDate>Wed, 01 May 2024"
        " 10:00:00 GMT</pubDate></item><item><link> /two </link></item></channel></rss>"
    )
    atom = (
        '<feed xmlns="http://www.w3.org/2005/Atom"><link href="http://h/"/><entry>'
        '<link rel="edit" href="/edit/1"/><link rel="alternate" href="http://h/a1"/>'
        "<updated>2024-05-01T10:00:00Z</updated></entry>"
        '<entry><link href="/a2"/><link rel="enclosure" href="/a2.mp3"/></entry></feed>'
    )

    from_rss = await parse_sitemap(SM, rss.encode())
    from_atom = await parse_sitemap(SM, atom.encode())

    assert from_rss.pages == [("http://h/2024/one", None), ("http://127.0.0.1:8000/two", None)]
    assert from_atom.pages == [
        ("http://h/a1", "2024-05-01T10:00:00Z"),
        ("http://127.0.0.1:8000/a2", None),
    ]
    assert (from_rss.entries, from_rss.error, from_atom.entries, from_atom.error) == (
        2,
        None,
        2,
        None,
    )


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


async def test_a_sitemap_declared_gb2312_is_read_as_gbk_as_browsers_read_that_label():
    body = urlset(url("http://h/朱镕基")).replace("UTF-8", "GB2312").encode("gbk")

    sitemap = await parse_sitemap(SM, body)

    assert sitemap.pages == [("http://h/%E6%9C%B1%E9%95%95%E5%9F%BA", None)]


async def test_a_gbk_sitemap_without_a_declaration_is_read_by_its_charset_or_its_bytes(
    site: Site, tmp_path
):
    # Chinese sites write sitemaps in GBK and leave out the XML declaration; expat read
    # them as UTF-8 and stopped at the first byte: sitemap_invalid, and no page of either.
    site.page(
        "/robots.txt",
        body="User-agent: *\nSitemap: /by-bytes.xml\nSitemap: /by-charset.xml\n",
        content_type="text/plain",
    )
    site.page("/", "home")
    for path, content_type, page in (
        ("/by-bytes.xml", "application/xml", "/新闻/北京.html"),
        ("/by-charset.xml", "text/xml; charset=gb2312", "/地图/朱镕基.html"),
    ):
        body = f'<urlset xmlns="{NS}">{url(site.url + page)}<!-- 网站地图 --></urlset>'
        site.page(path, body=body.encode("gbk"), content_type=content_type)

    records = by_url(await crawl(tmp_path, [site.url + "/"], sitemaps=True, ignore_robots=False))

    assert [
        records[f"{site.url}{path}"]["sitemap_urls"]
        for path in ("/by-bytes.xml", "/by-charset.xml")
    ] == [1, 1]
    for page in (
        "/%E6%96%B0%E9%97%BB/%E5%8C%97%E4%BA%AC.html",
        "/%E5%9C%B0%E5%9B%BE/%E6%9C%B1%E9%95%95%E5%9F%BA.html",
    ):
        assert records[site.url + page]["status"] == 404  # asked for, as the sitemap spells it


async def test_a_text_sitemap_saved_in_gbk_lists_its_urls_as_written(site: Site, tmp_path):
    # sitemaps.org asks for UTF-8; a Chinese site's sitemap.txt saved in GBK gave URLs of
    # U+FFFDs (%EF%BF%BD...), asked for and 404 each, and its pages were never reached.
    site.page("/robots.txt", body="Sitemap: /sitemap.txt\n", content_type="text/plain")
    site.page("/", "home")
    lines = [f"{site.url}/新闻/北京.html", f"{site.url}/about.html", f"{site.url}/地图/朱镕基.html"]
    site.page("/sitemap.txt", body="\r\n".join(lines).encode("gbk"), content_type="text/plain")

    records = by_url(await crawl(tmp_path, [site.url + "/"], sitemaps=True, ignore_robots=False))

    assert sorted(hit.path for hit in site.hits if hit.path.endswith(".html")) == [
        "/%E5%9C%B0%E5%9B%BE/%E6%9C%B1%E9%95%95%E5%9F%BA.html",
        "/%E6%96%B0%E9%97%BB/%E5%8C%97%E4%BA%AC.html",
        "/about.html",
    ]
    assert records[site.url + "/sitemap.txt"]["sitemap_urls"] == 3


async def test_a_sitemap_named_in_a_robots_txt_saved_in_gbk_is_the_url_written(
    site: Site, tmp_path
):
    # Its GBK bytes were U+FFFDs: a sitemap URL the site never had, a 404, no pages.
    robots = "User-agent: *\nDisallow: /后台/\nSitemap: /网站地图.xml\n"
    site.page("/robots.txt", body=robots.encode("gbk"), content_type="text/plain")
    site.page("/", "home")
    site.page("/网站地图.xml", body=urlset(url(site.url + "/listed")), content_type="text/xml")
    site.page("/listed", "listed")

    await crawl(tmp_path, [site.url + "/"], sitemaps=True, ignore_robots=False)

    assert site.count("/%E7%BD%91%E7%AB%99%E5%9C%B0%E5%9B%BE.xml") == site.count("/listed") == 1


async def test_an_unknown_encoding_is_an_invalid_sitemap():
    sitemap = await parse_sitemap(SM, urlset().replace("UTF-8", "no-such-codec").encode())

    assert sitemap.error == "sitemap_invalid"


async def test_an_encoding_python_has_as_a_codec_but_not_for_text_is_an_invalid_sitemap():
    for name in ("base64", "zlib", "rot13", "hex"):
        sitemap = await parse_sitemap(SM, urlset(url("http://h/a")).replace("UTF-8", name).encode())

        assert (sitemap.error, sitemap.pages) == ("sitemap_invalid", []), name


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


# -- crawls with --sitemaps ---------------------------------------------------------


def index(*locs: str) -> str:
    sitemaps = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<sitemapindex xmlns="{NS}">{sitemaps}</sitemapindex>'


def serve_xml(site: Site, path: str, text: str) -> None:
    site.page(path, body=text, content_type="application/xml")


async def test_robots_txt_leads_through_an_index_and_a_gzip_sitemap_to_pages_no_link_reaches(
    site: Site, tmp_path
):
    site.page("/robots.txt", body="User-agent: *\nSitemap: /index.xml\n", content_type="text/plain")
    site.page("/", "home")  # links to nothing
    serve_xml(site, "/index.xml", index("/s1.xml", f"{site.url}/s2.xml.gz"))
    serve_xml(site, "/s1.xml", urlset(url("/only-in-sitemap", "2024-05-01T10:00:00Z")))
    site.page(
        "/s2.xml.gz",
        body=gzip.compress(urlset(url("/gz-page"), url("/")).encode()),
        content_type="application/x-gzip",
    )
    site.page("/only-in-sitemap", "sitemap page", ["/linked"])
    site.page("/gz-page", "gzip page")
    site.page("/linked", "linked")

    records = by_url(await crawl(tmp_path, [site.url + "/"], sitemaps=True, ignore_robots=False))

    u = site.url
    assert site.paths() == {p: 1 for p in (
        "/robots.txt", "/", "/index.xml", "/s1.xml", "/s2.xml.gz",
        "/only-in-sitemap", "/gz-page", "/linked",
    )}  # fmt: skip
    sitemaps = {url: r for url, r in records.items() if r["kind"] == "sitemap"}
    assert {url: (r["referrer"], r["depth"], r["sitemap_urls"]) for url, r in sitemaps.items()} == {
        f"{u}/index.xml": (f"{u}/robots.txt", 0, 2),
        f"{u}/s1.xml": (f"{u}/index.xml", 0, 1),
        f"{u}/s2.xml.gz": (f"{u}/index.xml", 0, 2),
    }
    assert all(r["status"] == 200 and r["error"] is None for r in sitemaps.values())
    page = records[f"{u}/only-in-sitemap"]
    assert (page["kind"], page["depth"], page["referrer"]) == ("page", 1, f"{u}/s1.xml")
    assert page["sitemap_lastmod"] == "2024-05-01T10:00:00Z"
    assert (records[f"{u}/gz-page"]["referrer"], records[f"{u}/gz-page"]["depth"]) == (
        f"{u}/s2.xml.gz",
        1,
    )
    assert "sitemap_lastmod" not in records[f"{u}/gz-page"]
    assert (records[f"{u}/linked"]["depth"], records[f"{u}/"]["kind"]) == (2, "page")


async def test_a_sitemap_whose_gzip_stream_is_cut_short_is_invalid_not_too_large(
    site: Site, tmp_path
):
    text = urlset(*(url(f"/p{n}") for n in range(2000)))
    site.page(
        "/sitemap.xml",
        body=gzip.compress(text.encode())[:-200],
        content_type="application/xml",
        headers={"Content-Encoding": "gzip"},
    )
    site.page("/", "home")

    records = by_url(await crawl(tmp_path, [site.url + "/"], sitemaps=True, max_depth=0))

    sitemap = records[f"{site.url}/sitemap.xml"]
    assert (sitemap["error"], sitemap["truncated"]) == ("sitemap_invalid", True)
    assert 0 < sitemap["sitemap_urls"] < 2000  # the entries read before the cut are kept


async def test_include_picks_pages_not_the_sitemaps_that_list_them_and_exclude_holds(
    site: Site, tmp_path
):
    # As WordPress serves them: /sitemap.xml redirects to an index of sitemaps by kind.
    site.redirect("/sitemap.xml", "/sitemap_index.xml", 301)
    serve_xml(site, "/sitemap_index.xml", index("/post-sitemap.xml", "/shop-sitemap.xml"))
    serve_xml(site, "/post-sitemap.xml", urlset(url("/blog/1"), url("/about")))
    serve_xml(site, "/shop-sitemap.xml", urlset(url("/blog/from-shop")))
    site.page("/", "home")
    site.page("/blog/1", "post")

    options = {"include": ("/blog/",), "exclude": ("shop-sitemap",)}
    records = by_url(await crawl(tmp_path, [site.url + "/"], sitemaps=True, **options))

    assert set(site.paths()) == {
        "/",
        "/sitemap.xml",
        "/sitemap_index.xml",
        "/post-sitemap.xml",
        "/blog/1",
    }
    assert records[f"{site.url}/sitemap.xml"]["final_url"] == f"{site.url}/sitemap_index.xml"
    assert records[f"{site.url}/blog/1"]["referrer"] == f"{site.url}/post-sitemap.xml"


async def test_sitemaps_robots_txt_puts_on_another_host_are_read_for_the_pages_in_scope(
    site: Site, site2: Site, tmp_path
):
    # sitemaps.org's cross-submission: a site's robots.txt names sitemaps kept elsewhere (a
    # CDN, a bucket), and an index there lists more on its own host. An index of the site
    # does not send the crawl to a third party's sitemaps, but a redirect of the site does.
    robots = f"Sitemap: {site2.url}/maps/index.xml\nSitemap: /moved.xml\nSitemap: /local.xml\n"
    site.page("/robots.txt", body=robots, content_type="text/plain")
    site.page("/", "home")
    serve_xml(site2, "/maps/index.xml", index("/maps/pages.xml"))
    serve_xml(site2, "/maps/pages.xml", urlset(url(f"{site.url}/a"), url("/out-of-scope")))
    site.redirect("/moved.xml", f"{site2.url}/maps/moved.xml")
    serve_xml(site2, "/maps/moved.xml", urlset(url(f"{site.url}/b")))
    serve_xml(site, "/local.xml", index(f"{site2.url}/maps/elsewhere.xml"))
    site.page("/a", "a")
    site.page("/b", "b")

    options = {"ignore_robots": False, "allow_private_addresses": True}  # site2: 127.0.0.2
    records = by_url(await crawl(tmp_path, [site.url + "/"], sitemaps=True, **options))

    assert site2.paths() == {
        "/robots.txt": 1,
        "/maps/index.xml": 1,
        "/maps/pages.xml": 1,
        "/maps/moved.xml": 1,
    }
    assert (records[f"{site.url}/a"]["title"], records[f"{site.url}/b"]["title"]) == ("a", "b")
    assert records[f"{site.url}/a"]["referrer"] == f"{site2.url}/maps/pages.xml"
    assert f"{site2.url}/out-of-scope" not in records


async def test_sitemap_xml_is_tried_when_robots_txt_lists_none(site: Site, tmp_path):
    site.page("/robots.txt", body="User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page("/", "home")
    serve_xml(site, "/sitemap.xml", urlset(url("/found"), url("/private/no")))
    site.page("/found", "found")

    records = by_url(await crawl(tmp_path, [site.url + "/"], sitemaps=True, ignore_robots=False))

    sitemap = records[f"{site.url}/sitemap.xml"]
    assert (sitemap["kind"], sitemap["referrer"], sitemap["sitemap_urls"]) == ("sitemap", None, 2)
    assert records[f"{site.url}/found"]["referrer"] == f"{site.url}/sitemap.xml"
    assert records[f"{site.url}/private/no"]["error"] == "robots_disallowed"
    assert site.count("/private/no") == 0


async def test_without_sitemaps_no_sitemap_is_fetched_and_records_are_pages(site: Site, tmp_path):
    serve_xml(site, "/sitemap.xml", urlset(url("/found")))
    site.page("/", "home")

    records = await crawl(tmp_path, [site.url + "/"])

    assert site.paths() == {"/": 1}
    assert [r["kind"] for r in records] == ["page"]


async def test_a_sitemap_disallowed_by_robots_txt_is_not_fetched(site: Site, tmp_path):
    robots = "User-agent: *\nDisallow: /secret\nSitemap: /secret/sitemap.xml\n"
    site.page("/robots.txt", body=robots, content_type="text/plain")
    site.page("/", "home")
    serve_xml(site, "/secret/sitemap.xml", urlset(url("/x")))

    records = by_url(await crawl(tmp_path, [site.url + "/"], sitemaps=True, ignore_robots=False))

    assert site.count("/secret/sitemap.xml") == 0
    sitemap = records[f"{site.url}/secret/sitemap.xml"]
    assert (sitemap["kind"], sitemap["error"]) == ("sitemap", "robots_disallowed")


async def test_hostile_sitemaps_are_each_one_bounded_record_and_the_crawl_goes_on(
    site: Site, tmp_path
):
    lol = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(f'<!ENTITY lol{n} "{"&lol;" * 10}">' for n in range(9))
        + "]><urlset><url><loc>&lol8;</loc></url></urlset>"
    )
    robots = "".join(
        f"Sitemap: /{name}\n" for name in ("lol.xml", "bomb.xml.gz", "big.xml", "ok.xml")
    )
    site.page("/robots.txt", body=robots, content_type="text/plain")
    site.page("/", "home")
    serve_xml(site, "/lol.xml", lol)
    site.page("/bomb.xml.gz", body=gzip_bomb(4 << 30), content_type="application/gzip")
    serve_xml(site, "/big.xml", urlset(*(url(f"/many/{n}") for n in range(60_000))))
    serve_xml(site, "/ok.xml", "garbage, then " + urlset(url("/after")))
    site.page("/after", "after")
    started = time.monotonic()

    records = by_url(
        await crawl(
            tmp_path,
            [site.url + "/"],
            sitemaps=True,
            ignore_robots=False,
            exclude=("/many/",),  # the big sitemap's URLs are counted, not crawled
        )
    )

    u = site.url
    assert time.monotonic() - started < 30
    assert (records[f"{u}/lol.xml"]["error"], records[f"{u}/lol.xml"]["sitemap_urls"]) == (
        "sitemap_invalid",
        0,
    )
    assert records[f"{u}/bomb.xml.gz"]["error"] == "sitemap_too_large"
    assert records[f"{u}/bomb.xml.gz"]["truncated"] is True
    big = records[f"{u}/big.xml"]
    assert (big["error"], big["truncated"], big["sitemap_urls"]) == (
        "sitemap_too_large",
        True,
        50_000,
    )
    assert records[f"{u}/ok.xml"]["sitemap_urls"] == 0  # text, and no line is a URL
    assert records[f"{u}/"]["status"] == 200
    assert not any("/many/" in path for path in site.paths())


async def test_a_sitemap_and_urls_on_a_host_out_of_scope_are_dropped(
    site: Site, site2: Site, tmp_path
):
    site.page("/robots.txt", body="Sitemap: /index.xml\n", content_type="text/plain")
    site.page("/", "home")
    serve_xml(site, "/index.xml", index(f"{site2.url}/theirs.xml", "/mine.xml"))
    serve_xml(site, "/mine.xml", urlset(url(f"{site2.url}/elsewhere"), url("/here")))
    serve_xml(site2, "/theirs.xml", urlset(url(f"{site2.url}/x")))
    site.page("/here", "here")

    records = by_url(await crawl(tmp_path, [site.url + "/"], sitemaps=True, ignore_robots=False))

    assert site2.hits == []
    assert set(records) == {f"{site.url}{p}" for p in ("/", "/index.xml", "/mine.xml", "/here")}
    assert records[f"{site.url}/mine.xml"]["sitemap_urls"] == 2


async def test_a_sitemaps_urls_meet_the_trap_rules_as_links_do(site: Site, tmp_path):
    long_path = "/" + "x" * 60
    site.page("/", "home")
    serve_xml(site, "/sitemap.xml", urlset(url("/here"), url(long_path), url("/a/a/a/")))
    site.page("/here", "here")

    records = by_url(
        await crawl(tmp_path, [site.url + "/"], sitemaps=True, max_url_length=len(site.url) + 40)
    )

    assert set(records) == {f"{site.url}{p}" for p in ("/", "/sitemap.xml", "/here")}
    assert site.count(long_path) == site.count("/a/a/a/") == 0


async def test_max_sitemaps_caps_the_files_fetched(site: Site, tmp_path):
    site.page("/", "home")
    serve_xml(site, "/sitemap.xml", index(*(f"/s{n}.xml" for n in range(10))))
    for n in range(10):
        serve_xml(site, f"/s{n}.xml", urlset())

    records = await crawl(tmp_path, [site.url + "/"], sitemaps=True, max_sitemaps=4)

    assert [r["url"] for r in records if r["kind"] == "sitemap"] == [
        f"{site.url}/sitemap.xml",
        *(f"{site.url}/s{n}.xml" for n in range(3)),
    ]


async def test_sitemap_fetches_keep_the_hosts_delay(site: Site, tmp_path):
    site.page("/", "home")
    serve_xml(site, "/sitemap.xml", index("/a.xml", "/b.xml"))
    serve_xml(site, "/a.xml", urlset(url("/p1")))
    serve_xml(site, "/b.xml", urlset(url("/p2")))
    site.page("/p1", "1")
    site.page("/p2", "2")

    await crawl(tmp_path, [site.url + "/"], sitemaps=True, delay=0.2, concurrency=4)

    starts = sorted(hit.started for hit in site.hits)
    assert len(starts) == 6
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.2


async def test_max_pages_counts_sitemap_records(site: Site, tmp_path):
    site.page("/", "home")
    serve_xml(site, "/sitemap.xml", urlset(*(url(f"/p{n}") for n in range(10))))
    for n in range(10):
        site.page(f"/p{n}", str(n))

    records = await crawl(tmp_path, [site.url + "/"], sitemaps=True, max_pages=5)

    assert len(records) == 5
    assert sum(r["kind"] == "sitemap" for r in records) == 1


def test_sitemap_requests_keep_their_kind_and_lastmod_in_a_disk_frontier(tmp_path):
    db = sqlite3.connect(tmp_path / "f.sqlite")
    db.execute(  # a frontier table from before sitemaps: it gains the columns
        "CREATE TABLE frontier (host TEXT NOT NULL, seq INTEGER NOT NULL, url TEXT NOT NULL, "
        "depth INTEGER NOT NULL, referrer TEXT, PRIMARY KEY (host, seq)) WITHOUT ROWID"
    )
    db.execute("INSERT INTO frontier VALUES ('h:1', 1, 'http://h:1/old', 2, NULL)")
    SqliteFrontier(db).push(
        [
            Request("http://h:1/s.xml", 0, "http://h:1/robots.txt", kind=SITEMAP),
            Request("http://h:1/p", 1, "http://h:1/s.xml", lastmod="2024-01-01"),
        ]
    )
    db.commit()

    frontier = SqliteFrontier(db)
    popped = [frontier.pop("h:1") for _ in range(3)]

    assert [(r.url, r.kind, r.lastmod) for r in popped] == [
        ("http://h:1/old", "page", None),
        ("http://h:1/s.xml", "sitemap", None),
        ("http://h:1/p", "page", "2024-01-01"),
    ]


async def test_sitemaps_survive_kill_9_and_resume(site: Site, tmp_path):
    site.page("/p/0", "seed")
    serve_xml(site, "/sitemap.xml", index(*(f"/s/{n}.xml" for n in range(5))))
    pages = [f"{site.url}/p/0"]
    for n in range(5):
        locs = [f"/p/{n}-{i}" for i in range(20)]
        serve_xml(site, f"/s/{n}.xml", urlset(*(url(loc, f"2024-0{n + 1}-01") for loc in locs)))
        for loc in locs:
            site.page(loc, loc, delay_s=0.01)
        pages += [site.url + loc for loc in locs]
    run = Run(site, tmp_path, "--sitemaps", "--ignore-robots")

    await run.interrupted_after(30, signal.SIGKILL)
    code, err = await run.until_done()

    assert code == 0, err
    records = read_records(run.output)
    assert_each_page_once([r for r in records if r["kind"] == "page"], pages)
    sitemaps = sorted(r["url"] for r in records if r["kind"] == "sitemap")
    assert sitemaps == sorted(
        [f"{site.url}/sitemap.xml", *(f"{site.url}/s/{n}.xml" for n in range(5))]
    )
    lastmods = {r["url"]: r.get("sitemap_lastmod") for r in records}
    assert lastmods[f"{site.url}/p/3-7"] == "2024-04-01"


async def test_the_follow_hook_sees_a_sitemaps_urls_with_the_sitemap_as_page(site: Site, tmp_path):
    site.page("/", "home")
    serve_xml(site, "/sitemap.xml", urlset(url("/keep"), url("/drop")))
    site.page("/keep", "keep")
    seen = []

    def follow(link: str, page) -> bool:
        seen.append((link, page.kind))
        return not link.endswith("/drop")

    settings = replace(TEST_SETTINGS, sitemaps=True)
    async with Crawler([site.url + "/"], settings, follow=follow) as crawler:
        urls = [page.url async for page in crawler]

    assert (site.url + "/keep", "sitemap") in seen
    assert site.count("/drop") == 0
    assert site.url + "/keep" in urls
