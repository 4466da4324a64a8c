"""JSONL records: one object per URL attempted, each line written whole."""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import stat
from typing import Any

import orjson

from crawler.config import STDOUT, ConfigError
from crawler.page import Page
from crawler.sinks import OutputClosed, WriteFailed


def encode(record: dict[str, Any]) -> bytes:
    """One JSON line, UTF-8, non-ASCII as is."""
    try:
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        # A lone surrogate or an integer past 64 bits (a hook's): the standard library
        # writes both, the surrogate as U+FFFD, as the crawler reads one anywhere else
        # (an escaped lone surrogate is JSON that orjson, and so --since, refuses);
        # NaN and infinities null, as orjson writes them (its NaN is no JSON: jq and
        # JSON.parse refused the line).
        line = json.dumps(_finite(record), ensure_ascii=False, separators=(",", ":"))
        return _LONE_SURROGATE.sub("\ufffd", line).encode("utf-8") + b"\n"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


class JsonlSink:
    """Writes each record with unbuffered write() calls, so `tail -f` never sees half a line.

    `path` is a file, or "-" for stdout. `offset` is the file's length after the
    last whole line: the state directory commits it, and a resumed crawl cuts the
    file back to it.
    """

    def __init__(self, path: str, resume_at: int | None = None) -> None:
        self.path = path
        if path == STDOUT:
            self._fd, self._owned = 1, False
            self.offset = 0
            return
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._owned = True
        if stat.S_ISREG(os.fstat(self._fd).st_mode):
            self._lock()
            # cut back only once locked: a crawl still writing the file keeps it whole.
            # Resumed, the cut drops a torn or uncommitted tail.
            os.ftruncate(self._fd, resume_at or 0)
            os.lseek(self._fd, resume_at or 0, os.SEEK_SET)
        self.offset = resume_at or 0

    def _lock(self) -> None:
        """Hold the file for this crawl: two crawls given one output (two processes, or
        two crawlers of one program) each wrote it from its start, over the other's."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.close()
            raise ConfigError(f"{self.path} is being written by another crawl") from None

    @property
    def position(self) -> int:
        return self.offset

    def write(self, page: Page) -> None:
        self.write_record(page.record())

    def write_record(self, record: dict[str, Any]) -> None:
        """Write `record` as one line."""
        line = encode(record)
        view = memoryview(line)
        try:
            while view:
                written = os.write(self._fd, view)
                self.offset += written
                view = view[written:]
        except BrokenPipeError:
            raise OutputClosed("the output was closed") from None
        except OSError as exc:
            self._drop_torn(self.offset - (len(line) - len(view)))
            name = "stdout" if self.path == STDOUT else self.path
            raise WriteFailed(f"cannot write {name}: {exc.strerror}") from None

    def _drop_torn(self, line_start: int) -> None:
        """Cut off the part of a line a write failed in (a full disk), so that the file
        ends with a whole record; a pipe or a device keeps what it got."""
        if self._owned and stat.S_ISREG(os.fstat(self._fd).st_mode):
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, line_start)
                os.lseek(self._fd, line_start, os.SEEK_SET)
                self.offset = line_start

    def close(self) -> None:
        if self._owned:
            os.close(self._fd)
            self._owned = False
