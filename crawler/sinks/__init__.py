"""Where records go. A sink takes each finished `Page` and owns its file and its commit point.

A store (crawler/state) hands every committed page to its `Sinks` in order: the
WARC archive first, which puts its record's place in the page's fields (and has its
CDXJ index written as it writes each record), then the --wacz pages list, then the
JSONL file, whose record holds them. A sink's `position` is how far its file is
committed; a crawl resumed from a state directory reopens each sink at its
position, cutting off whatever came after.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from crawler.page import Page

if TYPE_CHECKING:
    from crawler.config import Settings
    from crawler.fetch import Exchange

Archive = Callable[[Sequence["Exchange"]], object]


OUTPUT = "jsonl"  # the sink of -o, by its name in a state directory's positions


class WriteFailed(Exception):
    """Records or crawl state could not be written (disk full, output closed...)."""


class OutputClosed(WriteFailed):
    """The reader of stdout went away (e.g. `| head`)."""


def write_all(fd: int, data: bytes, name: object) -> None:
    """Write all of `data` to `fd`; WriteFailed naming the file `name` if it cannot be."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise WriteFailed(f"cannot write {name}: {exc.strerror}") from None


class Sink(Protocol):
    @property
    def position(self) -> Any:
        """How far the sink's file is committed, as JSON (a state directory keeps it)."""

    def write(self, page: Page) -> None: ...
    def close(self) -> None: ...


class Sinks:
    """The sinks of a crawl, by name, in the order each page goes through them."""

    def __init__(self, sinks: Mapping[str, Sink], archive: Archive | None = None) -> None:
        self._sinks = dict(sinks)
        self._in_order = list(self._sinks.values())
        # Writes the exchanges no page carries (robots.txt); the next commit covers them.
        self.archive = archive

    def write(self, page: Page) -> None:
        for sink in self._in_order:
            sink.write(page)

    def write_archived(self, page: Page) -> None:
        """Write `page` to the sinks that read its response (the archive and its
        indexes), not the output: a page held with --state is archived as it is held,
        and its record, which says where, is output at its commit (its response gone,
        the archive's sinks then write nothing)."""
        for name, sink in self._sinks.items():
            if name != OUTPUT:
                sink.write(page)

    def positions(self) -> dict[str, Any]:
        return {name: sink.position for name, sink in self._sinks.items()}

    def close(self) -> None:
        """Close every sink, even after one failed to (a full disk); then raise the first
        failure."""
        failures = []
        for sink in self._in_order:
            try:
                sink.close()
            except WriteFailed as exc:
                failures.append(exc)
        if failures:
            raise failures[0]


def open_sinks(
    settings: Settings, positions: Mapping[str, Any] | None = None, finished: bool = False
) -> Sinks:
    """The sinks the settings name (--warc and its index, --wacz, -o), reopened at
    `positions` if a crawl resumes. `finished`: the crawl resumed has nothing left to
    do, and only a --wacz package it still owes (killed while packaging) is made.

    ConfigError if one cannot be opened.
    """
    if finished and not (settings.wacz and not os.path.exists(settings.wacz)):
        return Sinks({})
    from crawler.sinks.jsonl import JsonlSink

    positions = positions or {}
    sinks: dict[str, Sink] = {}
    archive = None
    if settings.warc is not None:
        from crawler.sinks.cdxj import CdxjSink  # only with --warc
        from crawler.sinks.warc import open_warc

        warc = open_warc(settings, positions.get("warc"))
        sinks["warc"], archive = warc, warc.write_exchanges
        sinks["cdxj"] = CdxjSink(warc, resumed=positions.get("warc") is not None)
        if settings.wacz is not None:
            from crawler.sinks.wacz import WaczSink

            # A recrawl's revisits refer to captures in the previous crawl's WARC files.
            earlier = [settings.since_warc] if settings.since_warc else []
            sinks["wacz"] = WaczSink(
                settings.wacz, warc, positions.get("wacz"), earlier, settings.state
            )
    if settings.output:
        sinks[OUTPUT] = JsonlSink(settings.output, resume_at=positions.get("jsonl"))
    return Sinks(sinks, archive)
