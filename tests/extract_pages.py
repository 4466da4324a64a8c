"""The extraction corpus: pages written in the manner of the sites --extract meets (news
with sidebars and comments, blogs, forums, documentation, shops, tables, <br>-only text,
single-page apps, GBK portals...), each with its main text written by hand, and the
scorer that compares what `extract` finds with it.

    python -m tests.extract_pages [--split dev|test|holdout|holdout2|all] [--show NAME]

`tests/data/extract_pages/dev` is tuned on; `test` is scored only, to tell whether a
change helps pages it was not made for; `holdout` (20 pages of kinds the first two lack,
written before the changes of QA round 5) and `holdout2` (20 more, written before those
of QA round 8: Tieba, CSDN, cnblogs, Jianshu, Hexo and Bilibili articles, a GBK novel
chapter, a GB2312 notice, a Douban review, MDN, pkg.go.dev, Wikipedia with infobox and
references, a recipe, XenForo quotes, newsletter and cookie pop-ups, AMP; its WeChat
article, university notice, news list page and <noscript> article, which that round's
changes were made for, are in dev now) are scored only at the start and the end of a
round of changes, never between. A page is NAME.html (the bytes
a server sends, GBK ones included) and NAME.txt (its main text, one block a line).

Scores are over tokens: a word (`\\w+`), or one Han, kana or Hangul character, as
Chinese and Japanese are compared character by character. A page's precision and
recall are over the bags of tokens; a split's are their means over pages (so that a
long page weighs no more than a short one), and its F1 is that of the two means, as
benchmarks/extract_eval.py scores the article-extraction-benchmark. The order score is
the same over 3-token shingles, which text in the wrong order loses.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

from crawler.charset import decode_html_as
from crawler.extract import extract

PAGES = Path(__file__).parent / "data" / "extract_pages"
SPLITS = ("dev", "test", "holdout", "holdout2")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")


@dataclass
class Score:
    name: str
    precision: float
    recall: float
    order_precision: float
    order_recall: float

    @property
    def f1(self) -> float:
        return _f1(self.precision, self.recall)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


def _bag_scores(true: Counter[object], found: Counter[object]) -> tuple[float, float]:
    hits = sum((true & found).values())
    if not true and not found:
        return 1.0, 1.0
    precision = hits / sum(found.values()) if found else 0.0
    recall = hits / sum(true.values()) if true else 0.0
    return precision, recall


def _shingles(words: list[str], n: int = 3) -> Counter[object]:
    return Counter(tuple(words[i : i + n]) for i in range(max(1, len(words) - n + 1)))


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def pages(split: str) -> list[Path]:
    """The .html files of `split` (one of SPLITS, or "all"), by name."""
    folders = list(SPLITS) if split == "all" else [split]
    return sorted(path for folder in folders for path in (PAGES / folder).glob("*.html"))


def main_text(path: Path) -> str:
    """What --extract finds in the page at `path`, decoded as a crawl decodes it."""
    html, encoding = decode_html_as(path.read_bytes(), None)
    return extract(LexborHTMLParser(html), f"http://127.0.0.1/{path.name}", encoding).main_text


def score(path: Path, found_text: str | None = None) -> Score:
    """How `found_text` (by default, what `extract` finds) compares with the page's
    main text."""
    true = tokens(path.with_suffix(".txt").read_text(encoding="utf-8"))
    found = tokens(main_text(path) if found_text is None else found_text)
    precision, recall = _bag_scores(Counter(true), Counter(found))
    order = _bag_scores(_shingles(true), _shingles(found))
    return Score(path.stem, precision, recall, *order)


def summary(scores: list[Score]) -> tuple[float, float, float, float]:
    """Precision, recall and F1 of a split (of the means over pages), and its order F1."""
    precision = statistics.mean(s.precision for s in scores)
    recall = statistics.mean(s.recall for s in scores)
    order = _f1(
        statistics.mean(s.order_precision for s in scores),
        statistics.mean(s.order_recall for s in scores),
    )
    return precision, recall, _f1(precision, recall), order


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="dev")
    parser.add_argument("--show", help="print what is found in page NAME")
    args = parser.parse_args()
    if args.show:
        print(main_text(next(p for p in pages("all") if p.stem == args.show)))
        return 0
    scores = [score(path) for path in pages(args.split)]
    print(f"{'page':28} {'P':>5} {'R':>5} {'F1':>5} {'order':>5}")
    for s in scores:
        order = _f1(s.order_precision, s.order_recall)
        print(f"{s.name:28} {s.precision:5.2f} {s.recall:5.2f} {s.f1:5.2f} {order:5.2f}")
    precision, recall, f1, order = summary(scores)
    print(
        f"{args.split + ' (' + str(len(scores)) + ' pages)':28} {precision:5.3f} {recall:5.3f}"
        f" {f1:5.3f} {order:5.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
