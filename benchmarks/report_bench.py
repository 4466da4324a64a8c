"""How fast `python -m crawler report` reads records, and in how much memory.

    python benchmarks/report_bench.py [--records 1000000 100000] [--runs 3]

For each size it generates (once, in benchmarks/out/) a JSONL file of records
shaped like a crawl's: 200 hosts, 10 links a page, 90% 200s, 3% 404s, 1% 500s,
3% redirects and 3% connection errors, one body in twenty served at two URLs,
an hour of fetch times. Then it times the report of each, `--runs` times, with
crawl_bench's launcher: wall time, user+sys CPU and peak RSS of the report
process alone. Memory bounded means the peak RSS hardly moves from the smaller
file to the larger.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import random
import statistics
import sys
from pathlib import Path

import orjson

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
HOSTS = 200
LINKS_PER_PAGE = 10
CRAWL_S = 3600


def url(i: int) -> str:
    return f"http://host{i % HOSTS}.test/section/{i // HOSTS % 50}/page-{i}.html"


def digest(i: int) -> str:
    body = hashlib.sha1(str(i - i % 2 if i % 20 < 2 else i).encode()).digest()
    return "sha1:" + base64.b32encode(body).decode()


def record(i: int, n: int, rng: random.Random) -> dict[str, object]:
    roll = rng.random()
    status: int | None = 200
    error = None
    final_url = url(i)
    if roll < 0.03:
        status = 404
    elif roll < 0.04:
        status = 500
    elif roll < 0.07:
        status, final_url = 200, url(i + 1)
    elif roll < 0.10:
        status, final_url, error = None, None, "connection_error"
    second = i * CRAWL_S // n
    return {
        "url": url(i),
        "final_url": final_url,
        "status": status,
        "depth": min(12, int(rng.expovariate(0.5))),
        "referrer": url(i // 3),
        "fetched_at": f"2026-11-24T{10 + second // 3600:02}:{second // 60 % 60:02}:{second % 60:02}"
        f".{rng.randrange(1000):03}+00:00",
        "elapsed_ms": round(rng.lognormvariate(4.5, 1.0), 1),
        "content_type": "text/html; charset=utf-8" if roll > 0.15 else "application/pdf",
        "bytes": int(rng.lognormvariate(10, 1.2)) if status else None,
        "content_digest": digest(i) if status else None,
        "title": f"Page {i}",
        "description": None,
        "canonical": None,
        "links": [url(rng.randrange(n)) for _ in range(LINKS_PER_PAGE)],
        "error": error,
        "truncated": False,
        "kind": "page",
        "lang": "en" if i % 3 else "de",
    }


def records_file(n: int) -> Path:
    path = OUT_DIR / f"report-{n}.jsonl"
    if not path.exists():
        rng = random.Random(n)
        temporary = path.with_suffix(".tmp")
        with open(temporary, "wb") as f:
            for i in range(n):
                f.write(orjson.dumps(record(i, n, rng)) + b"\n")
        temporary.rename(path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1_000_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    OUT_DIR.mkdir(exist_ok=True)
    sys.path.insert(0, str(BENCH_DIR))
    import crawl_bench

    for n in args.records:
        path = records_file(n)
        size_mib = path.stat().st_size / 2**20
        runs = []
        for run in range(1, args.runs + 1):
            stem = OUT_DIR / f"report-{n}-{run}"
            output = stem.with_suffix(".html")
            command = [sys.executable, "-m", "crawler", "report", str(path), "-o", str(output)]
            runs.append(crawl_bench.measure(command, stem))
            assert runs[-1].exit_code == 0, stem.with_suffix(".log").read_text()
        wall = statistics.median(r.wall_s for r in runs)
        cpu = statistics.median(r.cpu_s for r in runs)
        peak = max(r.peak_rss_mib for r in runs)
        print(
            f"{n:>9,} records ({size_mib:,.0f} MiB): {n / wall:,.0f} records/s wall, "
            f"{n / cpu:,.0f} records/s CPU (median of {args.runs}: {wall:.1f} s, "
            f"{cpu:.1f} s CPU), peak RSS {peak:.0f} MiB, report "
            f"{output.stat().st_size / 1024:,.0f} KiB",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
