"""Files written whole (the --stats file, the report): checked before a crawl starts,
replaced at once when written, and never a device or a link swapped for a plain file."""

from __future__ import annotations

import os

from crawler.config import ConfigError


def check_writable(path: str, replaced: bool = False) -> None:
    """A file to be written: its directory must exist, it must not be one, and we must
    be allowed to write the file itself or, if it is new or `replaced` (written whole
    beside it and renamed over it, as write_whole does), its directory."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ConfigError(f"cannot write {path}: directory {directory} does not exist")
    if os.path.isdir(path):
        raise ConfigError(f"cannot write {path}: it is a directory")
    in_place = os.path.exists(path) and not (replaced and os.path.isfile(path))
    if not os.access(path if in_place else os.path.dirname(os.path.realpath(path)), os.W_OK):
        raise ConfigError(f"cannot write {path}: permission denied")


def same_file(path: str, other: str) -> bool:
    """Would writing `path` overwrite the regular file `other` (or the one it will be)?
    Devices such as /dev/null may be written by two outputs."""
    if os.path.exists(path) and not os.path.isfile(path):
        return False
    if os.path.abspath(path) == os.path.abspath(other):
        return True
    return os.path.exists(path) and os.path.exists(other) and os.path.samefile(path, other)


def write_whole(path: str, data: bytes) -> None:
    """Make `data` the whole of `path`: written beside it, then renamed over it, so that a
    reader sees the old file or the new one. A symbolic link is followed (its file is
    replaced, the link stays); what is not a regular file, such as /dev/null or a FIFO, is
    written in place, since a rename would put a plain file where the device was."""
    if os.path.exists(path) and not os.path.isfile(path):
        # Opened by its own name: /dev/stdout's real path is no path ("pipe:[123]").
        with open(path, "wb") as f:
            f.write(data)
        return
    target = os.path.realpath(path)
    temporary = f"{target}.tmp"
    try:
        with open(temporary, "wb") as f:
            f.write(data)
        os.replace(temporary, target)
    except OSError as exc:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise OSError(exc.errno, exc.strerror, path) from None
