"""The visited set, crawler.bloom.BloomFilter: what issue 3 asks of it, as tests."""

from __future__ import annotations

import logging
import math
import random
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.bloom import (
    MAGIC,
    PAGE,
    BloomFileError,
    BloomFilter,
    optimal_bits,
    optimal_hashes,
)
from crawler.state import RecentKeys

# Hypothesis runs are derandomized: "up to false positives" must not mean "flaky".
properties = settings(derandomize=True, deadline=None, max_examples=100)
items = st.one_of(st.text(max_size=30), st.binary(max_size=30))


def urls(count: int, kind: str = "page") -> list[str]:
    return [
        f"https://host-{i % 97}.example.com/{kind}/{i}.html?id={i * 7919}" for i in range(count)
    ]


def same_item(item: str | bytes) -> bytes:
    """Items are str (as UTF-8) or bytes: a str and its UTF-8 bytes are one item."""
    return item.encode() if isinstance(item, str) else item


def theory_bits_per_item(p: float) -> float:
    return -math.log(p) / math.log(2) ** 2


def measured_fp(bf: BloomFilter, probes: list[str]) -> float:
    return sum(u in bf for u in probes) / len(probes)


# -- 1. sizing and hashing ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "p", "bits", "hashes"),
    [
        (1_000_000, 1e-3, 14_377_600, 10),  # ceil(14,377,587.6) = 14,377,588 -> 224,650 words
        (1_000_000, 1e-6, 28_755_200, 20),  # ceil(28,755,175.1) -> 449,300 words
        (100_000, 1e-3, 1_437_760, 10),
        (1, 0.5, 64, 44),  # 2 bits -> one word; k = round(64 ln 2)
    ],
)
def test_size_is_the_theoretical_bits_in_whole_64_bit_words_and_k_is_m_over_n_ln2(
    capacity: int, p: float, bits: int, hashes: int
) -> None:
    assert optimal_bits(capacity, p) == bits
    assert optimal_hashes(bits, capacity) == hashes
    assert BloomFilter(capacity, p).nbytes * 8 == bits


@given(capacity=st.integers(1, 10**9), p=st.floats(1e-12, 0.5))
@properties
def test_bits_are_rounded_up_to_the_next_64_bit_word_and_no_further(
    capacity: int, p: float
) -> None:
    exact = math.ceil(-capacity * math.log(p) / math.log(2) ** 2)
    bits = optimal_bits(capacity, p)
    assert bits % 64 == 0
    assert exact <= bits < exact + 64


@pytest.mark.parametrize("p", [1e-3, 1e-6])
def test_at_capacity_bits_per_item_are_within_2_percent_of_theory(p: float) -> None:
    bf = BloomFilter(100_000, p)
    bf.update(urls(100_000))
    assert bf.slice_count == 1
    bits_per_item = bf.nbytes * 8 / 100_000
    assert theory_bits_per_item(p) <= bits_per_item <= 1.02 * theory_bits_per_item(p)


# -- the set vocabulary, as properties ----------------------------------------------------


@given(st.lists(items, max_size=300), st.integers(1, 50), st.sampled_from([0.1, 1e-3, 1e-6]))
@properties
def test_an_added_item_is_always_found_even_after_growth(
    added: list[str | bytes], capacity: int, p: float
) -> None:
    bf = BloomFilter(capacity, p)
    bf.update(added)
    assert all(item in bf for item in added)
    assert all(not bf.add(item) for item in added)


@given(st.lists(st.one_of(items, st.sampled_from(["a", b"a", "é", "é".encode()])), max_size=300))
@properties
def test_add_returns_true_exactly_for_items_not_added_before(added: list[str | bytes]) -> None:
    bf = BloomFilter(100_000, 1e-9)  # room enough that a false positive is out of reach
    seen: set[bytes] = set()
    for item in added:
        assert bf.add(item) == (same_item(item) not in seen)
        seen.add(same_item(item))
    assert len(bf) == len(seen)


@given(st.lists(items, max_size=300), st.integers(1, 60), st.integers(1, 100))
@properties
def test_add_many_answers_as_add_one_at_a_time_would(
    added: list[str | bytes], batch: int, capacity: int
) -> None:
    one_by_one, batched = BloomFilter(capacity, 1e-3), BloomFilter(capacity, 1e-3)
    expected = [one_by_one.add(item) for item in added]
    got = [
        new for i in range(0, len(added), batch) for new in batched.add_many(added[i : i + batch])
    ]
    assert got == expected
    assert len(batched) == len(one_by_one)
    assert batched.slice_count == one_by_one.slice_count


def test_a_str_and_its_utf8_bytes_are_the_same_item() -> None:
    bf = BloomFilter(1000, 1e-6)
    assert bf.add("https://example.com/ünïcode")
    assert "https://example.com/ünïcode".encode() in bf
    assert not bf.add("https://example.com/ünïcode".encode())


def test_an_empty_filter_holds_nothing() -> None:
    bf = BloomFilter(1000, 1e-3)
    assert len(bf) == 0
    assert "https://example.com/" not in bf
    assert bf.false_positive_rate == 0.0
    assert bf.expected_missed_urls == 0.0


@pytest.mark.parametrize(("capacity", "p"), [(0, 1e-3), (100, 0.0), (100, 1.0), (100, -0.1)])
def test_nonsense_sizing_is_refused(capacity: int, p: float) -> None:
    with pytest.raises(ValueError):
        BloomFilter(capacity, p)


# -- 3. growth ---------------------------------------------------------------------------


def test_at_capacity_the_measured_false_positive_rate_is_on_target() -> None:
    p = 1e-3
    bf = BloomFilter(100_000, p)
    bf.update(urls(100_000))
    fp = measured_fp(bf, urls(400_000, kind="never-added"))  # about 400 hits expected
    assert 0.5 * p <= fp <= 1.25 * p
    assert 0.5 * p <= bf.false_positive_rate <= 1.25 * p  # the estimate from the fill agrees


def test_a_small_filter_at_a_low_rate_is_on_target_too() -> None:
    # With the k positions in one strided run, items sharing a stride overlapped and
    # this filter measured 2.1x p; two independent runs put it back on target.
    p = 1e-4
    bf = BloomFilter(1_000, p)
    bf.update(urls(1_000))
    fp = measured_fp(bf, urls(1_000_000, kind="never-added"))  # about 100 hits expected
    assert 0.5 * p <= fp <= 1.25 * p


def test_after_three_times_capacity_the_false_positive_rate_stays_under_twice_the_target(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p = 1e-3
    bf = BloomFilter(50_000, p)
    with caplog.at_level(logging.WARNING, logger="crawler.bloom"):
        bf.update(urls(150_000))
    assert bf.slice_count == 2  # 50k at p, then 100k at p/2
    assert len(caplog.records) == 1
    fp = measured_fp(bf, urls(300_000, kind="never-added"))  # p + p/2: about 450 hits
    assert fp <= 2 * p
    assert bf.false_positive_rate <= 2 * p


def test_each_growth_is_logged_with_the_new_slice(caplog: pytest.LogCaptureFixture) -> None:
    bf = BloomFilter(100, 1e-3)
    with caplog.at_level(logging.WARNING, logger="crawler.bloom"):
        bf.update(urls(100))
        assert caplog.records == []  # full, but nothing has needed the room yet
        bf.update(urls(700))  # 100 + 200 + 400
    assert bf.slice_count == 3
    assert [r.levelno for r in caplog.records] == [logging.WARNING] * 2
    assert "200 more at p=0.0005" in caplog.records[0].getMessage()
    assert "400 more at p=0.00025" in caplog.records[1].getMessage()


def test_a_quiet_filter_grows_without_a_word_about_the_visited_set(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bf = BloomFilter(100, 1e-3, quiet=True)  # the engine's record of claims past unfinished pages
    with caplog.at_level(logging.WARNING, logger="crawler.bloom"):
        bf.update(urls(700))
    assert bf.slice_count == 3 and caplog.records == []


def test_each_new_slice_holds_twice_the_items_at_half_the_error_rate() -> None:
    bf = BloomFilter(1000, 1e-3)
    bf.update(urls(7000))  # 1000 + 2000 + 4000
    assert bf.slice_count == 3
    assert bf.nbytes * 8 == sum(
        optimal_bits(1000 * 2**i, 1e-3 / 2**i) for i in range(bf.slice_count)
    )


# -- 4. honesty ---------------------------------------------------------------------------


def test_expected_missed_urls_add_the_rate_at_each_new_verdict() -> None:
    capacity, p = 10_000, 1e-3
    bf = BloomFilter(capacity, p)
    bf.update(urls(5_000))
    assert bf.expected_missed_urls == 0.0  # update() gives no verdicts

    assert not any(bf.add_many(urls(5_000)))  # 5,000 repeats: none could be missed
    assert bf.expected_missed_urls == 0.0

    m = optimal_bits(capacity, p)
    k = optimal_hashes(m, capacity)
    fresh = [f"https://example.org/new/{i}" for i in range(1_000)]
    verdicts = bf.add_many(fresh)
    rate = (1 - math.exp(-k * len(bf) / m)) ** k  # the rate of the batch, from the count
    assert bf.expected_missed_urls == pytest.approx(sum(verdicts) * rate, rel=1e-6)

    before = bf.expected_missed_urls
    assert bf.add("https://example.org/one-more")
    rate = (1 - math.exp(-k * len(bf) / m)) ** k
    assert bf.expected_missed_urls == pytest.approx(before + rate, rel=1e-6)


def test_expected_missed_urls_count_new_verdicts_of_check_many_too() -> None:
    bf = BloomFilter(1_000, 1e-3)
    bf.update(urls(500))
    rate = bf.predicted_false_positive_rate
    verdicts = bf.check_many(urls(600))  # 500 seen, about 100 new
    assert bf.expected_missed_urls == pytest.approx(sum(verdicts) * rate, rel=1e-6)


def test_false_positive_rate_rises_with_the_fill() -> None:
    bf = BloomFilter(10_000, 1e-3)
    rates = []
    for i in range(4):
        bf.update(urls(2_500 * (i + 1)))
        rates.append(bf.false_positive_rate)
    assert rates == sorted(rates)
    assert 0.5e-3 <= rates[-1] <= 1.25e-3


# -- 5. persistence -----------------------------------------------------------------------


def assert_same_filter(a: BloomFilter, b: BloomFilter, probes: list[str]) -> None:
    assert (len(a), a.nbytes, a.slice_count) == (len(b), b.nbytes, b.slice_count)
    assert (a.capacity, a.error_rate) == (b.capacity, b.error_rate)
    assert a.false_positive_rate == b.false_positive_rate
    assert a.expected_missed_urls == b.expected_missed_urls
    assert a.journal_position == b.journal_position
    assert [u in a for u in probes] == [u in b for u in probes]


@pytest.mark.parametrize("added", [0, 800, 3_000], ids=["empty", "one slice", "after growth"])
def test_save_then_load_gives_the_same_filter(tmp_path: Path, added: int) -> None:
    bf = BloomFilter(1000, 1e-2)
    bf.update(urls(added))
    bf.add_many(urls(added // 2))  # some "already seen" verdicts
    bf.journal_position = 12_345
    bf.save(tmp_path / "visited.bloom")

    loaded = BloomFilter.load(tmp_path / "visited.bloom")
    assert_same_filter(bf, loaded, urls(added) + urls(2_000, kind="never-added"))
    more = urls(2_000, kind="later")  # and it carries on exactly where the saved one stopped
    assert loaded.add_many(more) == bf.add_many(more)
    assert_same_filter(bf, loaded, more)


def test_a_filter_with_more_than_64_hash_functions_saves_and_loads(tmp_path: Path) -> None:
    bf = BloomFilter(100, 1e-25)  # k = 83
    bf.update(urls(100))
    bf.save(tmp_path / "visited.bloom")
    assert_same_filter(bf, BloomFilter.load(tmp_path / "visited.bloom"), urls(100))


def test_a_memory_mapped_filter_keeps_its_items_across_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "visited.bloom"
    bf = BloomFilter.open(path, 1000, 1e-3)
    assert path.exists()
    bf.update(urls(3_000))
    assert bf.slice_count == 2
    bf.journal_position = 77
    bf.checkpoint()
    bf.close()

    reopened = BloomFilter.open(path, 1000, 1e-3)
    assert (len(reopened), reopened.slice_count, reopened.journal_position) == (len(bf), 2, 77)
    assert all(u in reopened for u in urls(3_000))
    assert reopened.add("https://example.com/new")
    reopened.close()

    loaded = BloomFilter.load(path)  # a closed file is a valid saved filter
    assert len(loaded) == len(bf) + 1
    assert all(u in loaded for u in [*urls(3_000), "https://example.com/new"])


def test_a_memory_mapped_filter_must_be_reopened_with_its_own_sizing(tmp_path: Path) -> None:
    BloomFilter.open(tmp_path / "visited.bloom", 1000, 1e-3).close()
    with pytest.raises(BloomFileError, match=r"made for 1,000 URLs at p=0\.001"):
        BloomFilter.open(tmp_path / "visited.bloom", 2000, 1e-3)


def test_a_mapped_filter_whose_process_died_reopens_with_its_items_but_will_not_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "visited.bloom"
    crash = (
        "import os, sys\n"
        "from crawler.bloom import BloomFilter\n"
        "bf = BloomFilter.open(sys.argv[1], 1000, 1e-3)\n"
        "bf.update(sys.stdin.read().splitlines())\n"  # grows to 2 slices
        "os._exit(0)\n"  # and dies without close()
    )
    subprocess.run(
        [sys.executable, "-c", crash, str(path)],
        input="\n".join(urls(2_500)),
        text=True,
        check=True,
    )

    with pytest.raises(BloomFileError, match="not closed cleanly"):
        BloomFilter.load(path)
    with caplog.at_level(logging.INFO, logger="crawler.bloom"):
        bf = BloomFilter.open(path, 1000, 1e-3)
    assert "not closed cleanly" in caplog.text
    assert bf.slice_count == 2
    assert all(u in bf for u in urls(2_500))
    bf.close()
    BloomFilter.load(path)


# -- 5. damaged files ---------------------------------------------------------------------


def flip(offset: int) -> Callable[[bytes], bytes]:
    return lambda data: data[:offset] + bytes([data[offset] ^ 0x10]) + data[offset + 1 :]


DAMAGE: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "a bit flipped in the first slice": (flip(PAGE + 100), "checksum"),
    "a bit flipped in the last slice": (flip(-PAGE + 10), "checksum"),
    "a bit flipped in the error rate": (flip(24), "checksum"),
    "a bit flipped in an item count": (flip(76), "checksum"),
    "a bit flipped in the slice count": (flip(12), "corrupted header"),
    "cut short in the last slice": (lambda data: data[: len(data) - 1000], "truncated"),
    "cut short after the header": (lambda data: data[:PAGE], "truncated"),
    "cut short in the header": (lambda data: data[:100], "truncated"),
    "stray bytes at the end": (lambda data: data + b"\0" * PAGE, "stray bytes"),
    "wrong magic": (lambda data: b"NOTABLOO" + data[8:], "not a crawler Bloom filter"),
    "wrong version": (
        lambda data: data[:8] + struct.pack("<H", 99) + data[10:],
        "format version 99",
    ),
    "empty": (lambda data: b"", "not a crawler Bloom filter"),
    "random bytes": (lambda data: random.Random(3).randbytes(len(data)), "not a crawler Bloom"),
    "a text file": (lambda data: b"https://example.com/\n" * 500, "not a crawler Bloom"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_or_foreign_file_is_refused_with_a_clear_error(
    tmp_path: Path, damage: str
) -> None:
    bf = BloomFilter(1000, 1e-3)
    bf.update(urls(3_000))
    path = tmp_path / "visited.bloom"
    bf.save(path)
    assert path.read_bytes()[:8] == MAGIC
    mutate, message = DAMAGE[damage]
    path.write_bytes(mutate(path.read_bytes()))

    with pytest.raises(BloomFileError, match=message) as refused:
        BloomFilter.load(path)
    assert str(path) in str(refused.value)
    with pytest.raises(BloomFileError):
        BloomFilter.open(path, 1000, 1e-3)


def test_saving_replaces_the_old_file_only_once_the_new_one_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "visited.bloom"
    BloomFilter(1000, 1e-3).save(path)
    bf = BloomFilter(1000, 1e-3)
    bf.update(urls(10))
    bf.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["visited.bloom"]
    assert len(BloomFilter.load(path)) == 10


def test_strided_runs_name_the_bits_a_slice_sets():
    from crawler.bloom import _hash, _Slice, strided_runs

    for m, k in ((6400, 7), (64 * 1000, 20), (128, 3), (4096, 2)):
        for i in range(200):
            item = f"https://example.com/page/{i}"
            s = _Slice(1000, 0.01, m=m, k=k)
            s.insert(*_hash(item, signed=False))
            a, stride1, b, stride2 = strided_runs(*_hash(item, signed=False), m, k)
            k1 = (k + 1) // 2
            expected = {(a + j * stride1) % m for j in range(k1)}
            expected |= {(b + j * stride2) % m for j in range(k - k1)}
            assert set(s.bits.search(1)) == expected


@properties
@given(
    st.lists(st.lists(st.sampled_from(urls(300)), max_size=40), max_size=60),
    st.integers(min_value=1, max_value=64),
)
def test_recent_keys_in_front_change_no_verdict(batches: list[list[str]], size: int) -> None:
    """The exact front of recently claimed keys answers as the filter behind it would,
    duplicates within a page included, and the filter counts the same new items."""
    alone = BloomFilter(100, 0.01)
    behind = BloomFilter(100, 0.01)
    front = RecentKeys(size)
    for batch in batches:
        assert front.add_many(batch, behind) == alone.add_many(batch)
        assert len(front._newer) < size and len(front._older) <= size + 40
    assert len(behind) == len(alone)
    assert behind.expected_missed_urls == alone.expected_missed_urls


def test_recent_keys_spare_the_filter_the_links_every_page_repeats() -> None:
    asked: list[str] = []

    class Recording:
        def add_many(self, keys: list[str]) -> list[bool]:
            asked.extend(keys)
            return [True] * len(keys)

    front, menu = RecentKeys(), urls(20)
    for page in range(100):
        front.add_many([*menu, f"https://example.com/page/{page}"], Recording())
    assert len(asked) == 20 + 100
