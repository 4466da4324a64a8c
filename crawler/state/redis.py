"""A crawl shared by many processes through one Redis (--redis URL --crawl-id ID).

Keys, all under the hash tag `{<crawl-id>}` (the visited set's shards aside, see
`crawler.redis_bloom`):

    settings        the crawl-shaping settings; a joiner with others is refused
    simhash:*       --extract's near-duplicate index, shared (see _NEAR)
    members         sorted set: member id -> lease deadline (Redis time, ms)
    counts          hash: queued, inflight, started (toward --max-pages), records,
                    sitemaps (toward --max-sitemaps)
    claims          hash: host -> URLs queued (toward --max-pages-per-host)
    hosts:<slot>    sorted set: host -> the depth of the first URL on its list, for
                    each host of the slot with URLs queued; the shallowest are taken
                    first. A host's slot, of SLOTS, is a hash of its name
    slots           sorted set: slot -> the depth of its shallowest host, for each
                    slot with URLs queued
    q:<host>        list of queued URLs, each "depth url referrer", with " kind lastmod"
                    added for a sitemap's; a URL on the list's host is its path ("/p"
                    for http://host/p, "s/p" for https://), one elsewhere a network-
                    path reference ("//other/p", "s//other/p"); no referrer is ""
    inflight:<id>   hash: a member's taken URLs ("host entry") -> host
    robots:<agent> <origin>
                    robots.txt rules a process read, for the others, expiring with them
    recorded:<id>   sorted set: host -> minus the records a member wrote of it (its
                    summary's figures per host: kept here, not in its memory)
    locks, held:<id>
                    which member serves a host now, and the hosts a member holds:
                    those with URLs queued or in flight, a host finished is let go
    free            sorted set: host -> when its next request may start (Redis
                    time, ms), for a host let go within its delay; those past are
                    dropped

Each process heartbeats its lease; the slots, and so the hosts, are divided among
the live members by `partition.owner`. A process takes URLs only from hosts it
owns, and taking moves them into its in-flight hash (never deletes them). A
refill reads only the shallowest hosts of its own slots, so its cost does not
grow with the hosts queued. A page's commit is one script:
check-and-add of its links in the Bloom filter, queue the new ones, remove the
page from in-flight, count it, and apply --max-pages-per-host and --max-sitemaps
to the whole crawl. Trap rules, pure functions of a URL, are applied before that
script, to the links this process has not seen itself. A member whose lease ran
out is reaped by any other: its in-flight URLs go back to the heads of their
queues and its hosts are freed.

Each host is served by one process at a time: a process hands a host over only
when it has nothing of the host in flight, and with the time its next request may
start, so per-host slots, delays, Crawl-delay and robots.txt stay local and exact.
The robots.txt rules a process reads are shared: a host handed over is not asked
for robots.txt again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import secrets
import socket
import struct
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import hiredis
import redis

from crawler.config import STDOUT, ConfigError, Settings, redact_url
from crawler.cookies import CookieJar
from crawler.frontier import PAGE, ROBOTS, SITEMAP, UNLINKED, MemoryFrontier, Request
from crawler.page import Page
from crawler.partition import owner
from crawler.politeness import HostScheduler, RobotsRules
from crawler.sinks import WriteFailed, open_sinks
from crawler.state import (
    MAX_PAGES_PER_HOST,
    CheckedClaims,
    RecentKeys,
    trap_check,
    visited_set_in_memory,
    warn_sitemaps_dropped,
)
from crawler.state.disk import SHAPING_SETTINGS, crawl_shape
from crawler.state.redis_bloom import (
    CLAIM_LUA,
    CLAIM_ONLY_LUA,
    COUNTS_LUA,
    SharedBloomLayout,
    SharedVisitedFigures,
)
from crawler.state.redis_connection import RedisConnection
from crawler.stats import TOP_HOSTS, Stats, previous_reached
from crawler.urls import host_of, visit_key, visit_keys

if TYPE_CHECKING:
    from crawler.history import PreviousCrawl, Unreached
    from crawler.politeness import RulesTable
    from crawler.state.held import HeldTable

log = logging.getLogger(__name__)

IDLE_POLL_S = 0.05  # how often a process with nothing to do asks whether work or the end came
CONNECT_TIMEOUT_S = 5
REPLY_TIMEOUT_S = 10  # a Redis that takes longer to answer a heartbeat is taken for lost
# How often the shared visited set's counts are read for the figures (and at the end):
# a call that reads every shard, up to 1,024, so not at every tick.
VISITED_COUNT_S = 5.0
MAX_TICK_S = 0.25  # a membership change, or a new host to serve, is noticed within this
# The settings a joiner must share with the crawl it joins: a resume's, and the
# page budget, which all processes count against together.
SHARED_SHAPE = (*SHAPING_SETTINGS, "max_pages")
# --fetch-gone: URLs claimed in one commit script, which runs for a few ms: Redis
# serves the other processes between two
GONE_BATCH = 1000
NO_DEPTH_LIMIT = 1 << 30  # deeper than any crawl goes: take whatever is queued
TAKE_AHEAD_S = 1.0  # a host with a delay has only what it can start in this much taken
# Of the q:<host> entries, `hosts` and the visited set's slices (1: JSON, 2: `hosts` a
# set, 3: the shared filter at the whole --fp-rate, 4: one `hosts` sorted set, `free` a
# hash); another is refused.
QUEUE_FORMAT = 5
# Hosts are divided among the processes by slot: as many as spread them evenly over
# a few processes, as few as a refill reads the heads of at little cost.
SLOTS = 256
# The local filter's part of --fp-rate, the shared one has the rest. A tenth: the
# local filter holds this process's URLs only, and its bits stay few.
LOCAL_FP_SHARE = 0.1

_NOW = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
_RANK = (
    f"local SLOTS = {SLOTS}\n"
    + r"""
-- Keep `host` in its slot's sorted set at the depth of the first URL on its list, or
-- out of it once the list is empty (an entry starts with its depth), and the slot in
-- P .. 'slots' at the depth of its first host. A slot is as slot_of() computes it.
local function rank(P, host)
  local slot = tonumber(string.sub(redis.sha1hex(host), 1, 4), 16) % SLOTS
  local hosts = P .. 'hosts:' .. slot
  local first = redis.call('LINDEX', P .. 'q:' .. host, 0)
  if first then
    redis.call('ZADD', hosts, tonumber(string.match(first, '^%d+')), host)
  else
    redis.call('ZREM', hosts, host)
  end
  local head = redis.call('ZRANGE', hosts, 0, 0, 'WITHSCORES')
  if head[2] then
    redis.call('ZADD', P .. 'slots', head[2], slot)
  else
    redis.call('ZREM', P .. 'slots', slot)
  end
end
"""
)

# ARGV: prefix, member, lease_ms, joining ("1" or "0"), reaped_wait_ms. Renews the lease
# (or joins), reaps members whose lease ran out, and answers the live members and the
# counts. A dead member's last request to a host it held is not known: the host's next
# may start reaped_wait_ms from now (see RedisStore._reaped_wait_ms).
_TICK = (
    _NOW
    + _RANK
    + r"""
local P, me = ARGV[1], ARGV[2]
local members = P .. 'members'
if ARGV[4] == '0' and not redis.call('ZSCORE', members, me) then return {'evicted'} end
redis.call('ZADD', members, now + tonumber(ARGV[3]), me)
for _, dead in ipairs(redis.call('ZRANGEBYSCORE', members, '-inf', now)) do
  local inflight = P .. 'inflight:' .. dead
  local taken = redis.call('HGETALL', inflight)
  local back = {}
  for i = 1, #taken, 2 do
    local host = taken[i + 1]
    redis.call('LPUSH', P .. 'q:' .. host, string.sub(taken[i], #host + 2))
    back[host] = true
  end
  for host in pairs(back) do rank(P, host) end
  local n = #taken / 2
  if n > 0 then
    redis.call('HINCRBY', P .. 'counts', 'queued', n)
    redis.call('HINCRBY', P .. 'counts', 'inflight', -n)
    redis.call('HINCRBY', P .. 'counts', 'started', -n)
  end
  for _, host in ipairs(redis.call('SMEMBERS', P .. 'held:' .. dead)) do
    if redis.call('HGET', P .. 'locks', host) == dead then
      redis.call('HDEL', P .. 'locks', host)
      if ARGV[5] ~= '0' then redis.call('ZADD', P .. 'free', now + tonumber(ARGV[5]), host) end
    end
  end
  redis.call('DEL', inflight, P .. 'held:' .. dead, P .. 'recorded:' .. dead)
  redis.call('ZREM', members, dead)
end
redis.call('ZREMRANGEBYSCORE', P .. 'free', '-inf', now)
local c = redis.call('HMGET', P .. 'counts', 'queued', 'inflight', 'started', 'gone_listed',
                    'records')
return {'ok', redis.call('ZRANGE', members, 0, -1), c[1] or '0', c[2] or '0', c[3] or '0',
        c[4] or '0', c[5] or '0'}
"""
)

# let_go(P, me, host, wait_ms): the member serves `host` no more; its next request may
# start `wait_ms` from now, whoever serves it next.
_LET_GO_LUA = r"""
local function let_go(P, me, host, wait_ms)
  if redis.call('HGET', P .. 'locks', host) ~= me then return end
  redis.call('HDEL', P .. 'locks', host)
  redis.call('SREM', P .. 'held:' .. me, host)
  if wait_ms > 0 then
    local t = redis.call('TIME')
    redis.call('ZADD', P .. 'free', t[1] * 1000 + math.floor(t[2] / 1000) + wait_ms, host)
  else
    redis.call('ZREM', P .. 'free', host)
  end
end
"""

# ARGV: prefix, mask (a byte a slot, "1" for the slots of the member asking), count,
# hosts to skip... Answers host, depth, ... for up to `count` hosts of those slots
# with URLs queued, the shallowest first, but those skipped. It goes level by level
# (depth), reading at each the slots whose first host is at that level, and of
# ours only the hosts it answers (and the depth of each one's next): its work grows
# with `count` and the slots, not with the hosts queued.
_READY = r"""
local P, mask, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local skip = {}
for i = 4, #ARGV do skip[ARGV[i]] = true end
local chunk = count + #ARGV - 3
local slots = P .. 'slots'
local out, n = {}, 0
local later = {}  -- depth -> our slots read at a level above, whose next host is that deep
local level = tonumber(redis.call('ZRANGE', slots, 0, 0, 'WITHSCORES')[2])
while level and n < count do
  local here = later[level] or {}
  later[level] = nil
  for _, slot in ipairs(redis.call('ZRANGEBYSCORE', slots, level, level)) do
    if string.byte(mask, tonumber(slot) + 1) == 49 then here[#here + 1] = slot end
  end
  for _, slot in ipairs(here) do
    if n >= count then break end
    local hosts, at, got = P .. 'hosts:' .. slot, 0, {}
    repeat
      got = redis.call('ZRANGEBYSCORE', hosts, level, level, 'LIMIT', at, chunk)
      at = at + #got
      for _, host in ipairs(got) do
        if n < count and not skip[host] then
          n = n + 1
          out[#out + 1] = host
          out[#out + 1] = level
        end
      end
    until #got < chunk or n >= count
    if #got < chunk then
      local after = redis.call('ZRANGEBYSCORE', hosts, '(' .. level, '+inf', 'WITHSCORES',
                               'LIMIT', 0, 1)
      local depth = tonumber(after[2])
      if depth then
        later[depth] = later[depth] or {}
        table.insert(later[depth], slot)
      end
    end
  end
  local deeper = redis.call('ZRANGEBYSCORE', slots, '(' .. level, '+inf', 'WITHSCORES', 'LIMIT',
                            0, 1)
  level = tonumber(deeper[2])
  for depth in pairs(later) do
    if not level or depth < level then level = depth end
  end
end
return out
"""

# take(P, me, host, n, max_pages, deepest): moves up to n URLs of `host`, from the head
# of its list up to the first deeper than `deepest`, into the member's in-flight hash,
# unless another live member serves the host, and counts them toward --max-pages (0:
# no limit). Answers {wait_ms, urls...}, or {-1} if the host is
# someone else's; wait_ms is how long a hand-over asks the new server to wait.
_TAKE_LUA = (
    _RANK
    + r"""
local function take(P, me, host, n, max_pages, deepest)
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local holder = redis.call('HGET', P .. 'locks', host)
  if holder and holder ~= me then
    local lease = redis.call('ZSCORE', P .. 'members', holder)
    if lease and tonumber(lease) > now then return {-1} end
  end
  if holder ~= me then
    redis.call('HSET', P .. 'locks', host, me)
    redis.call('SADD', P .. 'held:' .. me, host)
  end
  local wait = 0
  local free = redis.call('ZSCORE', P .. 'free', host)
  if free then wait = math.max(0, tonumber(free) - now) end
  if max_pages > 0 then
    n = math.min(n, max_pages - tonumber(redis.call('HGET', P .. 'counts', 'started') or '0'))
  end
  if n <= 0 then return {wait} end
  local q = P .. 'q:' .. host
  local items = redis.call('LRANGE', q, 0, n - 1)
  for i, item in ipairs(items) do  -- none deeper than `deepest`, nor after one that is
    if tonumber(string.match(item, '^%d+')) > deepest then
      for j = #items, i, -1 do items[j] = nil end
      break
    end
  end
  if #items == 0 then return {wait} end
  redis.call('LTRIM', q, #items, -1)
  rank(P, host)
  local inflight = P .. 'inflight:' .. me
  for _, item in ipairs(items) do redis.call('HSET', inflight, host .. ' ' .. item, host) end
  redis.call('HINCRBY', P .. 'counts', 'queued', -#items)
  redis.call('HINCRBY', P .. 'counts', 'inflight', #items)
  redis.call('HINCRBY', P .. 'counts', 'started', #items)
  table.insert(items, 1, wait)
  return items
end
"""
)

# ARGV: prefix, member, host, how many, max_pages, deepest.
_TAKE = (
    _TAKE_LUA
    + r"""
return take(ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]))
"""
)

# ARGV: prefix, member, host, unlock ("1"/"0"), wait_ms, urls... Puts URLs the member
# took but never started back at the head of the host's queue, in order; with unlock,
# lets the host go, its next request to start `wait_ms` from now.
_RELEASE = (
    _RANK
    + _LET_GO_LUA
    + r"""
local P, me, host = ARGV[1], ARGV[2], ARGV[3]
local q, inflight = P .. 'q:' .. host, P .. 'inflight:' .. me
local n = #ARGV - 5
for i = #ARGV, 6, -1 do
  redis.call('LPUSH', q, ARGV[i])
  redis.call('HDEL', inflight, host .. ' ' .. ARGV[i])
end
if n > 0 then
  rank(P, host)
  redis.call('HINCRBY', P .. 'counts', 'queued', n)
  redis.call('HINCRBY', P .. 'counts', 'inflight', -n)
  redis.call('HINCRBY', P .. 'counts', 'started', -n)
end
if ARGV[4] == '1' then let_go(P, me, host, tonumber(ARGV[5])) end
return n
"""
)

# ARGV: prefix, member, done URL's JSON or '', records (0 for no record, else 1 plus
# the previous crawl's pages it shows are there, counted crawl-wide for those gone:
# stats.previous_reached), shape or '', a host to
# take more URLs of, how many, max_pages, max_pages_per_host, max_sitemaps, the
# deepest of them to take, the host of the record (counted in the member's
# `recorded:<id>`), the done URL's host if it was the last of its host taken here
# (else '') and when that host's next request may start (ms from now), then
# claim_args() of the candidates, then per candidate
# its host, JSON and limit ('h': --max-pages-per-host, 's': --max-sitemaps, '-':
# none). One atomic step:
# claim the candidates, queue the new ones within the limits, take the done URL out
# of flight, count the record, and take the done page's host's next URLs (so a busy
# host costs no round trip of its own), or let it go if it has none left queued (so
# that Redis keeps nothing of the hosts finished). The seeds' commit also stores the
# shape, or answers the one stored. Per candidate: 0 seen, 1 queued, 2 past
# --max-pages-per-host, 3 past --max-sitemaps.
_COMMIT = (
    CLAIM_LUA
    + _TAKE_LUA
    + _LET_GO_LUA
    + r"""
local P, me, done, shape = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
local bf = string.sub(P, 1, -3)
local c, counts = claim_parse(15), {}
local ready, top = claim_ready(bf, c, counts)
if not ready then return {'stale', top} end
if shape ~= '' then
  local saved = redis.call('GET', P .. 'settings')
  if saved and saved ~= shape then return {'shape', saved} end
  if not saved then redis.call('SET', P .. 'settings', shape) end
end
if done ~= '' then
  if redis.call('HDEL', P .. 'inflight:' .. me, done) == 0 then return {'evicted'} end
  redis.call('HINCRBY', P .. 'counts', 'inflight', -1)
end
local recorded = tonumber(ARGV[4])
if recorded > 0 then
  redis.call('HINCRBY', P .. 'counts', 'records', 1)
  redis.call('ZINCRBY', P .. 'recorded:' .. me, -1, ARGV[12])
end
if recorded > 1 then redis.call('HINCRBY', P .. 'counts', 'previous_seen', recorded - 1) end
local per_host, max_sitemaps = tonumber(ARGV[9]), tonumber(ARGV[10])
local queued = 0
local function queue(host, item)
  if redis.call('RPUSH', P .. 'q:' .. host, item) == 1 then rank(P, host) end
  queued = queued + 1
end
local flags
flags, top = claim(bf, c, counts)
for i, new in ipairs(flags) do
  if new == 1 then
    local at = c.after + 3 * (i - 1)
    local host, limit = ARGV[at], ARGV[at + 2]
    if limit == 'h' and per_host > 0 then
      if tonumber(redis.call('HGET', P .. 'claims', host) or '0') >= per_host then
        flags[i] = 2
        redis.call('HINCRBY', P .. 'counts', 'per_host_dropped', 1)
      else
        redis.call('HINCRBY', P .. 'claims', host, 1)
      end
    elseif limit == 's' then
      if tonumber(redis.call('HGET', P .. 'counts', 'sitemaps') or '0') >= max_sitemaps then
        flags[i] = 3
      else
        redis.call('HINCRBY', P .. 'counts', 'sitemaps', 1)
      end
    end
    if flags[i] == 1 then queue(host, ARGV[at + 1]) end
  end
end
if queued > 0 then redis.call('HINCRBY', P .. 'counts', 'queued', queued) end
local taken = {}
if tonumber(ARGV[7]) > 0 then
  taken = take(P, me, ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[11]))
end
local last = ARGV[13]
if last ~= '' and #taken <= 1 and redis.call('LLEN', P .. 'q:' .. last) == 0 then
  let_go(P, me, last, tonumber(ARGV[14]))
end
return {'ok', top, flags, taken}
"""
)


# near(P, high, low, url, max_distance, max_groups_changed): the near-duplicate index of
# --extract, shared by all processes. The 64-bit fingerprint comes as two 32-bit halves
# (Lua numbers are doubles; its bit library works on 32 bits). As in crawler/simhash.py,
# 4 lists, one per 16-bit block that is not 0, hold "order:high:low" of each distinct
# fingerprint, and simhash:urls maps order -> URL. Answers the URL of the first
# fingerprint near this one (crawler.simhash.near; false if none) and records this
# one, in one step.
_NEAR = r"""
local P, url, k, groups = ARGV[1], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local high, low = tonumber(ARGV[2]), tonumber(ARGV[3])
-- budget minus the bits set in x, or -1 once past it: most candidates differ in
-- about 32 bits, and counting stops at the fourth.
local function spare(x, budget)
  x = bit.tobit(x)
  while x ~= 0 do
    budget = budget - 1
    if budget < 0 then return -1 end
    x = bit.band(x, x - 1)
  end
  return budget
end
-- how many of the 4 bytes of the 32 bits x are not 0
local function changed_bytes(x)
  local n = 0
  for shift = 0, 24, 8 do
    if bit.band(bit.rshift(x, shift), 255) ~= 0 then n = n + 1 end
  end
  return n
end
-- the 8 bytes (groups) of a fingerprint, low byte first
local function bytes_of(h, l)
  local b = {}
  for i = 0, 3 do
    b[i + 1] = math.floor(l / 2 ^ (8 * i)) % 256
    b[i + 5] = math.floor(h / 2 ^ (8 * i)) % 256
  end
  return b
end
local mine = bytes_of(high, low)
local function near(h, l)
  if h == high and l == low then return true end
  local dh, dl = bit.bxor(h, high), bit.bxor(l, low)
  if changed_bytes(dh) + changed_bytes(dl) > groups then
    local left = spare(dh, k)
    if left < 0 or spare(dl, left) < 0 then return false end
  end
  local theirs, shared, block = bytes_of(h, l), 0, false
  for g = 1, 8 do
    if theirs[g] == mine[g] and mine[g] ~= 0 then shared = shared + 1 end
  end
  for t = 1, 7, 2 do
    if theirs[t] == mine[t] and theirs[t + 1] == mine[t + 1]
      and (mine[t] ~= 0 or mine[t + 1] ~= 0) then block = true end
  end
  return shared >= 2 and block
end
local lists = {}
local blocks = {low % 65536, math.floor(low / 65536), high % 65536, math.floor(high / 65536)}
for t = 1, 4 do
  if blocks[t] ~= 0 then lists[#lists + 1] = P .. 'simhash:' .. t .. ':' .. blocks[t] end
end
local first, known = nil, false
for _, list in ipairs(lists) do
  for _, entry in ipairs(redis.call('LRANGE', list, 0, -1)) do
    local order, h, l = string.match(entry, '(%d+):(%d+):(%d+)')
    h, l, order = tonumber(h), tonumber(l), tonumber(order)
    if h == high and l == low then known = true end
    if (first == nil or order < first) and near(h, l) then first = order end
  end
end
local found = false
if first ~= nil then found = redis.call('HGET', P .. 'simhash:urls', first) end
if not known and #lists > 0 then
  local order = redis.call('INCR', P .. 'simhash:order')
  redis.call('HSET', P .. 'simhash:urls', order, url)
  local entry = order .. ':' .. ARGV[2] .. ':' .. ARGV[3]
  for _, list in ipairs(lists) do redis.call('RPUSH', list, entry) end
end
return found
"""

# --revisit: a page's row for the next round (crawler/state/redis_rounds.py), moved out
# of the previous round's hash. ARGV: the round's prefix, visit key, row, due_at or '',
# a host whose <lastmod> was wrong or '', the id and name of the WARC file holding its
# record or '' and '', the previous round's prefix or ''.
_RECORD = r"""
local P, due, wrong = ARGV[1], ARGV[4], ARGV[5]
redis.call('HSET', P .. 'pages', ARGV[2], ARGV[3])
if ARGV[6] ~= '' then redis.call('HSET', P .. 'warc_files', ARGV[6], ARGV[7]) end
if ARGV[8] ~= '' then redis.call('HDEL', ARGV[8] .. 'pages', ARGV[2]) end
if due ~= '' then
  local first = redis.call('GET', P .. 'first_due')
  if not first or due < first then redis.call('SET', P .. 'first_due', due) end
end
if wrong ~= '' then redis.call('SADD', P .. 'lastmod_wrong', wrong) end
return 1
"""

# --revisit: a page's row in the previous round, or, if it was moved already by a
# process that died before it committed the page, in this one. ARGV: the previous
# round's prefix, this round's, the visit key.
_ROW = r"""
local key = ARGV[3]
return redis.call('HGET', ARGV[1] .. 'pages', key) or redis.call('HGET', ARGV[2] .. 'pages', key)
"""

SCRIPTS = {
    "tick": _TICK,
    "ready": _READY,
    "take": _TAKE,
    "release": _RELEASE,
    "commit": _COMMIT,
    "claim": CLAIM_ONLY_LUA,
    "counts": COUNTS_LUA,
    "near": _NEAR,
    "record": _RECORD,
    "row": _ROW,
}
SHAS = {name: hashlib.sha1(lua.encode()).hexdigest() for name, lua in SCRIPTS.items()}


def _command(script: str, *args: str | bytes | int | float) -> tuple[str, bytes]:
    """`script` and its EVALSHA command with `args`, packed in C by hiredis: redis-py packs
    each argument in Python, which cost more CPU than the rest of a page's work."""
    # hiredis's stub says a 1-tuple; it takes any number of arguments.
    return script, hiredis.pack_command(("EVALSHA", SHAS[script], 0, *args))  # type: ignore[arg-type]


def _plain_command(*args: str | bytes | int | float) -> tuple[None, bytes]:
    """A command that runs no script, as `_command` gives one."""
    return None, hiredis.pack_command(args)  # type: ignore[arg-type]  # as in _command


def _record(request: Request) -> bytes:
    """A queued request in its host's list: "depth url referrer", each URL on the host
    as its path; the kind and lastmod only when not a plain page's. Canonical URLs hold
    no spaces."""
    host = request.host
    entry = f"{request.depth} {_on_host(request.url, host)} {_on_host(request.referrer, host)}"
    if request.kind != PAGE or request.lastmod is not None:
        entry += f" {request.kind} {request.lastmod or ''}"
    return entry.encode()


def _on_host(url: str | None, host: str) -> str:
    """`url` in an entry of `host`'s list: a path on that host ("/p", or "s/p" for
    https), a network-path reference elsewhere ("//other/p", or "s//other/p")."""
    if url is None:
        return ""
    scheme, _, rest = url.partition("://")
    mark = {"http": "", "https": "s"}.get(scheme)
    if mark is None:
        return url
    if rest.startswith(host) and rest[len(host) : len(host) + 1] == "/":
        return mark + rest[len(host) :]
    return f"{mark}//{rest}"


def _off_host(text: str, host: str) -> str:
    """The URL `_on_host` gave `text` for."""
    scheme = "http"
    if text.startswith("s/"):
        scheme, text = "https", text[1:]
    if text.startswith("//"):
        return f"{scheme}:{text}"
    if text.startswith("/"):
        return f"{scheme}://{host}{text}"
    return text


def _request(item: bytes, host: str) -> Request:
    """The request a `_record` stands for, in `host`'s list."""
    depth, url, referrer, *kind_lastmod = item.decode().split(" ", 4)
    request = Request(_off_host(url, host), int(depth), _off_host(referrer, host) or None)
    if kind_lastmod:
        request.kind, request.lastmod = kind_lastmod[0], kind_lastmod[1] or None
    return request


def _taken_key(request: Request) -> tuple[str, str]:
    """A taken request's key: robots.txt may also be queued as a page, by a link to it."""
    return request.kind, request.url


def slot_of(host: str) -> int:
    """The slot of `host`, as _RANK computes it: the first 16 bits of its SHA-1."""
    return int(hashlib.sha1(host.encode(), usedforsecurity=False).hexdigest()[:4], 16) % SLOTS


def slot_name(slot: int) -> str:
    """A slot's name in `partition.owner`: the member that serves it serves its hosts."""
    return f"slot {slot}"


def host_owner(host: str, members: Iterable[str]) -> str | None:
    """The member that serves `host`."""
    return owner(slot_name(slot_of(host)), members)


def member_id() -> str:
    """This process's name in the crawl, unique across machines; also its files' prefix."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


def shape_of(settings: Settings, seeds: Sequence[str]) -> str:
    shape = crawl_shape(settings, seeds, SHARED_SHAPE) | {"queue_format": QUEUE_FORMAT}
    return json.dumps(shape, sort_keys=True)


def _differences(saved: str, shape: str) -> list[str]:
    old, new = json.loads(saved), json.loads(shape)
    return [name.replace("_", "-") for name in new if new[name] != old.get(name)]


def _end_of_last_line(path: str) -> int | None:
    """Where to append to `path`: after its last whole line (None: a new file, or one
    that is no regular file, such as /dev/null or a FIFO, which is written as a stream)."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        position = size
        while position > 0:
            step = min(65536, position)
            f.seek(position - step)
            chunk = f.read(step)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return position - step + newline + 1
            position -= step
    return 0


class SharedRobotsRules:
    """robots.txt rules in Redis, one key an origin (a `SharedRules`): robots.txt as
    fetched (zlib-compressed, as crawler.politeness keeps it) after its Crawl-delay, a
    double; expiring when the rules do (RFC 9309 2.4: 24 hours at most). Rules that
    say robots.txt could not be had are not shared: they last a minute."""

    def __init__(
        self, call: Callable[[tuple[str | None, bytes]], Awaitable[Any]], prefix: str
    ) -> None:
        self._call = call
        self._prefix = prefix + "robots:"

    async def get(self, origin: str, agent: str) -> RobotsRules | None:
        key = f"{self._prefix}{agent} {origin}"
        try:  # a lost Redis ends the crawl at the next heartbeat: fetch meanwhile
            value, left_ms = await asyncio.gather(
                self._call(_plain_command("GET", key)), self._call(_plain_command("PTTL", key))
            )
        except WriteFailed:
            return None
        if value is None or left_ms <= 0:
            return None
        (crawl_delay_s,) = struct.unpack_from("<d", value)
        return RobotsRules(
            packed=value[8:] or None,
            expires_at=time.monotonic() + left_ms / 1000,
            crawl_delay_s=crawl_delay_s,
            restored=True,
        )

    async def put(self, origin: str, agent: str, rules: RobotsRules) -> None:
        left_ms = round((rules.expires_at - time.monotonic()) * 1000)
        if left_ms <= 0:
            return
        value = struct.pack("<d", rules.crawl_delay_s) + (rules.packed or b"")
        with contextlib.suppress(WriteFailed):  # as in `get`
            await self._call(
                _plain_command("SET", f"{self._prefix}{agent} {origin}", value, "PX", left_ms)
            )


class RecordedHosts:
    """This process's records per host (a `HostCounts`), counted in Redis by each
    commit, in the member's `recorded:<id>`: kept in memory, every host's count took
    77 bytes a host (and kept its name), 100 MiB at 10^6 hosts. The figures are those
    read last, with the visited set's (every VISITED_COUNT_S, and at the end)."""

    def __init__(self) -> None:
        self._top: list[tuple[str, int]] = []
        self._hosts = 0

    def add(self, host: str) -> None:
        """Counted in Redis by the commit that records the page."""

    def most_common(self, n: int) -> list[tuple[str, int]]:
        return self._top[:n]

    def __len__(self) -> int:
        return self._hosts

    def update(self, top: list[tuple[str, int]], hosts: int) -> None:
        """The TOP_HOSTS hosts with most records (ties by name, as `by_records`), and
        how many hosts have records."""
        self._top, self._hosts = top, hosts


class RedisStore:
    """The Store of a process that shares its crawl with others through Redis."""

    shared = True
    complete = False  # the shared crawl's end is found by `serve`
    resumed: bool  # set by _check_and_join(), from __init__: the crawl was in Redis already
    # The breadth-first gate is off: other processes hold pages we don't see.
    gate: CheckedClaims | None = None
    previous_round: PreviousCrawl | None = None  # --revisit: set by _check_and_join()
    robots: RulesTable | None = None  # robots.txt rules are `shared_robots`, read by `load`
    shared_robots: SharedRobotsRules
    held: HeldTable | None = None  # each process holds no page: the gate is off
    _record_args: Callable[[Page], tuple[str, bytes, str, str, str, str]] | None = None
    _previous_prefix = ""  # --revisit: the previous round's, whose rows are moved to ours

    def __init__(self, settings: Settings, seeds: Sequence[str]) -> None:
        self.settings = settings
        self.member = member_id()
        assert settings.redis is not None  # open_store() chose this store for it
        self._url = settings.redis
        self._shown_url = redact_url(settings.redis)  # for messages: no password
        self._prefix = f"crawler:{{{settings.crawl_id}}}:"
        self._shape = shape_of(settings, seeds)
        self._lease_ms = round(settings.lease_s * 1000)
        self._tick_s = min(MAX_TICK_S, settings.lease_s / 3)  # a heartbeat at least this often
        # A member is reaped a lease after its last heartbeat, and made its last request
        # at most a heartbeat after that one: its hosts wait out the rest of the longest
        # delay one may ask, --delay or (robots.txt's Crawl-delay) --max-crawl-delay.
        longest_delay_s = max(
            settings.delay, 0 if settings.ignore_robots else settings.max_crawl_delay
        )
        reaped_wait_s = max(0.0, longest_delay_s - settings.lease_s + self._tick_s)
        self._reaped_wait_ms = round(reaped_wait_s * 1000) if longest_delay_s else 0
        self._check_and_join()
        # A URL either filter takes for seen is skipped, so their rates add up: each
        # approaches twice its own as it grows, and the two shares keep the sum under
        # twice --fp-rate, as one process's filter is.
        self.bloom = visited_set_in_memory(settings, settings.fp_rate * LOCAL_FP_SHARE)
        self._recent = RecentKeys()  # in front of it, as in one process
        self._layout = SharedBloomLayout(
            self._prefix[:-2], settings.expected_urls, settings.fp_rate * (1 - LOCAL_FP_SHARE)
        )
        self.visited_figures = SharedVisitedFigures(
            self._layout, settings.expected_urls, self.bloom, settings.fp_rate
        )
        self.frontier = MemoryFrontier()  # URLs taken from Redis, not started yet
        self.stats = Stats()
        self.stats.member = self.member  # labels this process's /metrics
        self.stats.hosts = self._host_counts = RecordedHosts()
        self._is_trap = trap_check(settings, self.stats)
        # The output is appended to, so that a process started again keeps what it
        # wrote before; WARC files are named after the member, so that no two
        # processes write the same file.
        positions = {}
        if settings.output and settings.output != STDOUT:
            positions["jsonl"] = _end_of_last_line(settings.output)
        if settings.warc is not None:
            settings = dataclasses.replace(
                settings, warc_prefix=f"{settings.warc_prefix}-{self.member}"
            )
        self.sinks = open_sinks(settings, positions)
        self._connection: RedisConnection | None = None
        self._connecting = asyncio.Lock()
        self.shared_robots = SharedRobotsRules(self._call, self._prefix)
        self._lost = False
        self._scheduler: HostScheduler | None = None
        self._members: list[str] = [self.member]
        self._slot_owners: list[str | None] = [self.member] * SLOTS  # per slot, its process
        self._mine = b"1" * SLOTS  # per slot, "1" if it is ours
        # (kind, url) -> its JSON, for URLs taken and not committed
        self._taken: dict[tuple[str, str], bytes] = {}
        self._outstanding: Counter[str] = Counter()  # per host: taken and not committed
        self._leaving: set[str] = set()  # hosts to hand over once nothing of theirs is left
        self._taking: set[str] = set()  # hosts of the takes sent and not answered yet
        self._wake = asyncio.Event()
        self._batch = max(16, 2 * settings.per_host)
        self._deepest = NO_DEPTH_LIMIT  # what may be taken: see _refill

    # -- opening and closing, with the synchronous client ----------------------

    def _sync_client(self) -> redis.Redis:
        return redis.Redis.from_url(
            self._url, socket_timeout=REPLY_TIMEOUT_S, socket_connect_timeout=CONNECT_TIMEOUT_S
        )

    def _check_and_join(self) -> None:
        client = self._sync_client()
        try:
            saved = cast("bytes | None", client.get(self._prefix + "settings"))
            if saved is not None and saved.decode() != self._shape:
                queue_format = json.loads(saved).get("queue_format")
                if queue_format != QUEUE_FORMAT:
                    raise ConfigError(
                        f"crawl {self.settings.crawl_id!r} in Redis was begun by another "
                        f"version of the crawler (queue format {queue_format}, this one "
                        f"uses {QUEUE_FORMAT}); finish it with that version, or use "
                        "another --crawl-id"
                    )
                raise ConfigError(
                    f"crawl {self.settings.crawl_id!r} in Redis has other "
                    f"{', '.join(_differences(saved.decode(), self._shape))}; "
                    "join it with the same settings, or use another --crawl-id"
                )
            self.resumed = saved is not None
            if self.settings.revisit is not None:
                self._open_previous_round(client)
            client.eval(
                _TICK, 0, self._prefix, self.member, self._lease_ms, "1", self._reaped_wait_ms
            )
        except redis.RedisError as exc:
            raise ConfigError(f"cannot use Redis at {self._shown_url}: {exc}") from None
        finally:
            client.close()

    def _open_previous_round(self, client: redis.Redis) -> None:
        """--revisit: this round's pages are recorded for the next; the round before
        it, if any, is the crawl this one recrawls. (Imported only then: a crawl
        without --revisit does not load the history's code.)"""
        from crawler.state.redis_rounds import (
            SharedHistory,
            read_previous_round,
            round_crawl_id,
            round_prefix,
            split_round,
        )
        from crawler.state.redis_rows import record_args

        self._record_args = record_args
        assert self.settings.crawl_id is not None
        crawl, number = split_round(self.settings.crawl_id)
        previous = read_previous_round(client, crawl, number)
        if previous is not None:
            pages, lastmod_wrong, warc_files = previous
            prefix = self._previous_prefix = round_prefix(round_crawl_id(crawl, number - 1))

            async def row_of(visit: str) -> bytes | None:
                row: bytes | None = await self._call(_command("row", prefix, self._prefix, visit))
                return row

            async def rows(cursor: int) -> tuple[int, list[tuple[str, bytes]]]:
                ask = _plain_command("HSCAN", prefix + "pages", cursor, "COUNT", 1000)
                after, found = await self._call(ask)
                pairs = zip(found[::2], found[1::2], strict=True)
                return int(after), [(key.decode(), row) for key, row in pairs]

            self.previous_round = SharedHistory(row_of, rows, pages, lastmod_wrong, warc_files)

    def keep_cookies(self, jar: CookieJar) -> None:
        """Each process keeps its own cookies, for its own hosts, in memory."""

    def close(self) -> None:
        """Give back what this process took and did not finish, and leave the crawl."""
        try:
            self.sinks.close()
        finally:
            if self._members and not self._lost:
                self._leave()

    def _leave(self) -> None:
        """Give back the URLs taken and not finished, and every host held, each free
        from when its next request may start: the process that takes a host over
        waits out its delay from our last request to it.

        What is given back is what Redis has in flight for us, in the order taken where
        we know it: a take whose answer was lost, as the crawl's end cancelled the
        feeder, moved URLs there that we never saw, and nothing reaps a member gone."""
        client = self._sync_client()
        try:
            inflight = cast(
                "dict[bytes, bytes]", client.hgetall(self._prefix + "inflight:" + self.member)
            )
            by_host: dict[str, list[bytes]] = defaultdict(list)
            for (_, url), item in self._taken.items():
                by_host[host_of(url)].append(item)
            for entry, entry_host in inflight.items():
                item, items = entry[len(entry_host) + 1 :], by_host[entry_host.decode()]
                if item not in items:
                    items.append(item)
            held = cast("set[bytes]", client.smembers(self._prefix + "held:" + self.member))
            pipe = client.pipeline(transaction=False)
            for host in {h.decode() for h in held} | by_host.keys():
                wait_ms = self._next_request_in_ms(host)
                pipe.eval(
                    _RELEASE, 0, self._prefix, self.member, host, "1", wait_ms, *by_host[host]
                )
            pipe.execute()
            pipe = client.pipeline()
            pipe.zrem(self._prefix + "members", self.member)
            pipe.delete(self._prefix + "held:" + self.member)
            pipe.delete(self._prefix + "recorded:" + self.member)
            pipe.execute()
        except redis.RedisError as exc:  # the others reap us when our lease runs out
            log.warning("could not leave the crawl in Redis cleanly: %s", exc)
        finally:
            client.close()

    # -- the Store protocol ------------------------------------------------------

    async def commit(
        self,
        done: Request | None,
        page: Page | None,
        links: list[str],
        claimed: list[str],
        listed: Sequence[Request] = (),
    ) -> list[Request]:
        """One script: claim the candidates, queue the new ones, finish `done`, count `page`.

        The page goes to the sinks first: if the process dies before the script runs,
        the URL is fetched again by another, rather than lost."""
        if page is not None:
            if "simhash" in page.fields:
                await self._mark_near_duplicate(page)
            self.sinks.write(page)
            if self._record_args is not None and page.kind == PAGE:
                # Before the commit: a page committed has its row; one whose process
                # dies first is fetched again, and its row written again.
                row = self._record_args(page)
                await self._call(_command("record", self._prefix, *row, self._previous_prefix))
            page.release()
        ask = self._candidates(done, links, listed)
        item = self._taken.pop(_taken_key(done), None) if done is not None else None
        more = self._more_of(done.host) if done is not None else 0
        while True:
            reply = await self._call(self._commit_command(done, page, item, more, ask))
            status = reply[0].decode()
            if status != "stale":
                break
            self._layout.slices_known = int(reply[1])
        settings = self.settings
        if status == "shape":
            raise WriteFailed(
                f"crawl {settings.crawl_id!r} in Redis was started with other "
                f"{', '.join(_differences(reply[1].decode(), self._shape))}"
            )
        if status == "evicted":
            raise WriteFailed(self._evicted())
        self._layout.slices_known = max(self._layout.slices_known, int(reply[1]))
        if page is not None and done is not None:
            self.stats.count(page, done.host)
        if done is not None:
            self._done(done.host)
            if more:
                self._accept(done.host, reply[3])
        new = []
        dropped_sitemaps = 0
        for (r, _, _), flag in zip(ask, reply[2], strict=True):
            if flag == 1:
                new.append(r)
            elif flag == 2:
                self.stats.dropped[MAX_PAGES_PER_HOST] += 1
            elif flag == 3:
                dropped_sitemaps += 1
        warn_sitemaps_dropped(settings.max_sitemaps, dropped_sitemaps)
        return new

    def _commit_command(
        self,
        done: Request | None,
        page: Page | None,
        item: bytes | None,
        more: int,
        ask: list[tuple[Request, str, str]],
    ) -> tuple[str, bytes]:
        """The commit script's command, packed: nothing of it lives on while Redis runs it."""
        settings = self.settings
        return _command(
            "commit",
            self._prefix,
            self.member,
            b"%s %s" % (done.host.encode(), item) if done is not None and item else "",
            0 if page is None else 1 + previous_reached(page),
            self._shape if done is None else "",
            done.host if done is not None and more else "",
            more,
            settings.max_pages,
            settings.max_pages_per_host,
            settings.max_sitemaps,
            self._deepest,
            done.host if page is not None and done is not None else "",
            *self._let_go_args(done),
            *self._layout.claim_args([key for _, key, _ in ask]),
            *[x for r, _, limit in ask for x in (r.host, _record(r), limit)],
        )

    def _let_go_args(self, done: Request | None) -> tuple[str, int]:
        """The commit's host to let go if nothing of it is left queued, and when its next
        request may start: `done`'s, if it was the last of its host taken here."""
        # A take of the host sent before the commit, whose answer is still to come,
        # may have taken the last URLs queued: the host is ours still.
        if done is None or self._outstanding[done.host] > 1 or done.host in self._taking:
            return "", 0
        return done.host, self._next_request_in_ms(done.host)

    def _candidates(
        self, done: Request | None, links: list[str], listed: Sequence[Request]
    ) -> list[tuple[Request, str, str]]:
        """(request, visit key, limit) of what to claim in Redis: the links and listed
        requests that this process has not seen itself and that are no traps."""
        keys = visit_keys(links)
        # A URL this process saw is not new anywhere. Added here, before Redis is asked,
        # as LocalStore claims first: a trap is then checked and counted once.
        maybe_new = self._recent.add_many(keys, self.bloom)
        is_trap = self._is_trap if done is not None else None  # a seed is no trap
        depth, referrer = (done.depth + 1, done.url) if done else (0, None)
        ask = [
            (Request(url, depth, referrer), key, "h")
            for url, key, new in zip(links, keys, maybe_new, strict=True)
            if new and not (is_trap and is_trap(url))
        ]
        if listed:
            # Every process that seeds the crawl lists the seeds' robots.txt: claimed
            # under a key no page has (visit keys have no fragment), they are queued once.
            keys = [visit_key(r.url) + ("#robots" if r.kind == ROBOTS else "") for r in listed]
            maybe_new = self.bloom.add_many(keys)
            is_trap = self._is_trap  # a sitemap's URLs are its links
            limits = {SITEMAP: "s", PAGE: "h"}  # robots.txt has none
            ask += (
                (r, key, limits.get(r.kind, "-"))
                for r, key, new in zip(listed, keys, maybe_new, strict=True)
                if new and not (r.kind == PAGE and is_trap and is_trap(r.url))
            )
        return ask

    async def claim(self, url: str) -> bool:
        """Claim a redirect target in the shared visited set; True if no one had."""
        key = visit_key(url)
        if key in self.bloom:
            return False
        while True:
            claim_args = self._layout.claim_args([key])
            reply = await self._call(_command("claim", self._prefix[:-2], *claim_args))
            if reply[0]:
                break
            self._layout.slices_known = int(reply[1])
        self.bloom.add(key)
        return bool(reply[2][0])

    async def serve(self, scheduler: HostScheduler, gone_from: Unreached | None) -> None:
        """Feed `scheduler` with the URLs of the hosts this process owns, and end it when
        the crawl is over everywhere: nothing queued and nothing in flight in any process.
        Runs until cancelled, which the engine does once its workers are done.

        --fetch-gone (`gone_from`): when the links are crawled everywhere, the previous
        crawl's pages that no link reached are queued, claimed in the shared visited set
        as any URL is, so each is fetched once, by the process that owns its host; the
        crawl is over when they are done too. Whichever process first finds the links
        crawled lists them; others that find it so meanwhile list them too (their claims
        find them queued), and one that dies while listing leaves them to the others."""
        self._scheduler = scheduler
        counted_at = -math.inf
        try:
            while True:
                self._wake.clear()
                if await self._over(gone_from):
                    await self._count_visited()
                    break
                if time.monotonic() - counted_at >= VISITED_COUNT_S:
                    counted_at = time.monotonic()
                    await self._count_visited()
                await self._refill()
                idle = not self.frontier and not scheduler.in_flight
                # asyncio.timeout, not wait_for: the engine's cancel, come as the last
                # commit set _wake, was lost in 3.11's wait_for, and a process on Ctrl-C
                # waited here until the others ended the crawl, then for good
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(IDLE_POLL_S if idle else self._tick_s):
                        await self._wake.wait()
            scheduler.end()
            await asyncio.Future()  # the engine cancels us once its workers are done
        except asyncio.CancelledError:
            # The shared visited set's figures as the crawl ends here: those of a crawl
            # interrupted were the last read, up to VISITED_COUNT_S before (at first, 1 URL)
            if not self._lost:
                with contextlib.suppress(WriteFailed):
                    await self._count_visited()
            raise
        finally:
            if self._connection is not None:
                self._connection.close()

    async def _over(self, gone_from: Unreached | None) -> bool:
        queued, inflight, started, gone_listed = await self._tick()
        over = inflight == 0 and (queued == 0 or 0 < self.settings.max_pages <= started)
        if over and gone_from is not None and not gone_listed:
            await self._queue_gone(gone_from)
            return False
        if over and self.stats.shared:  # a recrawl: the previous pages seen by all
            ask = _plain_command(
                "HMGET", self._prefix + "counts", "previous_seen", "per_host_dropped"
            )
            seen, per_host_dropped = await self._call(ask)
            # As links_left says for one process: stopped with URLs queued, or with
            # links past a host's budget, the pages not seen may be under them.
            if not queued and not int(per_host_dropped or 0):
                self.stats.previous_seen_everywhere = int(seen or 0)
        return over

    async def _count_visited(self) -> None:
        """Read the shared visited set's counts for its figures (their slices' items),
        and this process's records per host for its own."""
        ask = _command("counts", self._prefix[:-2], self._layout.shards)
        recorded = self._prefix + "recorded:" + self.member
        top = _plain_command("ZRANGE", recorded, 0, TOP_HOSTS - 1, "WITHSCORES")
        hosts = _plain_command("ZCARD", recorded)
        counts, top_hosts, host_count = await asyncio.gather(
            self._call(ask), self._call(top), self._call(hosts)
        )
        self.visited_figures.update(counts)
        self._host_counts.update(
            [(h.decode(), -int(n)) for h, n in zip(top_hosts[::2], top_hosts[1::2], strict=True)],
            host_count,
        )

    async def _queue_gone(self, gone_from: Unreached) -> None:
        """--fetch-gone: queue `gone_from`'s pages that no link reached, then tell all."""
        async for urls in gone_from.unreached(self.bloom.__contains__):
            listed = [Request(url, 0, None, kind=UNLINKED) for url in urls]
            for start in range(0, len(listed), GONE_BATCH):
                await self.commit(None, None, [], [], listed[start : start + GONE_BATCH])
            await self._tick()  # a long list must not cost us our lease
        await self._call(_plain_command("HSET", self._prefix + "counts", "gone_listed", 1))

    # -- inside ------------------------------------------------------------------

    async def _call(self, command: tuple[str | None, bytes]) -> Any:
        """Run a `_command` or `_plain_command` (on our one connection, pipelined with
        the others)."""
        script, packed = command
        connection = self._connection or await self._connect()
        try:
            try:
                return await connection.send(packed)
            except redis.exceptions.NoScriptError:  # Redis restarted empty
                if script is None:
                    raise
                await connection.call("SCRIPT", "LOAD", SCRIPTS[script])
                return await connection.send(packed)
        except redis.RedisError as exc:
            raise self._lost_redis(exc) from None

    async def _mark_near_duplicate(self, page: Page) -> None:
        """--extract: the page's near_duplicate_of, from the index all processes share."""
        from crawler.simhash import MAX_DISTANCE, MAX_GROUPS_CHANGED

        fingerprint = int(page.fields["simhash"], 16)
        high, low = fingerprint >> 32, fingerprint & 0xFFFFFFFF
        limits = (MAX_DISTANCE, MAX_GROUPS_CHANGED)
        first = await self._call(_command("near", self._prefix, high, low, page.url, *limits))
        # After a crash, a page fetched again may find the fingerprint it left itself.
        if first is not None and first.decode() != page.url:
            page.fields["near_duplicate_of"] = first.decode()

    async def _connect(self) -> RedisConnection:
        async with self._connecting:
            if self._connection is None:
                try:
                    self._connection = await RedisConnection.open(self._url, CONNECT_TIMEOUT_S)
                except redis.RedisError as exc:
                    raise self._lost_redis(exc) from None
        return self._connection

    def _lost_redis(self, exc: redis.RedisError) -> WriteFailed:
        self._lost = True  # leave the crawl to the others: they reap us after --lease-s
        return WriteFailed(f"lost Redis at {self._shown_url}: {exc}")

    def _evicted(self) -> str:
        return (
            f"this process ({self.member}) was dropped from the crawl: it sent no "
            f"heartbeat for --lease-s {self.settings.lease_s:g} s, and others took its URLs"
        )

    async def _tick(self) -> tuple[int, int, int, int]:
        """Renew our lease, reap the dead, follow membership; the crawl's counts (queued,
        in flight, started, gone listed), and its records and members in the stats."""
        tick = self._call(
            _command("tick", self._prefix, self.member, self._lease_ms, 0, self._reaped_wait_ms)
        )
        try:
            async with asyncio.timeout(REPLY_TIMEOUT_S):  # not wait_for (see serve)
                reply = await tick
        except TimeoutError:  # behind every command sent before it: Redis hangs
            if self._connection is not None:
                self._connection.abort()
            raise self._lost_redis(redis.TimeoutError(f"no reply in {REPLY_TIMEOUT_S} s")) from None
        if reply[0] == b"evicted":
            self._members = []
            raise WriteFailed(self._evicted())
        members = sorted(m.decode() for m in reply[1])
        if members != self._members:
            self._members = members
            self._slot_owners = [owner(slot_name(n), members) for n in range(SLOTS)]
            self._mine = bytes(b"01"[o == self.member] for o in self._slot_owners)
            held = await self._call(
                _plain_command("SMEMBERS", self._prefix + "held:" + self.member)
            )
            await self._hand_over(map(bytes.decode, held))
        self.stats.all_processes = {"records": int(reply[6]), "processes": len(members)}
        return int(reply[2]), int(reply[3]), int(reply[4]), int(reply[5])

    async def _hand_over(self, held: Iterable[str] = ()) -> None:
        """Give back the hosts another member owns now, of those `held` (locked by us in
        Redis) and those with work here; each one once nothing of it is in flight here,
        so that it is never served by two processes at once."""
        for host in {*held, *self.frontier.hosts(), *self._outstanding}:
            if self._slot_owners[slot_of(host)] != self.member:
                self._leaving.add(host)
        for host in list(self._leaving):
            items = []
            while (request := self.frontier.pop(host)) is not None:
                items.append(self._taken.pop(_taken_key(request)))
            self._outstanding[host] -= len(items)
            await self._release_host(host, items)

    async def _release_host(self, host: str, items: list[bytes]) -> None:
        unlock = self._outstanding[host] <= 0
        if unlock:
            self._outstanding.pop(host, None)
            self._leaving.discard(host)
        if items or unlock:
            wait_ms = self._next_request_in_ms(host) if unlock else 0
            await self._call(
                _command("release", self._prefix, self.member, host, int(unlock), wait_ms, *items)
            )

    def _next_request_in_ms(self, host: str) -> int:
        """When this process may ask `host` again (its delay from the last request)."""
        return round(self._scheduler.wait_s(host) * 1000) if self._scheduler else 0

    def _done(self, host: str) -> None:
        self._outstanding[host] -= 1
        # A host with nothing left here: to hand over, or to take more of, which a
        # level's end may have kept its commits from (see _refill). Its lock in Redis
        # says we still hold it while it has URLs queued (a hand-over reads them), and
        # its last commit let it go if none were: kept here, every host served was an
        # entry for the crawl's life.
        if self._outstanding[host] <= 0:
            del self._outstanding[host]
            self._wake.set()

    async def _refill(self) -> None:
        """Take URLs of the hosts we own, a batch per host, in one round trip."""
        if self._leaving:
            await self._hand_over()
        outstanding = self._outstanding
        # As many URLs as keep every worker busy, spread over as many hosts as have them
        # (a host new to the crawl may have one URL to give), up to two batches per
        # host taken or in flight here: of our hosts queued, the `room` shallowest that
        # have less than a batch here, and at least one with nothing here.
        room = max(1, 4 * self.settings.concurrency - len(self.frontier))
        full = [host for host, n in outstanding.items() if n >= self._batch]
        count = max(room, len(outstanding) - len(full) + 1)
        listed = await self._call(_command("ready", self._prefix, self._mine, count, *full))
        mine = [
            (host, int(depth))
            for host, depth in zip(map(bytes.decode, listed[::2]), listed[1::2], strict=True)
        ]
        # Breadth-first across hosts, as in one process: no URL of a host being served
        # is taken while a host not served yet has a shallower one. Hosts being served
        # set no limit: a slow one must not hold the others back.
        idle = [depth for host, depth in mine if not outstanding[host]]
        self._deepest = idle[0] if idle else NO_DEPTH_LIMIT  # the list is by depth
        wanted = [host for host, depth in mine if depth <= self._deepest][:room]
        share = max(1, room // max(1, len(wanted)))
        asks = []
        for host in wanted:
            n = self._paced(
                host, min(share, 2 * self._batch - outstanding[host]), outstanding[host]
            )
            if n:
                asks.append((host, n))
        max_pages = self.settings.max_pages
        self._taking = {host for host, _ in asks}
        try:
            replies = await asyncio.gather(  # sent in one write, answered in one read
                *(
                    self._call(
                        _command(
                            "take", self._prefix, self.member, host, n, max_pages, self._deepest
                        )
                    )
                    for host, n in asks
                )
            )
        finally:
            self._taking = set()
        for (host, _), reply in zip(asks, replies, strict=True):
            self._accept(host, reply)

    def _more_of(self, host: str) -> int:
        """How many URLs of `host` to take now: a host is kept at one to two batches
        taken here, unless it is being handed over."""
        outstanding = self._outstanding[host] - 1  # the one being committed
        if outstanding >= self._batch or host in self._leaving:
            return 0
        return self._paced(host, 2 * self._batch - outstanding, outstanding)

    def _paced(self, host: str, n: int, outstanding: int) -> int:
        """`n`, or for a host with a delay as many as it can start within TAKE_AHEAD_S,
        less those taken here already: taken sooner, they would count toward
        --max-pages, and the crawl's end would wait for them, one delay at a time."""
        scheduler = self._scheduler
        delay_s = scheduler.delay_s(host) if scheduler is not None else 0.0
        if not delay_s:
            return n
        return max(0, min(n, max(1, int(TAKE_AHEAD_S / delay_s)) - outstanding))

    def _accept(self, host: str, reply: list[Any]) -> None:
        """URLs of `host` taken from Redis (`take`'s answer): queue them here."""
        if not reply or reply[0] == -1:
            return
        requests = []
        for item in reply[1:]:
            request = _request(item, host)
            self._taken[_taken_key(request)] = item
            requests.append(request)
        if requests:
            self._outstanding[host] += len(requests)
            self.frontier.push(requests)
            scheduler = self._scheduler
            assert scheduler is not None  # URLs are taken only while serve() feeds it
            if reply[0] > 0:
                scheduler.hold(host, reply[0] / 1000)
            scheduler.add(requests)
