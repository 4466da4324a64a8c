"""Redis memory per queued URL with --redis: the queue entries of today against the JSON ones.

A real redis-server on a free port (started as broad_bench.py starts it) is
filled, as a crawl of the broad web of broad_web.py would fill it, with `--urls`
queued URLs over `--hosts` hosts: each page of the web, with the page linking to
it as its referrer, RPUSHed to its host's list `q:<host>`, its host added to
its slot's `hosts:<slot>` and the slot to `slots`. Then Redis's used_memory, less
what it used empty, is divided by the URLs. Both entry formats are measured: the
JSON `[url, depth, referrer]` of queue format 1, and crawler.state.redis's `depth
path referrer` (format 2).

    python benchmarks/redis_queue_memory.py --urls 10000000 --hosts 100000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import redis
from broad_bench import start_redis
from broad_web import Shape

from crawler.frontier import Request
from crawler.state.redis import SLOTS, _record, slot_of

PREFIX = "crawler:{bench}:"
BATCH = 10_000


def json_entry(request: Request) -> bytes:
    """Queue format 1, as crawler.state.redis wrote it before."""
    return orjson.dumps([request.url, request.depth, request.referrer])


def requests(shape: Shape, urls: int) -> Iterator[Request]:
    """Pages 1 .. urls of the web, each with the page that links to it first."""
    starts = shape.level_starts()
    for n in range(shape.seeds, shape.seeds + urls):
        parent = shape.parent(n, starts)
        assert parent is not None
        referrer = parent[0]
        yield Request(
            f"{shape.origin(shape.host(n, starts))}/p/{n}",
            shape.level(n, starts),
            f"{shape.origin(shape.host(referrer, starts))}/p/{referrer}",
        )


def fill(client: redis.Redis, shape: Shape, urls: int, entry: Callable[[Request], bytes]) -> int:
    """Queue the URLs; the bytes of their entries."""
    pipe = client.pipeline(transaction=False)
    entry_bytes = 0
    for i, request in enumerate(requests(shape, urls), 1):
        item = entry(request)
        entry_bytes += len(item)
        pipe.rpush(PREFIX + "q:" + request.host, item)
        # The crawl ranks a host by its first URL's depth: the first URL queued here,
        # and a slot by its shallowest host's.
        slot = slot_of(request.host)
        pipe.zadd(PREFIX + f"hosts:{slot}", {request.host: request.depth}, nx=True)
        pipe.zadd(PREFIX + "slots", {slot: request.depth}, lt=True)
        if i % BATCH == 0:
            pipe.execute()
    pipe.execute()
    return entry_bytes


def measure(shape: Shape, urls: int, entry: Callable[[Request], bytes]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        server, url = start_redis(Path(directory))
        try:
            client = redis.Redis.from_url(url)
            empty = client.info("memory")["used_memory"]
            started = time.monotonic()
            entry_bytes = fill(client, shape, urls, entry)
            used = client.info("memory")["used_memory"] - empty
            return {
                "bytes_per_url": used / urls,
                "entry_bytes_per_url": entry_bytes / urls,
                "hosts": sum(client.zcard(PREFIX + f"hosts:{n}") for n in range(SLOTS)),
                "seconds": time.monotonic() - started,
            }
        finally:
            server.terminate()
            server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=100_000)
    args = parser.parse_args()
    shape = Shape(args.hosts, args.urls + 100, seeds=100, port=26010)
    print(f"{args.urls:,} URLs queued over {args.hosts:,} hosts")
    results = {}
    for name, entry in (("JSON (format 1)", json_entry), ("depth path referrer (2)", _record)):
        results[name] = result = measure(shape, args.urls, entry)
        print(
            f"{name:<26} {result['bytes_per_url']:6.1f} B/URL in Redis "
            f"({result['entry_bytes_per_url']:.1f} B of entry), {result['hosts']:,} hosts, "
            f"{result['seconds']:.0f} s",
            flush=True,
        )
    old, new = (r["bytes_per_url"] for r in results.values())
    print(f"format 2 takes {new / old:.2f}x the memory of format 1")


if __name__ == "__main__":
    main()
