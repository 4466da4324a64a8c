"""JSONL records: one object per URL attempted, each line written whole."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

import orjson

FIELDS = (
    "url",
    "final_url",
    "status",
    "depth",
    "referrer",
    "fetched_at",
    "elapsed_ms",
    "content_type",
    "bytes",
    "title",
    "links",
    "error",
    "truncated",
)


class WriteFailed(Exception):
    """Records or crawl state could not be written (disk full, output closed...)."""


class OutputClosed(WriteFailed):
    """The reader of stdout went away (e.g. `| head`)."""


def record(url: str, depth: int, referrer: str | None, **fields: Any) -> dict[str, Any]:
    """A record with every field present, in the documented order."""
    full: dict[str, Any] = dict.fromkeys(FIELDS)
    full.update(
        url=url,
        depth=depth,
        referrer=referrer,
        links=[],
        truncated=False,
        fetched_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
    )
    full.update(fields)
    return full


def encode(fields: dict[str, Any]) -> bytes:
    """One JSON line, UTF-8, non-ASCII as is."""
    try:
        return orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:  # a lone surrogate: keep the line, replace the character
        line = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
        return line.encode("utf-8", "replace") + b"\n"


class JsonlWriter:
    """Writes each line with unbuffered write() calls, so `tail -f` never sees half a line.

    `offset` is the file's length after the last whole line: the state directory
    commits it, and a resumed crawl cuts the file back to it.
    """

    def __init__(self, path: str | None, resume_at: int | None = None) -> None:
        self.path = path
        if path is None:
            self._fd, self._owned = 1, False
            self.offset = 0
            return
        if resume_at is None:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self.offset = 0
        else:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            os.ftruncate(self._fd, resume_at)  # drops a torn or uncommitted tail
            os.lseek(self._fd, resume_at, os.SEEK_SET)
            self.offset = resume_at
        self._owned = True

    def write(self, line: bytes) -> int:
        view = memoryview(line)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except BrokenPipeError:
            raise OutputClosed("the output was closed") from None
        except OSError as exc:
            raise WriteFailed(f"cannot write {self.path or 'stdout'}: {exc.strerror}") from None
        self.offset += len(line)
        return self.offset

    def close(self) -> None:
        if self._owned:
            os.close(self._fd)
            self._owned = False
