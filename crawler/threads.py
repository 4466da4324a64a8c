"""Work in a daemon thread of its own, awaited on the event loop.

A daemon thread, unlike asyncio.to_thread's: one that cannot be stopped (a runaway
parse) or that need not finish (a WACZ being packaged when Ctrl-C ends the process;
its .partial file is swept on resume) does not keep the process from ending.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar, cast

T = TypeVar("T")


def beside_loop(work: Callable[[], T], name: str) -> asyncio.Future[T]:
    """`work()` run in a daemon thread named `name`; its result or exception, on the
    running loop. A loop closed meanwhile is not told: nobody waits for it any more."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(cast(T, result))

    def run() -> None:
        try:
            result, error = work(), None
        except BaseException as exc:  # given to the awaiting task, as if raised there
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done
