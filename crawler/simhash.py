"""Near-duplicate pages (--extract): 64-bit SimHash fingerprints and their index.

A page's fingerprint is 8 SimHashes of 8 bits (Charikar's), one of each group of its
main text's sentences: a sentence (cut at a line's end, at 。！？!? and at a full stop
before a space) belongs to the group its least-hashed shingle names, so the same
sentence is in the same group on every page, and a word changed moves it only if it
was that shingle. A group's tokens (words; in Chinese and Japanese, which
put no spaces between words, each pair of adjacent characters) are cut into shingles
of SHINGLE_TOKENS, each distinct shingle is hashed with MurmurHash3 (mmh3), and bit i
of the group's byte is set when more than half the shingles' hashes have it set; a
group without a sentence is 0. Byte g of the fingerprint is group g's.

Why groups: one 64-bit SimHash of the whole text flips a bit with a chance of about
atan(sqrt(f))/pi when a share f of its shingles changes, so 3 bits found changes of
about 1% of the text, and a sentence added or replaced (5 to 15% of a Chinese article's
character pairs, whose pairs a new sentence brings mostly new) was found a quarter of
the time. A changed sentence changes one group, or two (a sentence out of one, another
into another), and leaves the others' bytes exactly as they were; a few words changed
here and there move each group's byte a bit or so, as a whole-text SimHash moves.

Two pages are near-duplicates (`near`) when their fingerprints are equal, or when
they share two non-zero bytes and a non-zero 16-bit block, and differ in at most
MAX_GROUPS_CHANGED bytes or at most MAX_DISTANCE bits (Manku, Jain and Das Sarma's
threshold for 64-bit SimHash of web pages, "Detecting Near-Duplicates for Web
Crawling", WWW 2007). The shared bytes keep apart short pages of a sentence or two,
most of whose bytes are 0 on both. Finding them among a million pages without
comparing with each is their permuted tables' trick: two near fingerprints agree on a
16-bit block that is not 0 (pigeonhole: 3 bytes or bits changed leave one of the 4
blocks whole), so `SimhashIndex` keeps 4 tables, one per block, from the block's value
to the fingerprints that have it, 0 left out (two empty groups, on most short pages);
a lookup reads 4 buckets, about 4 * n / 65536 fingerprints (60 at a million pages).

A fingerprint is written as 16 hex digits: JSON numbers past 2**53 lose bits in
JavaScript and in many JSON readers.
"""

from __future__ import annotations

import re
from array import array

import mmh3

from crawler.page import Page

MAX_DISTANCE = 3  # bits; Manku et al.'s k for 64-bit fingerprints
MAX_GROUPS_CHANGED = 2  # bytes: a sentence out of one group and another into another
SHINGLE_TOKENS = 1  # measured best: benchmarks/simhash_bench.py
_GROUPS = 8
_BYTE_LOWS = 0x0101_0101_0101_0101
_BLOCK_LOWS = 0x0001_0001_0001_0001
_BLOCKS = 4
_BLOCK_BITS = 64 // _BLOCKS
_BLOCK_MASK = (1 << _BLOCK_BITS) - 1
# Han, kana, their punctuation and full-width forms: text without spaces between words,
# whose runs are cut into pairs of characters.
_CJK = "\u2e80-\u2fdf\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_TOKENS = re.compile(f"[{_CJK}]+|[^\\W{_CJK}]+")
CJK_CHARACTER = re.compile(f"[{_CJK}]")
_SENTENCE_END = re.compile(r"[。！？!?\n]|\.\s")
# Byte value -> its 8 bits spread into 8 lanes of 32 bits, so that adding the
# spread bytes of many hashes counts, in one big integer, how many have each bit.
_LANE_BITS = 32
_LANE_MASK = (1 << _LANE_BITS) - 1
_SPREAD = [sum(((b >> i) & 1) << (_LANE_BITS * i) for i in range(8)) for b in range(256)]


def tokens(text: str) -> list[str]:
    """The words of `text`, casefolded; in CJK text, each pair of adjacent characters."""
    words = _TOKENS.findall(text.casefold())
    if not CJK_CHARACTER.search(text):
        return words
    found: list[str] = []
    for word in words:
        if len(word) > 1 and CJK_CHARACTER.match(word):
            found.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            found.append(word)
    return found


def _shingled(words: list[str], size: int) -> set[str]:
    """The distinct runs of `size` of `words` (all of them if they are fewer)."""
    if len(words) <= size:
        return {" ".join(words)} if words else set()
    if size == 1:
        return set(words)
    return {" ".join(words[i : i + size]) for i in range(len(words) - size + 1)}


def simhash(text: str, shingle_tokens: int = SHINGLE_TOKENS) -> int | None:
    """The fingerprint of `text`: byte g is the 8-bit SimHash of the shingles of its
    sentences of group g (see the module's account); None for a text without a word."""
    folded = text.casefold()
    tokenized = tokens if CJK_CHARACTER.search(folded) else _TOKENS.findall
    sentences = [_shingled(tokenized(s), shingle_tokens) for s in _SENTENCE_END.split(folded)]
    sentences = [features for features in sentences if features]
    if not sentences:
        return None
    hashes = {feature: mmh3.hash(feature, signed=False) for feature in set().union(*sentences)}
    hash_of = hashes.__getitem__
    groups: list[set[str]] = [set() for _ in range(_GROUPS)]
    for features in sentences:
        # The group of the least-hashed shingle: a word changed moves the sentence to
        # another group only if it was that one.
        groups[min(map(hash_of, features)) % _GROUPS] |= features
    fingerprint = 0
    spread = _SPREAD.__getitem__
    for group, features in enumerate(groups):
        # Bits 8 to 15 of each hash: its low bits named the group of some of them.
        counts = sum(map(spread, [(hash_of(f) >> 8) & 0xFF for f in features]))
        half = len(features) / 2
        for bit in range(8):
            if (counts >> (_LANE_BITS * bit)) & _LANE_MASK > half:
                fingerprint |= 1 << (8 * group + bit)
    return fingerprint


def to_hex(fingerprint: int) -> str:
    return f"{fingerprint:016x}"


def from_hex(text: str) -> int:
    return int(text, 16)


def distance(a: int, b: int) -> int:
    """Hamming distance: how many bits two fingerprints differ in."""
    return (a ^ b).bit_count()


def near(a: int, b: int) -> bool:
    """Whether the pages of fingerprints `a` and `b` are near-duplicates."""
    if a == b:
        return True
    differ = a ^ b
    changed = _non_zero_bytes(differ)
    if changed.bit_count() > MAX_GROUPS_CHANGED and differ.bit_count() > MAX_DISTANCE:
        return False  # most candidates: one test of a few integer operations
    unchanged = ~changed & _BYTE_LOWS
    filled = _non_zero_bytes(a)
    # A 16-bit block that is the same in both, and not 0.
    same_block = unchanged & (unchanged >> 8) & (filled | (filled >> 8)) & _BLOCK_LOWS
    return (filled & unchanged).bit_count() >= 2 and same_block != 0


def _non_zero_bytes(x: int) -> int:
    """The lowest bit of each byte of `x` that is not 0, set."""
    x |= x >> 4
    x |= x >> 2
    x |= x >> 1
    return x & _BYTE_LOWS


class SimhashIndex:
    """Fingerprints, each with the URL of the first page that had it, found by nearness.

    `first_near(f)` is the URL of the earliest fingerprint added that is `near` `f`, or
    None. Memory: 16 bytes a fingerprint in each of the tables of its non-zero blocks
    (the fingerprint and its order, in arrays), and the URLs.
    """

    def __init__(self) -> None:
        # Per table, block value -> array of (fingerprint, order) pairs, flattened.
        self._tables: list[dict[int, array[int]]] = [{} for _ in range(_BLOCKS)]
        self._urls: list[str] = []

    def __len__(self) -> int:
        return len(self._urls)

    def __contains__(self, fingerprint: int) -> bool:
        for table, block in zip(self._tables, _blocks(fingerprint), strict=True):
            if block:
                bucket = table.get(block)
                return bucket is not None and fingerprint in bucket[::2]
        return False

    def add(self, fingerprint: int, url: str) -> bool:
        """Remember `url` for `fingerprint`; False (and nothing changes) if it had one, or
        if it is 0 (no text: nothing is near it)."""
        if not fingerprint or fingerprint in self:
            return False
        order = len(self._urls)
        self._urls.append(url)
        for table, block in zip(self._tables, _blocks(fingerprint), strict=True):
            if not block:
                continue
            bucket = table.get(block)
            if bucket is None:
                table[block] = array("Q", (fingerprint, order))
            else:
                bucket.append(fingerprint)
                bucket.append(order)
        return True

    def first_near(self, fingerprint: int) -> str | None:
        """The URL of the first fingerprint added that is `near` `fingerprint`, or None."""
        first = len(self._urls)
        for table, block in zip(self._tables, _blocks(fingerprint), strict=True):
            bucket = table.get(block) if block else None
            if bucket is None:
                continue
            for i in range(0, len(bucket), 2):
                if bucket[i + 1] < first and near(bucket[i], fingerprint):
                    first = bucket[i + 1]
        return self._urls[first] if first < len(self._urls) else None

    def mark(self, page: Page) -> None:
        """Set `page`'s near_duplicate_of, if its simhash is near an earlier page's, and
        remember its fingerprint. A page is never its own near-duplicate: after a crash,
        a page fetched again may find the fingerprint its first fetch left."""
        value = page.fields.get("simhash")
        if value is None:
            return
        fingerprint = from_hex(value)
        first = self.first_near(fingerprint)
        if first is not None and first != page.url:
            page.fields["near_duplicate_of"] = first
        self.add(fingerprint, page.url)


def _blocks(fingerprint: int) -> tuple[int, ...]:
    return tuple((fingerprint >> (_BLOCK_BITS * i)) & _BLOCK_MASK for i in range(_BLOCKS))
