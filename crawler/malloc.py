"""glibc's heap tuning for a crawl: the CLI sets it; API users opt in with `keep_freed_memory()`.

It changes the whole process, so a library that a web app imports must not do
it on its own: `Crawler` never calls it.
"""

from __future__ import annotations

import ctypes
import functools

M_TRIM_THRESHOLD, M_TOP_PAD = -1, -2  # glibc's <malloc.h>
TRIM_THRESHOLD_BYTES = 32 * 2**20
TOP_PAD_BYTES = 4 * 2**20


@functools.cache  # once a process
def keep_freed_memory() -> bool:
    """Stop glibc from giving the heap back to the kernel after every page, for the
    whole process: its M_TRIM_THRESHOLD becomes 32 MiB and its M_TOP_PAD 4 MiB.
    False where there is no glibc mallopt (nothing to tune there).

    Each page parsed allocates and frees a Lexbor document at the top of the heap.
    With glibc's default trim threshold the heap shrank and grew around each one,
    with fresh zeroed memory pages every time: through `Crawler.run()` on the
    5,000-page benchmark site, 89,000 minor page faults against 9,100 and 2.40 s
    of CPU against 2.00 (benchmarks/malloc_bench.py, median of three alternating
    runs). Keeping up to 32 MiB costs 1.1 MiB more peak RSS. The setting stays
    for the life of the process.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols include libc's
    except (OSError, AttributeError):
        return False
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    mallopt(M_TOP_PAD, TOP_PAD_BYTES)
    return True
