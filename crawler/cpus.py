"""How many CPUs the crawl may use: whether a large page's Lexbor parse, which lets go of
the GIL, is worth a thread beside the event loop. On one CPU, the hand-off only adds to
the work; on more, the loop goes on meanwhile."""

from __future__ import annotations

import functools
import os


@functools.cache
def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask where there is one (Linux,
    which `taskset` narrows), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
