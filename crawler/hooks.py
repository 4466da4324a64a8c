"""A user's hooks, run in the crawl's loop: `follow` decides per link, `on_page` adds fields.

Either may be a plain function or a coroutine function. A hook that raises costs
what it was deciding, never the crawl: `follow` the one link it raised for (the
page's other links are decided as usual), `on_page` the fields it would have
added; so does an `on_page` that returns what a record cannot hold (not a dict,
one of the record's own fields or of those the crawler adds with an option, a value
JSON cannot encode). The page's record says `error: "hook_failed"`, and each hook's
first failure is logged with its traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from inspect import isawaitable
from typing import Any

from crawler.errors import ErrorKind
from crawler.page import CRAWLER_FIELDS, Page
from crawler.sinks.jsonl import encode

# What a hook may not write: the crawler's own value would be lost, or the hook's.
RESERVED_FIELDS = frozenset(Page("x", 0, None).record()).union(CRAWLER_FIELDS)

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
        if page.fields:
            self._drop_unencodable_fields(page)
        return links

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
            self._failed("on_page" if self._on_page is not None else "follow", page)

    def _failed(self, hook: str, page: Page) -> None:
        page.error = ErrorKind.HOOK_FAILED
        if hook not in self._logged:
            self._logged.add(hook)
            log.exception(
                "the %s hook failed on %s (further failures are not logged)", hook, page.url
            )


def _raise_if_the_crawl_is_cancelled() -> None:
    """A CancelledError out of a hook is the crawl's own only if its task is being
    cancelled; else something the hook awaited was cancelled, and the hook failed (it
    used to end the worker, and the crawl with it, without a record or a word)."""
    task = asyncio.current_task()
    if task is None or task.cancelling():
        raise


def _extra_fields(fields: Any) -> dict[str, Any]:
    if not isinstance(fields, dict):
        raise TypeError(f"on_page must return a dict or None, not {type(fields).__name__}")
    taken = RESERVED_FIELDS.intersection(fields)
    if taken:
        raise ValueError(f"on_page may not write the crawler's own fields: {sorted(taken)}")
    encode(fields)  # a record is JSON: what it cannot hold fails here, not in a sink
    return fields
