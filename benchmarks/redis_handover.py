"""Hand-overs in a broad crawl shared through Redis: robots.txt fetched again, and memory.

Three crawler processes share one crawl (--redis) of the synthetic web of
broad_web.py, obeying robots.txt. Once a third of the pages are written, one of
them leaves (SIGINT), and once two thirds are, a new one joins: each time, hosts
change hands. At the end it prints the servers' counters (hosts whose robots.txt
was fetched, and fetched more than once; pages fetched twice) and each process's
peak RSS.

    python benchmarks/redis_handover.py [--hosts 10000] [--web-pages 20000]
        [--crawler-path DIR]   # another checkout's crawler/, to compare
        [--kill]               # the leaver is killed with SIGKILL, not interrupted
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broad_bench import OutputCounter, rss_mb, start_redis
from broad_web import BroadWeb, raise_open_files_limit


def start(
    args: argparse.Namespace, seeds: Path, scratch: Path, n: int, redis_url: str
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "crawler", str(seeds), "-o", str(scratch / f"out-{n}.jsonl")]
    command += ["--any-host", "--allow-private-addresses", "--quiet", "--max-depth", "50"]
    command += ["--concurrency", str(args.concurrency), "--redis", redis_url]
    command += ["--crawl-id", "handover", "--lease-s", "5"]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if args.crawler_path:
        env["PYTHONPATH"] = str(args.crawler_path)
    # Run from scratch: `-m` puts the working directory first on sys.path, and a
    # checkout's own crawler/ there would win over --crawler-path.
    return subprocess.Popen(command, env=env, cwd=scratch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--web-pages", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--crawler-path", type=Path)
    parser.add_argument("--kill", action="store_true", help="the leaver is killed (SIGKILL)")
    args = parser.parse_args()
    raise_open_files_limit()
    scratch = Path(tempfile.mkdtemp(prefix="handover-"))
    redis_server, redis_url = start_redis(scratch)
    try:
        with BroadWeb(args.hosts, args.web_pages, seeds=100, slow_hosts=0) as web:
            seeds = scratch / "seeds.txt"
            seeds.write_text("\n".join(web.seed_urls()) + "\n")
            processes = [start(args, seeds, scratch, n, redis_url) for n in range(3)]
            counters = [OutputCounter(scratch / f"out-{n}.jsonl") for n in range(4)]
            peak_mb = [0.0] * 4
            events = [args.web_pages // 3, 2 * args.web_pages // 3]
            started = time.monotonic()
            while any(p.poll() is None for p in processes):
                time.sleep(0.5)
                records = sum(c.update() for c in counters)
                for n, p in enumerate(processes):
                    peak_mb[n] = max(peak_mb[n], rss_mb(p.pid))
                if events and records >= events[0]:
                    events.pop(0)
                    print(f"{records} records: one process leaves or joins", file=sys.stderr)
                    if events:
                        processes[0].send_signal(signal.SIGKILL if args.kill else signal.SIGINT)
                    else:
                        processes.append(start(args, seeds, scratch, 3, redis_url))
            for p in processes:
                p.wait()
            result = {
                "hosts": args.hosts,
                "records": sum(c.update() for c in counters),
                "seconds": round(time.monotonic() - started, 1),
                "peak_rss_mb": [round(mb, 1) for mb in peak_mb],
            } | web.counters()
    finally:
        redis_server.terminate()
        redis_server.wait()
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
