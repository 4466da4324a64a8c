"""What --dashboard costs a crawl: crawl_bench.py's rounds with three contenders.

    python benchmarks/dashboard_bench.py [--runs 7] [--pages 20000] [crawl_bench options]

- ours: no dashboard;
- ours --dashboard 127.0.0.1:WATCHED: a dashboard someone watches: a watcher
  process, pinned beside the server (as a browser on another core would be),
  keeps /events open and scrapes /metrics every second, as Prometheus would
  (more often than it usually does);
- ours --dashboard 127.0.0.1:UNWATCHED: a dashboard nobody opens.

The rounds alternate the three, and crawl_bench prints the medians, pages/s and
CPU seconds per 1000 pages, and each variant's ratio to ours within rounds. The
watcher's own CPU is not counted: it is not a child of the timed process.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
WATCHED_PORT, UNWATCHED_PORT = 18799, 18798
SCRAPE_EVERY_S = 1.0
RETRY_EVERY_S = 0.05  # between crawls the port is closed: try again this often

_WATCHER = f"""
import socket, sys, time
PORT = int(sys.argv[1])

def get(path):
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    head = "Host: 127.0.0.1\\r\\nConnection: close\\r\\n"
    sock.sendall(f"GET {{path}} HTTP/1.1\\r\\n{{head}}\\r\\n".encode())
    return sock

while True:
    try:
        events = get("/events")
    except OSError:
        time.sleep({RETRY_EVERY_S})
        continue
    events.settimeout({SCRAPE_EVERY_S})
    while True:
        try:
            if not events.recv(1 << 16):
                break
        except socket.timeout:
            pass
        except OSError:
            break
        try:
            metrics = get("/metrics")
            while metrics.recv(1 << 16):
                pass
            metrics.close()
        except OSError:
            break
    events.close()
"""


def main() -> int:
    watcher = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, "-c", _WATCHER, str(WATCHED_PORT)]
    )
    try:
        for port in (WATCHED_PORT, UNWATCHED_PORT):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    raise SystemExit(f"port {port} is taken: something else listens there")
        sys.argv[1:] = [
            "--no-scrapy",
            "--no-wget",
            "--no-ceilings",
            "--variant",
            f"watched=--dashboard 127.0.0.1:{WATCHED_PORT}",
            "--variant",
            f"unwatched=--dashboard 127.0.0.1:{UNWATCHED_PORT}",
            *sys.argv[1:],
        ]
        sys.path.insert(0, str(BENCH_DIR))
        import crawl_bench

        started = time.monotonic()
        code = crawl_bench.main()
        print(f"dashboard benchmark: {time.monotonic() - started:.0f} s")
        return code
    finally:
        watcher.terminate()
        watcher.wait()


if __name__ == "__main__":
    sys.exit(main())
