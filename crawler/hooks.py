"""A user's hooks, run in the crawl's loop: `follow` decides per link, `on_page` adds fields.

Either may be a plain function or a coroutine function. A hook that raises costs
what it was deciding, never the crawl: `follow` the one link it raised for (the
page's other links are decided as usual), `on_page` the fields it would have
added; so does an `on_page` that returns what a record cannot hold (not a dict,
one of the record's own fields or of those the crawler adds with an option, a value
JSON cannot encode), or that sets one of the page's standard attributes to a value
of another type (`page.bytes = "x"`, `page.links = set()`), which gets its value back.
The page's record says `error: "hook_failed"`, and each hook's
first failure is logged with its traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from inspect import isawaitable
from operator import attrgetter
from typing import Any

from crawler.errors import ErrorKind
from crawler.page import CRAWLER_FIELDS, RECORD_FIELDS, RECORD_TYPES, Page
from crawler.sinks.jsonl import encode

# What a hook may not write: the crawler's own value would be lost, or the hook's.
RESERVED_FIELDS = frozenset(Page("x", 0, None).record()).union(CRAWLER_FIELDS)

_standard_values = attrgetter(*RECORD_FIELDS)
_STANDARD = frozenset(RECORD_FIELDS)

log = logging.getLogger(__name__)

FollowHook = Callable[[str, Page], bool | Awaitable[bool]]
PageHook = Callable[[Page], Awaitable[dict[str, Any] | None] | dict[str, Any] | None]


class Hooks:
    def __init__(self, follow: FollowHook | None = None, on_page: PageHook | None = None) -> None:
        self._follow = follow
        self._on_page = on_page
        self._logged: set[str] = set()

    async def apply(self, page: Page, links: list[str]) -> list[str]:
        """Run the hooks on `page`; the links of `links` still to follow."""
        standard, own_fields = _standard_values(page), page.fields
        follow = self._follow
        if follow is not None and links:
            kept = []
            for url in links:
                try:
                    verdict = follow(url, page)
                    if isawaitable(verdict):  # a coroutine a link only when the hook is async
                        verdict = await verdict
                except Exception:  # costs this link; the hook still decides the others
                    self._failed("follow", page)
                    continue
                except asyncio.CancelledError:
                    _raise_if_the_crawl_is_cancelled()
                    self._failed("follow", page)
                    continue
                if verdict:
                    kept.append(url)
            links = kept
        if self._on_page is not None:
            try:
                fields = self._on_page(page)
                if isawaitable(fields):
                    fields = await fields
                if fields is not None:
                    page.fields.update(_extra_fields(fields))
            except Exception:
                self._failed("on_page", page)
            except asyncio.CancelledError:
                _raise_if_the_crawl_is_cancelled()
                self._failed("on_page", page)
        self._restore_mistyped(page, standard, own_fields)
        if page.fields:
            self._drop_unencodable_fields(page)
        return links

    def _restore_mistyped(self, page: Page, standard: tuple[Any, ...], fields: Any) -> None:
        """A standard attribute a hook set to another type gets its value back, and one
        written into `page.fields` goes (the record's own was replaced): stats
        that count the page failed after its record was written (with --state, every
        page had two records, the second internal_error), or broke the crawl's figures
        (`page.depth = None`), and a set of links cost the page and its links."""
        mistyped = []
        for name, was in zip(RECORD_FIELDS, standard, strict=True):
            value = getattr(page, name)
            if value is not was and not _fits(value, RECORD_TYPES[name]):
                setattr(page, name, was)
                mistyped.append(f"{name} to a {type(value).__name__}")
        if not all(isinstance(link, str) for link in page.links):  # appended in place
            page.links = [link for link in page.links if isinstance(link, str)]
            mistyped.append("a link to no str")
        if not isinstance(page.fields, dict):
            mistyped.append(f"fields to a {type(page.fields).__name__}")
            page.fields = fields
        elif not _STANDARD.isdisjoint(page.fields):  # each would replace its attribute's
            written = sorted(_STANDARD.intersection(page.fields))
            for name in written:
                del page.fields[name]
            mistyped.append(f"fields[{', '.join(map(repr, written))}]")
        if mistyped:
            self._blame(page, f"it set the page's {', '.join(mistyped)}")

    def _drop_unencodable_fields(self, page: Page) -> None:
        """A hook may write `page.fields` itself rather than return them: a value JSON
        cannot encode (a set, say) must cost that field, as a returned one does, not fail
        the page's record and leave its links unfollowed (a site's crawl ended at its seed)."""
        try:
            encode(page.fields)
        except (TypeError, ValueError):
            for name, value in list(page.fields.items()):
                try:
                    encode({name: value})
                except (TypeError, ValueError):
                    del page.fields[name]
            self._blame(page)

    def _blame(self, page: Page, why: str | None = None) -> None:
        """A hook left the page wrong; on_page if there is one (follow's page is the same)."""
        self._failed("on_page" if self._on_page is not None else "follow", page, why)

    def _failed(self, hook: str, page: Page, why: str | None = None) -> None:
        """`why`, if the hook raised nothing (else its traceback is logged)."""
        page.error = ErrorKind.HOOK_FAILED
        if hook not in self._logged:
            self._logged.add(hook)
            said = f": {why}" if why else ""
            log.error(
                "the %s hook failed on %s%s (further failures are not logged)",
                *(hook, page.url, said),
                exc_info=why is None,
            )


def _raise_if_the_crawl_is_cancelled() -> None:
    """A CancelledError out of a hook is the crawl's own only if its task is being
    cancelled; else something the hook awaited was cancelled, and the hook failed (it
    used to end the worker, and the crawl with it, without a record or a word)."""
    task = asyncio.current_task()
    if task is None or task.cancelling():
        raise


def _fits(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and (not isinstance(value, bool) or bool in types)


def _extra_fields(fields: Any) -> dict[str, Any]:
    if not isinstance(fields, dict):
        raise TypeError(f"on_page must return a dict or None, not {type(fields).__name__}")
    taken = RESERVED_FIELDS.intersection(fields)
    if taken:
        raise ValueError(f"on_page may not write the crawler's own fields: {sorted(taken)}")
    encode(fields)  # a record is JSON: what it cannot hold fails here, not in a sink
    return fields
