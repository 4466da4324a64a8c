"""Where records go. A sink takes each finished `Page` and owns its file and its commit point.

A store (crawler/state) hands every committed page to its sinks in order. A
sink's `offset` is how far its file is committed; a crawl resumed from a state
directory reopens the sink at that offset, cutting off whatever came after.
"""

from __future__ import annotations

from typing import Protocol

from crawler.page import Page


class WriteFailed(Exception):
    """Records or crawl state could not be written (disk full, output closed...)."""


class OutputClosed(WriteFailed):
    """The reader of stdout went away (e.g. `| head`)."""


class Sink(Protocol):
    def write(self, page: Page) -> None: ...
    def close(self) -> None: ...
