"""What a crawler process's memory is made of, sampled while it runs.

`broad_bench.py --probe-log FILE` puts this directory on the crawler's PYTHONPATH,
so that Python imports this module at start-up; it does nothing unless
RSS_PROBE_LOG names a file. Then a thread appends a line every RSS_PROBE_EVERY_S
seconds (default 10): RSS and its anonymous and file-backed parts
(/proc/self/status), glibc's heap (mallinfo2: the main arena, what of it is in
use and free, and the bytes in mmapped chunks), the pymalloc blocks allocated, and
every third line the bytes of the crawl's Bloom filters: the visited set's, and
the others' (the engine's notes of claims made past unfinished pages).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
import time


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _status_mib() -> dict[str, int]:
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    names = ("VmRSS", "RssAnon", "RssFile")
    return {name: int(fields[name].split()[0]) // 1024 for name in names}


def _bloom_mib() -> str:
    from crawler.bloom import BloomFilter

    visited = others = 0
    for thing in gc.get_objects():
        if isinstance(thing, BloomFilter):
            if thing.quiet:
                others += thing.nbytes
            else:
                visited += thing.nbytes
    return f" visited_bloom={visited >> 20} other_blooms={others >> 20}"


def _sample(path: str, every_s: float) -> None:
    mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    mallinfo2.restype = _MallInfo2
    with open(path, "a") as log:
        for n in range(1, sys.maxsize):
            time.sleep(every_s)
            rss, heap = _status_mib(), mallinfo2()
            blooms = _bloom_mib() if n % 3 == 0 else ""
            print(
                f"{time.time():.0f} rss={rss['VmRSS']} anon={rss['RssAnon']} "
                f"file={rss['RssFile']} heap={heap.arena >> 20} in_use={heap.uordblks >> 20} "
                f"free={heap.fordblks >> 20} mmapped={heap.hblkhd >> 20} "
                f"pymalloc_blocks={sys.getallocatedblocks()}{blooms}",
                file=log,
                flush=True,
            )


if os.environ.get("RSS_PROBE_LOG"):
    every_s = float(os.environ.get("RSS_PROBE_EVERY_S", "10"))
    threading.Thread(
        target=_sample, args=(os.environ["RSS_PROBE_LOG"], every_s), daemon=True
    ).start()
