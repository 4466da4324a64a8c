"""Which character encoding an HTML body is in, and its text.

The order is the HTML standard's encoding sniffing: a byte order mark, then the
charset of Content-Type, then a prescan of the first 1024 bytes for
<meta charset> or <meta http-equiv="Content-Type">, then UTF-8 if the body is
UTF-8, else a guess from the bytes, as browsers make one. Labels map to
decoders as the WHATWG Encoding Standard says, so "gb2312" decodes as GBK (with
the GB18030 decoder, its superset) and "iso-8859-1" as windows-1252, which is
what those pages really are. Undecodable bytes become U+FFFD, never an error; bytes
WHATWG's decoders read and Python's do not (GBK's 0x80 for the euro sign, the code
points windows-1252 and its siblings leave undefined) are read as browsers read them.
"""

from __future__ import annotations

import codecs
import functools
import re

BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# Every label of the WHATWG Encoding Standard (encodings.json), by the Python codec that
# decodes it. A label not here is no encoding, as in browsers: Python knows many more
# (utf-7, utf-32, EBCDIC's cp037, and base64 or zlib, which are not even text codecs).
_LABEL_GROUPS = {
    "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "cp866": "866 cp866 csibm866 ibm866",
    "iso8859-2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 "
    "iso_8859-2:1987 l2 latin2",
    "iso8859-3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 "
    "iso_8859-3:1988 l3 latin3",
    "iso8859-4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 "
    "iso_8859-4:1988 l4 latin4",
    "iso8859-5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 "
    "iso_8859-5 iso_8859-5:1988",
    "iso8859-6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 "
    "iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
    "iso8859-7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 "
    "iso8859-7 iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    "iso8859-8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 "
    "iso8859-8 iso88598 iso_8859-8 iso_8859-8:1988 visual csiso88598i iso-8859-8-i logical",
    "iso8859-10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "iso8859-13": "iso-8859-13 iso8859-13 iso885913",
    "iso8859-14": "iso-8859-14 iso8859-14 iso885914",
    "iso8859-15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "iso8859-16": "iso-8859-16",
    "koi8-r": "cskoi8r koi koi8 koi8-r koi8_r",
    "koi8-u": "koi8-ru koi8-u",
    "mac-roman": "csmacintosh mac macintosh x-mac-roman",
    "mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "cp1250": "cp1250 windows-1250 x-cp1250",
    "cp1251": "cp1251 windows-1251 x-cp1251",
    "cp1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 "
    "iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 "
    "x-cp1252",
    "cp1253": "cp1253 windows-1253 x-cp1253",
    "cp1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 "
    "iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    "cp1255": "cp1255 windows-1255 x-cp1255",
    "cp1256": "cp1256 windows-1256 x-cp1256",
    "cp1257": "cp1257 windows-1257 x-cp1257",
    "cp1258": "cp1258 windows-1258 x-cp1258",
    # GBK and gb2312 are decoded as GB18030, their superset (_DECODED_AS), but a link's
    # query on such a page is encoded in GBK, as browsers do (crawler.urls).
    "gbk": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk",
    "gb18030": "gb18030",
    "big5hkscs": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "euc-jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "iso2022-jp": "csiso2022jp iso-2022-jp",
    "cp932": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "cp949": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 "
    "ksc5601 ksc_5601 windows-949",
    "utf-16-le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
    "utf-16-be": "unicodefffe utf-16be",
    "x-user-defined": "x-user-defined",
}
# WHATWG's ISO-2022-JP reads JIS X 0201 katakana (ESC ( I) too, which Python's
# iso2022_jp refuses and its iso2022_jp_ext reads.
_DECODED_AS = {"gbk": "gb18030", "iso2022-jp": "iso2022_jp_ext"}


def _gb18030_errors(error: UnicodeError) -> tuple[str, int]:
    """WHATWG's gb18030 decoder reads a lone 0x80 as the euro sign, as Windows' GBK (code
    page 936) writes it; Python's decoder has no byte for it."""
    assert isinstance(error, UnicodeDecodeError)
    if error.object[error.start] == 0x80:
        return "\u20ac", error.start + 1
    return "\ufffd", error.end


def _windows_errors(error: UnicodeError) -> tuple[str, int]:
    """WHATWG's windows-874 and windows-125x decoders read a byte from 0x80 to 0x9F that
    their code page leaves undefined as the C1 control of its value, and windows-1255's
    0xCA as U+05BA; Python's decoders have no character for them."""
    assert isinstance(error, UnicodeDecodeError)
    byte = error.object[error.start]
    if 0x80 <= byte < 0xA0:
        return chr(byte), error.start + 1
    return ("\u05ba" if byte == 0xCA else "\ufffd"), error.start + 1


# The codes of WHATWG's Big5 that Python's Big5-HKSCS leaves undefined: A3C0 to A3E1 (the
# control pictures U+2400 to U+241F, U+2421, and the euro sign), and 158 of HKSCS (from
# the Encoding Standard's index-big5.txt: each code's two bytes, then its code point).
_BIG5_UNDEFINED_IN_PYTHON = (
    "877a3875 877b21d53 877c2369e 877d26021 877e3eec 87a1258de 87a23af5 87a37afc "
    "87a49f97 87a524161 87a62890d 87a7231ea 87a820a8a 87a92325e 87aa430a 87ab8484 "
    "87ac9f96 87ad942f 87ae4930 87af8613 87b05896 87b1974a 87b29218 87b379d0 87b47a32 "
    "87b56660 87b66a29 87b7889d 87b8744c 87b97bc5 87ba6782 87bb7a2c 87bc524f 87bd9046 "
    "87be34e6 87bf73c4 87c025db9 87c174c6 87c29fc7 87c357b3 87c4492f 87c5544c 87c64131 "
    "87c72368e 87c85818 87c97a72 87ca27b65 87cb8b8f 87cc46ae 87cd26e88 87ce4181 "
    "87cf25d99 87d07bae 87d1224bc 87d29fc8 87d3224c1 87d4224c9 87d5224cc 87d69fc9 "
    "87d78504 87d8235bb 87d940b4 87da9fca 87db44e1 87dc2adff 87dd62c1 87de706e 87df9fcb "
    "8e697bb8 8e6f7c06 8e7e7cce 8eab7dd2 8eb47e1d 8ecd8005 8ed08028 8f5783c1 8f6984a8 "
    "8f6e840f 8fcb89a6 8fcc89a9 8ffe8d77 906d90fd 907a92b9 90dc975c 90f197ff 91bf9f16 "
    "92448503 92af5159 92b0515b 92b1515d 92b2515e 92c8936e 92d17479 94476d67 94ca799b "
    "95d99097 9644975d 96ed701e 96fc5b28 9b767201 9b7877d7 9b7b7e87 9bc699d6 9bde91d4 "
    "9bec60de 9bf66fb6 9c428f36 9c534fbb 9c6271df 9c689104 9c6b9df0 9c7783cf 9cbc5c10 "
    "9cbd79e3 9cd05a67 9d578f0b 9d5a7b51 9dc462d0 9ea96062 9eef75f9 9efd6c4a 9f609b2e "
    "9f669f17 9fcb50ed 9fd85f0c a063880f a07762ce a0d57468 a0df7162 a0e47250 c6cf5ef4 "
    "c6d365e0 c6d57676 c6d796b6 c6de3003 c6df4edd fa5f5029 fa66507d fabd5305 fac55344 "
    "fad5537f fb485605 fbb85a77 fbf35e75 fbf95ed0 fc4f5f58 fc6c60a4 fcb96490 fce26674 "
    "fcf1675e fdb76c9c fdb86e1d fdbb6e2f fdf1716e fe52732a fe6f745c feaa74e9 fedd7809 "
)
_BIG5_WHATWG_ONLY = {
    bytes.fromhex(code[:4]): chr(int(code[4:], 16)) for code in _BIG5_UNDEFINED_IN_PYTHON.split()
}
_BIG5_WHATWG_ONLY.update(
    (bytes((0xA3, 0xC0 + i)), character)
    for i, character in enumerate([*map(chr, range(0x2400, 0x2420)), "\u2421", "\u20ac"])
)


def _big5_errors(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeDecodeError)
    code = error.object[error.start : error.start + 2]
    character = _BIG5_WHATWG_ONLY.get(code)
    if character is not None:
        return character, error.start + 2
    if len(code) < 2 or not 0x81 <= code[0] <= 0xFE or code[1] < 0x80:
        # not a lead byte, or one followed by ASCII, which WHATWG reads anew
        return "\ufffd", error.start + 1
    return "\ufffd", error.start + 2  # and a lead and a byte past ASCII as one character


# Where WHATWG's Big5 decoder (Microsoft's code page 950 there) differs from Python's
# Big5-HKSCS in characters: ～ for A1E3 where Python has ∼, and so on. Each code point on
# the left comes from one byte sequence only.
_BIG5_PYTHON_ONLY, _BIG5_WHATWG_INSTEAD = "•､‾∼♁☉¥¢£", "‧﹑¯～⊕⊙￥￠￡"
_BIG5_WHATWG = str.maketrans(_BIG5_PYTHON_ONLY, _BIG5_WHATWG_INSTEAD)
_BIG5_DIFFERENT = tuple(map(chr, _BIG5_WHATWG))
# A241 and A242 are ∕ and ﹨ to browsers, ／ and ＼ to Python, which A1FE and A240 also
# are: they are found in the bytes, where a trail byte A2 before A or B is not one.
_BIG5_SLASHES = {b"\xa2A": "\u2215", b"\xa2B": "\ufe68"}
_BIG5_SLASH = re.compile(rb"\xa2[AB]")
# A byte that always stands alone, before which a Big5 character starts: below 0x40 (no
# trail byte is), or DEL; a lead byte followed by one is an error and leaves it alone.
_BIG5_SINGLE = frozenset([*range(0x40), 0x7F])


def _big5_slashes_read(body: bytes, text: str, errors: str) -> str:
    """`text`, decoded from `body`, with the codes A241 and A242 read as browsers read
    them (the text again, if `body` holds either as a character)."""
    parts: list[str] = []
    start = known = 0  # where the text still to decode starts; a character boundary
    for match in _BIG5_SLASH.finditer(body):
        at = match.start()
        boundary = at
        while boundary > known and body[boundary - 1] not in _BIG5_SINGLE:
            boundary -= 1
        while boundary < at:  # from a byte that stands alone, a character at a time
            boundary += 2 if 0x81 <= body[boundary] <= 0xFE else 1
        known = boundary
        if boundary == at:
            parts += [body[start:at].decode("big5hkscs", errors), _BIG5_SLASHES[match[0]]]
            start = known = at + 2
    if not parts:
        return text
    return "".join([*parts, body[start:].decode("big5hkscs", errors)])


def _euc_jp_errors(error: UnicodeError) -> tuple[str, int]:
    """WHATWG's EUC-JP has JIS X 0208 as Windows has it, with the NEC row 13 (①, Ⅰ, ㍉...)
    and the IBM extensions of rows 89 to 92, which Python's euc_jp leaves undefined:
    read as Shift_JIS's code page 932 reads the same pointer, which WHATWG's index shares."""
    assert isinstance(error, UnicodeDecodeError)
    code = error.object[error.start : error.start + 2]
    if len(code) == 2 and 0xA1 <= code[0] <= 0xFE and 0xA1 <= code[1] <= 0xFE:
        pointer = (code[0] - 0xA1) * 94 + code[1] - 0xA1
        lead, trail = divmod(pointer, 188)
        shift_jis = bytes(
            (lead + (0x81 if lead < 0x1F else 0xC1), trail + (0x40 if trail < 0x3F else 0x41))
        )
        try:
            return shift_jis.decode("cp932"), error.start + 2
        except UnicodeDecodeError:
            return "\ufffd", error.start + 2
    return "\ufffd", error.start + 1


# JIS X 0212's 2237, ～ to WHATWG (its index-jis0212) and ~ to Python, which ASCII's ~ also
# is: found in the bytes, where 8F is always a lead byte.
_EUC_JP_TILDE = b"\x8f\xa2\xb7"
# Where WHATWG's EUC-JP (Windows' mappings) reads a JIS X 0208 code as another character
# than Python's: ～ for A1C1 where Python has 〜, ∥, －, ￠, ￡, ￢. Each code point on the
# left comes from that one byte sequence only.
_EUC_JP_WHATWG = str.maketrans(
    "\u301c\u2016\u2212\xa2\xa3\xac", "\uff5e\u2225\uff0d\uffe0\uffe1\uffe2"
)
_EUC_JP_DIFFERENT = tuple(map(chr, _EUC_JP_WHATWG))
# WHATWG's KOI8-U is KOI8-RU: 0xAE and 0xBE are Belarusian ў and Ў, not box drawing.
_KOI8_U_WHATWG = str.maketrans("\u255d\u256c", "\u045e\u040e")
_KOI8_U_PYTHON = {whatwg: python for python, whatwg in _KOI8_U_WHATWG.items()}  # to encode
# Where WHATWG's gb18030 decoder (GB18030-2022's mappings) differs from Python's, which
# gives private-use code points for 18 characters that Unicode has since encoded
# (vertical punctuation, ideographs) and for A3A0, the ideographic space to browsers, and
# swaps ḿ and U+E7C7. Each code point on the left comes from one byte sequence only, so
# translating the text is exact.
_GB18030_2022 = {
    0xE5E5: 0x3000,  # A3A0
    **{0xE78D + i: 0xFE10 + j for i, j in enumerate([0, 2, 1, 3, 4, 5, 6, 7, 8, 9])},
    0xE7C7: 0x1E3F,  # A8BC
    0x1E3F: 0xE7C7,  # 8135F437
    0xE81E: 0x9FB4,
    0xE826: 0x9FB5,
    0xE82B: 0x9FB6,
    0xE82C: 0x9FB7,
    0xE832: 0x9FB8,
    0xE843: 0x9FB9,
    0xE854: 0x9FBA,
    0xE864: 0x9FBB,
}
_GB18030_DIFFERENT = tuple(map(chr, _GB18030_2022))
# WHATWG's gb18030 encoder, the other way: each of those characters as the code point
# Python encodes to its bytes (U+FE10 as U+E78D, A6D9). U+3000 is A1A1 to both, and
# U+E5E5 (A3A0 to Python) is no character of gb18030 to browsers.
_GB18030_2022_ENCODED = str.maketrans(
    {whatwg: python for python, whatwg in _GB18030_2022.items() if whatwg != 0x3000}
)
# WHATWG's x-user-defined, which Python lacks: ASCII, and the bytes 0x80 to 0xFF as the
# private-use U+F780 to U+F7FF (a page of binary data read byte for byte by a script).
_X_USER_DEFINED = "".join(map(chr, range(0x80))) + "".join(map(chr, range(0xF780, 0xF800)))
_X_USER_DEFINED_ENCODING = codecs.charmap_build(_X_USER_DEFINED)


def _x_user_defined(name: str) -> codecs.CodecInfo | None:
    if name != "x_user_defined":
        return None
    return codecs.CodecInfo(
        name="x-user-defined",
        encode=lambda text, errors="strict": codecs.charmap_encode(
            text, errors, _X_USER_DEFINED_ENCODING
        ),
        decode=lambda data, errors="strict": codecs.charmap_decode(data, errors, _X_USER_DEFINED),
    )


codecs.register(_x_user_defined)
# Registered once, under names of our own: how the decoders above handle their errors.
codecs.register_error("crawler-gb18030", _gb18030_errors)
codecs.register_error("crawler-windows", _windows_errors)
codecs.register_error("crawler-big5", _big5_errors)
codecs.register_error("crawler-euc-jp", _euc_jp_errors)
_ERRORS = {
    "gb18030": "crawler-gb18030",
    "gbk": "crawler-gb18030",
    "big5hkscs": "crawler-big5",
    "euc-jp": "crawler-euc-jp",
    "cp874": "crawler-windows",
}
_ERRORS.update((f"cp{page}", "crawler-windows") for page in range(1250, 1259))
_ASCII_WHITESPACE = "\t\n\f\r "
_DECODERS = {label: name for name, labels in _LABEL_GROUPS.items() for label in labels.split()}

_CHARSET_PARAM = re.compile(rb"""charset\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s;"']+))""", re.I)
_META_OR_COMMENT = re.compile(rb"<!--.*?-->|<meta[\s/]([^>]*)>?", re.I | re.S)
_ATTRIBUTE = re.compile(rb"""([^\s/>=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>]*))?""")


def decoder_for(label: str | bytes | None) -> str | None:
    """The Python codec for an encoding label ("gbk" for GBK's, decoded as "gb18030"), or
    None if the label is unknown."""
    if not label:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    # The "replacement" encoding's labels (iso-2022-kr, hz-gb-2312...) are left out, as
    # unknown: its decoder would make the whole page one U+FFFD.
    return _DECODERS.get(label.strip(_ASCII_WHITESPACE).lower())


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
            # A page that says UTF-16 in ASCII-compatible bytes is not UTF-16, and HTML's
            # prescan reads a <meta> saying x-user-defined as windows-1252.
            if found == "x-user-defined":
                return "cp1252"
            return "utf-8" if found.startswith("utf-16") else found
    return None


_XML_DECLARATION = re.compile(rb"""<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']""")


def _xml_declared(head: bytes) -> str | None:
    """The encoding an XML declaration names, as XML parsers read an XHTML page (an
    application/xhtml+xml one has no other, its <meta> unread): an XHTML page of a
    Chinese site declared gb2312 there and nowhere else had its title guessed from its
    bytes, and a short one was mojibake (图片 read as UTF-8 'ͼƬ')."""
    match = _XML_DECLARATION.match(head)
    found = decoder_for(match.group(1)) if match else None
    return "utf-8" if found is not None and found.startswith("utf-16") else found


# How far in a <meta charset> is looked for when all before it is ASCII: past a long
# inline script or style, and short of scanning a 10 MB page of comments (12 ms a MB).
_LATE_META_BYTES = 1 << 20


def declared_encoding(body: bytes, content_type: str | None) -> str:
    """The codec for a body without a byte order mark: Content-Type, <meta>, an XML
    declaration, or UTF-8."""
    found = charset_from_content_type(content_type) or prescan(body[:1024])
    if found:
        return found
    if body.startswith(b"<?xml"):
        found = _xml_declared(body[:1024])
        if found:
            return found
    head = body[:65536]
    if len(body) > len(head) and head.isascii():
        # Nothing to go by yet: browsers read on, and a <meta> further in (after a long
        # inline script, say) or the first bytes past ASCII decide (HTML's "change the
        # encoding").
        late = prescan(body[:_LATE_META_BYTES])
        return late or ("utf-8" if body.isascii() else guessed_encoding(body))
    if _is_utf8(head):
        return "utf-8"
    # A <meta charset> after the first 1024 bytes makes browsers reparse with it; with
    # none, they guess from the bytes (Firefox's chardetng, Chrome's CED).
    return prescan(head) or guessed_encoding(head)


# The legacy encodings a page that declares none and is not UTF-8 may be in, in the order
# a tie goes, and the bytes of each one's common characters: the punctuation and first
# level of GB 2312's hanzi, Big5's and JIS X 0208's; the kana; KS X 1001's hangul.
_GUESSES = {
    "gbk": ((0xA1, 0xA1, 0xA1, 0xFE), (0xA3, 0xA3, 0xA1, 0xFE), (0xB0, 0xD7, 0xA1, 0xFE)),
    "big5hkscs": ((0xA1, 0xA3, 0x40, 0xFE), (0xA4, 0xC6, 0x40, 0xFE)),
    "cp932": ((0x81, 0x83, 0x40, 0xFC), (0x88, 0x98, 0x40, 0xFC)),
    "euc-jp": ((0xA1, 0xA1, 0xA1, 0xFE), (0xA4, 0xA5, 0xA1, 0xFE), (0xB0, 0xCF, 0xA1, 0xFE)),
    "cp949": ((0xA1, 0xA1, 0xA1, 0xFE), (0xB0, 0xC8, 0xA1, 0xFE)),
}
# Below this share of common characters, the page is read as windows-1252, the default
# browsers outside East Asia fall back to.
_MIN_COMMON_SHARE = 0.6
_MIN_UTF8_SHARE = 0.9
# Korean puts spaces between words and Chinese does not: hangul in EUC-KR are GB 2312's
# hanzi bytes too, and a tie between the two is settled by how often a space separates
# two non-ASCII characters.
_SPACED = re.compile("[^\x00-\x7f] [^\x00-\x7f]")
_NON_ASCII = re.compile("[^\x00-\x7f]")
_NON_ASCII_BYTE = re.compile(b"[\x80-\xff]")
_SAMPLE_BYTES = 4096


def guessed_encoding(data: bytes) -> str:
    """The encoding of `data`, a page that declares none and is not all UTF-8: UTF-8 if
    nearly all of it is, else the East Asian encoding whose reading has the largest
    share of common characters, else windows-1252."""
    # 4 KB from the first byte past ASCII (some 1,500 characters of Chinese) are plenty
    # to tell, and take a tenth of the time a whole page does.
    first = _NON_ASCII_BYTE.search(data)
    if first is None:
        return "cp1252"
    data = data[first.start() : first.start() + _SAMPLE_BYTES]
    # Mostly UTF-8, with a stray byte (a template in UTF-8 around text in Latin-1): UTF-8,
    # which a legacy reading would turn into mojibake throughout.
    utf8 = _NON_ASCII.findall(data.decode("utf-8", "replace"))
    if utf8.count("\ufffd") < (1 - _MIN_UTF8_SHARE) * len(utf8):
        return "utf-8"
    best, best_share = "cp1252", _MIN_COMMON_SHARE
    shares = {}
    for encoding in _GUESSES:
        text = data.decode(_DECODED_AS.get(encoding, encoding), "replace")
        non_ascii = _NON_ASCII.findall(text)  # never empty: the sample starts with one
        common = _common_characters(encoding)
        shares[encoding] = share = sum(map(common.__contains__, non_ascii)) / len(non_ascii)
        if share > best_share:
            best, best_share = encoding, share
    if best == "gbk" and shares["cp949"] >= best_share - 0.05:
        text = data.decode("cp949", "replace")
        if len(_SPACED.findall(text)) > 0.1 * len(_NON_ASCII.findall(text)):
            return "cp949"
    return best


@functools.cache
def _common_characters(encoding: str) -> frozenset[str]:
    codec = _DECODED_AS.get(encoding, encoding)
    found = set()
    for first_lead, last_lead, first_trail, last_trail in _GUESSES[encoding]:
        for lead in range(first_lead, last_lead + 1):
            for trail in range(first_trail, last_trail + 1):
                try:
                    found.add(bytes((lead, trail)).decode(codec))
                except UnicodeDecodeError:
                    continue
    return frozenset(character for character in found if len(character) == 1)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(data) - 3  # a character cut by the slice is fine
    return True


def encode_as_browsers(text: str, encoding: str) -> bytes:
    """`text` in `encoding` (a name decoder_for gives) as the Encoding Standard's encoder
    writes it, which is how a browser encodes a link's query on a page in that encoding;
    UnicodeEncodeError for a character the encoder has no bytes for."""
    if encoding in ("gbk", "gb18030"):
        if "\ue5e5" in text:
            raise UnicodeEncodeError(encoding, text, 0, len(text), "U+E5E5 is no gb18030")
        if any(map(text.__contains__, _GB18030_ENCODED_OTHERWISE)):
            text = text.translate(_GB18030_2022_ENCODED)
        if encoding == "gb18030":
            return text.encode("gb18030")
        # The GBK encoder: GB18030's two-byte forms only, and 0x80 for the euro sign.
        raw = b"".join(b"\x80" if c == "\u20ac" else c.encode("gb18030") for c in text)
        if len(raw) > 2 * len(text):
            raise UnicodeEncodeError("gbk", text, 0, len(text), "a four-byte GB18030 form")
        return raw
    if encoding == "big5hkscs":
        return b"".join(map(_big5_encoded, text))  # one by one: no HKSCS pairs (Ê̄: 8862)
    if encoding in ("cp932", "euc-jp"):
        return b"".join(_japanese_encoded(character, encoding) for character in text)
    if encoding == "koi8-u":
        if "\u255d" in text or "\u256c" in text:  # ╝ and ╬: no bytes of WHATWG's KOI8-U
            raise UnicodeEncodeError(encoding, text, 0, len(text), "no ╝ or ╬ in KOI8-RU")
        if "\u045e" in text or "\u040e" in text:
            text = text.translate(_KOI8_U_PYTHON)
    return text.encode(encoding)


def _japanese_encoded(character: str, encoding: str) -> bytes:
    """WHATWG's Shift_JIS and EUC-JP encoders: JIS X 0208 as Windows has it, each
    character at its first code (Python's cp932 and euc_jp choose others for the IBM
    and NEC extensions, ￢, ∵..., and lack ¥ and ‾, which are 0x5C and 0x7E)."""
    code = ord(character)
    if code < 0x80 or (code == 0x80 and encoding == "cp932"):
        return bytes((code,))
    if code in (0xA5, 0x203E):
        return b"\x5c" if code == 0xA5 else b"\x7e"
    if 0xFF61 <= code <= 0xFF9F:  # halfwidth katakana
        single = bytes((code - 0xFF61 + 0xA1,))
        return single if encoding == "cp932" else b"\x8e" + single
    pointer = _jis0208_pointers(encoding == "cp932").get("\uff0d" if code == 0x2212 else character)
    if pointer is None:
        raise UnicodeEncodeError(encoding, character, 0, 1, "not in WHATWG's index jis0208")
    lead, trail = divmod(pointer, 188 if encoding == "cp932" else 94)
    if encoding == "euc-jp":
        return bytes((lead + 0xA1, trail + 0xA1))
    return bytes((lead + (0x81 if lead < 0x1F else 0xC1), trail + (0x40 if trail < 0x3F else 0x41)))


@functools.cache
def _jis0208_pointers(shift_jis: bool) -> dict[str, int]:
    """WHATWG's index jis0208 the other way, each character's first pointer (Shift_JIS's
    encoder leaves out 8272 to 8835, NEC's copy of IBM's extensions). Python's cp932
    decodes every code as that index does, but for 8836 to 10715, the decoder's private
    use, which the index has no character for."""
    pointers: dict[str, int] = {}
    for pointer in range(11104):
        if 8836 <= pointer <= 10715 or (shift_jis and 8272 <= pointer <= 8835):
            continue
        lead, trail = divmod(pointer, 188)
        code = bytes(
            (lead + (0x81 if lead < 0x1F else 0xC1), trail + (0x40 if trail < 0x3F else 0x41))
        )
        try:
            pointers.setdefault(code.decode("cp932"), pointer)
        except UnicodeDecodeError:
            continue
    return pointers


_GB18030_ENCODED_OTHERWISE = tuple(map(chr, _GB18030_2022_ENCODED))


def _big5_encoded(character: str) -> bytes:
    raw = _big5_encoder_table().get(character, b"")
    if raw is None:
        raise UnicodeEncodeError("big5", character, 0, 1, "not in WHATWG's Big5")
    if not raw:
        raw = character.encode("big5hkscs")
        if raw[0] < 0xA1:
            raise UnicodeEncodeError("big5", character, 0, 1, "a Hong Kong extension")
    return raw


@functools.cache
def _big5_encoder_table() -> dict[str, bytes | None]:
    """Where WHATWG's Big5 encoder writes a character otherwise than Python's big5hkscs,
    which encodes the Hong Kong extensions (lead bytes under 0xA1) that browsers leave out
    and, for a character at two codes, not always the first one, which browsers write
    (apart from six, that both write at their last code)."""
    table: dict[str, bytes | None] = {
        python: None
        for python in _BIG5_PYTHON_ONLY  # a character browsers read otherwise
    }
    table.update(
        (whatwg, python.encode("big5hkscs"))
        for python, whatwg in zip(_BIG5_PYTHON_ONLY, _BIG5_WHATWG_INSTEAD, strict=True)
    )
    for code, character in _BIG5_WHATWG_ONLY.items():
        if code[0] < 0xA1 or character in table:
            continue
        try:
            python = character.encode("big5hkscs")
        except UnicodeEncodeError:
            python = code
        table[character] = min(code, python) if python[0] >= 0xA1 else code
    # Box drawing and slashes, whose first code Python reads as another character.
    table.update(
        {
            "╭": b"\xa2\x7e",
            "╮": b"\xa2\xa1",
            "╯": b"\xa2\xa3",
            "╰": b"\xa2\xa2",
            "∕": b"\xa2\x41",
            "﹨": b"\xa2\x42",
            "／": b"\xa1\xfe",
            "＼": b"\xa2\x40",
        }
    )
    return table


def decode_html(body: bytes, content_type: str | None) -> str:
    return decode_html_as(body, content_type)[0]


def decode_html_as(body: bytes, content_type: str | None) -> tuple[str, str]:
    """The body's text, and its encoding (the name decoder_for gives), which a link's
    query is encoded in."""
    for bom, codec in BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(codec, "replace"), codec
    encoding = declared_encoding(body, content_type)
    return decode_as(body, encoding), encoding


def decode_as(body: bytes, encoding: str) -> str:
    """`body` in `encoding` (a name decoder_for or guessed_encoding gives) as the
    Encoding Standard's decoder reads it."""
    codec = _DECODED_AS.get(encoding, encoding)
    errors = _ERRORS.get(encoding, "replace")
    text = body.decode(codec, errors)
    # One search for each character (16 us for 14,000 characters, a regular expression's
    # class took 50): translate, which costs a millisecond a page, is rarely needed.
    if codec == "gb18030" and any(map(text.__contains__, _GB18030_DIFFERENT)):
        text = text.translate(_GB18030_2022)
    elif codec == "big5hkscs":
        if b"\xa2A" in body or b"\xa2B" in body:
            text = _big5_slashes_read(body, text, errors)
        if any(map(text.__contains__, _BIG5_DIFFERENT)):
            text = text.translate(_BIG5_WHATWG)
    elif codec == "euc-jp":
        if _EUC_JP_TILDE in body:
            text = "\uff5e".join(part.decode(codec, errors) for part in body.split(_EUC_JP_TILDE))
        if any(map(text.__contains__, _EUC_JP_DIFFERENT)):
            text = text.translate(_EUC_JP_WHATWG)
    elif codec == "koi8-u" and ("\u255d" in text or "\u256c" in text):
        text = text.translate(_KOI8_U_WHATWG)
    return text
