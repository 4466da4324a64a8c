"""The files a crawl writes: checked before it starts, so that bad input leaves nothing
written; those written whole (the --stats file, the report) replaced at once, and never a
device or a link swapped for a plain file."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import BinaryIO

from crawler.config import STDOUT, ConfigError, Settings


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


def check_outputs(settings: Settings) -> None:
    """What the crawl writes (-o, --stats, --wacz, --warc DIR) can be written, and no file
    of it is one the crawl reads, another of them, or a directory it makes (--warc,
    --state, --revisit): the crawl would write over it.
    Checked before anything is opened, so that a bad one leaves a --state to resume
    (--fresh empties it only once the crawl can run) and no file begun."""
    cookies = settings.cookies if isinstance(settings.cookies, str) else None
    taken = [
        ("seeds file", settings.seeds),
        ("config file", settings.config),
        ("--cookies file", cookies),
        ("--since file", settings.since),
    ]
    made = (("--warc", settings.warc), ("--state", settings.state), ("--revisit", settings.revisit))
    output = settings.output if settings.output != STDOUT else None
    written = (
        ("-o", output, False),
        ("--stats", settings.stats, True),
        ("--wacz", settings.wacz, True),
        ("--list-gone", settings.list_gone, True),
    )
    for flag, path, replaced in written:
        if path is None:
            continue
        for label, other in taken:
            if other is not None and other != "-" and same_file(path, other):
                raise ConfigError(f"{flag} {path} is the {label}; refusing to overwrite it")
        for directory_flag, directory in made:
            if directory is not None and os.path.abspath(path) == os.path.abspath(directory):
                raise ConfigError(f"{flag} {path} is the {directory_flag} directory")
        check_writable(path, replaced)
        taken.append((f"{flag} file", path))
    if settings.state is not None and output is not None and _not_a_file(output):
        # The first run went well, and every resume was refused: a device cannot be cut
        # back to what the crawl committed, nor its records read back.
        raise ConfigError(
            f"--state needs -o FILE, a regular file a resume can cut back: {output} is not one"
        )
    if settings.warc is not None:
        _check_directory(settings.warc, "--warc")


def _check_directory(path: str, flag: str) -> None:
    """A directory to write in, made if need be (config.make_directory makes it): the
    messages that would give, found without making anything."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        whose = "it is" if existing == os.path.abspath(path) else f"{existing} is"
        raise ConfigError(f"cannot use {flag} {path}: {whose} a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot use {flag} {path}: not writable")


def _not_a_file(path: str) -> bool:
    return os.path.exists(path) and not os.path.isfile(path)


def same_file(path: str, other: str) -> bool:
    """Would writing `path` overwrite the regular file `other` (or the one it will be)?
    Devices such as /dev/null may be written by two outputs."""
    if _not_a_file(path):
        return False
    if os.path.abspath(path) == os.path.abspath(other):
        return True
    return os.path.exists(path) and os.path.exists(other) and os.path.samefile(path, other)


def write_whole(path: str, data: bytes) -> None:
    """Make `data` the whole of `path` (see `replacing`)."""
    with replacing(path) as f:
        f.write(data)


@contextlib.contextmanager
def replacing(path: str) -> Iterator[BinaryIO]:
    """A file to write the whole of `path` in: written beside it, then renamed over it,
    so that a reader sees the old file or the new one (the old one stays if the writing
    fails). A symbolic link is followed (its file is replaced, the link stays); what is
    not a regular file, such as /dev/null or a FIFO, is written in place, since a rename
    would put a plain file where the device was."""
    if _not_a_file(path):
        # Opened by its own name: /dev/stdout's real path is no path ("pipe:[123]").
        with open(path, "wb") as f:
            yield f
        return
    target = os.path.realpath(path)
    temporary = f"{target}.tmp"
    try:
        with open(temporary, "wb") as f:
            yield f
        os.replace(temporary, target)
    except BaseException as exc:
        if os.path.exists(temporary):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, path) from None
        raise
