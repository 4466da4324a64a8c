"""Hosts and URLs as people read them, for the report and the dashboard only.

A host stays in Punycode wherever it is an identifier (records, archives, metrics, the
links' targets); what is shown to be read is its Unicode form, as browsers show it in
their address bars: xn--fiq228c.xn--fiqs8s is shown as 中文.中国. As Firefox does by
default (Unicode TR 39's "highly restrictive" profile), a label is left in Punycode if
its letters are of more than one script, but for the mixes East Asian names are written
in, or if it has a character that is no letter, mark or digit (☃, 💩); and one that is
not what its own Punycode decodes to. A label wholly in another script that looks Latin
(аррӏе, Cyrillic) is shown, as Firefox shows it; Chrome's confusables list is not ours.
"""

from __future__ import annotations

import unicodedata

# Scripts that TR 39 lets a label mix: Latin with Han and Japanese kana, with Han and
# Bopomofo, or with Han and Hangul.
_MIXES = (
    frozenset({"LATIN", "CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA"}),
    frozenset({"LATIN", "CJK", "BOPOMOFO"}),
    frozenset({"LATIN", "CJK", "HANGUL"}),
)


def display_host(host: str) -> str:
    """`host` (a port after it allowed) with each IDN label in Unicode where that is safe."""
    if "xn--" not in host:
        return host
    name, colon, port = host.partition(":")
    return ".".join(_display_label(label) for label in name.split(".")) + colon + port


def display_url(url: str) -> str:
    """`url` with its host as display_host shows it; the rest as it is."""
    scheme, separator, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "xn--" not in authority or "@" in authority:
        return url
    return f"{scheme}{separator}{display_host(authority)}{slash}{path}"


def _display_label(label: str) -> str:
    if not label.startswith("xn--") or not label.isascii():  # a record not of a crawl
        return label
    from ada_url import idna  # only for a host in Punycode: its import takes 6 ms

    shown: str = idna.decode(label)
    if shown == label or idna.encode(shown) != label.encode("ascii") or _mixed(shown):
        return label
    return shown


def _mixed(label: str) -> bool:
    """Whether the label has a symbol, or letters of scripts no one name mixes."""
    if any(unicodedata.category(c)[0] not in "LMN" and c != "-" for c in label):
        return True
    scripts = {unicodedata.name(c, "?").split(" ")[0] for c in label if c.isalpha()}
    return len(scripts) > 1 and not any(scripts <= allowed for allowed in _MIXES)
