"""Redis memory per URL of a shared --revisit round's rows (crawler/state/redis_rounds.py).

A real redis-server on a free port (started as broad_bench.py starts it) gets, for
`--urls` pages of a site (each with 10 links, as recrawl_bench.py's history has,
a WARC capture and a schedule), the row a round writes in its `pages` hash, in two
formats: the JSON array the rows were before (format 1, with the fields a 304
keeps as a string of JSON, and the URL beside its key), and the deflated row of
today (format 2, with the capture a revisit refers to). Printed, from `INFO
memory` used_memory less the empty server's, per URL:

- one round's rows;
- Redis at the end of the next round, whose rows format 1 wrote beside the
  previous round's (two rounds held), and format 2 moves out of them (the record
  script's HSET and HDEL), as the crawl does;
- the CPU time to make a row and to read one back (`Previous`).

    python benchmarks/redis_rounds_memory.py --urls 1000000
"""

from __future__ import annotations

import argparse
import base64
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
import redis
from broad_bench import start_redis

from crawler.history import Capture, page_row
from crawler.page import Page
from crawler.state.redis_rows import previous_of_row, record_args

ROUND = ["crawler:{bench.r00001}:", "crawler:{bench.r00002}:"]
BATCH = 10_000
HOST = "http://www.example.com"
DAY_S = 86400.0
WARC_FILE = "crawl-worker-7.example.net-31337-9f3c-20261124100000123-00000.warc.gz"


def format_1_row(page: Page) -> tuple[str, bytes]:
    """A page's key and row as crawler/state/redis_rounds.py wrote them before."""
    row = list(page_row(page.record()))
    kept = row[7]
    row[7] = kept.decode() if kept is not None else None
    return row[0], orjson.dumps(row[1:])


def format_2_row(page: Page) -> tuple[str, bytes]:
    key, row, *_ = record_args(page)
    return key, row


def _iso(timestamp: float, warc: bool = False) -> str:
    """A time as a record (page.py) or a WARC-Date (sinks/warc.py) gives it."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    if warc:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.isoformat(timespec="milliseconds")


def pages(urls: int, round_number: int) -> Iterator[Page]:
    """The site's pages as round `round_number` fetched them, 3 ms apart."""
    rng = random.Random(7)
    round_start = 1_764_000_000.0 + round_number * DAY_S
    for n in range(urls):
        url = f"{HOST}/p/{n}"
        fetched = round_start + n * 0.003
        page = Page(
            url,
            3,
            f"{HOST}/p/{n // 10}",
            final_url=url,
            status=304 if round_number > 1 else 200,
            fetched_at=_iso(fetched),
            elapsed_ms=12.5,
            content_type="text/html",
            bytes=9000 + n % 5000,
            content_digest="sha1:" + base64.b32encode(rng.randbytes(20)).decode(),
            etag=f'"{n:x}-2328"',
            last_modified="Mon, 02 Nov 2026 10:00:00 GMT",
            title=f"Page {n} of the site",
            links=[f"{HOST}/p/{rng.randrange(urls)}" for _ in range(10)],
        )
        page.fields = {
            "changed": False if round_number > 1 else None,
            "warc_file": WARC_FILE,
            "warc_offset": 1000 + 5000 * n,
            "warc_length": 4000 + n % 1000,
            "revisit_interval_s": DAY_S,
            "due_at": _iso(fetched + DAY_S),
        }
        page.capture = Capture(
            f"<urn:{uuid.UUID(bytes=rng.randbytes(16), version=4).urn[4:]}>".encode(),
            url.encode(),
            _iso(fetched - round_number * DAY_S + 0.000123, warc=True).encode(),
        )
        yield page


def write_round(
    client: redis.Redis,
    urls: int,
    round_number: int,
    row_of: Callable[[Page], tuple[str, bytes]],
    move: bool,
) -> tuple[float, int]:
    """Write a round's rows (moving the previous round's out if `move`); the CPU
    seconds a row took to make, and the rows' bytes."""
    pipe = client.pipeline(transaction=False)
    make_s = 0.0
    row_bytes = 0
    prefix = ROUND[round_number - 1]
    for n, page in enumerate(pages(urls, round_number), 1):
        started = time.process_time()
        key, row = row_of(page)
        make_s += time.process_time() - started
        row_bytes += len(row)
        pipe.hset(prefix + "pages", key, row)
        if move:
            pipe.hdel(ROUND[round_number - 2] + "pages", key)
        if n % BATCH == 0:
            pipe.execute()
    pipe.execute()
    return make_s, row_bytes


def read_s(client: redis.Redis, urls: int) -> float:
    """CPU seconds to turn a format 2 row back into a `Previous`, per row."""
    keys = [f"{HOST}/p/{n}" for n in range(0, urls, max(1, urls // 10_000))]
    rows = client.hmget(ROUND[1] + "pages", keys)
    started = time.process_time()
    for key, row in zip(keys, rows, strict=True):
        previous_of_row(key, row, {})
    return (time.process_time() - started) / len(keys)


def measure(urls: int, row_of: Callable[[Page], tuple[str, bytes]], move: bool) -> str:
    """Both rounds' rows written in a new Redis; what they took, as a line to print."""
    with tempfile.TemporaryDirectory() as directory:
        server, url = start_redis(Path(directory))
        try:
            client = redis.Redis.from_url(url)
            empty = client.info("memory")["used_memory"]
            make_s, row_bytes = write_round(client, urls, 1, row_of, move=False)
            one_round = (client.info("memory")["used_memory"] - empty) / urls
            write_round(client, urls, 2, row_of, move)
            next_round = (client.info("memory")["used_memory"] - empty) / urls
            read = f", read in {read_s(client, urls) * 1e6:.1f} us" if move else ""
        finally:
            server.terminate()
            server.wait()
    return (
        f"{one_round:6.1f} B/URL a round ({row_bytes / urls:.1f} B of row), "
        f"{next_round:6.1f} B/URL at the next round's end; "
        f"a row made in {make_s / urls * 1e6:.1f} us CPU{read}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000, help="pages a round")
    urls = parser.parse_args().urls
    print(f"{urls:,} URLs, 10 links each")
    print("format 1, copied ", measure(urls, format_1_row, move=False), flush=True)
    print("format 2, moved  ", measure(urls, format_2_row, move=True), flush=True)


if __name__ == "__main__":
    main()
