"""A parsed HTML tree -> title, link hrefs, <base href>, meta robots, description and
canonical (one CSS query), and on request the language and the visible text (selectolax, Lexbor)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError

# Not shown by a browser: their text is no part of the page's text.
_HIDDEN_TAGS = frozenset(["script", "style", "template", "noscript"])
# Elements that flow within a line. Unwrapped before taking the text, so that the
# only breaks left between text nodes are those of block elements and <br>.
_INLINE_TAGS = frozenset(
    "a abbr b bdi bdo big cite code data del dfn em font i ins kbd label mark nobr q s samp "  # noqa: SIM905
    "small span strike strong sub sup time tt u var".split()
)


def _tag_ids(tags: frozenset[str]) -> frozenset[int]:
    """Lexbor's ids of HTML `tags`, the same in every document (its own table numbers
    them): comparing ids took a third less than each element's tag name, a new str."""
    body = LexborHTMLParser("<body>" + "".join(f"<{tag}></{tag}>" for tag in tags)).body
    assert body is not None
    return frozenset(node.tag_id for node in body.traverse() if node.tag in tags)


_INLINE_TAG_IDS = _tag_ids(_INLINE_TAGS)
_HIDDEN_TAG_IDS = _tag_ids(_HIDDEN_TAGS)
_FLOW_TAG_IDS = _INLINE_TAG_IDS | _HIDDEN_TAG_IDS  # what text extraction takes out of the flow
# HTML's parser turns NUL into U+FFFD, so no text node holds one: a safe separator.
_SEPARATOR = "\x00"
_OTHER_WHITESPACE = "\t\n\r\f"  # HTML's whitespace but the space
# Two spaces and any more: the search runs on the literal pair, in C, and finds the
# few runs; a pattern that matched single spaces too tried a match at every one.
_SPACE_RUN = re.compile("   *")
# meta[content]: its name (description, robots), or its http-equiv (refresh); one
# selector for both, as each more costs every element of every page a match.
_WANTED = (
    "title, base[href], meta[content], link[rel][href], a[href], area[href], frame[src], "
    "iframe[src]"
)
# <link rel> values that name another page of the same document: pagination.
_PAGE_RELS = frozenset(["next", "prev"])
# HTML's "parse a refresh value": a time, then ";", "," or whitespace, then the URL, maybe
# after "url=" and in quotes. A time alone reloads the page itself: no link.
_HTML_SPACE = "[\\t\\n\\f\\r ]"
_REFRESH = re.compile(
    rf"{_HTML_SPACE}*[\d.]+(?:{_HTML_SPACE}*[;,]|{_HTML_SPACE}){_HTML_SPACE}*(?:url{_HTML_SPACE}*={_HTML_SPACE}*)?",
    re.I,
)


@dataclass(slots=True)
class ParsedPage:
    title: str | None
    hrefs: list[str]  # as written in the page, in page order
    base_href: str | None
    nofollow: bool
    noindex: bool = False
    description: str | None = None
    canonical_href: str | None = None  # as written in <link rel=canonical>


# The directives of a meta robots tag or an X-Robots-Tag header that forbid following
# the page's links, and indexing the page ("none" is both).
NOFOLLOW = frozenset({"nofollow", "none"})
NOINDEX = frozenset({"noindex", "none"})


def robots_directives(content: str) -> frozenset[str]:
    """The directives of a meta robots value, lowercased."""
    return frozenset(d.strip().lower() for d in content.replace(";", ",").split(","))


# The directives that take a value after a colon, which a crawler's name before a colon
# ("googlebot: noindex") must not be taken for.
_VALUED_DIRECTIVES = frozenset(
    ["unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"]
)


def x_robots_directives(values: list[str], agent: str) -> frozenset[str]:
    """The directives of X-Robots-Tag header `values` that apply to the crawler whose
    robots.txt name is `agent` (lowercase): those for every crawler, and those after its
    own name. A name and a colon ("otherbot: noindex, nofollow") make the directives after
    it, to the next name, that crawler's only, as Google's documentation has it."""
    directives = set()
    for value in values:
        named = None  # the crawler the directives are for; None: every one
        for directive in value.replace(";", ",").split(","):
            name, colon, rest = directive.partition(":")
            if colon and (name := name.strip().lower()) not in _VALUED_DIRECTIVES:
                named, directive = name, rest
            if named is None or named == agent:
                directives.add(directive.strip().lower())
    return frozenset(directives)


def parse_html(tree: LexborHTMLParser, agent: str = "robots") -> ParsedPage:
    """What the crawl reads in a page's `tree`; the robots directives of <meta name=robots>
    and of a <meta> named for the crawler, `agent` (its robots.txt name, lowercase), as
    Google reads <meta name=googlebot>."""
    page = ParsedPage(title=None, hrefs=[], base_href=None, nofollow=False)
    hrefs = page.hrefs
    title_node = None
    # One query for all: Lexbor walks the document once for a selector list, where
    # a query each took 50% longer. `attrs.get` reads one attribute without making
    # the node's whole attribute dict, which took 40% of the time of the links.
    for node in tree.css(_WANTED):
        tag = node.tag
        if tag == "a" or tag == "area":
            href = node.attrs.get("href")
            if href is None:  # no value (the page itself), or SVG's <a xlink:href>
                href = node.attrs.get("xlink:href") or ""
            hrefs.append(href)
            continue
        attributes = node.attrs
        if tag == "title":
            if title_node is None:
                title_node = node
        elif tag == "base":
            if page.base_href is None:
                page.base_href = attributes.get("href")
        elif tag == "frame" or tag == "iframe":
            # A browser loads a frame's page as part of this one: a frameset's pages are
            # reached only so. An empty src is about:blank, not this page.
            if src := (attributes.get("src") or "").strip():
                hrefs.append(src)
        elif tag == "link":
            rel = (attributes.get("rel") or "").lower()
            if page.canonical_href is None and "canonical" in rel:
                page.canonical_href = (attributes.get("href") or "").strip() or None
            elif not _PAGE_RELS.isdisjoint(rel.split()) and (href := attributes.get("href")):
                hrefs.append(href)
        elif (name := attributes.get("name")) is None:
            # <meta http-equiv=refresh content="0; url=/new">: where browsers go next, a link
            if (attributes.get("http-equiv") or "").strip().lower() == "refresh":
                url = refresh_url(attributes.get("content") or "")
                if url is not None:
                    hrefs.append(url)
        else:
            name = name.strip().lower()
            if name == "robots" or name == agent:
                directives = robots_directives(attributes.get("content") or "")
                page.nofollow = page.nofollow or not NOFOLLOW.isdisjoint(directives)
                page.noindex = page.noindex or not NOINDEX.isdisjoint(directives)
            elif name == "description" and page.description is None:
                page.description = _collapsed(attributes.get("content") or "") or None
    if title_node is not None:
        page.title = _collapsed(title_node.text())
    return page


def refresh_url(content: str) -> str | None:
    """The URL a <meta http-equiv=refresh> or a Refresh header sends to, as written."""
    match = _REFRESH.match(content)
    if match is None:
        return None
    url = content[match.end() :]
    if url[:1] in ("'", '"'):
        url = url[1:].partition(url[0])[0]
    return url or None


def language(tree: LexborHTMLParser, content_language: str | None = None) -> str | None:
    """The page's language as HTML has it: <html lang> (`lang=""` says it is unknown),
    else the pragma-set default language (the last <meta http-equiv=content-language>
    that names one), else the HTTP `content_language` if it names one language."""
    root = tree.root
    lang = root.attributes.get("lang") if root is not None else None
    if lang is not None:
        return lang.strip() or None
    pragma = None
    for meta in tree.css("meta[http-equiv]"):
        if (meta.attributes.get("http-equiv") or "").strip(_ASCII_SPACE).lower() == (
            "content-language"
        ):
            pragma = _one_language(meta.attributes.get("content") or "") or pragma
    return pragma or _one_language(content_language or "")


_ASCII_SPACE = "\t\n\f\r "
_ASCII_SPACE_RUN = re.compile(f"{_HTML_SPACE}+")


def _one_language(content: str) -> str | None:
    """The language a content-language pragma sets: its first word, unless it is a list."""
    if "," in content:
        return None
    return _ASCII_SPACE_RUN.split(content.strip(_ASCII_SPACE), maxsplit=1)[0] or None


def visible_text(tree: LexborHTMLParser, keep_tree: bool = True) -> str:
    """The body's text as a reader sees it: one line per block, whitespace collapsed.

    With `keep_tree`, works on a copy, so that `tree` stays as it was for hooks
    and API users; without, changes `tree`. Copying and one walk to find inline
    elements measured cheaper than reparsing, or than a CSS query for the inline
    tags, which Lexbor matches one selector at a time.
    """
    copy = copy_of(tree) if keep_tree else tree
    body = copy.body
    if body is None:
        return ""
    # One walk, each element's tag id read once, finds both kinds: the inline ones
    # kept, the hidden ones set apart in `hidden` (strip_tags walked the whole
    # document once for each hidden tag: a sixth of the text's cost on small pages).
    flow, hidden_ids = _FLOW_TAG_IDS, _HIDDEN_TAG_IDS
    hidden: list[LexborNode] = []
    inline = [
        node
        for node in body.traverse()
        if (tag_id := node.tag_id) in flow
        and (tag_id not in hidden_ids or _set_apart(hidden, node))
    ]
    for node in inline:
        # An empty one goes too: kept, it parted the text on either side into two lines
        # (Sphinx puts an empty <span class=target> before each PEP it cites).
        node.unwrap(delete_empty=True)
    for node in reversed(hidden):  # one inside another goes first
        node.decompose()
    copy.merge_text_nodes()
    text = body.text(separator=_SEPARATOR, strip=True, skip_empty=True)
    return collapse_whitespace(text).replace(_SEPARATOR, "\n")


def copy_of(tree: LexborHTMLParser) -> LexborHTMLParser:
    """A copy of `tree` to change. Lexbor cannot clone a document whose doctype has a
    system id (`<!DOCTYPE html SYSTEM "about:legacy-compat">`, as XSLT writes it):
    such a tree is serialized and parsed again."""
    try:
        return tree.clone()
    except SelectolaxError:
        return LexborHTMLParser(tree.html or "")


def _set_apart(nodes: list[LexborNode], node: LexborNode) -> bool:
    """Append `node` to `nodes`; False, so that a filter leaves it out."""
    nodes.append(node)
    return False


def _collapsed(text: str) -> str:
    """`text` stripped of HTML's whitespace, each run of it one space, as document.title
    is: an ideographic or a no-break space is no whitespace there."""
    return collapse_whitespace(text).strip(" ")


def collapse_whitespace(text: str) -> str:
    """Each run of HTML whitespace as one space.

    str methods for the four other whitespace characters, and one regular
    expression for the runs of spaces that leaves single ones alone: `replace`,
    not `translate`, which looks each character up in the table as a Python object
    once the text holds one past U+00FF (1.7 ms against 5 us for the 18,000
    characters of a page of the Python docs); and one `re.sub` rather than
    replacing two spaces by one until none are left, which took four passes on
    the docs' indented code (260 us against 58 us a library page).
    """
    for character in _OTHER_WHITESPACE:
        if character in text:
            text = text.replace(character, " ")
    return _SPACE_RUN.sub(" ", text) if "  " in text else text
