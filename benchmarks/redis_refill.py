"""The cost of one --redis frontier refill against the number of hosts queued.

A real redis-server on a free port (started as broad_bench.py starts it) gets a
shared crawl whose queue holds one URL on each of `--hosts` hosts, queued by the
crawler's own commit script. Then one RedisStore refills its frontier `--refills`
times as the crawl's feeder does (the URLs it takes are given back after each, so
that every refill sees the same queue), and the benchmark prints per refill: the
crawler's CPU time (time.process_time, median), Redis's CPU time and the bytes
Redis sent (INFO's used_cpu_* and total_net_output_bytes, over all the refills).

    python benchmarks/redis_refill.py --hosts 10000 100000 [--refills 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broad_bench import start_redis

from crawler.config import Settings
from crawler.frontier import Request
from crawler.politeness import HostScheduler, Robots
from crawler.state.redis import RedisStore

FILL_BATCH = 1000


def redis_figures(client: redis.Redis) -> tuple[float, int]:
    """Redis's CPU seconds and the bytes it sent, since it started."""
    cpu, stats = client.info("cpu"), client.info("stats")
    return cpu["used_cpu_user"] + cpu["used_cpu_sys"], stats["total_net_output_bytes"]


async def measure(url: str, hosts: int, refills: int) -> dict[str, Any]:
    settings = Settings(
        redis=url, crawl_id=uuid.uuid4().hex, any_host=True, output="/dev/null", quiet=True
    )
    store = RedisStore(settings, [])
    robots = Robots(None, settings.user_agent, False, 0)  # type: ignore[arg-type]  # never fetches

    def scheduler() -> HostScheduler:
        return HostScheduler(
            store.frontier, robots, per_host=4, delay_s=0, max_crawl_delay_s=0,
            max_retry_after_s=0, max_pages=0, open_ended=True,
        )  # fmt: skip

    store._scheduler = scheduler()
    listed = [Request(f"http://h{i}.test/", 0, None) for i in range(hosts)]
    for start in range(0, hosts, FILL_BATCH):
        await store.commit(None, None, [], [], listed[start : start + FILL_BATCH])
    await store._tick()
    client = redis.Redis.from_url(url)
    cpu_s = []
    before = redis_figures(client)
    for _ in range(refills):
        started = time.process_time()
        await store._refill()
        cpu_s.append(time.process_time() - started)
        store._leaving |= set(store._outstanding)  # given back: the next finds the same queue
        await store._hand_over()
        store._scheduler = scheduler()
    after = redis_figures(client)
    store._members = []  # not a member any more: nothing to leave
    store.sinks.close()
    return {
        "hosts": hosts,
        "refills": refills,
        "crawler_cpu_ms_per_refill_median": round(statistics.median(cpu_s) * 1000, 3),
        "redis_cpu_ms_per_refill": round((after[0] - before[0]) / refills * 1000, 3),
        "redis_sent_bytes_per_refill": round((after[1] - before[1]) / refills),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--refills", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        server, url = start_redis(Path(scratch))
        try:
            for hosts in args.hosts:
                print(json.dumps(asyncio.run(measure(url, hosts, args.refills))), flush=True)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
