"""The second crawl: what a recrawl with --since costs against the first, and the history index.

1. A generated site (benchmarks/site.py), or with --docs Debian's Python 3.11
   documentation (benchmarks/docs_site.py), served by nginx, which sends ETag and
   Last-Modified for its files and answers conditional requests with 304, is
   crawled once. Then 5% of its pages change (a paragraph and a link to a new
   page added), 5% are touched (a new modification time, the same bytes), and 2%
   are deleted; and the site is crawled again with --since. As crawl_bench.py
   does, nginx runs on CPU 0 and the crawler on CPU 1. Printed, as medians of
   --runs rounds on a fresh site each: the body bytes and the time (wall and CPU)
   of each crawl and their ratio; the same ratio for a bare aiohttp client that
   fetches and parses the same URLs (fetch_ceiling.py, conditional the second
   time), which no crawler on this stack can beat; and whether the recrawl found
   exactly the changed, new and deleted pages, none missed and none invented.

2. The history index at --index-urls URLs: a JSONL of that many synthetic
   records is indexed (in a child process, for its peak RSS); printed: the build
   time, disk bytes per URL, peak RSS, and the time of a lookup per page, in
   batches as the crawl makes them and one by one.

    python benchmarks/recrawl_bench.py --pages 3000 --index-urls 1000000
    python benchmarks/recrawl_bench.py --docs --runs 5 --index-urls 0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crawl_bench import (  # and benchmarks/site.py, loaded by path
    BENCH_DIR,
    compile_bytecode,
    docs_site,
    pinning,
    site,
)

CHANGED, TOUCHED, DELETED = 0.05, 0.05, 0.02


def crawl(seeds: Path, output: Path, cpu: int | None, *extra: str) -> dict[str, Any]:
    """One CLI crawl; its stats, wall time and CPU time (user + system)."""
    stats = output.with_suffix(".stats.json")
    command = [sys.executable, "-m", "crawler", str(seeds), "-o", str(output), "--quiet"]
    command += ["--max-depth", "1000", "--stats", str(stats), "--ignore-robots"]
    command += ["--concurrency", "64", "--per-host", "64"]  # as crawl_bench.py runs ours
    timed = run_timed(site.pinned([*command, *extra], cpu))
    return {**timed, **json.loads(stats.read_text())}


def ceiling(urls: list[str], out: Path, cpu: int | None, validators: Path | None) -> dict[str, Any]:
    """fetch_ceiling.py --parse over `urls`: a bare aiohttp loop, conditional with `validators`."""
    manifest = out / "ceiling-urls.json"
    manifest.write_text(json.dumps({"urls": urls}), encoding="utf-8")
    command = [sys.executable, str(Path(__file__).with_name("fetch_ceiling.py")), str(manifest)]
    command += ["--parse", *(["--validators", str(validators)] if validators else [])]
    return run_timed(site.pinned(command, cpu), capture=True)


def run_timed(command: list[str], capture: bool = False) -> dict[str, Any]:
    """Run `command`; its wall time and its CPU time (user + system), and its JSON output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=capture, text=True)
    wall_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall_s, "cpu_s": cpu_s, **(json.loads(done.stdout) if capture else {})}


def mutate(the_site: Any, rng: random.Random) -> dict[str, set[str]]:
    """Change, touch and delete HTML pages (never the index); the URLs of each kind, and the new."""
    prefix = f"http://{site.HOST}:{the_site.port}"

    def file_of(url: str) -> Path:
        return the_site.directory / url.removeprefix(prefix).lstrip("/")

    urls = [url for url in the_site.urls[1:] if url.endswith(".html") and file_of(url).is_file()]
    rng.shuffle(urls)
    n = len(the_site.urls)
    changed = urls[: round(n * CHANGED)]
    touched = urls[len(changed) : len(changed) + round(n * TOUCHED)]
    deleted = urls[len(changed) + len(touched) :][: round(n * DELETED)]
    later = time.time() + 60
    new = set()
    for number, url in enumerate(changed):
        path = file_of(url)
        new_path = f"/new/{number}.html"
        text = path.read_text(encoding="utf-8")
        end = "</main>" if "</main>" in text else "</body>"
        addition = f'<p>Changed today: see <a href="{new_path}">what is new</a>.</p>\n{end}'
        path.write_text(text.replace(end, addition, 1), encoding="utf-8")
        new_file = file_of(prefix + new_path)
        new_file.parent.mkdir(exist_ok=True)
        new_file.write_text(
            f"<!DOCTYPE html><title>New {number}</title><p>New. <a href='/index.html'>Home</a>",
            encoding="utf-8",
        )
        new.add(prefix + new_path)
    for url in touched:
        os.utime(file_of(url), (later, later))
    for url in deleted:
        file_of(url).unlink()
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


def fresh_site(docs: bool, pages: int, directory: Path, port: int) -> Any:
    """The site to crawl, made anew in `directory`: generated, or the Python docs copied."""
    shutil.rmtree(directory, ignore_errors=True)
    return docs_site(directory, port) if docs else site.generate(directory, pages, port)


def one_round(docs: bool, pages: int, out: Path, port: int, seed: int) -> dict[str, Any]:
    """A first crawl, the mutation, the recrawl; and the bare-client ceiling of both."""
    crawler_cpu, server_cpu = pinning()
    the_site = fresh_site(docs, pages, out / "site", port)
    seeds = out / "seeds.txt"
    seeds.write_text(the_site.index_url + "\n", encoding="utf-8")
    first_jsonl, second_jsonl = out / "first.jsonl", out / "second.jsonl"
    with site.serve(the_site.directory, port, cpu=server_cpu) as server:
        first = crawl(seeds, first_jsonl, crawler_cpu)
        first_urls = [json.loads(line)["url"] for line in first_jsonl.open(encoding="utf-8")]
        expected = mutate(the_site, random.Random(seed))
        second = crawl(seeds, second_jsonl, crawler_cpu, "--since", str(first_jsonl))
        start = crawl(seeds, out / "start.jsonl", crawler_cpu, "--max-depth", "0")
        records = [json.loads(line) for line in second_jsonl.open(encoding="utf-8")]
        # The bare client on the site as it is now: all of the first crawl's URLs unchanged
        # but for the mutation, fetched plainly, then the recrawl's URLs conditionally.
        first_ceiling = ceiling(first_urls, out, crawler_cpu, None)
        second_ceiling = ceiling([r["url"] for r in records], out, crawler_cpu, first_jsonl)
    return {
        "server": server.name,
        "pages": len(first_urls),
        "first": first,
        "second": second,
        "start": start,
        "found": check(records, expected),
        "first_ceiling": first_ceiling,
        "second_ceiling": second_ceiling,
    }


def site_benchmark(docs: bool, pages: int, runs: int, out: Path) -> None:
    compile_bytecode(BENCH_DIR.parent)
    port = _free_port()
    rounds = [one_round(docs, pages, out, port, seed=22 + n) for n in range(runs)]
    name = "the Python 3.11 docs" if docs else f"a generated site of {pages:,} pages"
    print(f"site: {name}, {rounds[0]['pages']:,} URLs, served by {rounds[0]['server']}")
    print(f"{runs} rounds (each: a fresh site, a first crawl, the mutation, a recrawl); medians")

    print(f"{'':34}{'first crawl':>14}{'recrawl':>14}{'ratio':>9}  ratio's range")

    def row(label: str, first: Callable[[Any], float], second: Callable[[Any], float]) -> None:
        a = statistics.median(first(r) for r in rounds)
        b = statistics.median(second(r) for r in rounds)
        ratios = [second(r) / first(r) for r in rounds]
        spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
        print(f"{label:34}{a:>14,.2f}{b:>14,.2f}{statistics.median(ratios):>9.3f}  {spread}")

    def figure(crawl: str, name: str, less_start: bool = False) -> Callable[[Any], float]:
        return lambda r: r[crawl][name] - (r["start"][name] if less_start else 0)

    row("body bytes fetched", figure("first", "bytes"), figure("second", "bytes"))
    row("wall time (s)", figure("first", "wall_s"), figure("second", "wall_s"))
    row("CPU time (s)", figure("first", "cpu_s"), figure("second", "cpu_s"))
    # A crawl of the index alone is the fixed cost of a crawl: the interpreter, the imports.
    less = figure("first", "wall_s", True), figure("second", "wall_s", True)
    row("wall time less a 1-page crawl's", *less)
    ceilings = figure("first_ceiling", "wall_s"), figure("second_ceiling", "wall_s")
    row("bare aiohttp + parse: wall (s)", *ceilings)
    ceilings = figure("first_ceiling", "cpu_s"), figure("second_ceiling", "cpu_s")
    row("bare aiohttp + parse: CPU (s)", *ceilings)
    start_s = statistics.median(r["start"]["wall_s"] for r in rounds)
    print(f"a crawl of the index alone (--max-depth 0): {start_s:.2f} s")
    last = rounds[-1]
    print(f"{'records':34}{last['first']['records']:>14,}{last['second']['records']:>14,}")
    print("recrawl figures (last round):", json.dumps(last["second"]["recrawl"]))
    for number, found in enumerate(r["found"] for r in rounds):
        print(f"round {number + 1}, found against done:", json.dumps(found))
    exact = all(
        f["missed"] == 0 and f["invented"] == 0 for r in rounds for f in r["found"].values()
    )
    print("every change found, none invented, in every round:", "yes" if exact else "NO")


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
    parser.add_argument(
        "--docs", action="store_true", help="recrawl the Python 3.11 docs, not a generated site"
    )
    parser.add_argument("--runs", type=int, default=3, help="rounds, each on a fresh site")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="recrawl-bench-") as temp:
        out = Path(temp)
        out.chmod(0o755)  # nginx's workers, run as nobody, read the site in it
        if not args.no_site:
            site_benchmark(args.docs, args.pages, args.runs, out)
        if args.index_urls:
            index_benchmark(args.index_urls, out)


if __name__ == "__main__":
    main()
