"""The cost of sharing a crawl through Redis: pages/s and Redis's work per page.

On the generated site of crawl_bench.py (served by nginx), it times, in rounds:
the crawler with its in-memory store, the crawler with --redis alone, and two
--redis processes crawling together. The machine has two cores: the first
crawler is pinned to CPU 1; nginx, redis-server and (in the two-process runs) the
second crawler share CPU 0, so the two-process figure is a lower bound. For each
--redis run it reads Redis's own counters (INFO commandstats and INFO cpu, reset
before the run) and prints per page: commands sent by clients (round trips,
pipelined takes counted once per command), commands the scripts ran inside Redis,
and Redis CPU.

    python benchmarks/redis_bench.py [--pages 20000] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
import crawl_bench
from crawl_bench import OUT_DIR, Run, check_crawl, measure, ours_command, pinning, site

CLIENT_COMMANDS = ("evalsha", "eval", "smembers", "script|load", "zrem", "del", "get")


def start_redis(port: int, cpu: int | None) -> subprocess.Popen[bytes]:
    directory = tempfile.mkdtemp(prefix="redis-bench-")
    command = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", directory]
    command += ["--save", "", "--appendonly", "no"]
    process = subprocess.Popen(site.pinned(command, cpu), stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            return process
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def redis_cpu_s(client: redis.Redis) -> float:
    """Redis's CPU time since it started (CONFIG RESETSTAT does not reset it)."""
    cpu = client.info("cpu")
    return cpu["used_cpu_user"] + cpu["used_cpu_sys"]


def redis_figures(client: redis.Redis, cpu_before_s: float) -> dict[str, float]:
    stats = client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): v["calls"] for name, v in stats.items()}
    sent = sum(n for name, n in calls.items() if name in CLIENT_COMMANDS)
    return {
        "client_commands": sent,
        "script_commands": sum(calls.values()) - sent,
        "cpu_s": redis_cpu_s(client) - cpu_before_s,
        "calls": calls,
    }


def timed_processes(commands: list[list[str]], stem: Path) -> Run:
    """Run the commands together; one Run: the slowest's wall time, the CPU of all."""
    with ThreadPoolExecutor(len(commands)) as pool:
        stems = [stem.with_name(f"{stem.name}-{i}") for i in range(len(commands))]
        runs = list(pool.map(measure, commands, stems))
    with open(stem.with_suffix(".jsonl"), "wb") as joined:
        for part in stems:
            path = part.with_suffix(".jsonl")
            if path.exists():
                joined.write(path.read_bytes())
    return Run(
        started_at=min(r.started_at for r in runs),
        wall_s=max(r.wall_s for r in runs),
        cpu_s=sum(r.cpu_s for r in runs),
        peak_rss_mib=max(r.peak_rss_mib for r in runs),
        exit_code=max(r.exit_code for r in runs),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--port", type=int, default=18791)
    parser.add_argument("--redis-port", type=int, default=18779)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        print("redis-server is not installed (apt-get install -y redis-server)")
        return 1
    crawler_cpu, server_cpu = pinning()
    the_site = site.ensure(args.out / f"site-{args.pages}-{args.port}", args.pages, args.port)
    manifest = set(the_site.urls)
    seeds = args.out / "seeds.txt"
    seeds.write_text(the_site.index_url + "\n", encoding="utf-8")
    runs_dir = args.out / "redis-runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    redis_url = f"redis://127.0.0.1:{args.redis_port}/0"

    def ours(output: Path, cpu: int | None, *extra: str) -> list[str]:
        command = ours_command(seeds, output, args.concurrency, args.concurrency, 50)
        return site.pinned([*command, *extra], cpu)

    results: dict[str, list[dict[str, Any]]] = {"memory": [], "redis-1": [], "redis-2": []}
    redis_process = start_redis(args.redis_port, server_cpu)
    client = redis.Redis(port=args.redis_port)
    try:
        with site.serve(the_site.directory, args.port, cpu=server_cpu):
            measure(ours(runs_dir / "warm.jsonl", crawler_cpu), runs_dir / "warm")
            for n in range(args.runs):
                for label in results:
                    stem = runs_dir / f"{label}-{n}"
                    crawl = ["--redis", redis_url, "--crawl-id", uuid.uuid4().hex[:12]]
                    if label == "memory":
                        commands = [ours(stem.with_name(f"{stem.name}-0.jsonl"), crawler_cpu)]
                    else:
                        cpus = [crawler_cpu, server_cpu][: int(label[-1])]
                        commands = [
                            ours(stem.with_name(f"{stem.name}-{i}.jsonl"), cpu, *crawl)
                            for i, cpu in enumerate(cpus)
                        ]
                    for old in runs_dir.glob(f"{stem.name}*.jsonl"):
                        old.unlink()  # --redis appends to its output
                    client.flushall()
                    client.config_resetstat()
                    cpu_before_s = redis_cpu_s(client)
                    run = timed_processes(commands, stem)
                    check_crawl(manifest, stem, run)
                    figures = redis_figures(client, cpu_before_s) if label != "memory" else {}
                    if figures:
                        figures["used_memory_mib"] = client.info("memory")["used_memory"] / 2**20
                    results[label].append({"run": run.__dict__, "redis": figures})
                    print(f"{label} #{n}: {crawl_bench.describe(run)}", flush=True)
    finally:
        redis_process.terminate()
        redis_process.wait()

    print()
    print(
        f"{'':10} {'pages/s':>9} {'CPU ms/page':>12} {'complete':>9} "
        f"{'client cmds/page':>17} {'script cmds/page':>17} {'Redis CPU us/page':>18}"
    )
    medians = {}
    for label, entries in results.items():
        rate = statistics.median(e["run"]["pages"] / e["run"]["wall_s"] for e in entries)
        medians[label] = rate
        cpu = statistics.median(
            1000 * e["run"]["cpu_s"] / max(1, e["run"]["pages"]) for e in entries
        )
        complete = all(
            e["run"]["missing"] == e["run"]["duplicates"] == e["run"]["extra"] == 0 for e in entries
        )
        line = f"{label:10} {rate:9,.0f} {cpu:12.3f} {'yes' if complete else 'NO':>9}"
        if label != "memory":

            def per(key: str, entries: list[dict[str, Any]] = entries) -> float:
                return statistics.median(
                    e["redis"][key] / max(1, e["run"]["pages"]) for e in entries
                )

            line += (
                f" {per('client_commands'):17.3f} {per('script_commands'):17.1f}"
                f" {1e6 * per('cpu_s'):18.1f}"
            )
        print(line)
    print()
    print(f"--redis, 1 process / in memory: {medians['redis-1'] / medians['memory']:.3f}x pages/s")
    print(f"--redis, 2 processes / 1: {medians['redis-2'] / medians['redis-1']:.2f}x pages/s")
    out = args.out / f"redis_bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    print(f"figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
