"""BloomFilter: the visited set. Sizing, check-and-add, growth, persistence.

It reads like a set: `bf.add(url)` returns True when the URL was new, `url in bf`,
`len(bf)`. Two parameters a user understands, the number of items it is sized
for and the false-positive rate wanted up to that number; the rest is derived:

    m = ceil(-n ln p / (ln 2)^2) bits, rounded up to whole 64-bit words
    k = round((m / n) ln 2) hash functions

Each item is hashed once with MurmurHash3 x64 128. Its two 64-bit halves h1
and h2 give, by double hashing (g_i = h1 + i*h2, Kirsch & Mitzenmacher), the
start and stride of two runs of about k/2 positions each. A stride is at most
m over the run's length, so a run wraps around the array at most once: it is
one or two strided slices, which bitarray counts and sets in C, and no per-bit
work runs in the interpreter. Not one run of k: items whose runs share a stride
overlap, and with one run that put small filters far off target (8.2x p at 10k
items at p = 1e-6, 2.1x at 1,000 at 1e-4); two independent runs bring every size
measured back within [0.75, 1.15] x p. Not enhanced double hashing either: its
cubic term breaks the strided slices, and computing k indices in Python costs
more than the second run. benchmarks/bloom_bench.py measures rates and speed.

Past its capacity the filter grows instead of degrading: it is a scalable Bloom
filter (Almeida et al. 2007). Each new slice holds twice the items of the
previous one at half its error rate, so the compound rate stays below
p + p/2 + p/4 + ... < 2p however far the crawl goes.

File format (little-endian), the same for `save()` and for the memory-mapped
file of `BloomFilter.open()`:

    page 0    header: magic, version, flags, slice count, capacity, error rate,
              journal position, expected missed URLs, CRC-32, then one entry per
              slice (bits, hash count, capacity, items, error rate)
    then      each slice's bits, padded to a 4096-byte page

The CRC-32 covers the header (with the CRC field zeroed) and every slice's bits.
"""

from __future__ import annotations

import contextlib
import logging
import math
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

import mmh3
from bitarray import bitarray

log = logging.getLogger(__name__)

MAGIC = b"CRAWLBF\x00"
VERSION = 1
PAGE = 4096
_FLAG_OPEN = 1  # set while a memory-mapped file is in use; its CRC is stale until close()
_HEADER = struct.Struct("<8sHHIQdQdI")
_SLICE = struct.Struct("<QIIQQd")
_MAX_SLICES = (PAGE - _HEADER.size) // _SLICE.size
_CRC_OFFSET = _HEADER.size - 4
_hash = mmh3.hash64


class BloomFileError(ValueError):
    """A saved filter is truncated, corrupted, or not a filter file at all."""


def optimal_bits(capacity: int, error_rate: float) -> int:
    """m for n items at rate p, rounded up to whole 64-bit words."""
    bits = math.ceil(-capacity * math.log(error_rate) / math.log(2) ** 2)
    return -(-bits // 64) * 64


def optimal_hashes(bits: int, capacity: int) -> int:
    return max(1, round(bits / capacity * math.log(2)))


def _padded(nbytes: int) -> int:
    return -(-nbytes // PAGE) * PAGE


Probe = Callable[[int, int], bool]


def strided_runs(h1: int, h2: int, m: int, k: int) -> tuple[int, int, int, int]:
    """(start, stride) of an item's two runs in a slice of m bits and k positions.

    The run of n positions from start a with stride s sets bits (a + i*s) mod m for
    i < n; the first run has (k + 1) // 2 positions, the second the rest. This is
    the layout `_strided_runs` inlines, spelled out for the Redis-side filter,
    which sets the same bits one by one.
    """
    k1 = (k + 1) // 2
    g = h1 + h2
    return h1 % m, g % (m // k1) + 1, (g + h2) % m, (g + 2 * h2) % (m // max(1, k - k1)) + 1


def _strided_runs(bits: bitarray, m: int, k: int) -> tuple[Probe, Probe]:
    """`holds(h1, h2)` and `insert(h1, h2)` for k positions in m bits, as two strided runs.

    From double hashing, g_i = h1 + i*h2: the first run starts at g_0 mod m with
    a stride of 1 + g_1 mod (m // k1), the second at g_2 mod m with 1 + g_3 mod
    (m // k2). A stride of at most m // n keeps a run of n positions from wrapping
    around the array more than once, so each run is one or two slices that bitarray
    counts and sets in C. Two runs, not one: items whose single runs shared a stride
    overlapped, which put the false-positive rate of small filters at several times
    the target. Closures, because attribute lookups are a fair part of the cost.
    """
    k1 = (k + 1) // 2
    k2 = k - k1
    range1, range2 = m // k1, m // max(1, k2)
    span1, span2 = k1 - 1, k2 - 1
    count = bits.count

    def holds(h1: int, h2: int) -> bool:
        a = h1 % m
        g = h1 + h2
        s = g % range1 + 1
        e = a + span1 * s + 1
        if e <= m:
            if count(1, a, e, s) != k1:
                return False
        elif count(1, a, m, s) + count(1, (a - m) % s, e - m, s) != k1:
            return False
        g += h2
        b = g % m
        t = (g + h2) % range2 + 1
        f = b + span2 * t + 1
        if f <= m:
            return count(1, b, f, t) == k2
        return count(1, b, m, t) + count(1, (b - m) % t, f - m, t) == k2

    def insert(h1: int, h2: int) -> bool:
        """Set the item's bits; True if any was clear (the item is new)."""
        a = h1 % m
        g = h1 + h2
        s = g % range1 + 1
        e = a + span1 * s + 1
        found = count(1, a, e, s) if e <= m else count(1, a, m, s) + count(1, (a - m) % s, e - m, s)
        g += h2
        b = g % m
        t = (g + h2) % range2 + 1
        f = b + span2 * t + 1
        if found == k1:
            if f <= m:
                if count(1, b, f, t) == k2:
                    return False
            elif count(1, b, m, t) + count(1, (b - m) % t, f - m, t) == k2:
                return False
        elif e <= m:
            bits[a:e:s] = 1
        else:
            bits[a:m:s] = 1
            bits[(a - m) % s : e - m : s] = 1
        if f <= m:
            bits[b:f:t] = 1
        else:
            bits[b:m:t] = 1
            bits[(b - m) % t : f - m : t] = 1
        return True

    return holds, insert


class _Slice:
    """One fixed-size Bloom filter: m bits, k positions per item."""

    __slots__ = ("bits", "capacity", "count", "error_rate", "holds", "insert", "k", "m")

    def __init__(
        self,
        capacity: int,
        error_rate: float,
        bits: bitarray | None = None,
        m: int | None = None,
        k: int | None = None,
        count: int = 0,
    ) -> None:
        self.capacity = capacity
        self.error_rate = error_rate
        self.m = m if m is not None else optimal_bits(capacity, error_rate)
        self.k = k if k is not None else optimal_hashes(self.m, capacity)
        if bits is None:
            bits = bitarray(self.m, endian="little")
            bits.setall(0)
        self.count = count
        self.use(bits)

    def use(self, bits: bitarray) -> None:
        """Keep the slice's bits in `bits` from now on."""
        self.bits = bits
        self.holds, self.insert = _strided_runs(bits, self.m, self.k)

    def estimated_rate(self) -> float:
        """False-positive rate expected after `count` insertions (from the count, cheap)."""
        return (1.0 - math.exp(-self.k * self.count / self.m)) ** self.k

    def measured_rate(self) -> float:
        """False-positive rate from the fraction of bits actually set."""
        return (self.bits.count(1) / self.m) ** self.k


class BloomFilter:
    """A scalable Bloom filter of str or bytes items, with a set's vocabulary."""

    quiet = False  # a loaded filter (made without __init__) is the visited set

    def __init__(self, capacity: int, error_rate: float, quiet: bool = False) -> None:
        """`quiet`: a filter that is not the visited set grows without a warning."""
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        if not 0 < error_rate < 1:
            raise ValueError("error_rate must be between 0 and 1")
        self.capacity = capacity
        self.error_rate = error_rate
        self.quiet = quiet
        self._slices: list[_Slice] = []
        self._missed = 0.0
        self._rate_at = -1
        self._rate = 0.0
        self._file: _MappedFile | None = None
        self.journal_position = 0
        self._grow()

    # -- the set vocabulary -------------------------------------------------

    def add(self, item: str | bytes) -> bool:
        """Add `item`; True if it was not in the filter before (up to false positives)."""
        h1, h2 = _hash(item, signed=False)
        last = self._last
        if self._older or last.count >= last.capacity:
            new = self._insert(h1, h2)
        elif new := last.insert(h1, h2):  # the usual case, inlined: one slice with room
            last.count += 1
        if new:
            self._count_new(1)
        return new

    def add_many(self, items: Iterable[str | bytes]) -> list[bool]:
        """`add` for each item, in order; one call per page's links."""
        results = []
        for item in items:
            h1, h2 = _hash(item, signed=False)
            last = self._last
            if self._older or last.count >= last.capacity:
                results.append(self._insert(h1, h2))
            elif last.insert(h1, h2):
                last.count += 1
                results.append(True)
            else:
                results.append(False)
        self._count_new(results.count(True))
        return results

    def check_many(self, items: Iterable[str | bytes]) -> list[bool]:
        """For each item, True if it is not in the filter; nothing is added.

        Each "new" verdict counts toward `expected_missed_urls`, as in `add`.
        """
        if self._older:
            results = [item not in self for item in items]
        else:  # the usual case, inlined: one slice
            holds = self._last.holds
            results = [not holds(*_hash(item, signed=False)) for item in items]
        self._count_new(results.count(True))
        return results

    def update(self, items: Iterable[str | bytes]) -> None:
        """Add every item; unlike `add`, this is not a verdict and counts toward nothing."""
        insert = self._insert
        for item in items:
            insert(*_hash(item, signed=False))

    def replay(self, items: Iterable[str | bytes]) -> None:
        """Add items journaled as new, counting each one even if its bits are set already
        (a crash after the bits were set, before the header's counts were)."""
        for item in items:
            h1, h2 = _hash(item, signed=False)
            last = self._last
            if last.count >= last.capacity:
                self._grow()
                last = self._last
            last.insert(h1, h2)
            last.count += 1

    def __contains__(self, item: str | bytes) -> bool:
        h1, h2 = _hash(item, signed=False)
        for s in self._slices:  # noqa: SIM110 (any() of a generator costs 300 ns a lookup)
            if s.holds(h1, h2):
                return True
        return False

    def _insert(self, h1: int, h2: int) -> bool:
        """Set an item's bits in the newest slice unless a slice holds it; True if new."""
        last = self._last
        if last.count >= last.capacity:
            self._grow()
            last = self._last
        for older in self._older:
            if older.holds(h1, h2):
                return False
        if last.insert(h1, h2):
            last.count += 1
            return True
        return False

    def __len__(self) -> int:
        """Items added (each `add` that returned True)."""
        return sum(s.count for s in self._slices)

    # -- what a crawler needs to report -------------------------------------

    @property
    def nbytes(self) -> int:
        return sum(s.m // 8 for s in self._slices)

    @property
    def slice_count(self) -> int:
        return len(self._slices)

    @property
    def false_positive_rate(self) -> float:
        """Current false-positive rate, estimated from the fill of each slice."""
        miss = 1.0
        for s in self._slices:
            miss *= 1.0 - s.measured_rate()
        return 1.0 - miss

    @property
    def expected_missed_urls(self) -> float:
        """New items expected to have been called "seen" by mistake, and so skipped.

        The sum, over every "new" verdict, of the false-positive rate at that moment:
        each new item had that chance of colliding instead. Summing over "seen"
        verdicts would overstate it, as most of those are true repeats.
        """
        return self._missed

    @expected_missed_urls.setter
    def expected_missed_urls(self, value: float) -> None:  # as a crawl's journal last saw it
        self._missed = value

    @property
    def predicted_false_positive_rate(self) -> float:
        """The rate theory predicts from the item counts: cheap enough to read often."""
        # Only the last slice's count changes (and _grow() resets the key), so its count
        # says whether the cached rate is current, without summing over every slice.
        at = self._last.count
        if at != self._rate_at:
            miss = 1.0
            for s in self._slices:
                miss *= 1.0 - s.estimated_rate()
            self._rate, self._rate_at = 1.0 - miss, at
        return self._rate

    def _count_new(self, verdicts: int) -> None:
        # One rate, read after the batch, for the whole batch: within one page's links
        # it changes too little to matter, and one multiplication keeps it cheap.
        if verdicts:
            self._missed += verdicts * self.predicted_false_positive_rate

    # -- growth -------------------------------------------------------------

    def _grow(self) -> None:
        if self._slices:
            previous = self._slices[-1]
            capacity, error_rate = previous.capacity * 2, previous.error_rate / 2
        else:
            capacity, error_rate = self.capacity, self.error_rate
        if len(self._slices) >= _MAX_SLICES:
            raise OverflowError("the Bloom filter cannot grow further")
        new = _Slice(capacity, error_rate)
        if self._file is not None:
            new = self._file.map_slice(new)
        self._slices.append(new)
        self._older = self._slices[:-1]
        self._last = new
        self._rate_at = -1
        if self._file is not None:  # a crash must not leave a slice the header doesn't know
            self._file.write_header(self._header(_FLAG_OPEN))
        if len(self._slices) > 1 and not self.quiet:
            log.warning(
                "visited set grew past %s URLs: added a slice for %s more at p=%.2g "
                "(%.1f MiB in all)",
                f"{sum(s.capacity for s in self._older):,}",
                f"{capacity:,}",
                error_rate,
                self.nbytes / 2**20,
            )

    # -- persistence --------------------------------------------------------

    def _header(self, flags: int) -> bytes:
        header = bytearray(PAGE)
        _HEADER.pack_into(
            header,
            0,
            MAGIC,
            VERSION,
            flags,
            len(self._slices),
            self.capacity,
            self.error_rate,
            self.journal_position,
            self._missed,
            0,
        )
        for i, s in enumerate(self._slices):
            _SLICE.pack_into(
                header,
                _HEADER.size + i * _SLICE.size,
                s.m,
                s.k,
                0,
                s.capacity,
                s.count,
                s.error_rate,
            )
        return bytes(header)

    def _checksum(self, header: bytes) -> int:
        crc = zlib.crc32(header)
        for s in self._slices:
            crc = zlib.crc32(memoryview(s.bits)[: s.m // 8], crc)
        return crc

    def _sealed_header(self, flags: int = 0) -> bytes:
        header = self._header(flags)
        return (
            header[:_CRC_OFFSET]
            + struct.pack("<I", self._checksum(header))
            + header[_CRC_OFFSET + 4 :]
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the filter to `path` atomically: the old file stays whole until the new one is."""
        path = Path(path)
        temporary = path.with_name(path.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(self._sealed_header())
            for s in self._slices:
                f.write(memoryview(s.bits)[: s.m // 8])
                f.write(bytes(_padded(s.m // 8) - s.m // 8))
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BloomFilter:
        """Read a filter written by `save()`; BloomFileError if it is not whole and valid."""
        with open(path, "rb") as f:
            header = f.read(PAGE)
            bf, layout = cls._from_header(header, path, os.fstat(f.fileno()).st_size)
            if _HEADER.unpack_from(header)[2] & _FLAG_OPEN:
                raise BloomFileError(f"{path}: the filter was not closed cleanly")
            for s, (offset, _) in zip(bf._slices, layout, strict=True):
                f.seek(offset)
                if f.readinto(memoryview(s.bits)) != s.m // 8:
                    raise BloomFileError(f"{path}: truncated")
        bf._verify(header, path)
        return bf

    @classmethod
    def open(cls, path: str | os.PathLike[str], capacity: int, error_rate: float) -> BloomFilter:
        """A filter kept in the memory-mapped file `path`, created if missing.

        Bits are changed in place in the file, so a checkpoint writes only the
        header and the pages that changed. An existing file must have been made
        with the same capacity and error rate.
        """
        path = Path(path)
        if not path.exists():
            bf = cls(capacity, error_rate)
            bf.save(path)
        mapped = _MappedFile(path)
        try:
            header = mapped.read_header()
            bf, layout = cls._from_header(header, path, mapped.size)
            end = layout[-1][0] + _padded(layout[-1][1])
            if mapped.size > end:  # a slice was being added when the crawler died
                mapped.truncate(end)
            if (bf.capacity, bf.error_rate) != (capacity, error_rate):
                raise BloomFileError(
                    f"{path}: made for {bf.capacity:,} URLs at p={bf.error_rate:g}, "
                    f"not {capacity:,} at p={error_rate:g}"
                )
            bf._slices = [
                mapped.map_slice(s, offset)
                for s, (offset, _) in zip(bf._slices, layout, strict=True)
            ]
            if _HEADER.unpack_from(header)[2] & _FLAG_OPEN:
                log.info("%s was not closed cleanly; its journal will be replayed", path)
            else:
                bf._verify(header, path)
        except BaseException:
            mapped.close()
            raise
        bf._older, bf._last = bf._slices[:-1], bf._slices[-1]
        bf._file = mapped
        mapped.write_header(bf._header(_FLAG_OPEN))
        return bf

    def checkpoint(self) -> None:
        """Record counts and journal position in a memory-mapped file's header."""
        if self._file is not None:
            self._file.write_header(self._header(_FLAG_OPEN))

    def close(self) -> None:
        """Seal a memory-mapped file: flush its pages and write a valid checksum.

        The filter stays usable, in memory: later changes no longer reach the file.
        """
        if self._file is not None:
            self._file.flush()
            self._file.write_header(self._sealed_header())
            for s in self._slices:
                s.use(bitarray(s.bits))
            self._file.close()
            self._file = None

    @classmethod
    def _from_header(
        cls, header: bytes, path: object, size: int
    ) -> tuple[BloomFilter, list[tuple[int, int]]]:
        if len(header) < _HEADER.size or header[:8] != MAGIC:
            raise BloomFileError(f"{path}: not a crawler Bloom filter file")
        if len(header) < PAGE:
            raise BloomFileError(f"{path}: truncated")
        fields = _HEADER.unpack_from(header)
        _, version, flags, n_slices, capacity, error_rate, journal, missed, _ = fields
        if version != VERSION:
            raise BloomFileError(f"{path}: format version {version}, this crawler reads {VERSION}")
        if not 1 <= n_slices <= _MAX_SLICES or capacity < 1 or not 0 < error_rate < 1:
            raise BloomFileError(f"{path}: corrupted header")
        bf = cls.__new__(cls)
        bf.capacity, bf.error_rate, bf.journal_position = capacity, error_rate, journal
        bf._missed, bf._rate_at, bf._rate, bf._file = missed, -1, 0.0, None
        bf._slices, layout, offset = [], [], PAGE
        for i in range(n_slices):
            m, k, _, slice_capacity, count, slice_rate = _SLICE.unpack_from(
                header, _HEADER.size + i * _SLICE.size
            )
            if m == 0 or m % 64 or not 1 <= k <= m or slice_capacity < 1:
                raise BloomFileError(f"{path}: corrupted header")
            layout.append((offset, m // 8))
            offset += _padded(m // 8)
            bf._slices.append(
                _Slice(
                    slice_capacity,
                    slice_rate,
                    m=m,
                    k=k,
                    count=count,
                    bits=bitarray(m, endian="little"),
                )
            )
        dirty = flags & _FLAG_OPEN
        if size < offset or (size > offset and not dirty):
            raise BloomFileError(
                f"{path}: truncated (expected {offset:,} bytes, found {size:,})"
                if size < offset
                else f"{path}: {size - offset:,} stray bytes"
            )
        bf._older, bf._last = bf._slices[:-1], bf._slices[-1]
        return bf, layout

    def _verify(self, header: bytes, path: object) -> None:
        zeroed = header[:_CRC_OFFSET] + bytes(4) + header[_CRC_OFFSET + 4 :]
        stored = struct.unpack_from("<I", header, _CRC_OFFSET)[0]
        if self._checksum(zeroed) != stored:
            raise BloomFileError(f"{path}: checksum mismatch, the file is corrupted")


class _MappedFile:
    """The file behind `BloomFilter.open()`: one mapping per slice, header by pwrite."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR)
        self.size = os.fstat(self.fd).st_size
        self.maps: list[mmap.mmap] = []

    def read_header(self) -> bytes:
        return os.pread(self.fd, PAGE, 0)

    def write_header(self, header: bytes) -> None:
        os.pwrite(self.fd, header, 0)

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)
        self.size = size

    def map_slice(self, s: _Slice, offset: int | None = None) -> _Slice:
        """Back slice `s` by the file; a new slice (offset None) is appended to it, zeroed."""
        length = _padded(s.m // 8)
        if offset is None:
            offset = self.size
            os.ftruncate(self.fd, offset + length)
            self.size = offset + length
        mapping = mmap.mmap(self.fd, length, offset=offset)
        self.maps.append(mapping)
        bits = bitarray(buffer=memoryview(mapping)[: s.m // 8], endian="little")
        return _Slice(s.capacity, s.error_rate, bits=bits, m=s.m, k=s.k, count=s.count)

    def flush(self) -> None:
        for mapping in self.maps:
            mapping.flush()

    def close(self) -> None:
        for mapping in self.maps:
            # A filter that failed to open may still hold views; the mapping then goes
            # when they do.
            with contextlib.suppress(BufferError):
                mapping.close()
        self.maps.clear()
        os.close(self.fd)
