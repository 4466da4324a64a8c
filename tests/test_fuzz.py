"""Fuzzing what strangers control: HTML, hrefs, Location, Content-Type, robots.txt.

Random and mutated inputs go through the path a fetched page takes: charset
decoding -> parse -> canonicalize -> scope and trap rules -> visit_key, and
robots.txt through protego. Nothing may raise, and every URL that comes out is
absolute http(s) and canonical. Profiles (tests/conftest.py): 100 examples by
default, 300 with CI=true, HYPOTHESIS_PROFILE=long for a long local run.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from crawler.charset import decode_html
from crawler.fetch import Response
from crawler.parse import parse_html
from crawler.politeness import Robots
from crawler.urls import (
    Scope,
    TrapRules,
    canonical_links,
    canonicalize,
    host_of,
    visit_key,
    visit_keys,
    without_userinfo,
)

BASES = [
    "http://example.com/",
    "https://example.com/a/b/c.html?q=1",
    "http://127.0.0.1:8080/dir/",
    "http://[::1]/x/",
    "https://user@xn--bcher-kva.example/%C3%A9/?a=b&c",
]
URL_PIECES = [
    "http://", "https://", "HTTP://", "http:", "https:", "//", "\\\\", "/\\", "/", "?", "#", "&",
    "=", "..", ".", "./", "../", "%", "%2e", "%2F", "%zz", "%00", "@", ":", "[", "]", "[::1]",
    "127.0.0.1", "0x7f.1", "4294967296", "example.com", "EXAMPLE.com.", "bücher.de", "例え.jp",
    "xn--", "xn--a", "a..b", ":80", ":443", ":99999", ":0", " ", "\t", "\n", "\x00", "\ud800",
    "javascript:", "mailto:", "data:", "ftp://", "user:pass@", "a/b/a/b/a/b/", "ä", "+",
]  # fmt: skip
url_texts = st.one_of(
    st.text(max_size=40),
    st.lists(st.one_of(st.sampled_from(URL_PIECES), st.text(max_size=4)), max_size=12).map("".join),
)
bases = st.one_of(
    st.sampled_from(BASES),
    url_texts.map(canonicalize).filter(lambda url: url is not None),
)

HTML_PIECES = [
    "<a href='", "<a href=\"", "<a href=", "<area href='", "'>", "\">", ">", "</a>", "<",
    "<base href='", "<meta name=robots content='nofollow'>", "<meta name=ROBOTS content=none>",
    "<title>", "</title>", "<!--", "-->", "<script>", "</script>", "<![CDATA[", "<svg><a href='",
    "&amp;", "&#0;", "&#x110000;", "&", "\x00", "\ufeff", "<meta charset=", "shift_jis", "utf-16",
    "<html>", "<body>", "<frameset>", "<noscript>", "<template>",
]  # fmt: skip
html_texts = st.lists(
    st.one_of(st.sampled_from(HTML_PIECES), url_texts, st.text(max_size=10)), max_size=40
).map("".join)
ENCODINGS = ["utf-8", "latin-1", "utf-16", "shift_jis", "gb18030", "cp1252"]
html_bodies = st.one_of(
    st.binary(max_size=400),
    st.tuples(html_texts, st.sampled_from(ENCODINGS)).map(
        lambda pair: pair[0].encode(pair[1], "replace")
    ),
)
CONTENT_TYPES = [
    "text/html", "text/html; charset=utf-8", "TEXT/HTML;CHARSET=\"latin1\"", "text/html; charset=",
    "text/html; charset=no-such", "text/html; charset=utf-16", "application/xhtml+xml",
    "text/plain", ";;;", "text/html; charset=x-user-defined", "text/html; charset=replacement",
]  # fmt: skip
content_types = st.one_of(
    st.none(),
    st.sampled_from(CONTENT_TYPES),
    st.text(max_size=40),
    st.tuples(st.sampled_from(CONTENT_TYPES), st.text(max_size=12)).map("".join),
)

SCOPE = Scope(BASES, allow_hosts=["*.example.com"], exclude=[r"\?sid="])
TRAPS = TrapRules(max_path_depth=32, max_query_params=20, repeating_paths=True, max_url_length=200)


def assert_canonical(url: str) -> None:
    """A URL the crawler may queue: absolute http(s), canonical, and every check takes it."""
    assert url.startswith(("http://", "https://")), url
    assert canonicalize(url) == url, url
    assert host_of(url)
    SCOPE.allows(url)
    TRAPS.trap(url)
    assert canonicalize(visit_key(url)) == visit_key(url)


@given(href=url_texts, base=bases)
@example(href="//[::1]:0/", base="http://example.com/")
def test_hrefs_and_locations_resolve_to_canonical_urls_or_none(href: str, base: str) -> None:
    url = canonicalize(href, base)  # a Location header is resolved the same way
    if url is not None:
        assert_canonical(url)
        assert canonicalize(url, base) == url


@given(hrefs=st.lists(url_texts, max_size=8), base=bases)
def test_a_pages_links_are_its_hrefs_canonicalized_one_by_one(hrefs: list[str], base: str):
    # canonical_links() takes a shortcut when every href is plain: it must not show. A
    # link's own user:password is dropped, and no page's URL has one (crawler.credentials).
    page_url = without_userinfo(canonicalize(base) or base)
    one_by_one = (canonicalize(href, page_url) for href in hrefs)
    expected = dict.fromkeys(without_userinfo(u) for u in one_by_one if u)
    assert canonical_links(hrefs, page_url) == list(expected)
    assert visit_keys(canonical_links(hrefs, page_url)) == [
        visit_key(url) for url in canonical_links(hrefs, page_url)
    ]


@given(text=url_texts)
def test_any_string_canonicalizes_to_a_canonical_url_or_none(text: str) -> None:
    url = canonicalize(text)
    if url is not None:
        assert_canonical(url)


@given(body=html_bodies, content_type=content_types, base=bases)
def test_pages_parse_into_canonical_links(body: bytes, content_type: str | None, base: str):
    response = Response(base, status=200, content_type=content_type, body=body)
    response.is_html  # noqa: B018 (it must not raise)
    parsed = parse_html(LexborHTMLParser(decode_html(body, content_type)))
    page_base = base
    if parsed.base_href:
        page_base = canonicalize(parsed.base_href, base) or base
    for url in canonical_links(parsed.hrefs, page_base):
        assert_canonical(url)


@given(html=html_texts, base=bases)
def test_mutated_html_text_parses_into_canonical_links(html: str, base: str) -> None:
    body = html.encode("utf-8", "surrogatepass")
    parsed = parse_html(LexborHTMLParser(decode_html(body, "text/html")))
    for url in canonical_links(parsed.hrefs, base):
        assert_canonical(url)


ROBOTS_PIECES = [
    "User-agent:", "User-Agent: *", "user-agent: crawler", "Disallow:", "Allow:", "Crawl-delay:",
    "Request-rate:", "Sitemap:", "Host:", "*", "/", "$", "/*.php$", "?", "1/0", "0/0", "-5",
    "nan", "inf", "1e309", "10/1m", "#", "\n", "\r\n", "\r", " ", "\t", "%", "%ZZ", "\x00", "é",
]  # fmt: skip
robots_bodies = st.one_of(
    st.binary(max_size=300),
    st.lists(st.one_of(st.sampled_from(ROBOTS_PIECES), st.text(max_size=6)), max_size=40).map(
        lambda pieces: "".join(pieces).encode("utf-8", "surrogatepass")
    ),
)


@given(body=robots_bodies, path=url_texts)
def test_robots_txt_bodies_never_raise(body: bytes, path: str) -> None:
    robots = Robots(None, "crawler/1.0", enabled=True, retries=0)  # type: ignore[arg-type]
    rules = robots._parse("http://example.com", body)
    assert rules.crawl_delay_s >= 0
    url = canonicalize(path, "http://example.com/")
    if url is not None:
        assert robots.refusal(rules, url) in (None, "robots_disallowed")


def test_a_charset_label_with_a_nul_is_an_unknown_label() -> None:  # found by the fuzzer
    assert decode_html(b"<p>caf\xc3\xa9", "text/html; charset=utf\x00-8") == "<p>café"
    assert decode_html(b"<meta charset='utf\x00-8'><p>x", None).endswith("<p>x")
