"""Does a frontier of a million URLs stay on disk? Peak RSS with and without --state.

A generated site on 127.0.0.1 where page n links to `links` new pages
(n*links+1 .. n*links+links), so a crawl stopped at --max-pages P has
discovered about P*links URLs, nearly all still queued. The same crawl is run
at two sizes of frontier, 100k and 1M URLs, with --state (SQLite frontier) and
without (in memory). With --state the two peaks should differ by < 50 MB.

    python benchmarks/frontier_rss.py [--pages 2000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = """
import sys
from aiohttp import web
links = int(sys.argv[2])
async def page(request):
    n = int(request.match_info["n"])
    body = "".join(f'<a href="/p/{n * links + i}">p{n * links + i}</a>'
                   for i in range(1, links + 1))
    return web.Response(text=f"<title>p{n}</title>{body}", content_type="text/html")
app = web.Application()
app.router.add_get("/p/{n}", page)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int) -> None:
    import socket

    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


def crawl(port: int, pages: int, state: bool, scratch: Path) -> tuple[float, float, int]:
    """Run the CLI once; return (seconds, peak RSS in MB, records)."""
    seeds = scratch / "seeds.txt"
    seeds.write_text(f"http://127.0.0.1:{port}/p/0\n")
    output = scratch / "out.jsonl"
    command = [
        sys.executable,
        "-m",
        "crawler",
        str(seeds),
        "-o",
        str(output),
        "--quiet",
        "--ignore-robots",
        "--max-pages",
        str(pages),
        "--max-depth",
        "50",
        "--concurrency",
        "32",
        "--per-host",
        "32",
        "--expected-urls",
        "2000000",
    ]
    if state:
        command += ["--state", str(scratch / "state"), "--fresh"]
    started = time.perf_counter()
    child = subprocess.Popen(command)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    if status != 0:
        raise RuntimeError(f"crawler exited with status {status}")
    records = sum(1 for _ in output.open("rb"))
    return elapsed, usage.ru_maxrss / 1024, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000, help="--max-pages of each crawl")
    args = parser.parse_args()
    print(f"frontier RSS benchmark, --max-pages {args.pages}, python {sys.version.split()[0]}")
    print(
        f"{'frontier':>10} {'links/page':>10} {'mode':>8} {'records':>8} {'seconds':>8} "
        f"{'peak RSS MB':>12}"
    )
    peaks: dict[tuple[str, int], float] = {}
    for discovered in (100_000, 1_000_000):
        links = discovered // args.pages
        port = free_port()
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(links)])
        try:
            wait_for(port)
            for state in (True, False):
                with tempfile.TemporaryDirectory() as scratch:
                    seconds, peak, records = crawl(port, args.pages, state, Path(scratch))
                mode = "--state" if state else "memory"
                peaks[mode, discovered] = peak
                print(
                    f"{discovered:>10,} {links:>10} {mode:>8} {records:>8} {seconds:>8.1f} "
                    f"{peak:>12.1f}"
                )
        finally:
            server.terminate()
            server.wait()
    for mode in ("--state", "memory"):
        growth = peaks[mode, 1_000_000] - peaks[mode, 100_000]
        print(f"{mode}: peak RSS grows {growth:+.1f} MB from a 100k to a 1M URL frontier")


if __name__ == "__main__":
    main()
