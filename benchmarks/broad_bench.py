"""A broad crawl of the synthetic web of broad_web.py: speed, memory and disk against its size.

One crawler process, `--any-host --allow-private-addresses --state DIR`, crawls a
web of `--hosts` hosts from its seeds until it has written `--max-pages` records
(0: the whole web). Once a second the benchmark reads the crawler's RSS and how
many records it wrote. At the end it prints:

- pages/s over the first and the last 10% of the records, and their ratio;
- peak RSS, and how much RSS grew after the first 10% of the records;
- the state directory's size, part by part, per discovered URL (the Bloom
  filter apart: its size is fixed by --expected-urls);
- with --redis, Redis's memory, in all and per queued URL;
- exactness, from the servers' counters and the output: every page once, every
  depth its level (with --redis a few pages may come one deeper: see README),
  robots.txt read first and obeyed, Crawl-delay kept.

    python benchmarks/broad_bench.py --hosts 100000 --web-pages 2000000 --max-pages 100000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from broad_web import BroadWeb, raise_open_files_limit

REDIS_SERVER = "/usr/bin/redis-server"
Sample = tuple[float, int, float, float]  # seconds, records, RSS MB, crawler CPU seconds


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of process `pid` so far."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class OutputCounter:
    """Counts the records in a growing JSON-lines file, reading only what was added."""

    def __init__(self, path: Path) -> None:
        self.path, self.records, self._offset = path, 0, 0

    def update(self) -> int:
        if self.path.exists():
            with self.path.open("rb") as output:
                output.seek(self._offset)
                data = output.read()
            whole = data.rfind(b"\n") + 1
            self.records += data.count(b"\n", 0, whole)
            self._offset += whole
        return self.records


def crawler_command(args: argparse.Namespace, seeds: Path, scratch: Path) -> list[str]:
    command = [sys.executable, "-m", "crawler", str(seeds), "-o", str(scratch / "out.jsonl")]
    command += ["--any-host", "--allow-private-addresses", "--quiet", "--max-depth", "50"]
    command += ["--concurrency", str(args.concurrency), "--max-pages", str(args.max_pages)]
    command += ["--expected-urls", str(args.expected_urls), "--stats", str(scratch / "stats.json")]
    if args.redis:
        command += ["--redis", args.redis, "--crawl-id", "broad"]
    else:
        command += ["--state", str(scratch / "state")]
    return command + args.option


def crawler_env(args: argparse.Namespace) -> dict[str, str]:
    """The crawler's environment: this one, with rss_probe/ loaded if --probe-log."""
    env = dict(os.environ)
    if args.probe_log:
        probe = str(Path(__file__).parent / "rss_probe")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (probe, env.get("PYTHONPATH"))))
        env["RSS_PROBE_LOG"] = str(args.probe_log.resolve())
    return env


def crawl(
    args: argparse.Namespace, web: BroadWeb, scratch: Path, kill_at: int = 0
) -> tuple[list[Sample], int]:
    """Run the crawler, sampling (seconds, records, RSS MB); its exit status.
    With `kill_at`, SIGKILL it once it has written that many records."""
    seeds = scratch / "seeds.txt"
    seeds.write_text("\n".join(web.seed_urls()) + "\n")
    counter = OutputCounter(scratch / "out.jsonl")
    counter.update()
    started = time.monotonic()
    child = subprocess.Popen(crawler_command(args, seeds, scratch), env=crawler_env(args))
    samples = []
    while child.poll() is None:
        time.sleep(args.sample_s)
        records = counter.update()
        samples.append((time.monotonic() - started, records, rss_mb(child.pid), cpu_s(child.pid)))
        if kill_at and records >= kill_at:
            child.send_signal(signal.SIGKILL)
    child.wait()
    last = samples[-1] if samples else (0, 0, 0.0, 0.0)
    samples.append((time.monotonic() - started, counter.update(), last[2], last[3]))
    return samples, child.returncode


def rate_between(samples: list[Sample], low: int, high: int, clock: int = 0) -> float:
    """Records per second from the sample reaching `low` records to the one reaching `high`,
    by the wall clock (`clock` 0) or the crawler's CPU time (3)."""
    start = next(s for s in samples if s[1] >= low)
    end = next(s for s in samples if s[1] >= high)
    seconds = end[clock] - start[clock]
    return (end[1] - start[1]) / seconds if seconds > 0 else float("nan")


def figures(samples: list[Sample]) -> dict[str, Any]:
    total = samples[-1][1]
    tenth = total // 10
    first = rate_between(samples, 0, tenth)
    last = rate_between(samples, total - tenth, total)
    first_cpu = rate_between(samples, 0, tenth, clock=3)
    last_cpu = rate_between(samples, total - tenth, total, clock=3)
    rss_after_tenth = [rss for _, records, rss, _ in samples if records >= tenth and rss]
    rss_at_tenth = rss_after_tenth[0] if rss_after_tenth else float("nan")
    peak = max(sample[2] for sample in samples)
    return {
        "records": total,
        "seconds": round(samples[-1][0], 1),
        "pages_per_s_first_10%": round(first, 1),
        "pages_per_s_last_10%": round(last, 1),
        "speed_ratio": round(last / first, 2),
        "pages_per_cpu_s_first_10%": round(first_cpu, 1),
        "pages_per_cpu_s_last_10%": round(last_cpu, 1),
        "cpu_speed_ratio": round(last_cpu / first_cpu, 2),
        "crawler_cpu_s": round(samples[-1][3], 1),
        "peak_rss_mb": round(peak, 1),
        "rss_at_10%_mb": round(rss_at_tenth, 1),
        "rss_growth_after_10%": round(max(rss_after_tenth) / rss_at_tenth - 1, 3),
    }


def state_figures(directory: Path, output: Path) -> dict[str, Any]:
    sizes = {p.name: p.stat().st_size for p in directory.iterdir() if p.is_file()}
    with sqlite3.connect(directory / "crawl.sqlite") as db:
        queued = db.execute("SELECT count(*) FROM frontier").fetchone()[0]
        hosts = db.execute("SELECT count(*) FROM hosts").fetchone()[0]
    records = sum(1 for _ in output.open("rb"))
    discovered = records + queued
    without_bloom = sum(size for name, size in sizes.items() if name != "visited.bloom")
    return {
        "discovered_urls": discovered,
        "queued_urls": queued,
        "hosts_with_records": hosts,
        "state_bytes": sizes,
        "state_bytes_per_discovered_url_without_bloom": round(without_bloom / discovered, 1),
    }


def exactness(web: BroadWeb, output: Path) -> dict[str, Any]:
    counters = web.counters()
    seen: set[str] = set()
    twice = wrong_depth = 0
    with output.open("rb") as records:
        for line in records:
            record = orjson.loads(line)
            url = record["url"]
            twice += url in seen
            seen.add(url)
            if record.get("error") is None and web.expected_depth(url) != record["depth"]:
                wrong_depth += 1
    return counters | {"output_twice": twice, "output_wrong_depth": wrong_depth}


def redis_figures(url: str) -> dict[str, Any]:
    import redis

    client = redis.Redis.from_url(url)
    info = client.info("memory")
    prefix = "crawler:{broad}:"
    queued = int(client.hget(prefix + "counts", "queued") or 0)
    bloom = sum(client.memory_usage(key) or 0 for key in client.scan_iter("crawler:{broad:bf*"))
    hosts = client.zcard(prefix + "hosts")
    used = info["used_memory"] - info.get("used_memory_startup", 0)
    return {
        "redis_used_bytes": used,
        "redis_bloom_bytes": bloom,
        "queued_urls": queued,
        "queued_hosts": hosts,
        "redis_bytes_per_queued_url_without_bloom": round((used - bloom) / max(1, queued), 1),
    }


def start_redis(scratch: Path) -> tuple[subprocess.Popen[bytes], str]:
    import socket

    import redis

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [
            REDIS_SERVER,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(scratch),
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(200):
        try:
            redis.Redis.from_url(url).ping()
            return server, url
        except redis.ConnectionError:
            time.sleep(0.02)
    raise RuntimeError("redis-server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--web-pages", type=int, default=100_000, help="pages in the web")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--children", type=int, default=10, help="new pages each page links")
    parser.add_argument("--slow-hosts", type=int, default=1, help="hosts with Crawl-delay 10")
    parser.add_argument("--max-pages", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--expected-urls", type=int, default=1_000_000)
    parser.add_argument("--sample-s", type=float, default=1.0)
    parser.add_argument("--redis", action="store_true", help="crawl with --redis, not --state")
    parser.add_argument("--keep", type=Path, help="keep the scratch files here")
    parser.add_argument(
        "--probe-log", type=Path, help="sample what the crawler's memory is made of into this file"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        help="one more crawler flag, as --option=--max-pages-per-host=20 (repeatable)",
    )
    args = parser.parse_args()
    raise_open_files_limit()
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="broad-"))
    scratch.mkdir(parents=True, exist_ok=True)
    redis_server = None
    if args.redis:
        redis_server, args.redis = start_redis(scratch)
    shape = {"seeds": args.seeds, "children": args.children, "slow_hosts": args.slow_hosts}
    try:
        with BroadWeb(args.hosts, args.web_pages, **shape) as web:
            print("pages per depth:", web.shape.pages_at_depth(), flush=True)
            samples, status = crawl(args, web, scratch)
            result: dict[str, Any] = {"hosts": args.hosts, "exit": status} | figures(samples)
            if args.redis:
                result |= redis_figures(args.redis)
            else:
                result |= state_figures(scratch / "state", scratch / "out.jsonl")
            result |= exactness(web, scratch / "out.jsonl")
            stats = orjson.loads((scratch / "stats.json").read_bytes())
            result["depth_inexact"] = stats["depth_inexact"]  # the crawler's own count
    finally:
        if redis_server is not None:
            redis_server.terminate()
            redis_server.wait()
    print(json.dumps(result, indent=1))
    (scratch / "samples.json").write_text(json.dumps(samples))
    if args.keep is None:
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    else:
        print("files in", scratch, file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
