"""Canonical URLs, visited-set keys and the crawl's scope.

`canonicalize()` gives the URL a browser would request for a link: WHATWG URL's href,
without the fragment and without an empty query ("?" alone, which our HTTP client does
not send either):

- whitespace: leading and trailing C0 controls and spaces are stripped, tabs and
  newlines removed; backslashes in the path act as slashes;
- scheme and host lowercased, IDN hosts in punycode, default ports dropped, an empty
  path becomes "/", dot segments ("..", ".%2e", ...) resolved;
- characters are percent-encoded as browsers encode them (WHATWG's path, query and
  userinfo percent-encode sets; non-ASCII as UTF-8, but in the query of a link on a
  page in a legacy encoding, in that encoding), and existing escapes are left
  exactly as written: "%7e", "%7E" and "~" are three requests to a server, as they are
  from a browser, and a signed URL stays signed.

`visit_key()` is where spellings meet, for the visited set only: it puts the path and
query in RFC 3986 normal form (escapes of unreserved characters decoded, the hex of other
escapes uppercased, what RFC 3986 does not allow escaped) and sorts query parameters by
name, so "/%7Euser", "/~user" and "/%7euser" are fetched once, and so are links that
differ only in parameter order. The URL fetched is the first spelling met.

Hosts are made ASCII as WHATWG URL's domain parser ("domain to ASCII") says: an ASCII
host is only lowercased, its "xn--" labels kept whatever UTS 46 makes of them, as browsers
load them (whatwg/url#914); any other goes through UTS 46 (nontransitional, CheckBidi,
CheckJoiners, no CheckHyphens, no DNS length check), done by ada, the WHATWG URL parser
Node.js uses.
Nothing falls back to IDNA2003, which maps "faß.de" to another host. The rest is RFC 3986
section 5 done directly, with the WHATWG leniencies browsers have.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Sequence
from urllib.parse import unquote

from crawler.charset import encode_as_browsers

_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
DEFAULT_PORTS = {"http": "80", "https": "443"}  # the schemes a crawl follows

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


def _percent_encode_set(also: str) -> re.Pattern[str]:
    """A run of the C0 control percent-encode set (controls, and all past "~") and `also`,
    as a class of what is *not* in it: the class spelled out to U+10FFFF took 3 ms each
    to compile, a third of the crawler's own import time."""
    kept = "".join(c for c in map(chr, range(0x20, 0x7F)) if c not in also)
    return re.compile(f"[^{re.escape(kept)}]+")


def _ascii_matching(character: re.Pattern[str]) -> bytes:
    """The ASCII characters that `character` matches, as bytes (for bytes.translate)."""
    return bytes(b for b in range(128) if character.fullmatch(chr(b)))


# WHATWG URL's percent-encode sets for http(s) URLs: what a browser escapes (a run at a
# time). A "%" is never touched, whatever follows it.
_PATH_ESCAPED = _percent_encode_set(' "#<>?^`{}')
_QUERY_ESCAPED = _percent_encode_set(" \"#<>'")
_USERINFO_ESCAPED = _percent_encode_set(' "#<>?`{}/:;=@[\\]^|')
# Characters RFC 3986 allows as they are: unreserved, sub-delims, ":" and "@" ...
_PCHAR = r"A-Za-z0-9\-._~!$&'()*+,;=:@"
# ... plus "/" in a path, and "/" and "?" in a query. visit_key() escapes anything else.
_PATH_CHARS = _PCHAR + "/"
_QUERY_CHARS = _PCHAR + "/?"
_NOT_RFC3986 = {
    chars: re.compile(rf"%([0-9A-Fa-f]{{2}})|[^{chars}]") for chars in (_PATH_CHARS, _QUERY_CHARS)
}
# A URL made only of these characters is in RFC 3986 normal form already.
_RFC3986_NORMAL = re.compile(rf"[{_QUERY_CHARS}]*")
# The same characters as bytes, and the newline that joins a page's links: deleting
# them from the joined links leaves nothing if all are normal.
_RFC3986_NORMAL_BYTES = _ascii_matching(_RFC3986_NORMAL) + b"\n"
# A reference made only of these characters means the same to WHATWG and RFC 3986, and
# needs no escaping work at all ("'" is escaped in a query, "%" may start a dot segment).
_PLAIN_REFERENCE = re.compile(r"[A-Za-z0-9\-._~!$&()*+,;=:@/?]*")
# The same characters as bytes, with "#" (a fragment, dropped) and the newline that
# joins a page's hrefs: deleting them from the joined hrefs leaves nothing if all are plain.
_PLAIN_OR_FRAGMENT_BYTES = _ascii_matching(_PLAIN_REFERENCE) + b"#\n"
_DOT_SEGMENT = re.compile(r"(?:^|/)\.\.?(?:/|$)")
_DOT_OR_ESCAPED_DOT_SEGMENT = re.compile(r"(?:^|/)(?:\.|%2e){1,2}(?:/|$)", re.IGNORECASE)
_SINGLE_DOTS = frozenset((".", "%2e"))
_DOUBLE_DOTS = frozenset(("..", ".%2e", "%2e.", "%2e%2e"))
_PLAIN_ABSOLUTE = re.compile(r"(https?)://([a-z0-9\-.:]+)([/?].*)?")
# What WHATWG allows in a domain: no forbidden domain code point, and lowercase.
_DOMAIN = re.compile(r"[a-z0-9\-._~!$&'()*+,;=\"`{}]+")
_PORT = re.compile(r"[0-9]*")
_RADIX_DIGITS = {
    8: frozenset("01234567"),
    10: frozenset("0123456789"),
    16: frozenset("0123456789abcdef"),
}
_TWO_SLASHES = ("//", "\\\\", "/\\", "\\/")  # browsers take a backslash for a slash


def _escape(text: str, escaped: re.Pattern[str]) -> str:
    """Percent-encode, as UTF-8, the runs of characters that `escaped` matches."""
    if escaped.search(text) is None:
        return text
    return escaped.sub(_percent_encode, text)


def _percent_encode(match: re.Match[str]) -> str:
    run = match.group(0)
    try:
        # A header's bytes that are not UTF-8 (aiohttp reads them with surrogateescape, as
        # U+DC80 to U+DCFF) are sent as they came, as browsers send a Location's: on a GBK
        # site, a redirect to /\xcb\xd1 is a request for /%CB%D1.
        raw = run.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # another lone surrogate is U+FFFD to a browser (a USVString)
        raw = run.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    return "".join(f"%{byte:02X}" for byte in raw)


# The encodings whose query is UTF-8: WHATWG URL's "get an output encoding".
_UTF8_QUERY = frozenset(["utf-8", "utf-16-le", "utf-16-be"])
_NON_ASCII = re.compile("[^\x00-\x7f]+")
# ISO-2022-JP's encoder has no bytes for SO, SI and ESC either, which would switch a
# decoder's state: each is an error, written as U+FFFD's character reference.
_ISO_2022_JP = "iso2022-jp"
_ISO_2022_JP_SHIFTS = frozenset("\x0e\x0f\x1b")
_NOT_ISO_2022_JP_ASCII = re.compile("[^\x00-\x0d\x10-\x1a\x1c-\x7f]+")
# A query byte a browser leaves as it is: ASCII, not a control, nor in the special-query
# percent-encode set. Any other is escaped.
_QUERY_BYTES_KEPT = frozenset(b for b in range(0x21, 0x7F) if chr(b) not in "\"#<>'")


def _query_in(reference: str, encoding: str) -> str:
    """`reference` with the non-ASCII characters of its query percent-encoded in the
    page's `encoding`, as a browser encodes a link's query (HTML's "encoding-parse a
    URL"; the path is UTF-8 whatever the page's encoding). Any other character is left
    for canonicalization."""
    if encoding in _UTF8_QUERY:
        return reference
    if encoding == _ISO_2022_JP:
        encoded = _NOT_ISO_2022_JP_ASCII
    elif reference.isascii():
        return reference
    else:
        encoded = _NON_ASCII
    head, question, query = reference.partition("#")[0].partition("?")
    if not question or encoded.search(query) is None:
        return reference
    return f"{head}?{encoded.sub(lambda run: _escaped_in(run.group(0), encoding), query)}"


def _escaped_in(run: str, encoding: str) -> str:
    """A run of non-ASCII characters of a query, in `encoding` and percent-encoded; one
    the encoding lacks is "%26%23<code point>%3B" (an HTML character reference, escaped)."""
    try:
        if encoding == _ISO_2022_JP and not _ISO_2022_JP_SHIFTS.isdisjoint(run):
            raise UnicodeEncodeError(encoding, run, 0, len(run), "SO, SI or ESC")
        # the run at once, for ISO-2022-JP's escape sequences
        raw = encode_as_browsers(run, encoding)
    except UnicodeEncodeError:
        if len(run) == 1:
            code = ord(run)
            if 0xD800 <= code < 0xE000 or run in _ISO_2022_JP_SHIFTS:
                code = 0xFFFD
            return f"%26%23{code}%3B"
        return "".join(_escaped_in(character, encoding) for character in run)
    kept = _QUERY_BYTES_KEPT
    return "".join(chr(byte) if byte in kept else f"%{byte:02X}" for byte in raw)


def _rfc3986_escapes(text: str, chars: str) -> str:
    """RFC 3986 normal form: unreserved escapes decoded, other hex uppercased, the rest escaped."""
    pattern = _NOT_RFC3986[chars]
    if pattern.search(text) is None:
        return text
    return pattern.sub(_rfc3986_escape, text)


def _rfc3986_escape(match: re.Match[str]) -> str:
    hex_digits = match.group(1)
    if hex_digits is not None:
        char = chr(int(hex_digits, 16))
        return char if char in _UNRESERVED else "%" + hex_digits.upper()
    return "".join(f"%{byte:02X}" for byte in match.group(0).encode("utf-8"))


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, with WHATWG's dots: "%2e" is a dot, in any case."""
    if _DOT_OR_ESCAPED_DOT_SEGMENT.search(path) is None:
        return path
    output: list[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        dots = segment.lower() if "%" in segment else segment
        if dots in _DOUBLE_DOTS:
            if len(output) > 1:
                output.pop()
            if last:
                output.append("")
        elif dots in _SINGLE_DOTS:
            if last:
                output.append("")
        else:
            output.append(segment)
    result = "/".join(output)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result


@functools.lru_cache(maxsize=16384)
def _canonical_host(host: str) -> str | None:
    if host.startswith("["):
        if not host.endswith("]") or "%" in host:
            return None  # browsers accept no zone ID ("[fe80::1%25eth0]")
        try:
            return f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            return None
    if "%" in host:
        host = unquote(host, errors="strict") if _is_utf8_escaped(host) else host
    host = host.lower() if host.isascii() else _unicode_domain_to_ascii(host)
    if _ends_in_a_number(host):
        return _ipv4(host)
    return host if _DOMAIN.fullmatch(host) else None


def canonical_hostname(host: str) -> str | None:
    """A host name as URLs have it (lowercase, an IDN in Punycode: 中文.中国 is
    xn--fiq228c.xn--fiqs8s), or None if no URL could: for names given beside URLs."""
    return _canonical_host(host)


def _unicode_domain_to_ascii(domain: str) -> str:
    """UTS 46 ToASCII with WHATWG URL's settings; "" where the domain is invalid."""
    if "\x00" in domain:
        return ""  # forbidden anyway, and the binding would cut the string there
    from ada_url import idna  # only for a non-ASCII host: its import takes 6 ms

    try:
        return idna.encode(domain).decode("ascii")
    except UnicodeEncodeError:  # a lone surrogate
        return ""


def _ends_in_a_number(host: str) -> bool:
    """WHATWG's test for a host that must be an IPv4 address ("127.1", "0x7f.1")."""
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    if last.isdigit() and last.isascii():
        return True
    return last[:2] == "0x" and all(c in "0123456789abcdef" for c in last[2:])


def _ipv4(host: str) -> str | None:
    """WHATWG's IPv4 parser: decimal, octal and hex parts, 1 to 4 of them; None if invalid."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        return None
    numbers = []
    for part in parts:
        if not part:
            return None
        radix = 10
        if part[:2] == "0x":
            part, radix = part[2:], 16
        elif len(part) > 1 and part[0] == "0":
            part, radix = part[1:], 8
        if not _RADIX_DIGITS[radix].issuperset(part):  # int() takes signs, "_" and spaces too
            return None
        numbers.append(int(part, radix) if part else 0)
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return None
    address = numbers[-1] + sum(n * 256 ** (3 - i) for i, n in enumerate(numbers[:-1]))
    return str(ipaddress.IPv4Address(address))


def _is_utf8_escaped(text: str) -> bool:
    try:
        unquote(text, errors="strict")
    except UnicodeDecodeError:
        return False
    return True


@functools.lru_cache(maxsize=16384)
def _canonical_authority(authority: str, scheme: str) -> str | None:
    userinfo, _, hostport = authority.rpartition("@")
    if hostport.startswith("["):
        host, bracket, rest = hostport.partition("]")
        host += bracket
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:]
    else:
        host, _, port = hostport.partition(":")
    if not host or not _PORT.fullmatch(port):
        return None
    canonical_host = _canonical_host(host)
    if canonical_host is None:
        return None
    if port:
        if int(port) > 65535:
            return None
        port = str(int(port))
    if port and port != DEFAULT_PORTS[scheme]:
        canonical_host = f"{canonical_host}:{port}"
    user, _, password = userinfo.partition(":")  # the first ":" ends the user name
    user = _escape(user, _USERINFO_ESCAPED)
    if password:
        return f"{user}:{_escape(password, _USERINFO_ESCAPED)}@{canonical_host}"
    return f"{user}@{canonical_host}" if user else canonical_host  # "u:@h" is "u@h", ":@h" "h"


def _split_query(reference: str) -> tuple[str, str | None]:
    path, question, query = reference.partition("?")
    return path.replace("\\", "/"), (query if question else None)


def _assemble(scheme: str, authority: str, path: str, query: str | None) -> str:
    path = _remove_dot_segments(_escape(path, _PATH_ESCAPED)) or "/"
    if query:
        return f"{scheme}://{authority}{path}?{_escape(query, _QUERY_ESCAPED)}"
    return f"{scheme}://{authority}{path}"


class _Base:
    """A canonical URL taken apart once, to resolve many references against it."""

    __slots__ = ("authority", "directory", "origin", "path", "query", "scheme", "url", "userinfo")

    def __init__(self, url: str, userinfo: bool = True) -> None:
        """`userinfo`: whether an absolute reference keeps its "user:password@" (WHATWG's
        href does; the crawl's links do not: see crawler.credentials)."""
        self.url = url
        self.userinfo = userinfo
        self.scheme, _, rest = url.partition("://")
        slash = rest.find("/")
        self.authority = rest[:slash]
        self.origin = f"{self.scheme}://{self.authority}"
        self.path, self.query = _split_query(rest[slash:])
        self.directory = self.path[: self.path.rfind("/") + 1]

    def resolve(self, reference: str) -> str | None:
        """RFC 3986 section 5.2.2 with WHATWG's leniencies; `reference` has no fragment."""
        match = _SCHEME.match(reference)
        if match:
            scheme = match.group(1).lower()
            if scheme not in DEFAULT_PORTS:
                return None
            rest = reference[match.end() :]
            if scheme != self.scheme or rest.startswith(_TWO_SLASHES):
                return self._absolute(scheme, rest)
            reference = rest  # "http:page.html" is relative in browsers, "http:a:b" too
        elif reference.startswith(_TWO_SLASHES):
            return self._absolute(self.scheme, reference)
        path, query = _split_query(reference)
        if not path:
            return _assemble(
                self.scheme, self.authority, self.path, self.query if query is None else query
            )
        if not path.startswith("/"):
            path = self.path[: self.path.rfind("/") + 1] + path
        return _assemble(self.scheme, self.authority, path, query)

    def _absolute(self, scheme: str, rest: str) -> str | None:
        url = _absolute(scheme, rest)
        if url is None or self.userinfo or "@" not in url:
            return url
        return without_userinfo(url)

    def canonical(self, reference: str) -> str | None:
        """The canonical absolute URL of a link found on this page, or None."""
        reference = _clean(reference)
        if _PLAIN_REFERENCE.fullmatch(reference) and not reference.endswith("?"):
            plain = self._plain(reference)
            if plain is not None:
                return plain
        return self.resolve(reference)

    def _plain(self, reference: str) -> str | None:
        """The fast path for references that need no escaping: most links on most pages."""
        first = reference[:1]
        if first == "/":
            if reference[1:2] == "/" or _DOT_SEGMENT.search(reference.partition("?")[0]):
                return None
            return self.origin + reference
        if first == "?":
            return self.origin + self.path + reference
        path = reference.partition("?")[0]
        if ":" in path.partition("/")[0]:
            return _plain_absolute(reference)
        if not reference:
            return self.url
        directory = self.directory
        while first == ".":  # leading "./" and "../", the common relative forms
            if reference.startswith("./"):
                reference = reference[2:]
            elif reference.startswith("../"):
                reference = reference[3:]
                directory = directory[: directory.rfind("/", 0, -1) + 1] or "/"
            else:
                break
            first = reference[:1]
        if _DOT_SEGMENT.search(reference.partition("?")[0]):
            return None
        return self.origin + directory + reference


def _plain_absolute(reference: str) -> str | None:
    """An absolute URL that is canonical as it is, or None to take the general path."""
    match = _PLAIN_ABSOLUTE.fullmatch(reference)
    if match is None:
        return None
    scheme, authority, rest = match.groups()
    if _canonical_authority(authority, scheme) != authority:
        return None  # a default or odd port, an IPv4 shorthand...
    if rest is None:
        return reference + "/"
    if rest[0] == "?":
        return f"{scheme}://{authority}/{rest}"
    if _DOT_SEGMENT.search(rest.partition("?")[0]):
        return None
    return reference


def _absolute(scheme: str, rest: str) -> str | None:
    """Canonicalize `scheme:` + `rest`, where rest starts the authority (after any slashes)."""
    rest = rest.lstrip("/\\")
    end = len(rest)
    for delimiter in "/?\\":
        position = rest.find(delimiter)
        if position != -1 and position < end:
            end = position
    authority = _canonical_authority(rest[:end], scheme)
    if authority is None:
        return None
    path, query = _split_query(rest[end:])
    return _assemble(scheme, authority, path, query)


def _clean(reference: str) -> str:
    """Strip what browsers strip, and drop the fragment."""
    reference = reference.strip(_C0_AND_SPACE)
    if "\t" in reference or "\n" in reference or "\r" in reference:
        reference = reference.translate(_TAB_NEWLINE)
    return reference.partition("#")[0]


def _canonical_absolute(url: str) -> str | None:
    url = _clean(url)
    match = _SCHEME.match(url)
    if match is None or match.group(1).lower() not in DEFAULT_PORTS:
        return None
    return _absolute(match.group(1).lower(), url[match.end() :])


def canonicalize(url: str, base: str | None = None, encoding: str = "utf-8") -> str | None:
    """The canonical form of `url`, resolved against `base`; None if it is not crawlable.
    `encoding`: the Python codec of the page `url` is found on, which its query is in."""
    url = _query_in(url, encoding)
    if base is None:
        return _canonical_absolute(url)
    resolver = link_resolver(base)
    return resolver.canonical(url) if resolver else None


@functools.lru_cache(maxsize=1024)
def link_resolver(base: str) -> _Base | None:
    """A resolver for the links of the page at `base` (any spelling), or None if `base` is bad."""
    canonical_base = _canonical_absolute(base)
    return _Base(canonical_base) if canonical_base else None


def _made_of(text: str, characters: bytes) -> bool:
    """Whether `text` has only ASCII `characters`: one pass in C (translate deletes them)."""
    return text.isascii() and not text.encode().translate(None, characters)


def canonical_links(hrefs: Iterable[str], base: str, encoding: str = "utf-8") -> list[str]:
    """Canonical absolute URLs of `hrefs` in page order, each once; uncrawlable ones dropped.

    `base` must be canonical already (a fetched URL is): it is not checked again.
    `encoding` is the page's (a Python codec): non-ASCII in a query is encoded in it.
    """
    # each href once: a page links most of its targets many times over (the Python
    # docs' pages: 99,649 distinct hrefs of 164,265; 23,092 without fragments)
    hrefs = list(dict.fromkeys(hrefs))
    if encoding not in _UTF8_QUERY:  # a legacy page's: most are UTF-8, and pay nothing
        hrefs = [_query_in(href, encoding) for href in hrefs]
    resolver = _Base(base, userinfo=False)  # a link's own user:password is not kept
    seen: dict[str, None] = {}
    joined = "\n".join(hrefs)
    if joined.count("\n") == len(hrefs) - 1 and _made_of(joined, _PLAIN_OR_FRAGMENT_BYTES):
        # most pages: every href plain, so each one's cleaning and check are skipped
        if "#" in joined:
            hrefs = list(dict.fromkeys([href.partition("#")[0] for href in hrefs]))
        plain, resolve = resolver._plain, resolver.resolve
        for href in hrefs:
            url = plain(href) if not href.endswith("?") else None
            if url is None:
                url = resolve(href)
            if url is not None:
                seen[url] = None
        return list(seen)
    canonical = resolver.canonical
    for href in hrefs:
        url = canonical(href)
        if url is not None:
            seen[url] = None
    return list(seen)


def absolute_links(hrefs: Iterable[str], encoding: str = "utf-8") -> list[str]:
    """Canonical URLs of those of `hrefs` that are absolute http(s) URLs in their own
    right ("http:x" is "http://x/"), in page order, each once, without userinfo: the
    links of a page whose base URL takes no relative reference (see document_base)."""
    seen: dict[str, None] = {}
    for href in hrefs:
        url = canonicalize(href, encoding=encoding)
        if url is not None:
            seen[without_userinfo(url)] = None
    return list(seen)


def document_base(base_href: str, page_url: str, encoding: str = "utf-8") -> str | None:
    """The base URL of the page at `page_url` (canonical) whose first <base> has the href
    `base_href`, as HTML's "set the frozen base URL" makes it: `base_href` resolved
    against the page's URL (without userinfo); the page's URL if that is no URL, or a
    data: or javascript: one; None if it is a URL of another scheme (mailto:, ftp://),
    against which no relative reference resolves to an http(s) URL, so that a browser
    follows none of the page's relative links."""
    resolved = canonicalize(base_href, page_url, encoding)
    if resolved is not None:
        return without_userinfo(resolved)
    from ada_url import URL  # only for a page whose <base> is no http(s) URL

    try:
        scheme = URL(base_href, page_url).protocol
    except ValueError:  # no URL at all: "http://[bad", "ftp:"
        return page_url
    return page_url if scheme in ("data:", "javascript:") else None


def _parameter_name(parameter: str) -> str:
    return parameter.partition("=")[0]


def visit_key(url: str) -> str:
    """The visited-set key of a canonical URL: path and query in RFC 3986 normal form,
    query parameters stably sorted by name."""
    if _RFC3986_NORMAL.fullmatch(url) is None:
        path_start = url.index("/", url.index("//") + 2)
        path, question, query = url[path_start:].partition("?")
        path = _rfc3986_escapes(path, _PATH_CHARS)
        query = _rfc3986_escapes(query, _QUERY_CHARS)
        url = f"{url[:path_start]}{path}{question}{query}"
    head, question, query = url.partition("?")
    if not question or "&" not in query:
        return url
    parameters = query.split("&")
    parameters.sort(key=_parameter_name)
    return f"{head}?{'&'.join(parameters)}"


def visit_keys(urls: list[str]) -> list[str]:
    """`visit_key` of each of a page's links. Most pages' links are all their own keys:
    one pass over them joined, in C, tells, instead of a regular expression per link."""
    joined = "\n".join(urls)
    if "&" not in joined and _made_of(joined, _RFC3986_NORMAL_BYTES):
        return urls
    return [visit_key(url) for url in urls]


def host_of(url: str) -> str:
    """The host[:port] of a canonical URL, without user info: the unit of scope and politeness."""
    authority = url.split("/", 3)[2]
    return authority.rpartition("@")[2] if "@" in authority else authority


def without_userinfo(url: str) -> str:
    """A canonical URL without its "user:password@", if it has one: the URL the crawl
    keeps, fetches and writes (crawler.credentials sends a seed's as a header)."""
    start = url.find("//") + 2
    at = url.rfind("@", start, url.find("/", start))
    return url if at == -1 else url[:start] + url[at + 1 :]


def origin_of(url: str) -> str:
    """scheme://host[:port] of a canonical URL: the unit robots.txt applies to."""
    return f"{url.partition('://')[0]}://{host_of(url)}"


def _hostname(host: str) -> str:
    """host[:port] -> host."""
    if host.startswith("["):
        return host[: host.index("]") + 1]
    return host.partition(":")[0]


def is_host_pattern(pattern: str) -> bool:
    """Whether an --allow-host pattern ("faß.de", "*.example.com", "host:8080") names a host
    that a URL may have, by the same rules as the hosts of URLs."""
    return _canonical_authority(pattern.removeprefix("*."), "http") is not None


# A character's UTF-8 escapes: a lead byte and its continuation bytes.
_UTF8_CHARACTER_ESCAPED = re.compile(
    r"%(?:[CDcd][0-9A-Fa-f]|[Ee][0-9A-Fa-f](?:%[89ABab][0-9A-Fa-f])"
    r"|[Ff][0-7](?:%[89ABab][0-9A-Fa-f]){2})%[89ABab][0-9A-Fa-f]"
)


def _utf8_escapes_read(url: str) -> str:
    """`url` with the escapes of its characters past ASCII read, as address bars show it:
    /%E6%96%B0%E9%97%BB/ as /新闻/. Other escapes (%2F, a GBK byte's) stay."""
    return _UTF8_CHARACTER_ESCAPED.sub(_utf8_character, url)


def _utf8_character(escaped: re.Match[str]) -> str:
    try:
        return bytes.fromhex(escaped[0].replace("%", "")).decode()
    except UnicodeDecodeError:  # an overlong form, a surrogate
        return escaped[0]


class _Patterns:
    """--include's or --exclude's regexes. One with a character past ASCII (新闻) is also
    tried on the URL with its UTF-8 escapes read: canonical URLs are all ASCII, so
    `--exclude /下载/` excluded nothing, and `--include /新闻/` left nothing to crawl."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self._patterns = [re.compile(pattern) for pattern in patterns]
        self._unicode = [compiled for compiled in self._patterns if not compiled.pattern.isascii()]

    def search(self, url: str) -> bool:
        """Whether one of the patterns is found in `url`, or in it as people read it."""
        if any(pattern.search(url) for pattern in self._patterns):
            return True
        if not self._unicode:
            return False
        shown = _utf8_escapes_read(url)
        return shown != url and any(pattern.search(shown) for pattern in self._unicode)


class Scope:
    """Which canonical URLs the crawl follows: hosts, include/exclude patterns, length.

    A host is host[:port] with the default port left out, so http and https of one
    site are one host, and two servers on one machine but different ports are two.
    An --allow-host pattern without a port matches that host name on any port; one
    with a port matches that host[:port] only, ":80" and ":443" meaning the default.
    "*.example.com" matches the subdomains of example.com, on any port, not example.com.
    """

    def __init__(
        self,
        seed_urls: Sequence[str],
        allow_hosts: Sequence[str] = (),
        any_host: bool = False,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
    ) -> None:
        self._any_host = any_host
        self._hosts = {host_of(url) for url in seed_urls}
        self._names: set[str] = set()
        self._suffixes: list[str] = []
        for pattern in allow_hosts:
            subdomains = pattern.startswith("*.")
            name = pattern[2:] if subdomains else pattern
            host = _canonical_authority(name, "http")
            if host is None:
                continue  # the settings refuse such a pattern; a Scope made by hand skips it
            if subdomains:
                self._suffixes.append("." + _hostname(host))
            elif name == _hostname(name):  # no port: that name on any port
                self._names.add(host)
            else:  # that host[:port] exactly; ":80" and ":443" are the default port, so none
                self._hosts.add(host.removesuffix(":443"))
        self._include = _Patterns(include) if include else None
        self._exclude = _Patterns(exclude) if exclude else None
        self._host_verdicts: dict[str, bool] = {}
        self._origin_verdicts: dict[str, bool] = {}

    def allows(self, url: str) -> bool:
        return bool(self.allowed((url,)))

    def allows_sitemap(self, url: str, anywhere: bool = False) -> bool:
        """Whether the crawl fetches a sitemap file at `url`: on a host it follows (or, if
        the site itself sent there, `anywhere`), and not --exclude'd. --include picks pages:
        the sitemaps that list them need not match it."""
        if not (anywhere or self._any_host or self.allows_host(host_of(url))):
            return False
        return self._exclude is None or not self._exclude.search(url)

    def allowed(self, urls: Iterable[str]) -> list[str]:
        """Those of `urls` the crawl follows, in order: `allows` for a page's links."""
        if self._any_host:
            kept = list(urls)
        else:  # one verdict per origin: the slice is cheaper than host_of()
            verdicts = self._origin_verdicts
            kept = []
            for url in urls:
                path = url.find("/", 8)  # after "https://" and one host character
                origin = url[:path] if path > 0 else url
                verdict = verdicts.get(origin)
                if verdict is None:
                    verdict = verdicts[origin] = self.allows_host(host_of(url))
                if verdict:
                    kept.append(url)
        if self._include is not None:
            kept = [url for url in kept if self._include.search(url)]
        if self._exclude is not None:
            kept = [url for url in kept if not self._exclude.search(url)]
        return kept

    def allows_host(self, host: str) -> bool:
        verdict = self._host_verdicts.get(host)
        if verdict is None:
            hostname = _hostname(host)
            verdict = (
                host in self._hosts
                or hostname in self._names
                or any(hostname.endswith(suffix) for suffix in self._suffixes)
            )
            self._host_verdicts[host] = verdict
        return verdict


REPEATING_PATH = "repeating_path"
PATH_TOO_DEEP = "path_too_deep"
TOO_MANY_QUERY_PARAMS = "too_many_query_params"
URL_TOO_LONG = "url_too_long"
_REPEATS = 3  # a run of segments seen this many times in a row makes a trap


def path_segments(url: str) -> list[str]:
    """The path segments of a canonical URL; a trailing slash adds none ("/a/b/" is a, b)."""
    path = url.partition("?")[0].split("/", 3)[3] if url.count("/") >= 3 else ""
    segments = path.split("/")
    if segments[-1] == "":
        segments.pop()
    return segments


def repeats_segments(segments: Sequence[str]) -> bool:
    """True if some run of 1 or more segments occurs 3 times in a row (/a/b/a/b/a/b)."""
    n = len(segments)
    if n < _REPEATS or len(set(segments)) > n - (_REPEATS - 1):
        return False  # a repeated run needs at least two segments that are repeats
    for width in range(1, n // _REPEATS + 1):
        for start in range(n - _REPEATS * width + 1):
            run = segments[start : start + width]
            if all(
                segments[start + r * width : start + (r + 1) * width] == run
                for r in range(1, _REPEATS)
            ):
                return True
    return False


class TrapRules:
    """Heuristics against crawler traps: link spaces that generate endless unique URLs.

    A canonical URL is a trap when it is longer than `max_url_length` characters (a
    query that grows by a term a page), its path has more than `max_path_depth` segments,
    its query more than `max_query_params` "&"-separated parameters, or (with
    `repeating_paths`) its path repeats a run of segments 3 times in a row, as
    relative links resolved against the wrong base do: /a/b/a/b/a/b/. A limit of
    0 is no limit.
    """

    def __init__(
        self,
        max_path_depth: int,
        max_query_params: int,
        repeating_paths: bool,
        max_url_length: int = 0,
    ) -> None:
        self._max_path_depth = max_path_depth
        self._max_query_params = max_query_params
        self._repeating_paths = repeating_paths
        self._max_url_length = max_url_length
        self.enabled = bool(max_path_depth or max_query_params or repeating_paths or max_url_length)

    def trap(self, url: str) -> str | None:
        """Which rule `url` breaks (REPEATING_PATH, PATH_TOO_DEEP...), or None."""
        if self._max_url_length and len(url) > self._max_url_length:
            return URL_TOO_LONG
        path, _, query = url.partition("?")
        if self._max_query_params and query and query.count("&") >= self._max_query_params:
            return TOO_MANY_QUERY_PARAMS
        if self._max_path_depth or self._repeating_paths:
            # At least the path's segments: "scheme://host/a/b" has 2 ("/a/" has 1, counted 2)
            most_segments = path.count("/") - 2
            if most_segments < _REPEATS and most_segments <= (self._max_path_depth or _REPEATS):
                return None  # the common case: too short for either rule
            segments = path_segments(url)
            if self._max_path_depth and len(segments) > self._max_path_depth:
                return PATH_TOO_DEEP
            if self._repeating_paths and repeats_segments(segments):
                return REPEATING_PATH
        return None
