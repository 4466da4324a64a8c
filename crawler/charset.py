"""Which character encoding an HTML body is in, and its text.

The order is the HTML standard's encoding sniffing: a byte order mark, then the
charset of Content-Type, then a prescan of the first 1024 bytes for
<meta charset> or <meta http-equiv="Content-Type">, then UTF-8. Labels map to
decoders as the WHATWG Encoding Standard says, so "gb2312" decodes as GBK (with
the GB18030 decoder, its superset) and "iso-8859-1" as windows-1252, which is
what those pages really are. Undecodable bytes become U+FFFD, never an error.
"""

from __future__ import annotations

import codecs
import re

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# WHATWG labels whose decoder differs from Python's codec of the same name.
_LABEL_GROUPS = {
    "gb18030": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk "
    "gb18030",
    "big5hkscs": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "cp932": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "cp949": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 "
    "ksc5601 ksc_5601 windows-949",
    "cp1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 "
    "iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 "
    "x-cp1252",
    "cp1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 "
    "iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "utf-16-le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
    "utf-16-be": "unicodefffe utf-16be",
}
_DECODERS = {label: name for name, labels in _LABEL_GROUPS.items() for label in labels.split()}
# Labels the standard maps to its "replacement" decoder: never trust them.
_REFUSED = frozenset(
    ["csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext", "iso-2022-kr", "replacement"]
)

_CHARSET_PARAM = re.compile(rb"""charset\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s;"']+))""", re.I)
_META_OR_COMMENT = re.compile(rb"<!--.*?-->|<meta[\s/]([^>]*)>?", re.I | re.S)
_ATTRIBUTE = re.compile(rb"""([^\s/>=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>]*))?""")


def decoder_for(label: str | bytes | None) -> str | None:
    """The Python codec for an encoding label, or None if the label is unknown."""
    if not label:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    label = label.strip().lower()
    if label in _REFUSED:
        return None
    name = _DECODERS.get(label)
    if name:
        return name
    try:
        return codecs.lookup(label).name
    except (LookupError, ValueError):  # ValueError: a NUL in the label
        return None


def charset_from_content_type(content_type: str | None) -> str | None:
    if not content_type:
        return None
    match = _CHARSET_PARAM.search(content_type.encode("latin-1", "replace"))
    return decoder_for(next(filter(None, match.groups()), None)) if match else None


def prescan(head: bytes) -> str | None:
    """The encoding a <meta> in `head` declares (HTML's prescan, simplified)."""
    for match in _META_OR_COMMENT.finditer(head):
        attributes_text = match.group(1)
        if attributes_text is None:
            continue
        attributes: dict[bytes, bytes] = {}
        for name, value in _ATTRIBUTE.findall(attributes_text):
            attributes.setdefault(name.lower(), value.strip(b"\"'"))
        if b"charset" in attributes:
            found = decoder_for(attributes[b"charset"])
        elif attributes.get(b"http-equiv", b"").lower() == b"content-type":
            content = _CHARSET_PARAM.search(attributes.get(b"content", b""))
            found = decoder_for(next(filter(None, content.groups()), None)) if content else None
        else:
            continue
        if found:
            # A page that says UTF-16 in ASCII-compatible bytes is not UTF-16.
            return "utf-8" if found.startswith("utf-16") else found
    return None


def declared_encoding(body: bytes, content_type: str | None) -> str:
    """The codec for a body without a byte order mark: Content-Type, <meta>, or UTF-8."""
    found = charset_from_content_type(content_type) or prescan(body[:1024])
    if found:
        return found
    # A <meta charset> after the first 1024 bytes makes browsers reparse with it.
    if not _is_utf8(body[:65536]):
        found = prescan(body[:65536])
    return found or "utf-8"


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(data) - 3  # a character cut by the slice is fine
    return True


def decode_html(body: bytes, content_type: str | None) -> str:
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(codec, "replace")
    return body.decode(declared_encoding(body, content_type), "replace")
