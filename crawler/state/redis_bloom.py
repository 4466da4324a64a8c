"""The visited set of a shared crawl: a scalable Bloom filter in Redis bitmaps.

Each URL is hashed once with MurmurHash3, as `crawler.bloom` does. The top bits
of the hash pick one of `shards` independent filters, so a URL's bits all live in
one place and each shard can sit on its own Redis Cluster node (its keys share the
hash tag `{<crawl-id>:bf<shard>}`). Within a shard the layout is `crawler.bloom`'s:
slices that double in capacity at half the error rate, and in each slice the same
two strided runs of bit positions (`bloom.strided_runs`). Python computes the runs
(start and stride, four numbers per slice); the Lua in `CLAIM_LUA` walks them with
GETBIT and sets them with one BITFIELD, atomically for a whole page's links.

Why positions are computed here and not in Lua: MurmurHash3 x64 needs 64-bit
integers, which Redis's Lua (doubles) does not have; and sending the k positions
themselves would cost k numbers an item instead of four.

Memory: a slice's string is allocated whole when the slice is created, so it never
grows by doubling. Its length is fitted to the allocator's size class (jemalloc,
Redis's default) and its capacity derived from the bits it has, so the bytes Redis
holds are within a few percent of the theoretical -n ln p / (ln 2)^2 bits.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import mmh3

from crawler.bloom import BloomFilter, optimal_bits, optimal_hashes, strided_runs

SHARD_MIN_BYTES = 64 * 1024  # smaller filters are not split: the per-key overhead would show
SHARD_MAX_BYTES = 8 * 2**20  # a first slice's size; eight doublings stay under 512 MiB
MAX_SHARD_BITS = 10  # at most 1,024 shards


def allocation_bytes(size: int) -> int:
    """The jemalloc size class that `size` bytes are rounded up to (four per doubling)."""
    if size <= 128:
        return max(16, -(-size // 16) * 16)
    quantum = 1 << ((size - 1).bit_length() - 3)
    return -(-size // quantum) * quantum


def _string_overhead(size: int) -> int:
    """An SDS string's header and terminating NUL."""
    return (3 if size < 256 else 5 if size < 65536 else 9) + 1


@dataclass(frozen=True, slots=True)
class SliceGeometry:
    m: int  # bits
    k: int  # positions per item
    capacity: int  # items before the next slice
    error_rate: float

    @property
    def nbytes(self) -> int:
        return self.m // 8

    @property
    def theoretical_bits(self) -> float:
        return -self.capacity * math.log(self.error_rate) / math.log(2) ** 2


class SharedBloomLayout:
    """Where each URL's bits are: shard, slice geometry, key names; and the Lua arguments."""

    def __init__(self, key_prefix: str, capacity: int, error_rate: float) -> None:
        total_bytes = optimal_bits(capacity, error_rate) // 8
        # Enough shards that none is large, and up to 16 to spread over nodes when each
        # is still worth a key of its own.
        shard_bits = 0
        while shard_bits < MAX_SHARD_BITS and (
            total_bytes >> shard_bits > SHARD_MAX_BYTES
            or (shard_bits < 4 and total_bytes >> (shard_bits + 1) >= SHARD_MIN_BYTES)
        ):
            shard_bits += 1
        self.shard_bits = shard_bits
        self.shards = 1 << shard_bits
        self._shard_capacity = -(-capacity // self.shards)
        self.error_rate = error_rate
        self.key_prefix = key_prefix  # "crawler:{<id>" : a shard's keys add ":bf<j>}:..."
        self.slices_known = 1  # the most slices any shard was seen with

    @cache  # noqa: B019 (one layout per crawl, a handful of slices)
    def geometry(self, index: int) -> SliceGeometry:
        """Slice `index` of every shard: twice the items of the one before, at half the rate."""
        rate = self.error_rate / 2**index
        wanted = optimal_bits(self._shard_capacity << index, rate) // 8
        allocated = allocation_bytes(wanted + _string_overhead(wanted))
        m = (allocated - _string_overhead(allocated)) // 8 * 64
        capacity = int(m * math.log(2) ** 2 / -math.log(rate))
        return SliceGeometry(m, optimal_hashes(m, capacity), capacity, rate)

    def shard_of(self, h1: int) -> int:
        return h1 >> (64 - self.shard_bits) if self.shard_bits else 0

    def shard_keys(self, shard: int) -> str:
        """The prefix of shard `shard`'s keys: `...n` its slice counts, `...s<i>` its slices."""
        return f"{self.key_prefix}:bf{shard}}}:"

    def claim_args(self, keys: Sequence[str]) -> list[int | bytes]:
        """CLAIM_LUA's arguments for `keys`: how many slices are described, how many keys,
        and the numbers: the geometry of each slice described, then per key its shard and
        its runs in each slice. One slice more than any shard was seen with is described
        (or more, until the last holds every key), so the script can add what the keys
        fill; if a shard has grown further, the script changes
        nothing and answers with its count (`slices_known` is then raised and the call
        repeated). The numbers go as one string of doubles (exact below 2**53, and Lua's
        numbers are doubles) that the script reads with `struct.unpack`: as arguments of
        their own, each cost a decimal conversion on both sides, which made packing the
        command most of a page's cost in the client."""
        described = self.slices_known + 1
        # Else the script could fill the last and need one more, which it has no
        # geometry for (a page of 1,000 links against --expected-urls 50).
        while self.geometry(described - 1).capacity < len(keys):
            described += 1
        geometries = [self.geometry(i) for i in range(described)]
        numbers: list[int] = []
        for key in keys:
            h1, h2 = mmh3.hash64(key, signed=False)
            numbers.append(self.shard_of(h1))
            for g in geometries:
                numbers += strided_runs(h1, h2, g.m, g.k)
        packed = self._packed_geometries(described) + struct.pack(f"<{len(numbers)}d", *numbers)
        return [described, len(keys), packed]

    @cache  # noqa: B019 (as `geometry`)
    def _packed_geometries(self, described: int) -> bytes:
        """The first `described` slices' numbers, as claim_args sends them: every call
        sends the same ones, and packing them cost half of claim_args."""
        numbers: list[int] = []
        for g in map(self.geometry, range(described)):
            k1 = (g.k + 1) // 2
            numbers += (g.m, k1, g.k - k1, g.capacity, g.nbytes)
        return struct.pack(f"<{len(numbers)}d", *numbers)


# Lua functions shared by the scripts that claim URLs. ARGV from index `at` is
# claim_args(); `bf` is the key prefix. `claim_ready` checks that every shard touched
# is described (so that nothing is changed when one is not); `claim` sets each new
# URL's bits and answers 1 (new) or 0 (seen) per URL. Both return the largest slice
# count seen. All of one call is atomic: two callers can never both get 1 for a URL.
CLAIM_LUA = r"""
local function claim_parse(at)
  local described, n, numbers = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), ARGV[at + 2]
  local geo, keys, pos = {}, {}, 1
  for i = 0, described - 1 do
    local g = {struct.unpack('<ddddd', numbers, pos)}
    pos = table.remove(g)
    geo[i] = g
  end
  local key_format = '<' .. string.rep('d', 1 + 4 * described)
  for i = 1, n do
    local key = {struct.unpack(key_format, numbers, pos)}
    pos = table.remove(key)
    keys[i] = key
  end
  return {described = described, geo = geo, n = n, keys = keys, after = at + 3}
end

local function claim_slices(bf, shard, counts)
  local known = counts[shard]
  if known == nil then
    known = tonumber(redis.call('HGET', bf .. ':bf' .. shard .. '}:n', 'slices') or '0')
    counts[shard] = known
  end
  return known
end

local function claim_ready(bf, c, counts)
  local top = 1
  for i = 0, c.n - 1 do
    local slices = claim_slices(bf, c.keys[i + 1][1], counts)
    if slices > top then top = slices end
    if slices > c.described - 1 then return false, top end
  end
  return true, top
end

local function claim_holds(key, g, a, s, b, t)
  local m, p = g[1], a
  for _ = 1, g[2] do
    if redis.call('GETBIT', key, p) == 0 then return false end
    p = p + s
    if p >= m then p = p - m end
  end
  p = b
  for _ = 1, g[3] do
    if redis.call('GETBIT', key, p) == 0 then return false end
    p = p + t
    if p >= m then p = p - m end
  end
  return true
end

local function claim_set(key, g, a, s, b, t)
  local m, ops, p = g[1], {}, a
  for _ = 1, g[2] do
    ops[#ops + 1] = 'SET'; ops[#ops + 1] = 'u1'; ops[#ops + 1] = p; ops[#ops + 1] = 1
    p = p + s
    if p >= m then p = p - m end
  end
  p = b
  for _ = 1, g[3] do
    ops[#ops + 1] = 'SET'; ops[#ops + 1] = 'u1'; ops[#ops + 1] = p; ops[#ops + 1] = 1
    p = p + t
    if p >= m then p = p - m end
  end
  redis.call('BITFIELD', key, unpack(ops))
end

local function claim(bf, c, counts)
  local flags, top = {}, 1
  for i = 0, c.n - 1 do
    local key = c.keys[i + 1]
    local shard = key[1]
    local base = bf .. ':bf' .. shard .. '}:'
    local slices = counts[shard]
    if slices == 0 then
      redis.call('SETRANGE', base .. 's0', c.geo[0][5] - 1, '\0')
      redis.call('HSET', base .. 'n', 'slices', 1)
      slices = 1
    end
    local seen = false
    for j = 0, slices - 1 do
      local o = 2 + 4 * j
      if claim_holds(base .. 's' .. j, c.geo[j], key[o], key[o + 1], key[o + 2], key[o + 3]) then
        seen = true
        break
      end
    end
    if seen then
      flags[#flags + 1] = 0
    else
      local last = slices - 1
      if tonumber(redis.call('HGET', base .. 'n', 'c' .. last) or '0') >= c.geo[last][4] then
        last = slices
        slices = slices + 1
        redis.call('SETRANGE', base .. 's' .. last, c.geo[last][5] - 1, '\0')
        redis.call('HSET', base .. 'n', 'slices', slices)
      end
      local o = 2 + 4 * last
      claim_set(base .. 's' .. last, c.geo[last], key[o], key[o + 1], key[o + 2], key[o + 3])
      redis.call('HINCRBY', base .. 'n', 'c' .. last, 1)
      flags[#flags + 1] = 1
    end
    counts[shard] = slices
    if slices > top then top = slices end
  end
  return flags, top
end
"""

# Claim keys and nothing else: ARGV[1] is the key prefix, then claim_args().
# Answers {1, top, flags} or, when a shard was not described, {0, top}.
CLAIM_ONLY_LUA = (
    CLAIM_LUA
    + r"""
local c, counts = claim_parse(2), {}
local ready, top = claim_ready(ARGV[1], c, counts)
if not ready then return {0, top} end
local flags
flags, top = claim(ARGV[1], c, counts)
return {1, top, flags}
"""
)

# ARGV: the key prefix and the number of shards. Each shard's slice count, then the
# items in each of its slices: {slices, c0, c1, ...} per shard, in shard order.
COUNTS_LUA = r"""
local bf, out = ARGV[1], {}
for shard = 0, tonumber(ARGV[2]) - 1 do
  local n = bf .. ':bf' .. shard .. '}:n'
  local row = {tonumber(redis.call('HGET', n, 'slices') or '0')}
  for j = 0, row[1] - 1 do row[j + 2] = tonumber(redis.call('HGET', n, 'c' .. j) or '0') end
  out[shard + 1] = row
end
return out
"""

_INTEGRAL_STEPS = 32  # Simpson's rule over a slice's fill: the rate is smooth in the count


def _filled_rate(g: SliceGeometry, items: float) -> float:
    """A slice's false-positive rate after `items` insertions, as theory predicts."""
    return float((1.0 - math.exp(-g.k * items / g.m)) ** g.k)


def _rate_summed_over_fill(g: SliceGeometry, items: int) -> float:
    """The sum of the slice's rate at each of its first `items` insertions (Simpson)."""
    if items <= 0:
        return 0.0
    h = items / _INTEGRAL_STEPS
    total = _filled_rate(g, 0) + _filled_rate(g, items)
    for i in range(1, _INTEGRAL_STEPS):
        total += (4 if i % 2 else 2) * _filled_rate(g, i * h)
    return total * h / 3


class SharedVisitedFigures:
    """The shared visited set's figures for the summary, the --stats file and /metrics,
    from its slices' item counts (read from Redis by `update`, since figures are read
    where nothing may wait on Redis, and worked out there, since the status line reads
    them several times a second). The process's local filter stands in front of it:
    a URL that either takes for seen is skipped, so both count in the rate and in
    `expected_missed_urls`. Before the first update, only the local filter counts."""

    def __init__(
        self, layout: SharedBloomLayout, capacity: int, local: BloomFilter, error_rate: float
    ) -> None:
        """`error_rate`: the target of the two filters together (--fp-rate)."""
        self._layout = layout
        self._local = local
        self.capacity = capacity
        self.error_rate = error_rate
        self._urls = self.nbytes = self.slice_count = 0
        self._rate = self._missed = 0.0

    def update(self, reply: Sequence[Sequence[int]]) -> None:
        """Take COUNTS_LUA's answer: per shard, the items in each of its slices."""
        shards = [row[1 : 1 + int(row[0])] for row in reply]
        geometry = self._layout.geometry
        self._urls = sum(map(sum, shards))
        self.nbytes = sum(geometry(j).nbytes for counts in shards for j in range(len(counts)))
        self.slice_count = max(map(len, shards), default=0)
        rate = missed = 0.0
        for counts in shards:
            # While slice j fills, the full slices before it are part of the rate: each
            # insertion adds the rate at that moment to the expected misses.
            survive = 1.0  # the chance that none of the full slices takes a new URL
            for j, items in enumerate(counts):
                g = geometry(j)
                missed += items * (1.0 - survive) + survive * _rate_summed_over_fill(g, items)
                survive *= 1.0 - _filled_rate(g, items)
            rate += (1.0 - survive) / len(shards)  # a URL's shard is chosen by its hash
        self._rate, self._missed = rate, missed

    def __len__(self) -> int:
        return self._urls

    @property
    def false_positive_rate(self) -> float:
        return self.predicted_false_positive_rate

    @property
    def predicted_false_positive_rate(self) -> float:
        local = self._local.predicted_false_positive_rate
        return 1.0 - (1.0 - local) * (1.0 - self._rate)

    @property
    def expected_missed_urls(self) -> float:
        return self._local.expected_missed_urls + self._missed
