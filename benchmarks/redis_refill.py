"""The cost of one --redis frontier refill against the number of hosts queued.

A real redis-server on a free port (started as broad_bench.py starts it) gets a
shared crawl whose queue holds one URL on each of `--hosts` hosts, queued by the
crawler's own commit script. Then one RedisStore refills its frontier `--refills`
times as the crawl's feeder does (the URLs it takes are given back after each, so
that every refill sees the same queue), and the benchmark prints per refill: the
crawler's CPU time (time.process_time, median), Redis's CPU time and the bytes
Redis sent (INFO's used_cpu_* and total_net_output_bytes, over all the refills).

With --crawl-hosts, two crawler processes then crawl together (--redis) the
synthetic web of broad_web.py, of that many hosts and --crawl-pages pages, obeying
robots.txt (no host asks for a Crawl-delay of 10 s): it prints the pages a second
over the whole crawl, and each process's CPU seconds (its rusage).

    python benchmarks/redis_refill.py --hosts 10000 100000 [--refills 50]
        [--crawl-hosts 10000 --crawl-pages 30000] [--crawler-path DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broad_bench import OutputCounter, start_redis
from broad_web import BroadWeb, raise_open_files_limit

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


def crawl(args: argparse.Namespace, url: str, scratch: Path) -> dict[str, Any]:
    """Two processes crawl a broad web together: pages/s, and each one's CPU seconds."""
    raise_open_files_limit()
    with BroadWeb(args.crawl_hosts, args.crawl_pages, seeds=100, slow_hosts=0) as web:
        seeds = scratch / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls()) + "\n")
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        if args.crawler_path:
            env["PYTHONPATH"] = str(args.crawler_path)
        started, crawl_id, pids = time.monotonic(), uuid.uuid4().hex, []
        for n in range(2):
            command = [sys.executable, "-m", "crawler", str(seeds)]
            command += ["-o", str(scratch / f"out-{n}.jsonl"), "--any-host", "--quiet"]
            command += ["--allow-private-addresses", "--max-depth", "50", "--concurrency", "32"]
            command += ["--redis", url, "--crawl-id", crawl_id, "--lease-s", "5"]
            # Run from scratch: `-m` puts the working directory first on sys.path, and
            # a checkout's own crawler/ there would win over --crawler-path.
            pids.append(subprocess.Popen(command, env=env, cwd=scratch).pid)
        cpu_s = []
        for pid in pids:
            _, status, usage = os.wait4(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            cpu_s.append(round(usage.ru_utime + usage.ru_stime, 1))
        seconds = time.monotonic() - started
        records = sum(OutputCounter(scratch / f"out-{n}.jsonl").update() for n in range(2))
        return {
            "crawl_hosts": args.crawl_hosts,
            "records": records,
            "pages_per_s": round(records / seconds),
            "cpu_s_per_process": cpu_s,
        } | web.counters()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--refills", type=int, default=50)
    parser.add_argument("--crawl-hosts", type=int, default=0)
    parser.add_argument("--crawl-pages", type=int, default=30_000)
    parser.add_argument("--crawler-path", type=Path, help="another checkout's, to compare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        server, url = start_redis(Path(scratch))
        try:
            for hosts in args.hosts:
                print(json.dumps(asyncio.run(measure(url, hosts, args.refills))), flush=True)
            if args.crawl_hosts:
                print(json.dumps(crawl(args, url, Path(scratch))), flush=True)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
