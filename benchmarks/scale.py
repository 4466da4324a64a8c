"""How pages/s, CPU per page and peak RSS change with the size of the site.

Generated sites of 2,000, 20,000 and 200,000 pages (as crawl_bench.py makes
them), each served by nginx and crawled once by our crawler with the same
settings as crawl_bench.py. Costs should grow linearly or better: pages/s and
CPU per page flat, peak RSS growing far slower than the site.

    python benchmarks/scale.py [--sizes 2000 20000 200000] [--max-pages N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from crawl_bench import OUT_DIR, check_crawl, measure, ours_command, pinning, site


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000, 200_000])
    parser.add_argument("--max-pages", type=int, default=0, help="stop each crawl there")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--port", type=int, default=18766)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    crawler_cpu, server_cpu = pinning()
    rows = []
    for pages in args.sizes:
        the_site = site.ensure(args.out / f"site-{pages}-{args.port}", pages, args.port)
        with tempfile.TemporaryDirectory(prefix="scale-") as temp:
            seeds, stem = Path(temp) / "seeds.txt", Path(temp) / "ours"
            seeds.write_text(the_site.index_url + "\n", encoding="utf-8")
            command = ours_command(
                seeds, stem.with_suffix(".jsonl"), args.concurrency, args.concurrency, max_depth=50
            )
            if args.max_pages:
                command += ["--max-pages", str(args.max_pages)]
            with site.serve(the_site.directory, args.port, cpu=server_cpu) as server:
                run = measure(site.pinned(command, crawler_cpu), stem)
            check_crawl(set(the_site.urls), stem, run)
        rows.append((pages, run))
        print(f"{pages:,} pages: {run.pages:,} crawled in {run.wall_s:.1f} s", flush=True)
    print(
        f"\nscale, our crawler, concurrency {args.concurrency}, server {server.name}, "
        f"crawler on CPU {crawler_cpu}, server on CPU {server_cpu}"
    )
    print(
        f"{'site pages':>10} {'crawled':>9} {'pages/s':>8} {'CPU ms/page':>12} "
        f"{'peak RSS MiB':>13} {'missing':>8} {'dup':>5} {'failed':>7}"
    )
    for pages, run in rows:
        print(
            f"{pages:>10,} {run.pages:>9,} {run.pages_per_s:>8,.0f} "
            f"{1000 * run.cpu_s / run.pages:>12.3f} {run.peak_rss_mib:>13.1f} "
            f"{run.missing if not args.max_pages else '-':>8} {run.duplicates:>5} "
            f"{run.failed:>7}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
