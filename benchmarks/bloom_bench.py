"""The visited set against the other ways to keep one, in one table.

    python benchmarks/bloom_bench.py           # n = 1M and 10M, p = 1e-3 and 1e-6 (about 8 min)
    python benchmarks/bloom_bench.py --quick   # n = 100k, a smoke run (about 5 s)
    python benchmarks/bloom_bench.py --sizes 1e5 --probes 5e7   # a small filter at p = 1e-6

Rows: ours (crawler.bloom.BloomFilter), a Python set of the URL strings, a set of 64-bit
digests of them (mmh3, "a fingerprint in a hash table") and rbloom, which is installed for
this benchmark only. Sets do not depend on p, so they get one row per n.

How it measures:
- URLs are 58-78 characters, https://host-N.example.com/<section>/page-I.html?id=<hex>.
- Every timed operation gets a str object built just before (untimed, in chunks), as a
  crawler gets a new one from canonicalize() for every link. So a set and rbloom pay for
  hashing it, as they would in a crawl: Python caches a str's hash in the object.
- The contenders take turns chunk by chunk, so they share whatever else the machine is
  doing and their ratios hold even when it is busy.
- insert: n adds into an empty structure. present: a lookup of each of the n items (all must
  be found). absent: lookups of URLs never added; the hits are the measured false positives,
  shown with a 95% confidence interval: at p = 1e-6, 50M probes expect 50 hits, so the
  interval is about +-30%. FP est.: ours `false_positive_rate` (from the fill).
- check-and-add: n operations on an empty structure, half new URLs and half repeats of an
  earlier one (a crawler mostly meets links it has seen). Ours: `bf.add(u)`, which answers
  "was it new"; sets and rbloom: `if u not in s: s.add(u)`. add_many: the same stream into
  another filter of ours, in batches of 50 (one page's links), per item.
- bytes: ours `nbytes`, rbloom `size_in_bits / 8`; for the sets, sys.getsizeof of the set's
  table plus every object it holds (the URL strings themselves, or the int digests), which
  leaves out only the allocator's slack. As a cross-check, the growth of the process's
  resident memory while all of one n's contenders were built is printed next to their sum.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import mmh3

from crawler.bloom import BloomFilter

try:
    import rbloom
except ImportError:  # the benchmark still runs, without its rows
    rbloom = None

CHUNK = 50_000  # URLs built per timed loop
PAGE_LINKS = 50  # add_many batch size
ABSENT_BASE = 10**9  # absent URLs have indices from here, present ones below n
_SECTIONS = ("news", "blog/2024/archive", "products/item", "wiki/Special:Page")
_SECTIONS += ("docs/api/v2", "forum/thread", "a", "tags/python")
_PREFIXES = [f"https://host-{h}.example.com/{_SECTIONS[h % 8]}/page-" for h in range(10_007)]


# -- the URLs -------------------------------------------------------------------------------


def present_urls(lo: int, hi: int) -> list[str]:
    """The URLs with indices lo..hi-1, new str objects at each call."""
    return [f"{_PREFIXES[i % 10_007]}{i}.html?id={i ^ 0x5BBD1E95:x}" for i in range(lo, hi)]


def absent_urls(lo: int, hi: int) -> list[str]:
    return present_urls(ABSENT_BASE + lo, ABSENT_BASE + hi)


def stream_urls(lo: int, hi: int) -> list[str]:
    """Operations lo..hi-1 of the check-and-add stream: even ones new, odd ones a repeat."""
    indices = [j >> 1 if j % 2 == 0 else _earlier(j >> 1) for j in range(lo, hi)]
    return [f"{_PREFIXES[i % 10_007]}{i}.html?id={i ^ 0x5BBD1E95:x}" for i in indices]


def _earlier(i: int) -> int:
    """A pseudo-random index in 0..i: a link to a page met before."""
    return (i * 0x9E3779B97F4A7C15 >> 17) % (i + 1)


# -- the contenders: the same loop shape for each -------------------------------------------


class Ours:
    name = "ours"

    def __init__(self, n: int, p: float) -> None:
        self.bf = BloomFilter(n, p)

    def insert(self, urls: list[str]) -> None:
        add = self.bf.add
        for u in urls:
            add(u)

    def lookup(self, urls: list[str]) -> int:
        bf, hits = self.bf, 0
        for u in urls:
            if u in bf:
                hits += 1
        return hits

    def check_and_add(self, urls: list[str]) -> None:
        add = self.bf.add
        for u in urls:
            add(u)

    def add_many(self, urls: list[str]) -> None:
        add_many = self.bf.add_many
        for i in range(0, len(urls), PAGE_LINKS):
            add_many(urls[i : i + PAGE_LINKS])

    def nbytes(self) -> int:
        return self.bf.nbytes


class StringSet:
    name = "set of str"

    def __init__(self, n: int, p: float) -> None:
        self.s: set[str] = set()

    def insert(self, urls: list[str]) -> None:
        add = self.s.add
        for u in urls:
            add(u)

    def lookup(self, urls: list[str]) -> int:
        s, hits = self.s, 0
        for u in urls:
            if u in s:
                hits += 1
        return hits

    def check_and_add(self, urls: list[str]) -> None:
        s = self.s
        add = s.add
        for u in urls:
            if u not in s:
                add(u)

    def nbytes(self) -> int:
        return sys.getsizeof(self.s) + sum(map(sys.getsizeof, self.s))


class DigestSet(StringSet):
    """A set of 64-bit ints: the first half of each URL's MurmurHash3 x64 128."""

    name = "set of 64-bit digests"

    def insert(self, urls: list[str]) -> None:
        add, digest = self.s.add, mmh3.hash64
        for u in urls:
            add(digest(u, signed=False)[0])

    def lookup(self, urls: list[str]) -> int:
        s, digest, hits = self.s, mmh3.hash64, 0
        for u in urls:
            if digest(u, signed=False)[0] in s:
                hits += 1
        return hits

    def check_and_add(self, urls: list[str]) -> None:
        s, digest = self.s, mmh3.hash64
        add = s.add
        for u in urls:
            d = digest(u, signed=False)[0]
            if d not in s:
                add(d)


class RBloom(StringSet):
    name = "rbloom"

    def __init__(self, n: int, p: float) -> None:
        self.s = rbloom.Bloom(n, p)

    def nbytes(self) -> int:
        return self.s.size_in_bits // 8


# -- measuring ------------------------------------------------------------------------------

Job = tuple[Callable[[list[str]], object], Callable[[int, int], list[str]], int]


def interleaved(jobs: list[Job]) -> list[tuple[float, int]]:
    """Run each job's operation over its URLs, chunk by chunk, the jobs taking turns.

    A job is (operation, URL maker, how many URLs). Per job: the seconds spent in the
    operation (building the URLs is not timed) and the sum of what it returned.
    """
    results = [(0.0, 0)] * len(jobs)
    for lo in range(0, max(total for _, _, total in jobs), CHUNK):
        for i, (op, make, total) in enumerate(jobs):
            if lo < total:
                batch = make(lo, min(lo + CHUNK, total))
                start = time.perf_counter()
                result = op(batch)
                seconds = time.perf_counter() - start
                results[i] = (results[i][0] + seconds, results[i][1] + (result or 0))
    return results


@dataclass
class Row:
    n: int
    p: float | None
    name: str
    ops: dict[str, float] = field(default_factory=dict)  # operation -> seconds per operation
    fp_hits: int = 0
    probes: int = 0
    fp_estimate: float | None = None  # ours: false_positive_rate, from the fill
    nbytes: int = 0


def measure(
    n: int, kinds: list[tuple[type, float | None]], rare_probes: int
) -> tuple[list[Row], str]:
    """Every contender at one n, taking turns in each phase: one row each, and a memory note."""
    rows = [Row(n, p, cls.name) for cls, p in kinds]
    probes = [absent_probes(n, p, rare_probes) for _, p in kinds]

    def phase(name: str, jobs: list[Job]) -> list[tuple[float, int]]:
        began = time.perf_counter()
        results = interleaved(jobs)
        print(f"  n={count(n)} {name}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
        return results

    gc.collect()
    rss_before = rss_bytes()
    built = [cls(n, p or 0.01) for cls, p in kinds]
    results = phase("insert", [(c.insert, present_urls, n) for c in built])
    gc.collect()
    rss_growth = rss_bytes() - rss_before
    for row, contender, (seconds, _) in zip(rows, built, results, strict=True):
        row.ops["insert"] = seconds / n
        row.nbytes = contender.nbytes()

    results = phase("present lookups", [(c.lookup, present_urls, n) for c in built])
    for row, (seconds, found) in zip(rows, results, strict=True):
        if found != n:
            raise AssertionError(f"{row.name}: {n - found} false negatives")
        row.ops["present"] = seconds / n

    jobs = [(c.lookup, absent_urls, k) for c, k in zip(built, probes, strict=True)]
    results = phase("absent lookups", jobs)
    for row, contender, k, (seconds, hits) in zip(rows, built, probes, results, strict=True):
        row.ops["absent"], row.fp_hits, row.probes = seconds / k, hits, k
        if isinstance(contender, Ours):
            row.fp_estimate = contender.bf.false_positive_rate
    del built, contender
    gc.collect()

    fresh = [cls(n, p or 0.01) for cls, p in kinds]
    batched = [Ours(n, p) for cls, p in kinds if cls is Ours]
    jobs = [(c.check_and_add, stream_urls, n) for c in fresh]
    jobs += [(b.add_many, stream_urls, n) for b in batched]
    results = phase("check-and-add", jobs)
    for row, (seconds, _) in zip(rows, results[: len(fresh)], strict=True):
        row.ops["check_and_add"] = seconds / n
    one_by_one = [(row, c) for row, c in zip(rows, fresh, strict=True) if isinstance(c, Ours)]
    for (row, single), batch, (seconds, _) in zip(
        one_by_one, batched, results[len(fresh) :], strict=True
    ):
        row.ops["add_many"] = seconds / n
        if len(batch.bf) != len(single.bf):
            raise AssertionError("add_many and add disagree on the same stream")
    note = (
        f"n={count(n)}: resident memory grew {human_bytes(rss_growth)} while all of them were "
        f"built; their bytes column adds up to {human_bytes(sum(row.nbytes for row in rows))}"
    )
    return rows, note


def absent_probes(n: int, p: float | None, rare_probes: int) -> int:
    """Absent lookups: enough to count false positives at p; a timing sample for the sets."""
    if p is None:
        return min(n, rare_probes // 10)
    return rare_probes if p < 1e-4 else rare_probes // 10


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- the table ------------------------------------------------------------------------------


def wilson(hits: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """95% confidence interval of a binomial proportion (Wilson score)."""
    centre = (hits + z * z / 2) / (trials + z * z)
    half = z * math.sqrt(hits * (trials - hits) / trials + z * z / 4) / (trials + z * z)
    return max(0.0, centre - half), centre + half


def theory_bits(p: float) -> float:
    return -math.log(p) / math.log(2) ** 2


def count(n: int) -> str:
    for unit, scale in (("M", 10**6), ("k", 10**3)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n:,}"


def si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def human_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


COLUMNS = (
    ("n", ">4"),
    ("p", ">5"),
    ("structure", "<21"),
    ("insert/s", ">8"),
    ("present/s", ">9"),
    ("absent/s", ">8"),
    ("chk+add/s", ">9"),
    ("add_many/s", ">10"),
    ("FP measured (hits/probes)", ">25"),
    ("FP/p [95% CI]", ">17"),
    ("FP est.", ">8"),
    ("bytes", ">10"),
    ("bits/item", ">9"),
    ("theory", ">6"),
)


def format_row(cells: list[str]) -> str:
    return "  ".join(f"{c:{spec}}" for c, (_, spec) in zip(cells, COLUMNS, strict=True))


def cells(row: Row) -> list[str]:
    per_s = {op: si(1 / seconds) for op, seconds in row.ops.items()}
    fp = f"{row.fp_hits / row.probes:.3g} ({row.fp_hits:,}/{count(row.probes)})"
    if row.p is None:
        ratio, theory = "-", "-"
    else:
        lo, hi = wilson(row.fp_hits, row.probes)
        ratio = f"{row.fp_hits / row.probes / row.p:.2f} [{lo / row.p:.2f}, {hi / row.p:.2f}]"
        theory = f"{theory_bits(row.p):.2f}"
    return [
        count(row.n),
        "any" if row.p is None else f"{row.p:g}",
        row.name,
        per_s["insert"],
        per_s["present"],
        per_s["absent"],
        per_s["check_and_add"],
        per_s.get("add_many", "-"),
        fp,
        ratio,
        "-" if row.fp_estimate is None else f"{row.fp_estimate:.3g}",
        human_bytes(row.nbytes),
        f"{row.nbytes * 8 / row.n:.2f}",
        theory,
    ]


def print_ratios(rows: list[Row]) -> None:
    print("\nours check-and-add, `add` (`add_many` per item), how many times slower than:")
    sets = {row.n: row for row in rows if row.name == StringSet.name}
    blooms = {(row.n, row.p): row for row in rows if row.name == RBloom.name}
    for row in rows:
        if row.name != Ours.name:
            continue
        ours, batched = row.ops["check_and_add"], row.ops["add_many"]
        line = f"  n={count(row.n):>4} p={row.p:<6g} add {ours * 1e9:4.0f} ns"
        line += f", add_many {batched * 1e9:4.0f} ns"
        base = sets[row.n].ops["check_and_add"]
        line += f" | set of str: {ours / base:.1f}x ({batched / base:.1f}x), target <= 8x"
        other = blooms.get((row.n, row.p))
        if other is not None:
            base = other.ops["check_and_add"]
            line += f" | rbloom: {ours / base:.1f}x ({batched / base:.1f}x), target <= 4x"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 100k and fewer probes")
    parser.add_argument("--sizes", type=float, nargs="+", help="n values (default 1e6 1e7)")
    parser.add_argument(
        "--probes",
        type=float,
        help="absent lookups at p = 1e-6 (default 50M; p = 1e-3 gets a tenth, the sets 2M)",
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes or ([1e5] if args.quick else [1e6, 1e7])]
    rare_probes = int(args.probes or (2e6 if args.quick else 5e7))
    blooms = [Ours, RBloom] if rbloom is not None else [Ours]
    if rbloom is None:
        print("rbloom is not installed: no rbloom rows", file=sys.stderr)

    started, load = time.perf_counter(), os.getloadavg()[0]
    kinds: list[tuple[type, float | None]] = [(StringSet, None), (DigestSet, None)]
    kinds += [(cls, p) for p in (1e-3, 1e-6) for cls in blooms]
    rows, notes = [], []
    for n in sizes:
        more, note = measure(n, kinds, rare_probes)
        rows += more
        notes.append(note)
    print(format_row([name for name, _ in COLUMNS]))
    for row in rows:
        print(format_row(cells(row)))
    print_ratios(rows)
    print()
    for note in notes:
        print(note)
    print(
        f"{time.perf_counter() - started:.0f} s in all; Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end"
    )


if __name__ == "__main__":
    main()
