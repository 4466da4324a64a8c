"""Which crawler process serves a host: rendezvous hashing over the live members.

Every process of a shared crawl (--redis) computes the same answer from the same
member list, with no coordination: each member scores the host with a hash of
(member, host) and the highest score wins. When a member joins or leaves, only
the hosts it wins or held change hands (about 1/N of them), unlike `hash % N`,
which reshuffles nearly all. The idea of Heritrix's HashCrawlMapper and
StormCrawler's URLPartitioner, as one pure function.
"""

from __future__ import annotations

from collections.abc import Iterable

import mmh3


def owner(host: str, members: Iterable[str]) -> str | None:
    """The member that serves `host`; None if there are no members."""
    best, best_score = None, -1
    for member in members:
        score = mmh3.hash64(f"{member}\x00{host}", signed=False)[0]
        if score > best_score or (score == best_score and best is not None and member > best):
            best, best_score = member, score
    return best
