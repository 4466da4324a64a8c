"""The breadth-first gate's held pages: packed, or on disk with --state, and given back whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.errors import ErrorKind
from crawler.frontier import Request
from crawler.held import HeldPages
from crawler.page import Page


def held_page(n: int) -> tuple[Request, Page, list[str]]:
    url = f"http://127.16.0.{n}:8080/p/{n}"
    request = Request(url, 3, "http://127.16.0.1:8080/", seq=100 + n, hops=[url + "?moved"])
    links = [f"http://127.16.0.{m}:8080/p/{m}" for m in range(n, n + 30)]
    page = Page(url, 3, request.referrer, status=200, title=f"p{n}", links=links, bytes=2000)
    page.error = ErrorKind.DECODING_ERROR if n % 2 else None
    page.fields["lang"] = "en"
    return request, page, links[::2]


def test_held_pages_past_the_memorys_share_wait_on_disk_and_come_back_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("crawler.held.IN_MEMORY", 2)
    held = HeldPages(str(tmp_path))
    pages = [held_page(n) for n in range(6)]
    for request, page, follow in pages[:5]:
        held.add(request, page, follow, pack=True)
    held.add(*pages[5], pack=False)  # its response is read at commit: kept whole, in memory

    assert len(held) == 6 and held.shallowest() == 3
    assert (tmp_path / "held.sqlite").exists()
    back = [held.pop(3) for _ in range(6)]
    assert len(held) == 0 and held.shallowest() is None and held.nbytes == 0
    for (request, page, follow), (was_request, was_page, was_follow) in zip(
        back, [pages[0], pages[1], pages[5], pages[2], pages[3], pages[4]], strict=True
    ):
        assert page.record() == was_page.record()
        assert follow == was_follow
        fields = ("url", "depth", "referrer", "seq", "kind", "hops")
        assert [getattr(request, f) for f in fields] == [getattr(was_request, f) for f in fields]
    assert back[0][0] is pages[0][0]  # those in memory keep their request object
    held.close()
    assert not (tmp_path / "held.sqlite").exists()


def test_a_page_json_cannot_carry_is_held_whole_in_memory(tmp_path: Path) -> None:
    held = HeldPages(str(tmp_path))
    request, page, follow = held_page(1)
    page.title = "broken \ud800 surrogate"

    held.add(request, page, follow, pack=True)

    assert held.pop(3) == (request, page, follow)
