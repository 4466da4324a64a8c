"""Near-duplicate pages (--extract): 64-bit SimHash fingerprints and their index.

A page's fingerprint is Charikar's SimHash of its main text: the text is cut into
tokens (words; in Chinese and Japanese, which put no spaces between words, each
pair of adjacent characters), the tokens into shingles of SHINGLE_TOKENS, each
distinct shingle is hashed to 64 bits with MurmurHash3 (mmh3), and bit i of the
fingerprint is set when more than half the shingles' hashes have it set. Pages that
differ in a few shingles have fingerprints a few bits apart. Shingles of one token
(the set of words, or of character bigrams) found the most planted near-duplicates,
with no false ones among 16,290 pairs of distinct articles, plain or sharing a long
template; longer shingles change in more places for one changed word
(benchmarks/README.md has the figures).

Two pages are near-duplicates when their fingerprints are at most 3 bits apart, the
threshold Manku, Jain and Das Sarma found right for 64-bit SimHash of web pages
("Detecting Near-Duplicates for Web Crawling", WWW 2007). Finding them among a
million pages without comparing with each is their permuted tables' trick: cut the
64 bits into 4 blocks of 16; two fingerprints at most 3 bits apart differ in at most
3 blocks, so they agree on one block at least (pigeonhole). `SimhashIndex` keeps 4
tables, one per block, from the block's value to the fingerprints that have it; a
lookup reads 4 buckets, about 4 * n / 65536 fingerprints (60 at a million pages),
and compares each with one XOR and a popcount.

A fingerprint is written as 16 hex digits: JSON numbers past 2**53 lose bits in
JavaScript and in many JSON readers.
"""

from __future__ import annotations

import re
from array import array

import mmh3

from crawler.page import Page

MAX_DISTANCE = 3  # bits; Manku et al.'s k for 64-bit fingerprints
SHINGLE_TOKENS = 1  # measured best: benchmarks/simhash_bench.py
_BLOCKS = 4
_BLOCK_BITS = 64 // _BLOCKS
_BLOCK_MASK = (1 << _BLOCK_BITS) - 1
# Han, kana, their punctuation and full-width forms: text without spaces between words,
# whose runs are cut into pairs of characters.
_CJK = "\u2e80-\u2fdf\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_TOKENS = re.compile(f"[{_CJK}]+|[^\\W{_CJK}]+")
CJK_CHARACTER = re.compile(f"[{_CJK}]")
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


def shingles(text: str, size: int = SHINGLE_TOKENS) -> set[str]:
    """The distinct runs of `size` tokens (the whole text if it has fewer)."""
    words = tokens(text)
    if len(words) <= size:
        return {" ".join(words)} if words else set()
    if size == 1:
        return set(words)
    return {" ".join(words[i : i + size]) for i in range(len(words) - size + 1)}


def simhash(text: str, shingle_tokens: int = SHINGLE_TOKENS) -> int | None:
    """The 64-bit SimHash of `text`'s shingles; None for a text without a word."""
    features = shingles(text, shingle_tokens)
    if not features:
        return None
    # The first 8 bytes of each hash, little-endian: byte k holds bits 8k to 8k+7.
    digests = b"".join([mmh3.hash_bytes(feature)[:8] for feature in features])
    half = len(features) / 2
    fingerprint = 0
    spread = _SPREAD.__getitem__
    for byte in range(8):
        counts = sum(map(spread, digests[byte::8]))
        for bit in range(8):
            if (counts >> (_LANE_BITS * bit)) & _LANE_MASK > half:
                fingerprint |= 1 << (8 * byte + bit)
    return fingerprint


def to_hex(fingerprint: int) -> str:
    return f"{fingerprint:016x}"


def from_hex(text: str) -> int:
    return int(text, 16)


def distance(a: int, b: int) -> int:
    """Hamming distance: how many bits two fingerprints differ in."""
    return (a ^ b).bit_count()


class SimhashIndex:
    """Fingerprints, each with the URL of the first page that had it, found by nearness.

    `first_near(f)` is the URL of the earliest fingerprint added within
    MAX_DISTANCE bits of `f`, or None. Memory: 16 bytes a fingerprint in each of
    the 4 tables (the fingerprint and its order, in arrays), and the URLs.
    """

    def __init__(self) -> None:
        # Per table, block value -> array of (fingerprint, order) pairs, flattened.
        self._tables: list[dict[int, array[int]]] = [{} for _ in range(_BLOCKS)]
        self._urls: list[str] = []

    def __len__(self) -> int:
        return len(self._urls)

    def __contains__(self, fingerprint: int) -> bool:
        bucket = self._tables[0].get(fingerprint & _BLOCK_MASK)
        return bucket is not None and fingerprint in bucket[::2]

    def add(self, fingerprint: int, url: str) -> bool:
        """Remember `url` for `fingerprint`; False (and nothing changes) if it had one."""
        if fingerprint in self:
            return False
        order = len(self._urls)
        self._urls.append(url)
        for table, block in zip(self._tables, _blocks(fingerprint), strict=True):
            bucket = table.get(block)
            if bucket is None:
                table[block] = array("Q", (fingerprint, order))
            else:
                bucket.append(fingerprint)
                bucket.append(order)
        return True

    def first_near(self, fingerprint: int, max_distance: int = MAX_DISTANCE) -> str | None:
        """The URL of the first fingerprint added within `max_distance` bits, or None."""
        first = len(self._urls)
        for table, block in zip(self._tables, _blocks(fingerprint), strict=True):
            bucket = table.get(block)
            if bucket is None:
                continue
            for i in range(0, len(bucket), 2):
                if bucket[i + 1] < first and (bucket[i] ^ fingerprint).bit_count() <= max_distance:
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
