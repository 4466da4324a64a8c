"""A parsed HTML tree -> title, link hrefs, <base href> and meta robots (selectolax, Lexbor)."""

from __future__ import annotations

from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser


@dataclass(slots=True)
class ParsedPage:
    title: str | None
    hrefs: list[str]  # as written in the page, in page order
    base_href: str | None
    nofollow: bool


def robots_directives_forbid_following(content: str) -> bool:
    """True when a meta robots or X-Robots-Tag value says not to follow links."""
    directives = {d.strip().lower() for d in content.replace(";", ",").split(",")}
    return bool(directives & {"nofollow", "none"})


def parse_html(tree: LexborHTMLParser) -> ParsedPage:
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node is not None else None
    base_href = None
    nofollow = False
    # One pass for both: each CSS query walks the whole document.
    for node in tree.css("base[href], meta[name][content]"):
        attributes = node.attributes
        if node.tag == "base":
            if base_href is None:
                base_href = attributes["href"]
        elif (attributes["name"] or "").strip().lower() == "robots":
            nofollow = nofollow or robots_directives_forbid_following(attributes["content"] or "")
    hrefs = [node.attributes["href"] or "" for node in tree.css("a[href], area[href]")]
    return ParsedPage(title=title, hrefs=hrefs, base_href=base_href, nofollow=nofollow)
