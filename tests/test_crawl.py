"""End-to-end crawls of local sites: what is fetched, how often, and what is recorded."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import brotli
import pytest
from aiohttp import web

from tests.conftest import Site, by_url, crawl, html


async def test_a_link_cycle_is_fetched_once_per_page(site: Site, tmp_path):
    site.page("/a", "A", ["/b"])
    site.page("/b", "B", ["/c"])
    site.page("/c", "C", ["/a", "/b"])

    records = await crawl(tmp_path, [site.url + "/a"])

    assert site.paths() == {"/a": 1, "/b": 1, "/c": 1}
    assert [r["title"] for r in records] == ["A", "B", "C"]


async def test_many_spellings_of_one_url_are_fetched_once(site: Site, tmp_path):
    spellings = [
        "/x",
        "/x#top",
        "/./x",
        "/y/../x",
        "/%78",
        "x",
        "/x?",
        f"{site.url}/x",
        f"HTTP://127.0.0.1:{site.port}/x#a",
        f"http://127.0.0.1:{site.port}/./x",
        "  /x\n",
        "/q?a=1&b=2",
        "/q?b=2&a=1",
        "/q?b=2&a=1#f",
    ]
    site.page("/", "index", spellings)
    site.page("/x", "X")
    site.page("/q", "Q")

    records = await crawl(tmp_path, [site.url + "/"])

    assert site.paths() == {"/": 1, "/x": 1, "/q?a=1&b=2": 1}
    # The links as a browser would request them: "/%78" is another request line, one visit key.
    assert by_url(records)[site.url + "/"]["links"] == [
        f"{site.url}/x",
        f"{site.url}/%78",
        f"{site.url}/q?a=1&b=2",
        f"{site.url}/q?b=2&a=1",
    ]


async def test_links_are_requested_as_written_as_browsers_request_them(site: Site, tmp_path):
    # A server may tell "%7e" from "~" or "%2f" from "%2F" (a signed URL does): the request
    # line holds the escapes the page wrote, and what a browser leaves raw is sent raw.
    written = ["/files/a%7eb%2fc?sig=Ab%2b%3d", "/list[2]|x?f={a}", "/100%", "/v%2e1.txt"]
    site.page("/", "index", written)

    records = await crawl(tmp_path, [site.url + "/"])

    assert site.paths() == {"/": 1, **dict.fromkeys(written, 1)}
    assert by_url(records)[site.url + "/"]["links"] == [site.url + path for path in written]


async def test_spellings_of_one_url_cost_one_request_for_the_first_spelling(site, tmp_path):
    site.page("/", "index", ["/%7euser/?a=1&b=%2f", "/~user/?b=%2F&a=1", "/%7Euser/?a=1&b=%2F"])

    await crawl(tmp_path, [site.url + "/"])

    assert site.paths() == {"/": 1, "/%7euser/?a=1&b=%2f": 1}


async def test_depth_limit_is_exact(site: Site, tmp_path):
    for n in range(6):
        site.page(f"/{n}", str(n), [f"/{n + 1}"])

    records = await crawl(tmp_path, [site.url + "/0"], max_depth=3)

    assert [(r["url"], r["depth"]) for r in records] == [(f"{site.url}/{n}", n) for n in range(4)]
    assert site.count("/4") == 0


async def test_concurrency_is_capped_at_the_server(site: Site, tmp_path):
    site.page("/", "index", [f"/p{n}" for n in range(30)])
    for n in range(30):
        site.page(f"/p{n}", str(n), delay_s=0.05)

    records = await crawl(tmp_path, [site.url + "/"], concurrency=3, per_host=10)

    assert len(records) == 31
    assert site.max_in_flight == 3


async def test_a_redirect_chain_gives_one_record_and_fetches_each_hop_once(site, tmp_path):
    site.redirect("/r1", "/r2", 301)
    site.redirect("/r2", f"{site.url}/r3", 307)
    site.redirect("/r3", "final")
    site.page("/final", "Final", ["/r1", "/r2", "/r3", "/final"])

    records = by_url(await crawl(tmp_path, [site.url + "/r1"]))

    assert site.paths() == {"/r1": 1, "/r2": 1, "/r3": 1, "/final": 1}
    assert set(records) == {site.url + "/r1"}
    chain = records[site.url + "/r1"]
    assert (chain["status"], chain["final_url"], chain["title"], chain["error"]) == (
        200,
        site.url + "/final",
        "Final",
        None,
    )


async def test_a_redirect_loop_ends_at_the_first_url_seen_again(site: Site, tmp_path):
    site.redirect("/loop1", "/loop2")
    site.redirect("/loop2", "/loop1")

    [loop] = await crawl(tmp_path, [site.url + "/loop1"])

    assert site.paths() == {"/loop1": 1, "/loop2": 1}
    assert (loop["status"], loop["final_url"], loop["error"]) == (302, site.url + "/loop1", None)


async def test_a_redirect_back_that_sets_a_cookie_is_followed_as_browsers_follow_it(
    site: Site, tmp_path
):
    """A cookie check: the page redirects to itself, or through a second URL back to
    itself, setting a cookie, and answers once the cookie comes back."""

    def cookie_check(location: str):
        async def handler(request: web.Request) -> web.Response:
            if request.cookies.get("seen") == "1":
                return web.Response(text=html("in"), content_type="text/html")
            return web.Response(
                status=302, headers={"Location": location, "Set-Cookie": "seen=1; Path=/"}
            )

        return handler

    site.handle("/self", cookie_check("/self"))
    site.handle("/via", cookie_check("/check"))
    site.redirect("/check", "/via")

    async def never(_request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/never", "Set-Cookie": "x=1"})

    site.handle("/never", never)

    records = by_url(
        await crawl(tmp_path, [site.url + p for p in ("/self", "/via", "/never")], max_redirects=4)
    )

    for path in ("/self", "/via"):
        record = records[site.url + path]
        assert (record["status"], record["title"], record["final_url"]) == (
            200,
            "in",
            site.url + path,
        ), path
    assert records[site.url + "/never"]["error"] == "too_many_redirects"
    assert site.count("/never") == 5


async def test_a_location_in_gbk_bytes_is_followed_with_those_bytes(site: Site, tmp_path):
    """Old GBK sites redirect with the raw GBK bytes of a path in Location. Browsers
    request those bytes percent-encoded as they are (WPT's redirect-location-escape:
    valid UTF-8 as UTF-8, any other byte as %XX), which the server reads back."""
    site.page("/%CB%D1%CB%F7", "搜索")

    async def redirect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        location = site.url.encode() + "/搜索?q=中".encode("gbk")
        writer.write(b"HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % location)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(redirect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        [record] = await crawl(tmp_path, [f"http://127.0.0.1:{port}/old"], any_host=True)
    finally:
        server.close()
        await server.wait_closed()

    assert record["final_url"] == site.url + "/%CB%D1%CB%F7?q=%D6%D0"
    assert (record["status"], record["title"]) == (200, "搜索")


async def test_too_many_redirects_is_an_error(site: Site, tmp_path):
    for n in range(5):
        site.redirect(f"/r{n}", f"/r{n + 1}")

    [record] = await crawl(tmp_path, [site.url + "/r0"], max_redirects=2)

    assert site.paths() == {"/r0": 1, "/r1": 1, "/r2": 1}
    assert (record["status"], record["error"]) == (302, "too_many_redirects")


async def test_a_redirect_off_site_is_not_followed(site: Site, tmp_path):
    site.redirect("/away", "http://elsewhere.invalid/x", 301)

    [record] = await crawl(tmp_path, [site.url + "/away"])

    assert (record["status"], record["final_url"], record["error"]) == (
        301,
        "http://elsewhere.invalid/x",
        None,
    )


async def reset_connection(request: web.Request) -> web.StreamResponse:
    request.transport.abort()
    await asyncio.sleep(1)
    return web.Response()


async def test_http_and_network_failures_are_recorded_and_the_crawl_goes_on(site, tmp_path):
    async def slow(_request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.Response(text="too late")

    site.page("/", "index", ["/missing", "/broken", "/reset", "/slow", "/fine"])
    site.page("/broken", "oops", status=500)
    site.handle("/reset", reset_connection)
    site.handle("/slow", slow)
    site.page("/fine", "Fine")

    records = by_url(await crawl(tmp_path, [site.url + "/"], timeout=0.5, retries=1))

    outcome = {
        url.rpartition("/")[2]: (r["status"], r["error"], r["final_url"])
        for url, r in records.items()
    }
    assert outcome == {  # no response arrived: no final_url either
        "": (200, None, site.url + "/"),
        "missing": (404, None, site.url + "/missing"),
        "broken": (500, None, site.url + "/broken"),
        "reset": (None, "connection_error", None),
        "slow": (None, "timeout", None),
        "fine": (200, None, site.url + "/fine"),
    }
    assert site.count("/broken") == 2  # retried once
    assert site.count("/slow") == 2


async def test_a_gbk_page_with_only_a_meta_charset_decodes(site: Site, tmp_path):
    page = html("中文标题", ["/中文页"], head='<meta charset="gbk">').encode("gbk")
    site.page("/", body=page, content_type="text/html")
    site.page("/%E4%B8%AD%E6%96%87%E9%A1%B5", "ok")

    records = await crawl(tmp_path, [site.url + "/"])

    assert records[0]["title"] == "中文标题"
    assert records[0]["links"] == [site.url + "/%E4%B8%AD%E6%96%87%E9%A1%B5"]
    assert records[1]["title"] == "ok"


async def test_an_xhtml_page_read_in_the_encoding_its_xml_declaration_names(site: Site, tmp_path):
    # Its only declaration, as XML parsers read it; the bytes of 图片 in GBK are UTF-8 too
    # (ͼƬ), so the guess that was made instead gave mojibake.
    page = '<?xml version="1.0" encoding="gb2312"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
    page += '<head><title>图片</title></head><body><a href="?q=图片">x</a></body></html>'
    site.page("/", body=page.encode("gbk"), content_type="application/xhtml+xml")

    records = await crawl(tmp_path, [site.url + "/"], max_depth=0)

    assert (records[0]["title"], records[0]["links"]) == ("图片", [site.url + "/?q=%CD%BC%C6%AC"])


async def test_a_gbk_pages_links_are_requested_as_a_browser_requests_them(site: Site, tmp_path):
    """A browser encodes a link's query in the page's encoding (HTML's "encoding-parse a
    URL"), and its path in UTF-8: a GBK site's search links carry GBK, which its server
    decodes. A character GBK lacks is sent as an escaped character reference."""
    links = ["/search?q=中文&page=2", "/新闻/列表.html?类别=体育", "/tag?t=𠀀"]
    page = html("首页", links).encode("gb18030")
    site.page("/", body=page, content_type="text/html; charset=gbk")
    requested: list[str] = []

    async def record(request: web.Request) -> web.Response:
        requested.append(request.raw_path)
        return web.Response(text="ok", content_type="text/html")

    for path in ("/search", "/新闻/列表.html", "/tag"):
        site.handle(path, record)

    records = await crawl(tmp_path, [site.url + "/"])

    expected = [
        "/search?q=%D6%D0%CE%C4&page=2",
        "/%E6%96%B0%E9%97%BB/%E5%88%97%E8%A1%A8.html?%C0%E0%B1%F0=%CC%E5%D3%FD",
        "/tag?t=%26%23131072%3B",
    ]
    assert records[0]["links"] == [site.url + path for path in expected]
    assert sorted(requested) == sorted(expected)


async def test_big5_gb18030_japanese_and_koi8_u_queries_are_encoded_by_the_standards_encoders(
    site: Site, tmp_path
):
    """Python's big5hkscs writes the Hong Kong extensions browsers leave out, and some
    characters at another of their two codes; its gb18030 predates GB18030-2022. A
    browser on a Big5 page sends 嘅 as FB48 (Python: 9DEF), 无 as C6D3 (FCD3), é as a
    character reference (8866), € as A3E1 (none); on a GB18030 page ︐ as A6D9, ḿ as
    A8BC, and U+E5E5 as a character reference (A3A0)."""
    big5 = {"嘅": "%FBH", "无": "%C6%D3", "é": "%26%23233%3B", "€": "%A3%E1", "～": "%A1%E3"}
    gb18030 = {"︐": "%A6%D9", "ḿ": "%A8%BC", "\ue5e5": "%26%2358853%3B", "\u9fb4": "%FEY"}
    # Shift_JIS and EUC-JP: IBM's extensions at their first code (﨑, common in names, is
    # FAB1 where Python's cp932 has ED95), and ∥, which Python's euc_jp lacks.
    shift_jis = {"ⅰ": "%FA@", "﨑": "%FA%B1"}
    euc_jp = {"﨑": "%F9%F5", "∥": "%A1%C2"}
    # WHATWG's KOI8-U is KOI8-RU: Belarusian ў and Ў at AE and BE, where Python's koi8_u
    # has ╝ and ╬, which browsers' encoder lacks.
    koi8_u = {"ў": "%AE", "Ў": "%BE", "╝": "%26%239565%3B", "я": "%D1"}
    pages = {
        "/koi8-u": ("koi8-u", koi8_u),
        "/big5": ("big5", big5),
        "/gb18030": ("gb18030", gb18030),
        "/gbk": ("gbk", gb18030),
        "/shift_jis": ("shift_jis", shift_jis),
        "/euc-jp": ("euc-jp", euc_jp),
    }
    requested: list[str] = []

    async def record(request: web.Request) -> web.Response:
        requested.append(request.raw_path)
        return web.Response(text="ok", content_type="text/html")

    expected = []
    for path, (charset, queries) in pages.items():
        # Character references: the page's bytes are ASCII, whatever its encoding.
        links = [f"{path}/q?v=&#{ord(text)};" for text in queries]
        site.page(path, body=html(path, links), content_type=f"text/html; charset={charset}")
        site.handle(f"{path}/q", record)
        expected += [f"{path}/q?v={escaped}" for escaped in queries.values()]

    await crawl(tmp_path, [site.url + path for path in pages])

    assert sorted(requested) == sorted(expected)


async def test_bytes_a_browser_reads_in_gbk_and_windows_1252_are_no_replacement_characters(
    site: Site, tmp_path
):
    """Windows' GBK writes the euro sign as the one byte 0x80, which WHATWG's GB18030
    decoder reads (Python's does not); windows-1252 leaves 0x81 undefined, and browsers
    read it as U+0081."""
    gbk = html("价格：€100", head='<meta charset="gbk">').encode("gb18030")
    site.page("/gbk", body=gbk.replace("€".encode("gb18030"), b"\x80"), content_type="text/html")
    site.page(
        "/1252",
        body=b"<title>caf\xe9 \x80\x81</title>",
        content_type="text/html; charset=windows-1252",
    )

    records = by_url(await crawl(tmp_path, [site.url + "/gbk", site.url + "/1252"]))

    assert records[site.url + "/gbk"]["title"] == "价格：€100"
    assert records[site.url + "/1252"]["title"] == "café €\x81"


UNDECLARED = {
    "gbk": "<title>经济运行总体回升向好</title><p>国家统计局今天发布数据显示，经济回升向好。",
    "big5": "<title>經濟運行總體回升向好</title><p>國家統計局今天發布數據顯示，經濟回升向好。",
    "shift_jis": "<title>経済は緩やかに回復</title><p>日本の経済は今年、緩やかに回復しました。",
    "euc_jp": "<title>経済は緩やかに回復</title><p>日本の経済は今年、緩やかに回復しました。",
    "euc_kr": "<title>경제가 회복세를 보였다</title><p>올해 국내 경제는 회복세를 보였습니다.",
    "cp1252": "<title>Café crème brûlée</title><p>Déjà vu à Noël, où est la gare?",
}


async def test_a_page_that_declares_no_encoding_is_read_in_the_one_its_bytes_say(
    site: Site, tmp_path
):
    """With no charset and no <meta charset>, browsers guess from the bytes (Firefox's
    chardetng, Chrome's CED): a GBK page is Chinese to them, not U+FFFD. A page that is
    UTF-8 but for a stray byte stays UTF-8."""
    for encoding, page in UNDECLARED.items():
        site.page(f"/{encoding}", body=page.encode(encoding), content_type="text/html")
    mostly_utf8 = (
        "<title>中文标题</title><p>国家统计局今天发布数据显示</p><p>caf".encode() + b"\xe9"
    )
    site.page("/mostly-utf8", body=mostly_utf8, content_type="text/html")

    records = by_url(
        await crawl(tmp_path, [f"{site.url}/{e}" for e in [*UNDECLARED, "mostly-utf8"]])
    )

    for encoding, page in UNDECLARED.items():
        title = page.partition("<title>")[2].partition("</title>")[0]
        assert records[f"{site.url}/{encoding}"]["title"] == title, encoding
    assert records[f"{site.url}/mostly-utf8"]["title"] == "中文标题"


async def test_a_meta_charset_after_64_kb_of_ascii_is_still_read_as_browsers_read_it(
    site: Site, tmp_path
):
    """A long inline script before <meta charset>: browsers, with nothing to go by in
    the first bytes, change to the encoding the <meta> declares when they reach it; with
    no <meta>, the first bytes past ASCII decide."""
    script = "<script>" + "var x = 1;\n" * 8000 + "</script>"
    late = f'<html><head>{script}<meta charset="gbk"><title>中文标题</title>'.encode("gbk")
    site.page("/late-meta", body=late, content_type="text/html")
    undeclared = f"<html><head>{script}{UNDECLARED['gbk']}".encode("gbk")
    site.page("/late-bytes", body=undeclared, content_type="text/html")

    records = by_url(await crawl(tmp_path, [site.url + "/late-meta", site.url + "/late-bytes"]))

    assert records[site.url + "/late-meta"]["title"] == "中文标题"
    assert records[site.url + "/late-bytes"]["title"] == "经济运行总体回升向好"


async def test_gb2312_pages_decode_as_whatwg_gb18030_with_the_characters_of_gb18030_2022(
    site: Site, tmp_path
):
    """Browsers decode gb2312 and GBK as GB18030, with the mappings of GB18030-2022: 19
    two-byte codes that Python's codec reads as private-use code points are characters
    (vertical punctuation, ideographs), A3A0 is the ideographic space, and A8BC and
    8135F437 are ḿ and U+E7C7, the other way round from Python's."""
    codes = "a6d9 a6da a6f3 fe59 fea0 a3a0 a8bc 8135f437"
    body = b'<meta charset="gb2312"><p>' + bytes.fromhex(codes.replace(" ", "")) + b"</p>"
    site.page("/", body=body, content_type="text/html")

    [record] = await crawl(tmp_path, [site.url + "/"], text=True)

    assert record["text"] == "\ufe10\ufe12\ufe19\u9fb4\u9fbb\u3000\u1e3f\ue7c7"


async def test_big5_pages_decode_as_whatwg_big5_with_its_euro_and_fullwidth_tilde(
    site: Site, tmp_path
):
    """Browsers' Big5 is Microsoft's: A1E3 is the fullwidth tilde of "10～20" (Python's
    Big5-HKSCS has the tilde operator), A145 the dot of "約翰‧史密斯", A3E1 the euro sign
    (undefined to Python)."""
    body = "<title>10～20 約翰‧史密斯 ￥€</title>".encode("cp950")
    site.page("/", body=body, content_type="text/html; charset=big5")

    [record] = await crawl(tmp_path, [site.url + "/"])

    assert record["title"] == "10～20 約翰‧史密斯 ￥€"


async def test_x_user_defined_is_read_as_whatwg_reads_it_from_content_type_only(
    site: Site, tmp_path
):
    """WHATWG's x-user-defined reads 0x80 to 0xFF as U+F780 to U+F7FF (a script's byte
    for byte); a <meta> naming it is read as windows-1252 (HTML's prescan)."""
    body = b"<title>x\x80\xe9\xff</title>"
    site.page("/header", body=body, content_type="text/html; charset=x-user-defined")
    site.page("/meta", body=b'<meta charset="x-user-defined">' + body, content_type="text/html")

    records = by_url(await crawl(tmp_path, [site.url + "/header", site.url + "/meta"]))

    assert records[site.url + "/header"]["title"] == "x\uf780\uf7e9\uf7ff"
    assert records[site.url + "/meta"]["title"] == "x€éÿ"


async def test_big5_hkscs_codes_python_lacks_decode_as_whatwg_big5_reads_them(site: Site, tmp_path):
    """WHATWG's index-big5 has 158 HKSCS codes (Cantonese characters, some outside the
    BMP) that Python's Big5-HKSCS leaves undefined: 877A, 87C0, C6CF, FE52..."""
    codes = {"877a": "\u3875", "87c0": "\U00025db9", "c6cf": "\u5ef4", "fe52": "\u732a"}
    body = b"<title>" + bytes.fromhex("".join(codes)) + "香港".encode("big5hkscs") + b"</title>"
    site.page("/", body=body, content_type="text/html; charset=big5")

    [record] = await crawl(tmp_path, [site.url + "/"])

    assert record["title"] == "".join(codes.values()) + "香港"


async def test_big5_a241_and_a242_are_the_division_slash_and_small_reverse_solidus(
    site: Site, tmp_path
):
    """WHATWG's index-big5 (Microsoft's code page 950): A1FE ／, A240 ＼, A241 ∕, A242 ﹨;
    Python's Big5-HKSCS reads A241 and A242 as A1FE and A240. A4A2 then "A" is 丐A."""
    body = b"<title>\xa1\xfe\xa2\x40\xa2\x41\xa2\x42 \xa4\xa2A\xa4\xa2B</title>"
    site.page("/", body=body, content_type="text/html; charset=big5")

    [record] = await crawl(tmp_path, [site.url + "/"])

    assert record["title"] == "／＼∕﹨ 丐A丐B"


async def test_euc_jp_jis_x_0212_2237_is_the_fullwidth_tilde_as_browsers_read_it(
    site: Site, tmp_path
):
    """WHATWG's index-jis0212 has ～ at 2237 (8F A2 B7 in EUC-JP), Python's euc_jp the
    ASCII ~, which stays itself."""
    body = b"<title>10\x8f\xa2\xb720 ~</title>"
    site.page("/", body=body, content_type="text/html; charset=euc-jp")

    [record] = await crawl(tmp_path, [site.url + "/"])

    assert record["title"] == "10～20 ~"


async def test_iso_2022_jp_reads_halfwidth_katakana_as_whatwg_reads_them(site: Site, tmp_path):
    body = b"<title>\x1b(I12\x1b(B \x1b$B0!\x1b(B</title>"  # ESC ( I: JIS X 0201 katakana
    site.page("/", body=body, content_type="text/html; charset=iso-2022-jp")

    [record] = await crawl(tmp_path, [site.url + "/"])

    assert record["title"] == "ｱｲ 亜"


async def test_euc_jp_reads_the_nec_and_ibm_rows_and_the_fullwidth_tilde_as_browsers_do(
    site: Site, tmp_path
):
    """WHATWG's EUC-JP is JIS X 0208 as Windows maps it: the NEC row 13 (①, Ⅶ) and the
    IBM rows 89 to 92 (纊), undefined to Python's euc_jp, and A1C1 the fullwidth tilde of
    "10～20" (Python's wave dash)."""
    body = b"<title>10\xa1\xc120 \xad\xa1\xad\xbb\xf9\xa1 \xc6\xfc\xcb\xdc</title>"
    site.page("/", body=body, content_type="text/html; charset=euc-jp")

    [record] = await crawl(tmp_path, [site.url + "/"])

    assert record["title"] == "10～20 ①Ⅶ纊 日本"


async def test_koi8_u_reads_the_belarusian_short_u_as_whatwg_reads_it(site: Site, tmp_path):
    site.page("/", body=b"<title>\xae \xbe \xc1</title>", content_type="text/html; charset=koi8-u")

    [record] = await crawl(tmp_path, [site.url + "/"])

    assert record["title"] == "ў Ў а"


async def test_a_charset_no_browser_knows_is_ignored_for_the_meta_charset(site: Site, tmp_path):
    """Python has codecs no browser has (utf-7, utf-32, EBCDIC's cp037), and some that are
    not text codecs at all (base64, zlib, rot13, hex): a page naming one is read as a
    browser reads it, by its <meta charset>."""
    page = html("中文 +AGEA-", head='<meta charset="gbk">').encode("gbk")
    labels = ["utf-7", "utf-32", "cp037", "base64", "zlib", "rot13", "hex"]
    for label in labels:
        site.page(f"/{label}", body=page, content_type=f"text/html; charset={label}")

    records = by_url(await crawl(tmp_path, [f"{site.url}/{label}" for label in labels]))

    for label in labels:
        record = records[f"{site.url}/{label}"]
        assert (record["error"], record["title"]) == (None, "中文 +AGEA-"), label


async def test_a_body_over_max_bytes_is_cut_and_streamed(site: Site, tmp_path):
    sent = []

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        chunk = b"<p>" + b"x" * 65533
        for _ in range(1000):  # 64 MB if nobody stops reading
            await response.write(chunk)
            sent.append(len(chunk))
        return response

    site.handle("/big", endless)

    [record] = await crawl(tmp_path, [site.url + "/big"], max_bytes=100_000)

    assert (record["status"], record["bytes"], record["truncated"]) == (200, 100_000, True)
    assert sum(sent) < 16 * 2**20  # the crawler stopped reading long before the end


async def test_compressed_bodies_are_decoded_and_bombs_are_capped(site: Site, tmp_path):
    page = html("zipped", ["/bomb"]).encode()
    site.page("/", body=gzip.compress(page), headers={"Content-Encoding": "gzip"})
    site.page("/deflate", body=zlib.compress(page), headers={"Content-Encoding": "deflate"})
    site.page("/br", body=brotli.compress(page), headers={"Content-Encoding": "br"})
    site.page("/bomb", body=gzip.compress(b"\0" * 50_000_000), headers={"Content-Encoding": "gzip"})

    records = by_url(
        await crawl(
            tmp_path, [site.url + "/", site.url + "/deflate", site.url + "/br"], max_bytes=1_000_000
        )
    )

    assert {records[site.url + p]["title"] for p in ("/", "/deflate", "/br")} == {"zipped"}
    bomb = records[site.url + "/bomb"]
    assert (bomb["bytes"], bomb["truncated"]) == (1_000_000, True)


async def test_stacked_content_codings_are_undone_in_reverse_order_as_browsers_do(
    site: Site, tmp_path
):
    page = html("stacked", [f"/x{n}" for n in range(50)]).encode()
    # RFC 9110 8.4: codings are listed in the order they were applied.
    site.page(
        "/", body=zlib.compress(gzip.compress(page)), headers={"Content-Encoding": "gzip, deflate"}
    )
    site.page("/identity", body=gzip.compress(page), headers={"Content-Encoding": "identity, gzip"})
    # A first coding that grows the body (gzip level 0) makes the middle of the stack
    # longer than --max-bytes while the page is not.
    stored = gzip.compress(gzip.compress(page, compresslevel=0))
    site.page("/stored", body=stored, headers={"Content-Encoding": "gzip,gzip"})
    site.page("/unknown", body=gzip.compress(page), headers={"Content-Encoding": "gzip, zstd"})
    seeds = [site.url + path for path in ("/", "/identity", "/stored", "/unknown")]

    records = by_url(await crawl(tmp_path, seeds, max_depth=0, max_bytes=len(page)))

    for path in ("/", "/identity", "/stored"):
        record = records[site.url + path]
        assert (record["title"], record["bytes"], record["truncated"]) == (
            "stacked",
            len(page),
            False,
        ), path
    assert records[site.url + "/unknown"]["error"] == "decoding_error"


async def test_a_content_encoding_that_is_no_coding_is_passed_over_as_chromium_does(
    site: Site, tmp_path
):
    """A charset in the wrong header (PHP's header('Content-Encoding: utf-8')) or "none":
    Chromium shows the body as it came; a coding we cannot undo stays an error."""
    page = html("shown").encode()
    codings = {"/utf-8": "utf-8", "/none": "none", "/then-gzip": "UTF8, gzip"}
    for path, coding in codings.items():
        body = gzip.compress(page) if "gzip" in coding else page
        site.page(path, body=body, headers={"Content-Encoding": coding})
    site.page("/compress", body=page, headers={"Content-Encoding": "compress"})
    paths = [*codings, "/compress"]

    records = by_url(await crawl(tmp_path, [site.url + path for path in paths], max_depth=0))

    outcome = [(records[site.url + p]["title"], records[site.url + p]["error"]) for p in paths]
    assert outcome == [("shown", None)] * 3 + [(None, "decoding_error")]


async def test_a_meta_refresh_is_a_link_as_browsers_go_there(site: Site, tmp_path):
    """HTML's refresh value: a time, then the URL, maybe after "url=" and in quotes."""
    site.page("/", "moved", head='<meta http-equiv="Refresh" content="0; URL=\'/new?a=1\'">')
    site.page("/new", "new", head='<meta http-equiv="refresh" content="5">')  # reloads itself
    site.page("/other", head='<meta http-equiv=refresh content="3,other2">')
    site.page("/other2", "other2")

    records = by_url(await crawl(tmp_path, [site.url + "/", site.url + "/other"]))

    assert records[site.url + "/"]["links"] == [site.url + "/new?a=1"]
    assert records[site.url + "/new?a=1"]["title"] == "new"
    assert records[site.url + "/new?a=1"]["links"] == []
    assert records[site.url + "/other2"]["title"] == "other2"


async def test_frames_iframes_svg_links_and_pagination_are_links_as_browsers_load_them(
    site: Site, tmp_path
):
    # A frameset's pages are reached only through its frames; an <iframe>'s page is part
    # of the page (a web archive replays it); <link rel=next> is the next page of a list.
    site.page(
        "/",
        body=(
            '<html><head><title>frames</title><link rel="stylesheet" href="/style.css">'
            '<link rel="Next" href="/list?page=2"><link rel=prev href></head>'
            '<frameset cols="20%,80%"><frame src="/menu"><frame src=" /main ">'
            "<frame src></frameset></html>"
        ),
    )
    site.page(
        "/main",
        body=(
            '<p><iframe src="/comments"></iframe><iframe src=""></iframe>'
            '<svg><a xlink:href="/figure">figure</a></svg><img src="/image.png"></p>'
        ),
    )
    for path in ("/menu", "/list?page=2", "/comments", "/figure"):
        site.page(path, path)

    records = by_url(await crawl(tmp_path, [site.url + "/"]))

    assert records[site.url + "/"]["links"] == [
        site.url + path for path in ("/list?page=2", "/menu", "/main")
    ]
    assert records[site.url + "/main"]["links"] == [site.url + "/comments", site.url + "/figure"]
    assert set(site.paths()) == {"/", "/menu", "/main", "/list?page=2", "/comments", "/figure"}


async def test_a_refresh_header_is_a_link_as_a_meta_refresh_is(site: Site, tmp_path):
    async def refreshing(_request: web.Request) -> web.Response:
        headers = {"Refresh": "0;url=/next"}
        return web.Response(text=html("moved", ["/a"]), content_type="text/html", headers=headers)

    site.handle("/", refreshing)
    site.page("/a", "a")
    site.page("/next", "next")

    records = by_url(await crawl(tmp_path, [site.url + "/"]))

    assert records[site.url + "/"]["links"] == [site.url + "/a", site.url + "/next"]
    assert records[site.url + "/next"]["title"] == "next"


async def test_links_outside_scope_are_listed_but_not_followed(site: Site, site2: Site, tmp_path):
    site.page(
        "/",
        "index",
        [f"{site2.url}/", "mailto:me@example.com", "javascript:void(0)", "/in", "http://[bad"],
    )
    site.page("/in", "in")
    site2.page("/", "other")

    records = by_url(await crawl(tmp_path, [site.url + "/"]))

    assert records[site.url + "/"]["links"] == [f"{site2.url}/", f"{site.url}/in"]
    assert set(records) == {site.url + "/", site.url + "/in"}
    assert site2.hits == []


async def test_allow_host_widens_the_scope(site: Site, site2: Site, tmp_path):
    site.page("/", "index", [f"{site2.url}/"])
    site2.page("/", "other")

    records = await crawl(
        tmp_path, [site.url + "/"], allow_host=("127.0.0.2",), allow_private_addresses=True
    )

    assert [r["title"] for r in records] == ["index", "other"]


async def test_meta_robots_nofollow_lists_links_without_following(site: Site, tmp_path):
    site.page("/", "index", ["/a"], head='<meta name="ROBOTS" content="noindex, NoFollow">')
    site.page("/a", "A")

    [record] = await crawl(tmp_path, [site.url + "/"])

    assert record["links"] == [site.url + "/a"]
    assert site.count("/a") == 0


async def test_a_meta_robots_tag_named_for_our_crawler_is_obeyed_and_anothers_is_not(
    site: Site, tmp_path
):
    # As Google reads <meta name=googlebot>: a <meta> named for a crawler is its own.
    site.page("/", "index", ["/ours", "/theirs"])
    site.page("/ours", "ours", ["/ours/next"], head='<meta name=MyBot content="noindex,nofollow">')
    site.page("/theirs", "theirs", ["/theirs/next"], head='<meta name=googlebot content="none">')
    site.page("/theirs/next", "next")
    user_agent = "Mozilla/5.0 (compatible; MyBot/1.0; +https://example.com/bot)"

    records = by_url(await crawl(tmp_path, [site.url + "/"], user_agent=user_agent))

    ours, theirs = records[site.url + "/ours"], records[site.url + "/theirs"]
    assert (ours.get("noindex"), ours.get("nofollow")) == (True, True)
    assert (theirs.get("noindex"), theirs.get("nofollow")) == (None, None)
    assert (site.count("/ours/next"), site.count("/theirs/next")) == (0, 1)


async def test_a_page_that_asks_not_to_be_indexed_says_so_in_its_record(site: Site, tmp_path):
    # For a search index: the page is fetched, its links followed, and it is marked.
    site.page("/", "index", ["/meta", "/none", "/header", "/pdf", "/theirs", "/plain"])
    site.page("/meta", "meta", ["/after"], head='<meta name="robots" content="NOINDEX">')
    site.page("/none", "none", head="<meta name=robots content=none>")
    site.page("/header", "header", headers={"X-Robots-Tag": "noarchive, noindex"})
    site.page("/pdf", body=b"%PDF-1.4", content_type="application/pdf",
              headers={"X-Robots-Tag": "noindex"})  # fmt: skip
    site.page("/theirs", "theirs", headers={"X-Robots-Tag": "otherbot: noindex"})
    site.page("/plain", "plain")
    site.page("/after", "after")

    records = by_url(await crawl(tmp_path, [site.url + "/"]))

    marked = {url.removeprefix(site.url) for url, r in records.items() if r.get("noindex")}
    assert marked == {"/meta", "/none", "/header", "/pdf"}
    assert all(r["noindex"] is True for r in records.values() if "noindex" in r)
    assert records[site.url + "/after"]["title"] == "after"  # noindex alone follows links
    assert records[site.url + "/none"]["nofollow"] is True


async def test_an_x_robots_tag_for_another_crawler_is_not_obeyed_and_one_for_ours_is(
    site: Site, tmp_path
):
    # A crawler's name and a colon make the directives after it, to the next name, its own.
    headers = {
        "/theirs": ["otherbot: noindex, nofollow"],
        "/ours": ["noarchive, Crawler: NOFOLLOW"],
        "/mixed": ["googlebot: nofollow", "unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"],
        "/named-last": ["noindex, otherbot: nofollow"],
    }
    site.page("/", "index", headers)
    for path, values in headers.items():

        async def handler(_request: web.Request, values=values, path=path) -> web.Response:
            response = web.Response(text=html(path, [path + "/next"]), content_type="text/html")
            for value in values:
                response.headers.add("X-Robots-Tag", value)
            return response

        site.handle(path, handler)
        site.page(path + "/next", "next")

    records = by_url(await crawl(tmp_path, [site.url + "/"]))

    said = {
        path: (records[site.url + path].get("noindex"), records[site.url + path].get("nofollow"))
        for path in headers
    }
    assert said == {
        "/theirs": (None, None),
        "/ours": (None, True),
        "/mixed": (True, None),
        "/named-last": (True, None),
    }
    assert {path for path in headers if site.count(path + "/next")} == {
        "/theirs",
        "/mixed",
        "/named-last",
    }


async def test_base_href_is_the_base_of_relative_links(site: Site, tmp_path):
    site.page("/", "index", ["page"], head='<base href="/docs/">')
    site.page("/docs/page", "page")

    records = await crawl(tmp_path, [site.url + "/"])

    assert records[0]["links"] == [site.url + "/docs/page"]
    assert records[1]["title"] == "page"


@pytest.mark.parametrize(
    ("base_href", "relative_base"),
    [
        # A URL of another scheme is the base: no relative link resolves to a page.
        ("mailto:someone@example.com", None),
        ("ftp://files.example.com/pub/", None),
        ("tel:+15550100", None),
        # No URL, or a data: or javascript: one: the page's own URL is the base.
        ("ftp:", "/dir/"),
        ("http://[bad/", "/dir/"),
        ("data:text/html,<p>x", "/dir/"),
        ("javascript:void(0)", "/dir/"),
        # A user:password in the base is not kept in the links (nor sent).
        ("http://u:pw@{host}/other/", "/other/"),
    ],
)
async def test_the_document_base_url_is_what_html_makes_of_base_href(
    site: Site, tmp_path, base_href: str, relative_base: str | None
):
    absolute = f"{site.url}/absolute"
    links = ["page", "/rooted", f"//{site.host}:{site.port}/scheme-relative", absolute]
    head = f'<base href="{base_href.format(host=f"{site.host}:{site.port}")}">'
    site.page("/dir/", "index", links, head=head)

    [record] = await crawl(tmp_path, [site.url + "/dir/"], max_depth=0)

    expected = [absolute]
    if relative_base is not None:
        expected = [
            f"{site.url}{relative_base}page",
            f"{site.url}/rooted",
            f"{site.url}/scheme-relative",
            absolute,
        ]
    assert record["links"] == expected


async def test_title_and_description_collapse_only_ascii_whitespace_as_document_title_does(
    site: Site, tmp_path
):
    # document.title strips and collapses ASCII whitespace only: an ideographic space
    # (U+3000) between Chinese words, or a no-break space, is part of the title.
    site.page(
        "/",
        body=(
            "<title>\t中文\u3000标题 \r\n\f 第二\u00a0部分\u3000</title>"
            '<meta name="description" content="\u3000摘要\u3000 \n 内容\u00a0">'
        ),
    )

    [record] = await crawl(tmp_path, [site.url + "/"], max_depth=0)

    assert record["title"] == "中文\u3000标题 第二\u00a0部分\u3000"
    assert record["description"] == "\u3000摘要\u3000 内容\u00a0"


async def test_the_head_fields_and_links_in_page_order_come_from_anywhere_in_the_page(
    site: Site, tmp_path
):
    # <a> and <area> links keep their order; the first <base> and <title> count.
    site.page(
        "/",
        body=(
            '<head><link rel="Canonical" href=" /c "><title>  The\n  page </title></head>'
            '<body><area href="m1"><a href="a1">1</a><map><area href="m2"></map>'
            '<meta name="description" content=" said  here "><a href="a2"><base href="/d/"></a>'
            '<base href="/e/"><title>second</title><a href>no href value</a>'
        ),
    )

    records = await crawl(tmp_path, [site.url + "/"], max_depth=0)

    [record] = records
    assert record["title"] == "The page"
    assert record["description"] == "said here"
    assert record["canonical"] == site.url + "/c"
    assert record["links"] == [
        site.url + "/d/m1",
        site.url + "/d/a1",
        site.url + "/d/m2",
        site.url + "/d/a2",
        site.url + "/d/",
    ]


async def test_max_pages_counts_records(site: Site, tmp_path):
    site.page("/", "index", [f"/p{n}" for n in range(20)])
    for n in range(20):
        site.page(f"/p{n}", str(n))

    records = await crawl(tmp_path, [site.url + "/"], max_pages=5)

    assert len(records) == 5
    assert len(site.hits) == 5


async def test_only_html_is_parsed(site: Site, tmp_path):
    site.page("/", "index", ["/image.png", "/data.json"])
    site.page(
        "/image.png", body=b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, content_type="image/png"
    )
    site.page("/data.json", body='{"href": "<a href=/nope>"}', content_type="application/json")

    records = by_url(await crawl(tmp_path, [site.url + "/"]))

    image = records[site.url + "/image.png"]
    assert (image["status"], image["bytes"], image["title"], image["links"]) == (
        200,
        1032,
        None,
        [],
    )
    assert site.count("/nope") == 0


async def test_a_page_without_content_type_is_sniffed(site: Site, tmp_path):
    async def bare(request: web.Request) -> web.StreamResponse:
        body = html("sniffed", ["/a"]).encode()
        request.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (len(body), body)
        )
        request.transport.close()
        await asyncio.sleep(1)
        return web.Response()

    site.handle("/", bare)
    site.page("/a", "A")

    records = await crawl(tmp_path, [site.url + "/"])

    assert [r["title"] for r in records] == ["sniffed", "A"]


async def test_garbage_response_is_an_invalid_response(site: Site, tmp_path):
    async def garbage(request: web.Request) -> web.StreamResponse:
        request.transport.write(b"NOT HTTP AT ALL\r\n\r\n")
        request.transport.close()
        await asyncio.sleep(1)
        return web.Response()

    site.handle("/", garbage)

    [record] = await crawl(tmp_path, [site.url + "/"])

    assert record["status"] is None
    assert record["error"] in ("invalid_response", "connection_error")


async def test_depth_is_the_shortest_distance_even_when_a_shallow_page_is_slow(site, tmp_path):
    # / -> slow -> x, and / -> b -> c -> x: x is at depth 2, its link y at depth 3,
    # however long the slow page takes while b and c are fetched.
    site.page("/", "index", ["/slow", "/b"])
    site.page("/slow", "slow", ["/x"], delay_s=0.3)
    site.page("/b", "b", ["/c"])
    site.page("/c", "c", ["/x"])
    site.page("/x", "x", ["/y"])
    site.page("/y", "y", ["/z"])

    records = by_url(await crawl(tmp_path, [site.url + "/"], max_depth=3))

    depths = {url.rpartition("/")[2]: r["depth"] for url, r in records.items()}
    assert depths == {"": 0, "slow": 1, "b": 1, "c": 2, "x": 2, "y": 3}
    assert records[site.url + "/x"]["referrer"] == site.url + "/slow"


async def test_pages_held_for_a_slow_shallower_one_are_capped(site, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr("crawler.engine.MAX_HELD_PAGES", 2)
    site.page("/", "index", ["/slow", "/b"])
    site.page("/slow", "slow", delay_s=1.0)
    site.page("/b", "b", [f"/c{n}" for n in range(5)])
    for n in range(5):
        site.page(f"/c{n}", f"c{n}", [f"/d{n}"])
        site.page(f"/d{n}", f"d{n}")

    with caplog.at_level("WARNING", logger="crawler"):
        records = await crawl(tmp_path, [site.url + "/"], per_host=8)

    assert len(records) == 13
    slow_started = next(hit.started for hit in site.hits if hit.path == "/slow")
    early = [
        hit for hit in site.hits if hit.path.startswith("/d") and hit.started < slow_started + 0.9
    ]
    assert len(early) == 3  # five held c pages, two allowed to wait
    assert "some depths may come from longer paths" in caplog.text
