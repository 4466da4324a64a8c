"""Hosts are made ASCII as WHATWG URL's domain parser ("domain to ASCII") says, on every path a
host takes.

A host with non-ASCII code points goes through UTS 46 nontransitional, with CheckBidi and
CheckJoiners, without CheckHyphens and without the DNS length check; never IDNA2003, which sends
"faß.de" to "fass.de". An all-ASCII host is lowercased and kept, "xn--" labels and all, unless it
holds a forbidden domain code point (whatwg/url#914). The conformance cases are web-platform-tests'
IdnaTestV2.json, toascii.json and urltestdata.json (tests/data/SOURCES.md), used as WPT uses
them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crawler.config import ConfigError, load_settings, read_seeds
from crawler.urls import Scope, canonical_links, canonicalize
from tests.conftest import Site, crawl

DATA = Path(__file__).parent / "data"


def _cases(name: str) -> list[dict]:
    """The test cases of one of WPT's JSON files; its strings are comments."""
    return [case for case in json.loads((DATA / name).read_text("utf-8")) if isinstance(case, dict)]


def _expected_host_url(host: str | None) -> str | None:
    return None if host is None else f"https://{host}/x"


# As url/IdnaTestV2.window.js runs them: new URL("https://" + input + "/x") has host `output`,
# or throws where `output` is null. It skips the empty input, which no URL can hold.
IDNA_CASES = [case for case in _cases("IdnaTestV2.json") if case["input"]]


@pytest.mark.parametrize("case", IDNA_CASES, ids=lambda case: ascii(case["input"])[1:-1])
def test_idna_conformance_as_web_platform_tests_run_it(case):
    assert canonicalize(f"https://{case['input']}/x") == _expected_host_url(case["output"])


# As url/toascii.window.js runs them through new URL(): a missing `output` is the input itself.
TOASCII_CASES = _cases("toascii.json")


@pytest.mark.parametrize("case", TOASCII_CASES, ids=lambda case: ascii(case["input"])[1:-1])
def test_toascii_cases_as_web_platform_tests_run_them(case):
    host = case.get("output", case["input"])
    assert canonicalize(f"https://{case['input']}/x") == _expected_host_url(host)


_SCHEME = re.compile(r"[\x00-\x20]*([A-Za-z][A-Za-z0-9+.\-]*):")


def _is_http(case: dict) -> bool:
    """Whether WPT's case is about an http(s) URL: what it parses to, or, for a failure, what
    its input or its base names."""
    if not case.get("failure"):
        return case["protocol"] in ("http:", "https:")
    scheme = _SCHEME.match(case["input"])
    named = scheme.group(1) if scheme else (case["base"] or "").partition(":")[0]
    return named.lower() in ("http", "https")


def _our_href(case: dict) -> str | None:
    """WPT's href as we give it: without the fragment (never requested), and without an
    empty query, the one difference README.md states."""
    if case.get("failure"):
        return None
    href = case["href"].partition("#")[0]  # a "#" anywhere else is escaped
    return href.removesuffix("?") if case["search"] == "" else href


URL_CASES = [case for case in _cases("urltestdata.json") if _is_http(case)]


@pytest.mark.parametrize(
    "case", URL_CASES, ids=lambda case: ascii(f"{case['input']} {case['base']}")[1:-1]
)
def test_urltestdata_http_cases_give_web_platform_tests_href(case):
    assert canonicalize(case["input"], case["base"]) == _our_href(case)


def test_the_conformance_files_are_all_read():
    assert (len(IDNA_CASES), len(TOASCII_CASES), len(URL_CASES)) == (2670, 87, 445)


# Most of these came out wrong before: another host, or a valid host refused, or an invalid
# one accepted, because a failed UTS 46 conversion fell back to IDNA2003.
HOSTS = [  # (what it shows, host, WHATWG's ASCII host or None)
    ("sharp-s-is-kept-nontransitional", "faß.de", "xn--fa-hia.de"),
    ("hyphens-3-4-allowed-sharp-s-kept", "ab--c.faß.de", "ab--c.xn--fa-hia.de"),
    ("hyphens-3-4-in-a-unicode-label", "ab--cß.de", "xn--ab--c-pqa.de"),
    ("hyphens-3-4-in-an-ascii-label", "ab--c.example", "ab--c.example"),
    ("zero-width-space-mapped-away", "GOO\u200bgoo.com", "googoo.com"),
    ("soft-hyphen-mapped-away", "fa\u00adß.de", "xn--fa-hia.de"),
    (
        "joiner-allowed-after-a-virama",
        "www.\u0dc1\u0dca\u200d\u0dbb\u0dd3.com",
        "www.xn--10cl1a0b660p.com",
    ),
    ("ideographic-full-stop-alone", "\u3002", "."),
    ("bidi-label-with-both-kinds-of-digits", "\u05d0\u06611\u05d0.com", None),
    ("bidi-label-beside-a-hyphen-label", "ab--c.\u05d0\u06611\u05d0.com", None),
    ("forbidden-code-point-not-mapped-to-a1.com", "a\u2488com", None),
    ("joiner-without-context", "a\u200db.com", None),
    ("nul-in-a-unicode-host", "\u00fc\x00.de", None),
    ("lone-surrogate", "\u00fc\ud800.de", None),
]


@pytest.mark.parametrize(("host", "ascii_host"), [pytest.param(h, a, id=i) for i, h, a in HOSTS])
def test_hosts_follow_whatwg_domain_to_ascii(host, ascii_host):
    expected = None if ascii_host is None else f"http://{ascii_host}/p"
    assert canonicalize(f"http://{host}/p") == expected
    assert canonicalize(f"//{host}/p", "http://example.com/") == expected
    assert canonical_links([f"http://{host}/p"], "http://example.com/") == (
        [expected] if expected else []
    )


def test_a_seeds_file_reads_hosts_as_whatwg_does(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://ab--c.faß.de/\nhttp://GOO\u200bgoo.com/\nhttp://a\u2488com/\n")

    assert read_seeds(str(seeds), 2083) == ["http://ab--c.xn--fa-hia.de/", "http://googoo.com/"]


def test_allow_host_matches_the_whatwg_ascii_host():
    scope = Scope(["http://127.0.0.1/"], allow_hosts=["ab--c.faß.de", "*.GOO\u200bgoo.com"])

    assert scope.allows("http://ab--c.xn--fa-hia.de/x")
    assert not scope.allows("http://ab--c.fass.de/x")
    assert scope.allows("http://www.googoo.com/x")


@pytest.mark.parametrize("pattern", ["a\u2488com", "*.\u05d0\u06611\u05d0.com", "a\u200db.com"])
def test_an_allow_host_that_is_no_valid_host_is_refused(pattern):
    with pytest.raises(ConfigError, match="--allow-host has an invalid host"):
        load_settings(["seeds.txt", "--allow-host", pattern])


async def test_links_and_redirects_on_a_crawl_keep_the_whatwg_host(site: Site, tmp_path):
    site.page("/", "home", ["http://ab--c.faß.de/a", "//GOO\u200bgoo.com/b", "http://a\u2488com/"])
    site.redirect("/moved", "http://ab--c.faß.de/new", 301)

    records = await crawl(tmp_path, [site.url + "/", site.url + "/moved"])

    home, moved = sorted(records, key=lambda record: record["url"])
    assert home["links"] == ["http://ab--c.xn--fa-hia.de/a", "http://googoo.com/b"]
    assert (moved["status"], moved["final_url"]) == (301, "http://ab--c.xn--fa-hia.de/new")
    assert site.paths() == {"/": 1, "/moved": 1}
