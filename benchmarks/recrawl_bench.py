"""The second crawl: what a recrawl with --since costs against the first, and the history index.

1. A generated site (benchmarks/site.py) served by nginx, which sends ETag and
   Last-Modified for its files and answers conditional requests with 304, is
   crawled once. Then 5% of its pages change (a paragraph and a link to a new
   page added), 5% are touched (a new modification time, the same bytes), and 2%
   are deleted; and the site is crawled again with --since. Printed: the body
   bytes and the time (wall and CPU) of each crawl, and whether the recrawl found
   exactly the changed, new and deleted pages, none missed and none invented.

2. The history index at --index-urls URLs: a JSONL of that many synthetic
   records is indexed (in a child process, for its peak RSS); printed: the build
   time, disk bytes per URL, peak RSS, and the time of a lookup per page, in
   batches as the crawl makes them and one by one.

    python benchmarks/recrawl_bench.py --pages 3000 --index-urls 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from crawl_bench import site  # benchmarks/site.py, loaded by path

CHANGED, TOUCHED, DELETED = 0.05, 0.05, 0.02


def crawl(seeds: Path, output: Path, *extra: str) -> dict[str, Any]:
    """One CLI crawl; its stats, wall time and CPU time (user + system)."""
    stats = output.with_suffix(".stats.json")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    command = [sys.executable, "-m", "crawler", str(seeds), "-o", str(output), "--quiet"]
    command += ["--max-depth", "1000", "--stats", str(stats), "--ignore-robots"]
    command += ["--concurrency", "64", "--per-host", "64"]  # as crawl_bench.py runs ours
    subprocess.run([*command, *extra], check=True)
    wall_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    figures = json.loads(stats.read_text())
    return {"wall_s": wall_s, "cpu_s": cpu_s, **figures}


def mutate(the_site: Any, rng: random.Random) -> dict[str, set[str]]:
    """Change, touch and delete pages (never the index); the URLs of each kind, and the new."""
    urls = the_site.urls[1:]
    rng.shuffle(urls)
    n = len(the_site.urls)
    changed = urls[: round(n * CHANGED)]
    touched = urls[len(changed) : len(changed) + round(n * TOUCHED)]
    deleted = urls[len(changed) + len(touched) :][: round(n * DELETED)]
    prefix = f"http://{site.HOST}:{the_site.port}"
    later = time.time() + 60
    new = set()
    for number, url in enumerate(changed):
        path = the_site.directory / url.removeprefix(prefix).lstrip("/")
        new_path = f"/new/{number}.html"
        text = path.read_text(encoding="utf-8")
        addition = f'<p>Changed today: see <a href="{new_path}">what is new</a>.</p>\n</main>'
        path.write_text(text.replace("</main>", addition, 1), encoding="utf-8")
        new_file = the_site.directory / new_path.lstrip("/")
        new_file.parent.mkdir(exist_ok=True)
        new_file.write_text(
            f"<!DOCTYPE html><title>New {number}</title><p>New. <a href='/index.html'>Home</a>",
            encoding="utf-8",
        )
        new.add(prefix + new_path)
    for url in touched:
        path = the_site.directory / url.removeprefix(prefix).lstrip("/")
        os.utime(path, (later, later))
    for url in deleted:
        (the_site.directory / url.removeprefix(prefix).lstrip("/")).unlink()
    return {"changed": set(changed), "touched": set(touched), "deleted": set(deleted), "new": new}


def check(records: list[dict[str, Any]], expected: dict[str, set[str]]) -> dict[str, Any]:
    """What the recrawl found against what was done: missed and invented, by kind."""
    found = {
        "changed": {r["url"] for r in records if r["changed"] and r["status"] == 200},
        "deleted": {r["url"] for r in records if r["changed"] and r["status"] == 404},
        "new": {r["url"] for r in records if r["changed"] is None},
        "touched": {r["url"] for r in records if r["changed"] is False and r["status"] == 200},
    }
    return {
        kind: {
            "expected": len(expected[kind]),
            "missed": len(expected[kind] - found[kind]),
            "invented": len(found[kind] - expected[kind]),
        }
        for kind in found
    }


def site_benchmark(pages: int, out: Path) -> None:
    port = _free_port()
    the_site = site.generate(out / "site", pages, port)
    seeds = out / "seeds.txt"
    seeds.write_text(the_site.index_url + "\n", encoding="utf-8")
    with site.serve(the_site.directory, port) as server:
        first = crawl(seeds, out / "first.jsonl")
        expected = mutate(the_site, random.Random(22))
        second = crawl(seeds, out / "second.jsonl", "--since", str(out / "first.jsonl"))
    records = [json.loads(line) for line in (out / "second.jsonl").open(encoding="utf-8")]
    found = check(records, expected)
    recrawl = second["recrawl"]
    print(f"site: {pages:,} pages served by {server.name}; one run each, on loopback")
    print(f"{'':24}{'first crawl':>14}{'recrawl':>14}{'ratio':>9}")
    for label, key in (("body bytes fetched", "bytes"), ("wall time (s)", "wall_s")):
        a, b = first[key], second[key]
        print(f"{label:24}{a:>14,.2f}{b:>14,.2f}{b / a:>9.3f}")
    a, b = first["cpu_s"], second["cpu_s"]
    print(f"{'CPU time (s)':24}{a:>14,.2f}{b:>14,.2f}{b / a:>9.3f}")
    print(f"{'records':24}{first['records']:>14,}{second['records']:>14,}")
    print("recrawl figures:", json.dumps(recrawl))
    print("found against done:", json.dumps(found))
    exact = all(f["missed"] == 0 and f["invented"] == 0 for f in found.values())
    print("every change found, none invented:", "yes" if exact else "NO")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_history_jsonl(path: Path, urls: int) -> None:
    """`urls` records as a crawl of a large site writes them: 10 links each."""
    rng = random.Random(7)
    host = "http://www.example.com"
    with open(path, "w", encoding="utf-8") as f:
        for n in range(urls):
            links = [f"{host}/p/{rng.randrange(urls)}" for _ in range(10)]
            record = {
                "url": f"{host}/p/{n}",
                "final_url": f"{host}/p/{n}",
                "status": 200,
                "depth": 3,
                "referrer": f"{host}/p/{n // 10}",
                "fetched_at": "2026-11-24T10:00:00.000+00:00",
                "elapsed_ms": 12.5,
                "content_type": "text/html",
                "bytes": 9000 + n % 5000,
                "content_digest": f"sha1:{n:032d}",
                "etag": f'"{n:x}-2328"',
                "last_modified": "Mon, 02 Nov 2026 10:00:00 GMT",
                "title": f"Page {n} of the site",
                "description": None,
                "canonical": None,
                "links": links,
                "error": None,
                "truncated": False,
                "kind": "page",
            }
            f.write(json.dumps(record) + "\n")


_BUILD = """
import resource, sys, time
from crawler.history import open_history
started = time.perf_counter()
open_history(sys.argv[1], [])
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def index_benchmark(urls: int, out: Path) -> None:
    from crawler.history import open_history

    jsonl = out / "history.jsonl"
    write_history_jsonl(jsonl, urls)
    built = subprocess.run(
        [sys.executable, "-c", _BUILD, str(jsonl)], capture_output=True, text=True, check=True
    )
    build_s, peak_kib = built.stdout.split()
    index = jsonl.with_name(jsonl.name + ".history.sqlite")
    history = open_history(str(jsonl), [])
    rng = random.Random(1)
    asked = [f"http://www.example.com/p/{rng.randrange(urls)}" for _ in range(20_000)]
    started = time.process_time()
    for start in range(0, len(asked), 30):  # a page's new links, as the crawl batches them
        history.lookup_many(asked[start : start + 30])
    batched_us = (time.process_time() - started) / len(asked) * 1e6
    started = time.process_time()
    for url in asked[:5000]:
        history.take(url)
    single_us = (time.process_time() - started) / 5000 * 1e6
    history.close()
    print(f"history index: {urls:,} URLs ({jsonl.stat().st_size / urls:,.0f} JSONL bytes each)")
    print(f"  build time           {float(build_s):,.1f} s")
    print(f"  disk                 {index.stat().st_size / urls:,.0f} bytes per URL")
    print(f"  peak RSS (build)     {int(peak_kib) / 1024:,.1f} MiB")
    print(f"  lookup, batches of 30   {batched_us:,.1f} us CPU per URL")
    print(f"  lookup, one at a time   {single_us:,.1f} us CPU per URL")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=3000, help="pages in the site")
    parser.add_argument("--index-urls", type=int, default=1_000_000, help="0: skip the index")
    parser.add_argument("--no-site", action="store_true", help="only the index benchmark")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="recrawl-bench-") as temp:
        out = Path(temp)
        out.chmod(0o755)  # nginx's workers, run as nobody, read the site in it
        if not args.no_site:
            site_benchmark(args.pages, out)
        if args.index_urls:
            index_benchmark(args.index_urls, out)


if __name__ == "__main__":
    main()
