"""The command line both peers' crawl scripts take (crawlee_crawler.py, scrapy_spider.py),
each run with the Python that has its peer.

    PYTHON benchmarks/SCRIPT.py SEED_URL OUT.jsonl [--concurrency 64] [--max-depth 50]
"""

from __future__ import annotations

import argparse


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("seed", help="the URL to start from")
    parser.add_argument("output", help="JSON lines file to write")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-depth", type=int, default=50)
    return parser.parse_args()
