"""--extract on the corpus of tests/data/extract_pages (see tests/extract_pages.py):
pages in the manner of the sites users crawl, each with its main text written by hand.
The F1 of each split has a floor, so that a change that loses main text, or keeps
boilerplate, on pages it was not made for cannot pass unseen."""

from __future__ import annotations

from tests.conftest import Site, crawl
from tests.extract_pages import pages, score, summary

# F1 of the token means when the floors were set: dev 0.990 (30 pages: QA round 4's 23,
# the 3 test pages round 5 was made for, and the 4 holdout2 pages round 8 was: a
# university notice's attachments, a WeChat article, a news list page, a "Please enable
# JavaScript" note), test 0.975 (13 pages), holdout 0.935 (20 pages written for round 5
# before its changes, 0.935 before and after; scored only, never tuned on), holdout2
# 0.967 (16 pages written for round 8 before its changes, 0.966 before; 20 pages, 0.923
# before, with the 4 it was tuned on). QA round 9 added 8 dev pages of the kinds holdout
# and holdout2 missed (a Monobook wiki, WP Recipe Maker and Tasty Recipes cards,
# nbconvert's classic and lab notebooks, Microsoft Learn, a Lemmy thread, a GBK chapter):
# dev 0.991 (38 pages), test 0.975, holdout 0.959 (0.935 before), holdout2 0.983 (0.967
# before). The floors leave a margin for a change that trades a little on one page for
# more on others.
FLOORS = {"dev": 0.97, "test": 0.95, "holdout": 0.91, "holdout2": 0.94}
ORDER_F1_FLOOR = 0.90


async def test_a_crawl_of_the_corpus_finds_each_pages_main_text(site: Site, tmp_path):
    """Served as a site serves them (the GBK pages with a bare text/html, their
    encoding in their <meta>), crawled with --extract: the main text of every page is
    found with its splits' F1 above their floors."""
    paths = pages("all")
    for path in paths:
        site.page(
            f"/{path.parent.name}/{path.name}", body=path.read_bytes(), content_type="text/html"
        )

    records = await crawl(
        tmp_path, [f"{site.url}/{p.parent.name}/{p.name}" for p in paths], extract=True, max_depth=0
    )

    assert len(records) == len(paths)
    found = {record["url"].removeprefix(site.url + "/"): record for record in records}
    for split, floor in FLOORS.items():
        scores = [score(path, found[f"{split}/{path.name}"]["main_text"]) for path in pages(split)]
        precision, recall, f1, order_f1 = summary(scores)
        assert f1 >= floor, (split, precision, recall, f1)
        assert order_f1 >= ORDER_F1_FLOOR, (split, order_f1)
