"""What `keep_freed_memory()` (glibc's M_TRIM_THRESHOLD and M_TOP_PAD) saves an API crawl.

    python benchmarks/malloc_bench.py [--pages 5000] [--rounds 3] [--port 18791]

Generates the benchmark site, serves it with nginx, and crawls it with
`Crawler.run()` in fresh processes, with and without the opt-in, alternating.
Each process reports its own CPU time (user + sys) and minor page faults from
getrusage: counts that a busy machine disturbs far less than wall-clock time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from crawl_bench import site as bench_site  # benchmarks/site.py, loaded by its path

CHILD = """
import json, resource, sys
import crawler
from crawler import Crawler, Settings
if sys.argv[2] == "on":
    crawler.keep_freed_memory()
settings = Settings(concurrency=64, per_host=64, max_depth=50, ignore_robots=True, uvloop=False)
records = Crawler([sys.argv[1]], settings).run()["records"]
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"records": records, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "minor_faults": usage.ru_minflt, "max_rss_kib": usage.ru_maxrss}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=18791)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="malloc-bench-") as temp:
        Path(temp).chmod(0o755)  # nginx's workers run as another user
        site_dir = Path(temp) / "site"
        bench_site.generate(site_dir, args.pages, args.port)
        seed = f"http://{bench_site.HOST}:{args.port}/index.html"
        runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
        with bench_site.serve(site_dir, args.port):
            for _ in range(args.rounds):
                for mode in runs:
                    out = subprocess.run(
                        [sys.executable, "-c", CHILD, seed, mode],
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    if out.returncode:
                        raise SystemExit(f"the crawl with the opt-in {mode} failed:\n{out.stderr}")
                    runs[mode].append(json.loads(out.stdout))
    for mode, results in runs.items():
        line = ", ".join(
            f"{key} {statistics.median(r[key] for r in results):,.2f}"
            for key in ("records", "cpu_s", "minor_faults", "max_rss_kib")
        )
        print(f"keep_freed_memory {mode}: median of {len(results)}: {line}")


if __name__ == "__main__":
    main()
