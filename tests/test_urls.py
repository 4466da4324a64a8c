"""Canonical URLs, visited-set keys and scope, as issue 2 section 5 specifies them.

Every canonicalization vector is checked twice: through `canonicalize()` (which takes the
resolver's fast path when it can) and through the resolver's general path alone, so the two
cannot drift apart. Property tests add random links, random URLs and a literal RFC 3986
section 5.2 resolver as a reference. Where browsers (the WHATWG URL Standard) and a strict
RFC 3986 parser disagree, the vectors follow the browser and say so.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from crawler.charset import decoder_for
from crawler.urls import (
    URL_TOO_LONG,
    Scope,
    TrapRules,
    canonical_links,
    canonicalize,
    host_of,
    link_resolver,
    origin_of,
    visit_key,
)

# The base of RFC 3986 section 5.4's examples.
RFC_BASE = "http://a/b/c/d;p?q"

_C0_AND_SPACE = "".join(map(chr, range(0x21)))


def general_path(base: str, href: str) -> str | None:
    """What the resolver's general path alone makes of `href`, after the WHATWG stripping."""
    href = href.strip(_C0_AND_SPACE)
    href = href.replace("\t", "").replace("\n", "").replace("\r", "")
    return link_resolver(base).resolve(href.partition("#")[0])


def both_paths(base: str, href: str) -> str | None:
    """canonicalize(href, base), after checking that the fast and general paths agree on it."""
    fast = link_resolver(base).canonical(href)
    assert canonicalize(href, base) == fast
    assert general_path(base, href) == fast, "the fast path and the general path disagree"
    return fast


def vectors(*table: tuple[str, str, str | None]) -> list:
    return [pytest.param(url, expected, id=rule) for rule, url, expected in table]


# --- RFC 3986 section 5.4, against http://a/b/c/d;p?q ------------------------------------------

RFC_NORMAL = vectors(
    ("other-scheme-g:h-is-uncrawlable", "g:h", None),
    ("g", "g", "http://a/b/c/g"),
    ("./g", "./g", "http://a/b/c/g"),
    ("g/", "g/", "http://a/b/c/g/"),
    ("/g", "/g", "http://a/g"),
    ("//g-gets-a-root-path", "//g", "http://g/"),
    ("?y", "?y", "http://a/b/c/d;p?y"),
    ("g?y", "g?y", "http://a/b/c/g?y"),
    ("#s-is-the-base-without-fragment", "#s", "http://a/b/c/d;p?q"),
    ("g#s", "g#s", "http://a/b/c/g"),
    ("g?y#s", "g?y#s", "http://a/b/c/g?y"),
    (";x", ";x", "http://a/b/c/;x"),
    ("g;x", "g;x", "http://a/b/c/g;x"),
    ("g;x?y#s", "g;x?y#s", "http://a/b/c/g;x?y"),
    ("empty", "", "http://a/b/c/d;p?q"),
    (".", ".", "http://a/b/c/"),
    ("./", "./", "http://a/b/c/"),
    ("..", "..", "http://a/b/"),
    ("../", "../", "http://a/b/"),
    ("../g", "../g", "http://a/b/g"),
    ("../..", "../..", "http://a/"),
    ("../../", "../../", "http://a/"),
    ("../../g", "../../g", "http://a/g"),
)

RFC_ABNORMAL = vectors(
    ("../../../g", "../../../g", "http://a/g"),
    ("../../../../g", "../../../../g", "http://a/g"),
    ("/./g", "/./g", "http://a/g"),
    ("/../g", "/../g", "http://a/g"),
    ("g.", "g.", "http://a/b/c/g."),
    (".g", ".g", "http://a/b/c/.g"),
    ("g..", "g..", "http://a/b/c/g.."),
    ("..g", "..g", "http://a/b/c/..g"),
    ("./../g", "./../g", "http://a/b/g"),
    ("./g/.", "./g/.", "http://a/b/c/g/"),
    ("g/./h", "g/./h", "http://a/b/c/g/h"),
    ("g/../h", "g/../h", "http://a/b/c/h"),
    ("g;x=1/./y", "g;x=1/./y", "http://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "g;x=1/../y", "http://a/b/c/y"),
    ("g?y/./x-query-untouched", "g?y/./x", "http://a/b/c/g?y/./x"),
    ("g?y/../x-query-untouched", "g?y/../x", "http://a/b/c/g?y/../x"),
    ("g#s/./x", "g#s/./x", "http://a/b/c/g"),
    ("g#s/../x", "g#s/../x", "http://a/b/c/g"),
    # A strict RFC 3986 parser returns "http:g"; browsers (and the RFC's own note on
    # backward compatibility) read a same-scheme reference without "//" as relative.
    ("http:g-is-relative-as-in-browsers", "http:g", "http://a/b/c/g"),
)


@pytest.mark.parametrize(("href", "expected"), RFC_NORMAL)
def test_rfc3986_normal_examples(href, expected):
    assert both_paths(RFC_BASE, href) == expected


@pytest.mark.parametrize(("href", "expected"), RFC_ABNORMAL)
def test_rfc3986_abnormal_examples(href, expected):
    assert both_paths(RFC_BASE, href) == expected


# --- Relative links on a page: WHATWG leniencies, escapes, uncrawlable links ---------------------

PAGE = "http://example.com/dir/page.html?x=1"

RELATIVE = vectors(
    ("empty-href-is-the-page", "", "http://example.com/dir/page.html?x=1"),
    ("whitespace-only-href-is-the-page", " \t\n ", "http://example.com/dir/page.html?x=1"),
    ("fragment-only-is-the-page", "#top", "http://example.com/dir/page.html?x=1"),
    ("empty-query-drops-the-pages-query", "?", "http://example.com/dir/page.html"),
    ("query-only", "?y=2", "http://example.com/dir/page.html?y=2"),
    ("sibling", "other.html", "http://example.com/dir/other.html"),
    ("absolute-path", "/abs/path/page.html", "http://example.com/abs/path/page.html"),
    ("absolute-path-with-query", "/a?b=c&d=e", "http://example.com/a?b=c&d=e"),
    ("protocol-relative", "//cdn.example.net/x.js", "http://cdn.example.net/x.js"),
    ("absolute-other-host", "https://other.org/x", "https://other.org/x"),
    ("absolute-without-path", "https://other.org", "https://other.org/"),
    ("absolute-with-query-no-path", "https://other.org?q", "https://other.org/?q"),
    ("absolute-dot-segments", "https://other.org/a/../b/./c", "https://other.org/b/c"),
    # WHATWG: backslashes act as slashes in http(s) paths and before the authority.
    ("backslash-in-path", "a\\b\\c.html", "http://example.com/dir/a/b/c.html"),
    ("backslash-absolute-path", "\\root\\x", "http://example.com/root/x"),
    ("backslash-protocol-relative", "\\\\cdn.example.net\\x", "http://cdn.example.net/x"),
    ("slash-backslash-protocol-relative", "/\\cdn.example.net/x", "http://cdn.example.net/x"),
    ("backslash-slash-protocol-relative", "\\/cdn.example.net/x", "http://cdn.example.net/x"),
    ("backslash-in-query-kept", "?a\\b", "http://example.com/dir/page.html?a\\b"),
    # WHATWG: a same-scheme reference without "//" is relative, whatever follows the colon.
    ("http:foo-relative", "http:foo", "http://example.com/dir/foo"),
    ("http:/foo-relative-absolute-path", "http:/foo", "http://example.com/foo"),
    ("http:-alone-is-the-page", "http:", "http://example.com/dir/page.html?x=1"),
    ("http:?q-relative", "http:?q", "http://example.com/dir/page.html?q"),
    ("http:a:b-path-not-scheme", "http:a:b", "http://example.com/dir/a:b"),
    ("http:http:foo-path-not-scheme", "http:http:foo", "http://example.com/dir/http:foo"),
    ("HTTP:foo-scheme-case-insensitive", "HTTP:foo", "http://example.com/dir/foo"),
    ("http:\\\\host-absolute", "http:\\\\host.org\\x", "http://host.org/x"),
    ("http:/\\host-absolute", "http:/\\host.org/x", "http://host.org/x"),
    ("https:foo-other-scheme-is-a-host", "https:foo", "https://foo/"),
    ("https:foo/bar-other-scheme-is-a-host", "https:foo/bar", "https://foo/bar"),
    ("http:///host-extra-slashes-ignored", "http:///host.org/x", "http://host.org/x"),
    # WHATWG: leading and trailing C0 controls and spaces go; tabs and newlines go anywhere.
    ("leading-trailing-space", "  /a  ", "http://example.com/a"),
    ("leading-trailing-c0", "\x00\x01\x1f/a\x1f\x00", "http://example.com/a"),
    ("newline-inside", "/a\nb\r\nc", "http://example.com/abc"),
    ("tab-inside", "/a\tb", "http://example.com/ab"),
    ("tab-inside-scheme", "ht\ttp://other.org/", "http://other.org/"),
    ("newline-inside-host", "http://oth\ner.org/", "http://other.org/"),
    ("inner-space-escaped", "/a b", "http://example.com/a%20b"),
    ("inner-form-feed-escaped", "/a\x0cb", "http://example.com/a%0Cb"),
    ("trailing-del-is-not-stripped", "/a\x7f", "http://example.com/a%7F"),
    ("nbsp-is-not-whitespace", "\xa0x", "http://example.com/dir/%C2%A0x"),
    # Dot segments, also percent-encoded ones (WHATWG treats %2e as ".").
    ("dot-segments", "./a/../b/./c", "http://example.com/dir/b/c"),
    ("above-root", "../../../../x", "http://example.com/x"),
    ("encoded-dot", "%2e/x", "http://example.com/dir/x"),
    ("encoded-dot-dot", "%2E%2e/x", "http://example.com/x"),
    ("half-encoded-dot-dot", ".%2e/x", "http://example.com/x"),
    ("dot-dot-in-query-untouched", "?a/../b", "http://example.com/dir/page.html?a/../b"),
    ("double-slash-kept", "a//b", "http://example.com/dir/a//b"),
    # Escapes are sent as written, as browsers send them (visit_key() makes them meet).
    (
        "unreserved-escape-kept",
        "%7euser/%41%2D%5F%2E",
        "http://example.com/dir/%7euser/%41%2D%5F%2E",
    ),
    ("lowercase-hex-kept", "caf%c3%a9", "http://example.com/dir/caf%c3%a9"),
    ("reserved-escape-kept", "a%2Fb%3Fc%23d", "http://example.com/dir/a%2Fb%3Fc%23d"),
    ("bad-escape-kept", "%zz", "http://example.com/dir/%zz"),
    ("lone-percent-kept", "100%", "http://example.com/dir/100%"),
    ("non-ascii-path", "café/ü", "http://example.com/dir/caf%C3%A9/%C3%BC"),
    ("non-ascii-query", "?q=€", "http://example.com/dir/page.html?q=%E2%82%AC"),
    ("astral-plane", "😀", "http://example.com/dir/%F0%9F%98%80"),
    # Without the page's encoding, UTF-8 throughout; on a GBK page the query is in GBK
    # (test_a_gbk_pages_links_are_requested_as_a_browser_requests_them).
    (
        "gbk-page-chinese-path-and-query",
        "/新闻/列表.html?类别=体育&页=2",
        "http://example.com/%E6%96%B0%E9%97%BB/%E5%88%97%E8%A1%A8.html"
        "?%E7%B1%BB%E5%88%AB=%E4%BD%93%E8%82%B2&%E9%A1%B5=2",
    ),
    (
        "gbk-escapes-kept-as-bytes",
        "?q=%d6%d0%ce%c4",
        "http://example.com/dir/page.html?q=%d6%d0%ce%c4",
    ),
    # Links that are not crawlable.
    ("javascript", "javascript:void(0)", None),
    ("javascript-uppercase", "JavaScript:alert(1)", None),
    ("javascript-with-leading-space", "  javascript:x()", None),
    ("javascript-with-tab", "java\tscript:x()", None),
    ("mailto", "mailto:someone@example.com", None),
    ("tel", "tel:+1-555-0100", None),
    ("data", "data:text/html,<p>hi</p>", None),
    ("ftp", "ftp://example.com/file", None),
    ("file", "file:///etc/passwd", None),
    ("ws", "ws://example.com/socket", None),
    ("about", "about:blank", None),
    ("other-scheme-lookalike", "g:h", None),
    ("protocol-relative-without-host", "//", None),
    ("protocol-relative-bad-host", "//exa mple.com/", None),
    ("bad-port", "http://example.com:99999/", None),
    ("unclosed-ipv6", "http://[::1/", None),
)


@pytest.mark.parametrize(("href", "expected"), RELATIVE)
def test_link_on_a_page(href, expected):
    assert both_paths(PAGE, href) == expected


def test_a_colon_after_the_first_segment_is_no_scheme():
    # "1a:b" and "a@b:c" are not schemes (a scheme starts with a letter and has no "@").
    assert both_paths(PAGE, "1a:b") == "http://example.com/dir/1a:b"
    assert both_paths(PAGE, "a@b:c") == "http://example.com/dir/a@b:c"
    assert both_paths(PAGE, "./g:h") == "http://example.com/dir/g:h"


def test_links_on_an_https_page_keep_https():
    base = "https://example.com/a/b"
    assert both_paths(base, "//cdn.example.net/x") == "https://cdn.example.net/x"
    assert both_paths(base, "https:c") == "https://example.com/a/c"
    assert both_paths(base, "http:c") == "http://c/"


def test_links_on_a_page_with_a_port_and_userinfo_keep_them():
    base = "http://user:pw@example.com:8080/a/b"
    assert both_paths(base, "c") == "http://user:pw@example.com:8080/a/c"
    assert both_paths(base, "/c") == "http://user:pw@example.com:8080/c"
    assert both_paths(base, "//other.org/c") == "http://other.org/c"


def test_links_on_an_ipv6_page():
    base = "http://[::1]:8080/a/b"
    assert both_paths(base, "c?d") == "http://[::1]:8080/a/c?d"
    assert both_paths(base, "//[::2]/") == "http://[::2]/"


def test_the_base_may_be_any_spelling_of_the_page_url():
    assert both_paths("HTTP://Example.COM:80/a/./b/../c#frag", "") == "http://example.com/a/c"
    assert both_paths("HTTP://Example.COM:80/a/./b/../c#frag", "d") == "http://example.com/a/d"


def test_an_uncrawlable_base_resolves_nothing():
    assert canonicalize("/x", "mailto:a@example.com") is None
    assert canonicalize("/x", "not a url") is None
    assert link_resolver("ftp://example.com/") is None


def test_base_href_is_resolved_against_the_page_then_links_against_it():
    page = "http://example.com/a/b/page.html"
    base = canonicalize("../static/", page)  # <base href="../static/">
    assert base == "http://example.com/a/static/"
    assert both_paths(base, "img.png") == "http://example.com/a/static/img.png"
    assert both_paths(base, "") == "http://example.com/a/static/"


# --- Absolute URLs (seeds, redirects): the rules one by one --------------------------------------

ABSOLUTE = vectors(
    # Scheme and host case; empty path.
    ("scheme-and-host-lowercased", "HTTP://Example.COM/", "http://example.com/"),
    (
        "path-and-query-keep-case",
        "http://a.com/Path/To?Query=Value",
        "http://a.com/Path/To?Query=Value",
    ),
    ("empty-path-becomes-slash", "http://a.com", "http://a.com/"),
    ("empty-path-with-query", "http://a.com?x=1", "http://a.com/?x=1"),
    ("https-kept", "https://a.com/x", "https://a.com/x"),
    # Ports.
    ("default-http-port-dropped", "http://a.com:80/x", "http://a.com/x"),
    ("default-https-port-dropped", "https://a.com:443/x", "https://a.com/x"),
    ("https-port-on-http-kept", "http://a.com:443/", "http://a.com:443/"),
    ("http-port-on-https-kept", "https://a.com:80/", "https://a.com:80/"),
    ("explicit-port-kept", "http://a.com:8080/", "http://a.com:8080/"),
    ("port-leading-zeros", "http://a.com:08080/", "http://a.com:8080/"),
    ("default-port-leading-zeros", "http://a.com:0080/", "http://a.com/"),
    ("empty-port", "http://a.com:/", "http://a.com/"),
    ("port-zero", "http://a.com:0/", "http://a.com:0/"),
    ("port-max", "http://a.com:65535/", "http://a.com:65535/"),
    ("port-too-big", "http://a.com:65536/", None),
    ("port-not-a-number", "http://a.com:8o/", None),
    ("port-negative", "http://a.com:-1/", None),
    ("port-with-space", "http://a.com: 80/", None),
    ("two-ports", "http://a.com:80:80/", None),
    # Userinfo: kept (it may select the resource), escaped; an empty password goes.
    ("userinfo-kept", "http://user:pw@a.com/", "http://user:pw@a.com/"),
    ("userinfo-case-kept", "http://User@A.com/", "http://User@a.com/"),
    ("empty-userinfo-dropped", "http://@a.com/", "http://a.com/"),
    ("empty-user-and-password-dropped", "http://:@a.com/", "http://a.com/"),
    ("empty-password-dropped", "http://user:@a.com/", "http://user@a.com/"),
    ("password-without-user-kept", "http://:pw@a.com/", "http://:pw@a.com/"),
    ("at-in-userinfo-escaped", "http://u@v@a.com/", "http://u%40v@a.com/"),
    ("space-in-userinfo-escaped", "http://u v@a.com/", "http://u%20v@a.com/"),
    ("userinfo-without-host", "http://user@/x", None),
    # IDN: punycode, after UTS 46 mapping (case, full-width forms, ideographic full stop).
    ("idn-japanese", "http://例え.jp/", "http://xn--r8jz45g.jp/"),
    ("idn-german", "http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("idn-uppercase", "http://BÜCHER.DE/", "http://xn--bcher-kva.de/"),
    ("idn-ideographic-full-stop", "http://例え。jp/", "http://xn--r8jz45g.jp/"),
    ("idn-fullwidth-ascii", "http://ＥＸＡＭＰＬＥ.com/", "http://example.com/"),
    ("idn-percent-encoded", "http://b%C3%BCcher.de/", "http://xn--bcher-kva.de/"),
    ("idn-already-punycode-uppercase", "http://XN--BCHER-KVA.de/", "http://xn--bcher-kva.de/"),
    ("idn-with-port", "http://bücher.de:8080/", "http://xn--bcher-kva.de:8080/"),
    # UTS 46 nontransitional processing, as the URL Standard and current browsers do.
    ("idn-sharp-s-nontransitional", "http://faß.de/", "http://xn--fa-hia.de/"),
    ("idn-symbol", "http://☃.net/", "http://xn--n3h.net/"),
    ("host-percent-encoded-ascii", "http://ex%41mple.com/", "http://example.com/"),
    ("host-underscore-allowed", "http://a_b.example.com/", "http://a_b.example.com/"),
    # WHATWG forbids only some ASCII in a domain: these pass (and then fail to resolve).
    ("host-brace-allowed", "http://a{b}.com/", "http://a{b}.com/"),
    ("host-quote-and-backtick-allowed", 'http://a"b`c.com/', 'http://a"b`c.com/'),
    # Hosts with characters no host may have.
    ("host-space", "http://exa mple.com/", None),
    ("host-less-than", "http://a<b.com/", None),
    ("host-greater-than", "http://a>b.com/", None),
    ("host-caret", "http://a^b.com/", None),
    ("host-pipe", "http://a|b.com/", None),
    ("host-nul", "http://a\x00b.com/", None),
    ("host-bracket", "http://a[b.com/", None),
    ("host-lone-percent", "http://a%.com/", None),
    ("host-bad-escape", "http://a%zz.com/", None),
    ("host-escaped-space", "http://a%20b.com/", None),
    ("host-escaped-slash", "http://a%2Fb.com/", None),
    ("host-escaped-non-utf8", "http://a%FF.com/", None),
    ("host-fullwidth-less-than", "http://a＜b.com/", None),
    ("host-idn-with-space", "http://ü ber.de/", None),
    ("host-idn-with-bad-escape", "http://ü%zz.de/", None),
    ("host-idn-with-undecodable-escape", "http://ü%FF.de/", None),
    ("host-missing", "http://", None),
    ("host-missing-with-path", "http:///", None),
    ("host-missing-scheme-only", "http:", None),
    # IPv6 literals: compressed, lowercase; no zone IDs (browsers reject them).
    ("ipv6-loopback", "http://[::1]/", "http://[::1]/"),
    ("ipv6-lowercased", "http://[2001:DB8::1]/", "http://[2001:db8::1]/"),
    ("ipv6-compressed", "http://[2001:db8:0:0:0:0:0:1]/", "http://[2001:db8::1]/"),
    ("ipv6-leading-zeros", "http://[2001:0db8::0001]/", "http://[2001:db8::1]/"),
    ("ipv6-default-port-dropped", "http://[::1]:80/", "http://[::1]/"),
    ("ipv6-port-kept", "http://[::1]:8080/x", "http://[::1]:8080/x"),
    ("ipv6-userinfo", "http://u@[::1]/", "http://u@[::1]/"),
    ("ipv6-unclosed", "http://[::1/", None),
    ("ipv6-junk-after-bracket", "http://[::1]x/", None),
    ("ipv6-invalid", "http://[g::1]/", None),
    ("ipv6-too-many-groups", "http://[1:2:3:4:5:6:7:8:9]/", None),
    ("ipv6-zone-id", "http://[fe80::1%25eth0]/", None),
    ("ipvfuture", "http://[v1.x]/", None),
    ("ipv4-kept", "http://127.0.0.1:8080/", "http://127.0.0.1:8080/"),
    # Fragments.
    ("fragment-dropped", "http://a.com/x#frag", "http://a.com/x"),
    ("fragment-after-query-dropped", "http://a.com/x?y#frag", "http://a.com/x?y"),
    ("fragment-with-hash-inside", "http://a.com/x#a#b", "http://a.com/x"),
    ("fragment-right-after-host", "http://a.com#frag", "http://a.com/"),
    # Empty query.
    ("empty-query-dropped", "http://a.com/x?", "http://a.com/x"),
    ("empty-query-and-fragment-dropped", "http://a.com/x?#f", "http://a.com/x"),
    ("question-mark-query-kept", "http://a.com/x??", "http://a.com/x??"),
    # Dot segments.
    ("dot-segments-resolved", "http://a.com/a/./b/../c", "http://a.com/a/c"),
    ("dot-dot-above-root", "http://a.com/../../x", "http://a.com/x"),
    ("trailing-dot-dot", "http://a.com/a/b/..", "http://a.com/a/"),
    ("trailing-dot", "http://a.com/a/.", "http://a.com/a/"),
    ("encoded-dot-segments", "http://a.com/a/%2e%2E/b", "http://a.com/b"),
    ("dot-dot-in-query-kept", "http://a.com/?p=../x", "http://a.com/?p=../x"),
    # Escapes as written, what browsers leave raw raw (see ESCAPES for their visit keys).
    ("escaped-percent-kept", "http://a.com/%25", "http://a.com/%25"),
    ("escaped-slash-in-path-kept", "http://a.com/a%2Fb", "http://a.com/a%2Fb"),
    (
        "escaped-reserved-in-query-kept",
        "http://a.com/?x=%2F%2B%26%3D",
        "http://a.com/?x=%2F%2B%26%3D",
    ),
    ("escaped-plus-in-path-kept", "http://a.com/a%2Bb", "http://a.com/a%2Bb"),
    ("escaped-ampersand-equals-in-path", "http://a.com/%26%3D", "http://a.com/%26%3D"),
    ("escaped-question-and-hash-kept", "http://a.com/%3F%23?%23", "http://a.com/%3F%23?%23"),
    ("escaped-space-kept", "http://a.com/a%20b", "http://a.com/a%20b"),
    ("raw-plus-in-query-kept", "http://a.com/?q=a+b", "http://a.com/?q=a+b"),
    ("raw-space-in-path", "http://a.com/a b", "http://a.com/a%20b"),
    ("raw-space-in-query-not-plus", "http://a.com/?q=a b", "http://a.com/?q=a%20b"),
    ("raw-slash-and-question-in-query", "http://a.com/?a=/b?c", "http://a.com/?a=/b?c"),
    ("sub-delims-kept", "http://a.com/!$&'()*+,;=:@", "http://a.com/!$&'()*+,;=:@"),
    ("non-ascii-path-utf8", "http://a.com/café", "http://a.com/caf%C3%A9"),
    (
        "non-ascii-query-utf8",
        "http://a.com/?q=ü&r=例え",
        "http://a.com/?q=%C3%BC&r=%E4%BE%8B%E3%81%88",
    ),
    ("control-escaped", "http://a.com/a\x01b", "http://a.com/a%01b"),
    # Query order is kept (visit_key sorts, canonicalize does not).
    ("query-order-kept", "http://a.com/?b=2&a=1", "http://a.com/?b=2&a=1"),
    # WHATWG leniencies in absolute URLs.
    ("backslashes-as-slashes", "http:\\\\a.com\\x\\y", "http://a.com/x/y"),
    ("mixed-slashes", "http:/\\a.com/x", "http://a.com/x"),
    ("no-slashes", "http:a.com/x", "http://a.com/x"),
    ("one-slash", "http:/a.com/x", "http://a.com/x"),
    ("three-slashes", "http:///a.com/x", "http://a.com/x"),
    ("surrounding-whitespace", " \t\nhttp://a.com/x \x00", "http://a.com/x"),
    ("tabs-and-newlines-inside", "h\ttt\np://a.\r\ncom/x\ty", "http://a.com/xy"),
    # Other schemes and malformed input.
    ("javascript", "javascript:alert(1)", None),
    ("mailto", "mailto:a@example.com", None),
    ("tel", "tel:+15550100", None),
    ("data", "data:text/plain,hi", None),
    ("ftp", "ftp://example.com/", None),
    ("file", "file:///etc/passwd", None),
    ("wss", "wss://example.com/", None),
    ("view-source", "view-source:http://example.com/", None),
    ("no-scheme", "example.com/path", None),
    ("protocol-relative-without-base", "//example.com/path", None),
    ("empty", "", None),
    ("whitespace", " \t\n", None),
    ("nbsp-before-scheme", "\xa0http://a.com/", None),
)


@pytest.mark.parametrize(("url", "expected"), ABSOLUTE)
def test_absolute_url(url, expected):
    assert canonicalize(url) == expected


_HTTP = re.compile(r"[\x00-\x20]*h\s*t\s*t\s*p(\s*s)?\s*:", re.IGNORECASE)


@pytest.mark.parametrize(("url", "expected"), [p for p in ABSOLUTE if _HTTP.match(p.values[0])])
def test_absolute_url_found_as_a_link_is_the_same(url, expected):
    """An http(s) URL means the same on any page whose scheme differs from its own.

    (On a page of the same scheme, "http:a.com/x" would be relative, as in browsers.)
    """
    https = _HTTP.match(url).group(1)
    base = "http://page.example/a/b" if https else "https://page.example/a/b"
    assert both_paths(base, url) == expected


# --- Escapes: fetched as a browser sends them, one visit key for all their spellings ------------

ESCAPES = [
    pytest.param(url, fetched, key, id=rule)
    for rule, url, fetched, key in (
        ("tilde-escape", "http://a.com/%7euser", "http://a.com/%7euser", "http://a.com/~user"),
        (
            "tilde-escape-upper",
            "http://a.com/%7Euser",
            "http://a.com/%7Euser",
            "http://a.com/~user",
        ),
        (
            "unreserved",
            "http://a.com/%41%62%30%2D%2E%5F",
            "http://a.com/%41%62%30%2D%2E%5F",
            "http://a.com/Ab0-._",
        ),
        (
            "unreserved-in-query",
            "http://a.com/?%61=%62",
            "http://a.com/?%61=%62",
            "http://a.com/?a=b",
        ),
        ("lowercase-hex-path", "http://a.com/%c3%a9", "http://a.com/%c3%a9", "http://a.com/%C3%A9"),
        (
            "lowercase-hex-query",
            "http://a.com/?q=%c3%a9",
            "http://a.com/?q=%c3%a9",
            "http://a.com/?q=%C3%A9",
        ),
        (
            "lowercase-escaped-slash",
            "http://a.com/a%2fb",
            "http://a.com/a%2fb",
            "http://a.com/a%2Fb",
        ),
        (
            "lowercase-reserved-in-query",
            "http://a.com/?x=%2f%2b%26%3d",
            "http://a.com/?x=%2f%2b%26%3d",
            "http://a.com/?x=%2F%2B%26%3D",
        ),
        ("bad-escape-path", "http://a.com/%zz", "http://a.com/%zz", "http://a.com/%25zz"),
        ("bad-escape-query", "http://a.com/?q=%zz", "http://a.com/?q=%zz", "http://a.com/?q=%25zz"),
        ("half-escape", "http://a.com/%4", "http://a.com/%4", "http://a.com/%254"),
        ("lone-percent", "http://a.com/%", "http://a.com/%", "http://a.com/%25"),
        (
            "escaped-dot-in-a-name",
            "http://a.com/%2e.txt",
            "http://a.com/%2e.txt",
            "http://a.com/..txt",
        ),
        # Browsers escape " < > ^ ` { } in a path, and leave | [ ] raw.
        (
            "ascii-in-path",
            'http://a.com/"<>^`{|}[]',
            "http://a.com/%22%3C%3E%5E%60%7B|%7D[]",
            "http://a.com/%22%3C%3E%5E%60%7B%7C%7D%5B%5D",
        ),
        # ... and escape ' (not ` { } | [ ] ^ \\) in an http(s) query.
        (
            "ascii-in-query",
            "http://a.com/?a=[]|^`{}\\'",
            "http://a.com/?a=[]|^`{}\\%27",
            "http://a.com/?a=%5B%5D%7C%5E%60%7B%7D%5C%27",
        ),
        ("quote-in-query", "http://a.com/?q='", "http://a.com/?q=%27", "http://a.com/?q=%27"),
        (
            "escaped-quote-in-query",
            "http://a.com/?q=%27",
            "http://a.com/?q=%27",
            "http://a.com/?q=%27",
        ),
        (
            "brackets-kept-in-path",
            "http://a.com/[x]:1",
            "http://a.com/[x]:1",
            "http://a.com/%5Bx%5D:1",
        ),
    )
]


@pytest.mark.parametrize(("url", "fetched", "key"), ESCAPES)
def test_escapes_are_fetched_as_written_and_meet_in_the_visit_key(url, fetched, key):
    assert canonicalize(url) == fetched
    assert both_paths("https://page.example/", url) == fetched
    assert visit_key(fetched) == key
    assert visit_key(key) == key


def test_a_lone_surrogate_is_encoded_as_the_replacement_character():
    # A browser's strings hold no lone surrogates: it sees U+FFFD, and sends EF BF BD.
    assert canonicalize("http://a.com/x\ud83dy?q=\udc00") == "http://a.com/x%EF%BF%BDy?q=%EF%BF%BD"
    # A pair that Python kept as two code units is still one character.
    assert canonicalize("http://a.com/\ud83d\ude00") == "http://a.com/%F0%9F%98%80"


# web-platform-tests' url/resources/percent-encoding.json, its query column: a link's query
# on a page in each encoding, as url/percent-encoding.window.js checks it in a browser.
PERCENT_ENCODING = [
    ("big5", "\u2020", "%26%238224%3B"),
    ("euc-kr", "\u2020", "%A2%D3"),
    ("windows-1252", "\u2020", "%86"),
    ("iso-2022-jp", "\x0eA", "%26%2365533%3BA"),  # SO, SI and ESC are errors
    ("iso-2022-jp", "\u203e\\", "%1B(J~%1B(B\\"),
    ("gb18030", "\ue5e5", "%26%2358853%3B"),
    ("shift_jis", "\u2212", "%81|"),
    ("iso-8859-2", "\xa2", "%26%23162%3B"),
]


@pytest.mark.parametrize(("label", "query", "expected"), PERCENT_ENCODING)
def test_a_query_is_encoded_as_web_platform_tests_percent_encoding_json_says(
    label, query, expected
):
    encoding = decoder_for(label)
    assert canonical_links([f"/p?{query}"], "http://h.com/", encoding) == [
        f"http://h.com/p?{expected}"
    ]
    assert canonicalize(f"?{query}", "http://h.com/p", encoding) == f"http://h.com/p?{expected}"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("http://:a:b@h.com/", "http://:a%3Ab@h.com/", id="colon-in-password"),
        pytest.param("http://u;v=w@h.com/", "http://u%3Bv%3Dw@h.com/", id="semicolon-and-equals"),
        pytest.param(
            "http://u[x]^|@h.com/", "http://u%5Bx%5D%5E%7C@h.com/", id="brackets-caret-pipe"
        ),
        pytest.param("http://u%3a:p%40@h.com/", "http://u%3a:p%40@h.com/", id="escapes-kept"),
        pytest.param(
            "http://u@v:w@x@h.com/", "http://u%40v:w%40x@h.com/", id="every-at-but-the-last"
        ),
    ],
)
def test_userinfo_is_escaped_with_the_userinfo_set(url, expected):
    # The user name ends at the first ":"; the password may hold more, escaped as %3A.
    assert canonicalize(url) == expected


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("XN--BCHER-KVA.DE", "xn--bcher-kva.de"),
        ("shop.xn--p1ai", "shop.xn--p1ai"),
        # An all-ASCII host is lowercased and kept whatever UTS 46 makes of its labels
        # (whatwg/url#914): browsers load these.
        ("xn--ls8h1.de", "xn--ls8h1.de"),  # no Punycode
        ("xn--.de", "xn--.de"),  # decodes to nothing
        ("XN--abc-.de", "xn--abc-.de"),  # decodes to plain "abc", which UTS 46 keeps as "abc"
        ("xn--mi7ccd.de", "xn--mi7ccd.de"),  # full-width "ａｂｃ", which UTS 46 maps to "abc"
        ("xn--a.de", "xn--a.de"),  # decodes to U+0080, a control
        ("xn--fa-hia.de", "xn--fa-hia.de"),  # faß: valid in nontransitional processing
        # A host with any non-ASCII character goes through UTS 46 whole, its "xn--" labels too.
        ("xn--a.bücher.de", None),
        ("xn--mi7ccd.bücher.de", None),
        ("xn--fa-hia.bücher.de", "xn--fa-hia.xn--bcher-kva.de"),
        # The forbidden domain code points still make any host invalid.
        ("xn--a%25.de", None),
        ("xn--a|b.de", None),
    ],
)
def test_punycode_labels_are_checked_only_in_hosts_that_are_not_all_ascii(host, expected):
    assert canonicalize(f"http://{host}/") == (f"http://{expected}/" if expected else None)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("127.0.0.01", "127.0.0.1"),
        ("1.2.3.4.", "1.2.3.4"),
        ("0x", "0.0.0.0"),
        ("1.2.3.256", None),
        ("1.2.3.4.5", None),
        ("1..2", None),
        ("09.1", None),
        ("a.1", None),
        ("0x-7f.1", None),  # int() would take the sign, and the address would be negative
        ("1_0.0.0.1", None),  # ... and the underscore
        ("+1.1", None),
        ("１２７.０.０.１", "127.0.0.1"),  # full-width digits map to ASCII first
    ],
)
def test_ipv4_hosts_are_read_as_browsers_read_them(host, expected):
    # WHATWG's IPv4 parser: a host ending in a number must be an address.
    result = canonicalize(f"http://{host}/")
    assert result == (f"http://{expected}/" if expected else None)
    assert canonicalize(f"http://{host}:8080/x", "http://a.com/") == (
        f"http://{expected}:8080/x" if expected else None
    )


# --- Many spellings of one URL give one visit key; different resources stay different -----------

SPELLINGS = {
    "http://example.com/": [
        "http://example.com/",
        "http://example.com",
        "HTTP://EXAMPLE.COM",
        "hTtP://ExAmPlE.cOm/",
        "http://example.com:80/",
        "http://example.com:/",
        "http://example.com:0080",
        "http://example.com/#top",
        "http://example.com?",
        "http://example.com/?#",
        "  http://example.com/\n",
        "ht\ttp://exam\nple.com/",
        "http://example.com/.",
        "http://example.com/./",
        "http://example.com/a/..",
        "http://example.com/a/%2E%2E/",
        "http://ex%61mple.com/",
        "http:\\\\example.com\\",
        "http:example.com",
        "http:///example.com/",
        "http://@example.com/",
    ],
    "https://example.com/~user/a%2Fb?q=a%20b%2B&x=%26": [
        "https://example.com/~user/a%2Fb?q=a%20b%2B&x=%26",
        "HTTPS://Example.com:443/~user/a%2fb?q=a b%2b&x=%26#frag",
        "https://example.com/%7euser/a%2Fb?q=a%20b%2B&x=%26",
        "https://example.com/%7Euser/./a%2Fb?q=a b%2B&x=%26",
        "https://example.com/x/../%7Euser/a%2Fb?q=a%20b%2B&x=%26",
    ],
    "http://xn--bcher-kva.de/b%C3%BCcher?s=%C3%BC": [
        "http://bücher.de/bücher?s=ü",
        "http://BÜCHER.DE/bücher?s=ü",
        "http://xn--bcher-kva.de/b%C3%BCcher?s=%C3%BC",
        "http://XN--BCHER-KVA.DE:80/b%c3%bccher?s=%c3%bc",
        "http://b%C3%BCcher.de/b%C3%BCcher?s=%C3%BC",
        "http://b%c3%bccher.de/bücher?s=%C3%bc",
    ],
    "http://xn--r8jz45g.jp/": [
        "http://例え.jp/",
        "http://例え。jp/",
        "http://例え.ＪＰ/",
        "http://xn--r8jz45g.jp/",
        "http://%E4%BE%8B%E3%81%88.jp/",
    ],
    "http://[2001:db8::1]:8080/": [
        "http://[2001:db8::1]:8080/",
        "http://[2001:DB8::1]:8080",
        "http://[2001:db8:0:0:0:0:0:1]:08080/",
        "http://[2001:0db8:0000::0001]:8080/#x",
    ],
    "http://a.com/b/c": [
        "http://a.com/b/c",
        "http://a.com/b/./c",
        "http://a.com/x/../b/c",
        "http://a.com/b/%2e/c",
        "http://a.com/x/%2E%2e/b/c",
        "http://a.com/b\\c",
        "http://a.com/../b/c",
    ],
}


@pytest.mark.parametrize("key", list(SPELLINGS))
def test_many_spellings_give_one_visit_key(key):
    assert {spelling: visit_key(canonicalize(spelling)) for spelling in SPELLINGS[key]} == {
        spelling: key for spelling in SPELLINGS[key]
    }


def test_ipv4_mapped_ipv6_spellings_give_one_string():
    # The exact form depends on the Python version's ipaddress; that it is one form does not.
    spellings = ["[::ffff:192.0.2.1]", "[::FFFF:C000:201]", "[0:0:0:0:0:ffff:c000:0201]"]
    assert len({canonicalize(f"http://{host}/") for host in spellings} - {None}) == 1


DIFFERENT = [
    ("space-vs-plus", "http://a.com/?q=a%20b", "http://a.com/?q=a+b"),
    ("plus-vs-escaped-plus", "http://a.com/?q=a+b", "http://a.com/?q=a%2Bb"),
    ("ampersand-vs-escaped", "http://a.com/?q=a&b", "http://a.com/?q=a%26b"),
    ("equals-vs-escaped", "http://a.com/?q=a=b", "http://a.com/?q=a%3Db"),
    ("slash-vs-escaped-in-path", "http://a.com/a/b", "http://a.com/a%2Fb"),
    ("slash-vs-escaped-in-query", "http://a.com/?p=a/b", "http://a.com/?p=a%2Fb"),
    ("path-case", "http://a.com/Page", "http://a.com/page"),
    ("query-case", "http://a.com/?Q=1", "http://a.com/?q=1"),
    ("query-order", "http://a.com/?a=1&b=2", "http://a.com/?b=2&a=1"),
    ("http-vs-https", "http://a.com/", "https://a.com/"),
    ("port", "http://a.com/", "http://a.com:8080/"),
    ("trailing-slash", "http://a.com/a", "http://a.com/a/"),
    ("userinfo", "http://a.com/", "http://u@a.com/"),
]


@pytest.mark.parametrize(("one", "other"), [pytest.param(a, b, id=i) for i, a, b in DIFFERENT])
def test_different_resources_stay_different(one, other):
    assert canonicalize(one) == one
    assert canonicalize(other) == other


# --- Properties ---------------------------------------------------------------------------------

# fmt: off
URLISH_PIECES = [
    *"aZ09-._~!$&'()*+,;=:@/?#%\\ []|^\"<>{}`\t\n\x00\x7féü例😀",
    "%2e", "%2E", "%2F", "%2f", "%41", "%7e", "%zz", "%c3%a9", "%C3", "%25", "%20",
    "..", "./", "../", "/..", "//", "\\\\", "http:", "HTTPS:", "http://", "https://",
    "mailto:", "javascript:", "example.com", "Bücher.de", "[::1]",
    ":80", ":443", ":8080", ":0", ":99999", "u:p@",
]
# fmt: on
URLISH = st.lists(st.sampled_from(URLISH_PIECES), max_size=12).map("".join)

BASES = [
    RFC_BASE,
    "http://example.com/",
    "https://example.com/dir/page.html?x=1",
    "http://example.com:8080/a/b/",
    "https://user:pw@example.com/a?b=c",
    "http://[::1]/a/b",
    "http://xn--bcher-kva.de/%C3%BC/x",
]
OTHER_BASES = ["https://elsewhere.example/p/q?r", "http://elsewhere.example:81/"]
_WHITESPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def assert_canonical(url: str) -> None:
    """`url` is a canonical absolute http(s) URL: canonicalize() leaves it alone anywhere."""
    assert url.isascii()
    assert url.startswith(("http://", "https://"))
    assert "#" not in url
    assert not _WHITESPACE_OR_CONTROL.search(url)
    assert canonicalize(url) == url
    for base in OTHER_BASES:
        assert canonicalize(url, base) == url


@settings(max_examples=1500, deadline=None)
@given(base=st.sampled_from(BASES), href=URLISH)
def test_any_link_gives_a_canonical_url_or_none(base, href):
    url = both_paths(base, href)
    if url is not None:
        assert_canonical(url)


@settings(max_examples=300, deadline=None)
@given(base=st.sampled_from(BASES), href=st.text())
def test_any_text_as_a_link_gives_a_canonical_url_or_none(base, href):
    url = both_paths(base, href)
    if url is not None:
        assert_canonical(url)


@settings(max_examples=500, deadline=None)
@given(
    prefix=st.sampled_from(["", "http://", "HTTPS://", "http:", "http:\\\\", " http://a.b/"]),
    text=st.text(),
)
def test_canonicalize_is_idempotent_on_random_text(prefix, text):
    url = canonicalize(prefix + text)
    if url is not None:
        assert_canonical(url)


VALID_HOSTS = [
    "example.com",
    "EXAMPLE.com",
    "a-b.c_d.example",
    "例え.jp",
    "Bücher.DE",
    "xn--bcher-kva.de",
    "b%C3%BCcher.de",
    "ex%41mple.com",
    "[::1]",
    "[2001:DB8::1]",
    "127.0.0.1",
]
ANY_HOST = st.text(st.sampled_from("aZ0-._~%!$&*+:[]@ü例 <\x00"), max_size=8)
COMPONENT = st.text(st.sampled_from("aZ09-._~!$&'()*+,;=:@/?%\\ #[]éü例\t"), max_size=12)


@settings(max_examples=1000, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "hTtPs"]),
    userinfo=st.sampled_from(["", "user@", "u:p@", ":@", "u:@", "@", "a b:c%41@"]),
    host=st.sampled_from(VALID_HOSTS),
    port=st.one_of(
        st.just(""),
        st.integers(0, 65535).map(lambda p: f":{p}"),
        st.integers(0, 65535).map(lambda p: f":000{p}"),
    ),
    path=COMPONENT,
    query=st.one_of(st.just(""), COMPONENT.map(lambda q: "?" + q)),
    fragment=st.one_of(st.just(""), COMPONENT.map(lambda f: "#" + f)),
)
def test_canonicalize_is_idempotent_on_urls_from_parts(
    scheme, userinfo, host, port, path, query, fragment
):
    url = canonicalize(f"{scheme}://{userinfo}{host}{port}/{path}{query}{fragment}")
    assert url is not None
    assert_canonical(url)


@settings(max_examples=1000, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https"]),
    host=st.one_of(st.sampled_from(VALID_HOSTS), ANY_HOST),
    port=st.sampled_from(["", ":", ":80", ":443", ":8080", ":65536", ":x", ": 1"]),
    rest=COMPONENT,
)
def test_canonicalize_is_idempotent_on_any_authority(scheme, host, port, rest):
    url = canonicalize(f"{scheme}://{host}{port}/{rest}")
    if url is not None:
        assert_canonical(url)


def rfc3986_resolve(base: str, reference: str) -> str:
    """RFC 3986 section 5.2.2 to 5.2.4, literally, for a reference with no scheme or authority."""
    scheme, _, rest = base.partition("://")
    authority, _, rest = rest.partition("/")
    base_path, question, base_query = ("/" + rest).partition("?")
    path, question_mark, query = reference.partition("#")[0].partition("?")
    if not question_mark:
        query = None
    if not path:
        path = base_path
        if query is None:
            query = base_query if question else None
    elif path.startswith("/"):
        path = rfc3986_remove_dot_segments(path)
    else:
        path = rfc3986_remove_dot_segments(base_path[: base_path.rfind("/") + 1] + path)
    return f"{scheme}://{authority}{path}" + (f"?{query}" if query else "")


def rfc3986_remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, with its input and output buffers."""
    output: list[str] = []
    while path:
        if path.startswith("../"):  # A
            path = path[3:]
        elif path.startswith(("./", "/./")):  # A, B
            path = path[2:]
        elif path == "/.":  # B
            path = "/"
        elif path.startswith("/../") or path == "/..":  # C
            path = "/" + path[4:]
            if output:
                output.pop()
        elif path in (".", ".."):  # D
            path = ""
        else:  # E
            end = path.find("/", 1)
            end = len(path) if end == -1 else end
            output.append(path[:end])
            path = path[end:]
    return "".join(output)


def test_the_rfc3986_reference_resolver_passes_the_rfc_examples():
    for param in RFC_NORMAL + RFC_ABNORMAL:
        href, expected = param.values
        if expected is not None and ":" not in href and not href.startswith("//"):
            assert rfc3986_resolve(RFC_BASE, href) == expected, href


# Characters that need no escaping, so only resolution and dot segments are at stake
# (not "'", which browsers escape in a query).
PLAIN_REFERENCE = st.lists(
    st.sampled_from(
        [*"aZ09-_~!$&()*+,;=@", "/", ".", "..", "./", "../", "/.", "/..", "?", "#", ":", "g:h"]
    ),
    max_size=10,
).map("".join)


@settings(max_examples=1500, deadline=None)
@given(base=st.sampled_from(BASES[:6]), href=PLAIN_REFERENCE)
def test_plain_links_resolve_as_rfc3986_says(base, href):
    path = href.partition("#")[0].partition("?")[0]
    assume(":" not in path.partition("/")[0])  # that would be a scheme
    assume(not href.startswith("//"))  # that would be an authority
    assert link_resolver(base).canonical(href) == rfc3986_resolve(base, href)


# --- The visited-set key ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "key"),
    [
        pytest.param("http://a.com/?b=2&a=1", "http://a.com/?a=1&b=2", id="sorted-by-name"),
        pytest.param(
            "http://a.com/?b=1&a=2&b=0&a=1",
            "http://a.com/?a=2&a=1&b=1&b=0",
            id="same-name-order-kept",
        ),
        # Sorted by name only, as Crawlee does; Scrapy would also sort a=2 after a=1.
        pytest.param("http://a.com/?a=2&a=1", "http://a.com/?a=2&a=1", id="values-not-sorted"),
        pytest.param("http://a.com/?b&a&c=", "http://a.com/?a&b&c=", id="names-without-values"),
        pytest.param("http://a.com/?b=1&B=2", "http://a.com/?B=2&b=1", id="names-case-sensitive"),
        pytest.param(
            "http://a.com/?b=x%26a%3D1&a=2",
            "http://a.com/?a=2&b=x%26a%3D1",
            id="escaped-ampersand-is-no-separator",
        ),
        pytest.param("http://a.com/x", "http://a.com/x", id="no-query"),
        pytest.param("http://a.com/x?z=1", "http://a.com/x?z=1", id="one-parameter"),
        pytest.param("http://a.com/?a=1&b=2", "http://a.com/?a=1&b=2", id="already-sorted"),
        pytest.param(
            "http://a.com/b?a=1&b=2/c?d=1&c=0", "http://a.com/b?a=1&b=2/c?d=1&c=0", id="path-kept"
        ),
    ],
)
def test_visit_key(url, key):
    assert visit_key(url) == key
    assert visit_key(key) == key


def test_visit_key_unites_links_that_differ_only_in_parameter_order():
    links = canonical_links(["?a=1&b=2", "?b=2&a=1", "?b=2&a=1#x"], "http://a.com/p")
    assert links == ["http://a.com/p?a=1&b=2", "http://a.com/p?b=2&a=1"]  # as first seen
    assert {visit_key(url) for url in links} == {"http://a.com/p?a=1&b=2"}


PARAMETERS = st.lists(
    st.tuples(st.sampled_from(["a", "b", "B", "c", "", "a%26"]), st.sampled_from(["", "=", "=1"])),
    max_size=8,
)


@settings(max_examples=500, deadline=None)
@given(parameters=PARAMETERS, data=st.data())
def test_visit_key_ignores_the_order_of_differently_named_parameters(parameters, data):
    shuffled = data.draw(st.permutations(parameters))
    # Put same-name parameters back in their original order: only that order is meaningful.
    by_name: dict[str, list[str]] = {}
    for name, value in parameters:
        by_name.setdefault(name, []).append(value)
    shuffled = [(name, by_name[name].pop(0)) for name, _ in shuffled]

    def url(params: list[tuple[str, str]]) -> str:
        return "http://a.com/p" + ("?" + "&".join(n + v for n, v in params) if params else "")

    key = visit_key(url(parameters))
    assert visit_key(url(shuffled)) == key
    assert visit_key(key) == key
    query = url(parameters).partition("?")[2]
    assert sorted(key.partition("?")[2].split("&")) == sorted(query.split("&"))  # nothing lost


# --- Scope --------------------------------------------------------------------------------------


def test_by_default_only_the_seeds_hosts_are_in_scope():
    scope = Scope(["http://example.com/start", "https://docs.example.org/"])
    assert scope.allows("http://example.com/other")
    assert scope.allows("https://example.com/other")  # http and https of one site: one host
    assert scope.allows("http://docs.example.org/x")
    assert scope.allows("http://user@example.com/x")  # userinfo is not part of the host
    assert not scope.allows("http://www.example.com/")
    assert not scope.allows("http://example.org/")
    assert not scope.allows("http://other.net/")


def test_another_port_is_another_host():
    scope = Scope(["http://127.0.0.1:8001/"])
    assert scope.allows("http://127.0.0.1:8001/a")
    assert not scope.allows("http://127.0.0.1:8002/a")
    assert not scope.allows("http://127.0.0.1/a")
    assert not Scope(["http://example.com/"]).allows("http://example.com:8080/")


def test_an_ipv6_seed_host():
    scope = Scope(["http://[::1]:8080/"])
    assert scope.allows("http://[::1]:8080/x")
    assert not scope.allows("http://[::1]/x")
    assert not scope.allows("http://[::2]:8080/x")


def test_allow_host_without_a_port_allows_that_name_on_any_port():
    scope = Scope(["http://seed.com/"], allow_hosts=["other.com", "[::1]"])
    assert scope.allows("http://other.com/")
    assert scope.allows("https://other.com/")
    assert scope.allows("http://other.com:8080/")
    assert scope.allows("http://[::1]:81/")
    assert not scope.allows("http://www.other.com/")
    assert not scope.allows("http://notother.com/")


def test_allow_host_with_a_port_allows_only_that_port():
    scope = Scope(["http://seed.com/"], allow_hosts=["other.com:8080", "[::1]:81"])
    assert scope.allows("http://other.com:8080/")
    assert scope.allows("https://other.com:8080/")
    assert not scope.allows("http://other.com/")
    assert not scope.allows("http://other.com:8081/")
    assert scope.allows("http://[::1]:81/")
    assert not scope.allows("http://[::1]/")


@pytest.mark.parametrize("pattern", ["other.com:80", "other.com:443", "OTHER.com:0443"])
def test_allow_host_with_a_default_port_means_the_host_without_a_port(pattern):
    scope = Scope(["http://seed.com/"], allow_hosts=[pattern])
    assert scope.allows("http://other.com/")
    assert scope.allows("https://other.com/")
    assert not scope.allows("http://other.com:8080/")


def test_allow_host_wildcard_allows_subdomains_but_not_the_apex():
    scope = Scope(["http://seed.com/"], allow_hosts=["*.example.org"])
    assert scope.allows("http://www.example.org/")
    assert scope.allows("https://a.b.example.org/")
    assert scope.allows("http://www.example.org:8080/")
    assert not scope.allows("http://example.org/")  # the apex needs its own --allow-host
    assert not scope.allows("http://badexample.org/")
    assert not scope.allows("http://example.org.evil.com/")
    both = Scope(["http://seed.com/"], allow_hosts=["*.example.org", "example.org"])
    assert both.allows("http://example.org/")


def test_allow_host_patterns_are_canonicalized_like_urls():
    scope = Scope(["http://seed.com/"], allow_hosts=["EXAMPLE.net", "bücher.de", "*.例え.jp"])
    assert scope.allows("http://example.net/")
    assert scope.allows("http://xn--bcher-kva.de/")
    assert scope.allows(canonicalize("http://Bücher.de/x"))
    assert scope.allows("http://www.xn--r8jz45g.jp/")
    assert not scope.allows("http://xn--r8jz45g.jp/")


def test_any_host_lifts_the_host_rule_only():
    scope = Scope(["http://seed.com/"], any_host=True, exclude=[r"/private/"])
    assert scope.allows("http://anything.net:1234/")
    assert scope.allows("https://[2001:db8::1]/")
    assert not scope.allows("http://anything.net/private/x")


def test_include_and_exclude_search_the_canonical_url():
    scope = Scope(["http://a.com/"], include=[r"/docs/", r"[?&]page="], exclude=[r"\.pdf$"])
    assert scope.allows("http://a.com/docs/intro")
    assert scope.allows("http://a.com/blog?page=2")  # any include pattern will do
    assert not scope.allows("http://a.com/blog/")
    assert not scope.allows("http://a.com/docs/manual.pdf")  # exclude wins over include
    assert not scope.allows("http://other.com/docs/")  # and the host rule still applies
    escaped = Scope(["http://a.com/"], include=[r"caf%C3%A9"])
    assert escaped.allows(canonicalize("http://a.com/café"))


def test_urls_longer_than_max_url_length_are_traps():
    rules = TrapRules(0, 0, False, max_url_length=30)
    assert rules.trap("http://a.com/" + "x" * 17) is None  # 30 characters
    assert rules.trap("http://a.com/" + "x" * 18) == URL_TOO_LONG  # 31
    assert not TrapRules(0, 0, False).enabled


# --- canonical_links, host_of, origin_of --------------------------------------------------------


def test_canonical_links_keep_page_order_drop_duplicates_and_uncrawlable():
    hrefs = [
        "b",
        "a",
        "b#section",
        "javascript:void(0)",
        "mailto:x@example.com",
        "",
        "HTTP://A.COM/dir/b",
        "http://[",
        "a?",
        "#top",
        "tel:123",
        "https://other.org",
    ]
    assert canonical_links(hrefs, "http://a.com/dir/page") == [
        "http://a.com/dir/b",
        "http://a.com/dir/a",
        "http://a.com/dir/page",
        "https://other.org/",
    ]


def test_canonical_links_take_any_iterable():
    # The base is a fetched URL, canonical already; canonicalize() takes any base.
    assert canonical_links(iter(["x", "y"]), "http://a.com/") == [
        "http://a.com/x",
        "http://a.com/y",
    ]
    assert canonical_links([], "http://a.com/") == []


def test_host_and_origin_of_a_canonical_url():
    assert host_of("http://u:p@a.com:8080/x?y") == "a.com:8080"
    assert host_of("https://a.com/") == "a.com"
    assert host_of("http://[::1]:81/") == "[::1]:81"
    assert origin_of("http://u:p@a.com:8080/x?y") == "http://a.com:8080"
    assert origin_of("https://[::1]/x") == "https://[::1]"
