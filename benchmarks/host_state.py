"""What a crawl keeps per host, measured part by part with tracemalloc at 10^4 and 10^5 hosts.

Each part is built as a crawl of that many hosts builds it, with the crawler's own
classes, and measured alone: the bytes tracemalloc sees allocated and still live
once it is built, divided by the hosts.

    python benchmarks/host_state.py [--hosts 10000 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sqlite3
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from broad_web import Shape

from crawler.frontier import Request, SqliteFrontier
from crawler.politeness import ALLOW_ALL, ROBOTS_MAX_AGE_S, HostScheduler, Robots
from crawler.state.host_counts import SqliteHostCounts
from crawler.state.robots import SqliteRobotsRules
from crawler.stats import Stats

URLS_PER_HOST = 3


def measure(build: Callable[[], Any]) -> int:
    """Bytes still allocated by `build` once it returned (its result kept alive)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before


def origins(hosts: int) -> list[str]:
    shape = Shape(hosts, hosts, port=8000)
    return [shape.origin(h) for h in range(hosts)]


def robots_rules(hosts: int) -> Any:
    """Every host's robots.txt, parsed and cached as a crawl has them."""
    shape = Shape(hosts, hosts)
    robots = Robots(fetcher=None, user_agent="crawler", enabled=True, retries=0)  # type: ignore[arg-type]
    for h, origin in enumerate(origins(hosts)):
        status, body = shape.robots(h)
        robots._rules[origin] = robots._parse(origin, body.encode()) if status == 200 else ALLOW_ALL
    return robots


def robots_rules_on_disk(hosts: int) -> Any:
    """The same with --state: every host's in the state's SQLite as it is read, and only
    the Robots.MAX_CACHED origins used last in memory too."""
    shape = Shape(hosts, hosts)
    db = sqlite3.connect(Path(tempfile.mkdtemp()) / "r.sqlite", isolation_level=None)
    table = SqliteRobotsRules(db)
    robots = Robots(fetcher=None, user_agent="crawler", enabled=True, retries=0, table=table)  # type: ignore[arg-type]
    for h, origin in enumerate(origins(hosts)):
        status, body = shape.robots(h)
        rules = robots._parse(origin, body.encode()) if status == 200 else ALLOW_ALL
        rules = replace(rules, expires_at=time.monotonic() + ROBOTS_MAX_AGE_S)
        robots._cache(origin, rules)
        table.put(origin, "crawler", rules)
    return db, robots


def frontier(hosts: int) -> Any:
    """A disk frontier with URLS_PER_HOST URLs queued on every host."""
    db = sqlite3.connect(Path(tempfile.mkdtemp()) / "f.sqlite", isolation_level=None)
    queue = SqliteFrontier(db)
    db.execute("BEGIN")
    queue.push(
        Request(f"{origin}/p/{i}", 2, f"{origin}/")
        for origin in origins(hosts)
        for i in range(URLS_PER_HOST)
    )
    db.execute("COMMIT")
    return db, queue


def scheduler(hosts: int) -> Any:
    """The host scheduler over that frontier: each host's slot, and the heap."""
    db, queue = frontier(hosts)

    async def build() -> HostScheduler:
        robots = Robots(fetcher=None, user_agent="crawler", enabled=False, retries=0)  # type: ignore[arg-type]
        return HostScheduler(
            queue,
            robots,
            per_host=4,
            delay_s=0,
            max_crawl_delay_s=30,
            max_retry_after_s=60,
            max_pages=0,
        )

    return db, queue, asyncio.run(build())


def stats_hosts(hosts: int) -> Stats:
    stats = Stats()
    for origin in origins(hosts):
        for _ in range(3):
            stats.hosts.add(origin.removeprefix("http://"))
    return stats


def stats_hosts_on_disk(hosts: int) -> Any:
    """The same with --state: the counts in its SQLite, saved at each checkpoint (here
    after every 1,000 hosts), and only those made since the last one in memory."""
    db = sqlite3.connect(Path(tempfile.mkdtemp()) / "h.sqlite", isolation_level=None)
    db.execute("CREATE TABLE hosts (host TEXT PRIMARY KEY, records INTEGER NOT NULL) WITHOUT ROWID")
    counts = SqliteHostCounts(db)
    for h, origin in enumerate(origins(hosts)):
        for _ in range(3):
            counts.add(origin.removeprefix("http://"))
        if h % 1000 == 999:
            counts.save()
    return db, counts


PARTS: dict[str, Callable[[int], Any]] = {
    "robots.txt rules": robots_rules,
    "robots.txt rules, --state": robots_rules_on_disk,
    f"disk frontier, {URLS_PER_HOST} URLs a host": frontier,
    "scheduler + disk frontier": scheduler,
    "Stats.hosts": stats_hosts,
    "Stats.hosts, --state": stats_hosts_on_disk,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args()
    print(f"{'part':<34}" + "".join(f"{f'{n:,} hosts':>22}" for n in args.hosts))
    for name, build in PARTS.items():
        row = f"{name:<34}"
        for hosts in args.hosts:
            size = measure(lambda build=build, hosts=hosts: build(hosts))
            row += f"{size / 2**20:>10.1f} MiB {size / hosts:>6.0f} B"
        print(row, flush=True)


if __name__ == "__main__":
    main()
