"""Crawl a small generated site once with our crawler; print pages/s and peak RSS.

The quick figure for notes and issues, set up as crawl_bench.py does it (nginx
pinned to CPU 0, the crawler to CPU 1) but one run, ours only, not --quiet.

    python benchmarks/crawl_once.py [--pages 5000] [--concurrency 32] [--per-host N]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from crawl_bench import (
    BENCH_DIR,
    OUT_DIR,
    check_crawl,
    compile_bytecode,
    measure,
    ours_command,
    pinning,
    site,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=5000, help="pages in the site")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument(
        "--per-host",
        type=int,
        help="requests in flight to the one host (default: --concurrency; the crawler's own "
        "default of 4 would be the limit on a one-host site)",
    )
    parser.add_argument("--port", type=int, default=18765, help="port to serve the site on")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where the site goes")
    args = parser.parse_args()
    compile_bytecode(BENCH_DIR.parent)
    crawler_cpu, server_cpu = pinning()
    the_site = site.ensure(args.out / f"site-{args.pages}-{args.port}", args.pages, args.port)
    with tempfile.TemporaryDirectory(prefix="crawl-once-") as temp:
        seeds, stem = Path(temp) / "seeds.txt", Path(temp) / "ours"
        seeds.write_text(the_site.index_url + "\n", encoding="utf-8")
        command = ours_command(
            seeds,
            stem.with_suffix(".jsonl"),
            args.concurrency,
            args.per_host or args.concurrency,
            max_depth=50,
            quiet=False,
        )
        print(f"$ {shlex.join(command)}")
        with site.serve(the_site.directory, args.port, cpu=server_cpu) as server:
            run = measure(site.pinned(command, crawler_cpu), stem)
        check_crawl(set(the_site.urls), stem, run)
        summary = stem.with_suffix(".log").read_text(encoding="utf-8", errors="replace")
    print(summary.rstrip())
    print(
        f"{run.pages:,} pages of {len(the_site.urls):,} from {server.name} in {run.wall_s:.2f} s "
        f"(interpreter start included): {run.pages_per_s:,.0f} pages/s, "
        f"peak RSS {run.peak_rss_mib:.0f} MiB, CPU {run.cpu_s:.2f} s; "
        f"missing {run.missing}, duplicates {run.duplicates}, extra {run.extra}, "
        f"failed {run.failed}"
        + ("" if crawler_cpu is None else f"; crawler on CPU {crawler_cpu}, server {server_cpu}")
    )
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
