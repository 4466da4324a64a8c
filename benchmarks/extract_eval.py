"""Main-content extraction: F1 against hand-made ground truth, and CPU time a page.

    python benchmarks/extract_eval.py --data DIR [--split heldout|dev|all] [--only ours,...]
    python benchmarks/extract_eval.py --docs /usr/share/doc/python3.11/html

DIR is a checkout of scrapinghub/article-extraction-benchmark (MIT licence; 181
news and blog pages fetched with JS off, `html/*.html.gz`, and `ground-truth.json`
with each page's `articleBody`, made by hand):

    git clone https://github.com/scrapinghub/article-extraction-benchmark DIR

The data is not copied here: it is 5 MB, and the script needs only the path.

The pages are split by their id (a SHA-256 hex string): ids starting 0-7 are the
dev set (tuned on), 8-f the held-out set (reported). Two scores, each the mean
over pages of per-page precision and recall, F1 from the two means (as the
benchmark's own evaluate.py does, so that a long page weighs no more than a
short one):

- **token F1**: the bag of `\\w+` tokens (the "F1 on tokens of the article body"
  of the issue, as in trafilatura's and Dragnet's evaluations);
- **shingle F1**: the bag of 4-token shingles, the benchmark's own metric, which
  also punishes text in the wrong order.

CPU time is `time.process_time()` around each call, best of `--repeat` runs, in
ms a page (mean over pages). For ours it is given twice: the extraction alone,
from the tree the crawl has already parsed for its links, which is what
`--extract` adds to a crawl; and parse + extraction, the like of what the
libraries do, each parsing with its own parser.

The libraries are imported only if asked for; install them into the venv for
the evaluation (they are no dependency of the crawler):

    .venv/bin/pip install trafilatura readability-lxml lxml_html_clean resiliparse
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

_TOKEN = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text or "")


def _bag_scores(true: Counter[object], pred: Counter[object]) -> tuple[float, float]:
    """Precision and recall of one page, as the benchmark's evaluate.py scores them."""
    tp = sum((true & pred).values())
    fp = sum(pred.values()) - tp
    fn = sum(true.values()) - tp
    if fp == fn == 0:
        return 1.0, 1.0
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return precision, recall


def shingles(text: str, n: int = 4) -> Counter[object]:
    words = tokens(text)
    return Counter(tuple(words[i : i + n]) for i in range(max(1, len(words) - n + 1)) if words)


def f1_of(scores: list[tuple[float, float]]) -> tuple[float, float, float]:
    precision = statistics.mean(p for p, _ in scores)
    recall = statistics.mean(r for _, r in scores)
    return 2 * precision * recall / (precision + recall), precision, recall


def load_trafilatura(tests: Path, split: str) -> list[tuple[str, str, str, dict[str, list[str]]]]:
    """(file, url, html, snippets) of each page of trafilatura's evaluation corpus in
    `split`: the dev set is the pages whose URL's SHA-256 starts with 0-7."""
    from crawler.charset import decode_html

    truth = json.loads((tests / "evaldata.json").read_text(encoding="utf-8"))
    pages = []
    for url in sorted(truth):
        dev = hashlib.sha256(url.encode()).hexdigest()[0] in "01234567"
        if split != "all" and (split == "dev") != dev:
            continue
        item = truth[url]
        for folder in ("cache", "eval"):
            path = tests / folder / item["file"]
            if path.is_file():
                html = decode_html(path.read_bytes(), None)
                pages.append((item["file"], url, html, item))
                break
    return pages


def _norm(text: str) -> str:
    return " ".join(text.split())


def snippet_counts(item: dict[str, list[str]], text: str) -> tuple[int, int, int, int]:
    """(tp, fp, fn, tn) of one page, as trafilatura's tests/eval_common.py counts them."""
    found = _norm(text)
    tp = sum(_norm(w) in found for w in item["with"])
    fp = sum(_norm(w) in found for w in item["without"])
    return tp, fp, len(item["with"]) - tp, len(item["without"]) - fp


def load(data: Path, split: str) -> list[tuple[str, str, str, str]]:
    """(id, url, html, true body) of each page of the split."""
    truth = json.loads((data / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for key in sorted(truth):
        dev = key[0] in "01234567"
        if split == "all" or (split == "dev") == dev:
            html = gzip.decompress((data / "html" / f"{key}.html.gz").read_bytes()).decode()
            pages.append((key, truth[key].get("url", ""), html, truth[key]["articleBody"]))
    return pages


def _ours() -> dict[str, Callable[[str, str], str]]:
    from selectolax.lexbor import LexborHTMLParser

    from crawler.extract import extract

    def full(html: str, url: str) -> str:
        return extract(LexborHTMLParser(html), url).main_text

    return {"ours (parse + extract)": full}


def _trafilatura() -> dict[str, Callable[[str, str], str]]:
    import trafilatura

    def run(html: str, url: str) -> str:
        return trafilatura.extract(html, include_comments=False) or ""

    return {f"trafilatura {trafilatura.__version__}": run}


def _readability() -> dict[str, Callable[[str, str], str]]:
    from importlib.metadata import version

    import lxml.html
    from readability import Document

    def run(html: str, url: str) -> str:
        summary = Document(html).summary(html_partial=True)
        return str(lxml.html.fromstring(summary).text_content())

    return {f"readability-lxml {version('readability-lxml')}": run}


def _resiliparse() -> dict[str, Callable[[str, str], str]]:
    from importlib.metadata import version

    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    def run(html: str, url: str) -> str:
        return str(extract_plain_text(HTMLTree.parse(html), main_content=True))

    return {f"resiliparse {version('resiliparse')}": run}


CONTENDERS = {
    "ours": _ours,
    "trafilatura": _trafilatura,
    "readability": _readability,
    "resiliparse": _resiliparse,
}


def _timed(run: Callable[[], object], repeat: int) -> tuple[object, float]:
    best_s = float("inf")
    result: object = None
    for _ in range(repeat):
        started = time.process_time()
        result = run()
        best_s = min(best_s, time.process_time() - started)
    return result, best_s


def measure(
    name: str,
    run: Callable[[str, str], str],
    pages: list[tuple[str, str, str, str]],
    repeat: int,
    worst: int,
) -> dict[str, object]:
    token_scores, shingle_scores, cpu_s = [], [], []
    per_page = []
    for key, url, html, true in pages:
        text, seconds = _timed(lambda: run(html, url), repeat)  # noqa: B023 (called at once)
        assert isinstance(text, str)
        cpu_s.append(seconds)
        token_scores.append(_bag_scores(Counter(tokens(true)), Counter(tokens(text))))
        shingle_scores.append(_bag_scores(shingles(true), shingles(text)))
        per_page.append((key, *token_scores[-1]))
    row: dict[str, object] = {
        "name": name,
        "token": f1_of(token_scores),
        "shingle": f1_of(shingle_scores),
        "cpu_ms": 1000 * statistics.mean(cpu_s),
        "cpu_ms_median": 1000 * statistics.median(cpu_s),
    }
    if worst:
        per_page.sort(key=lambda s: 2 * s[1] * s[2] / (s[1] + s[2] or 1))
        row["worst"] = per_page[:worst]
    return row


def measure_snippets(
    name: str, run: Callable[[str, str], str], pages: list[tuple[str, str, str, Any]], repeat: int
) -> tuple[float, float, float, float]:
    """Precision, recall, F1 over all snippets, and CPU ms a page."""
    tp = fp = fn = 0
    cpu_s = []
    for _, url, html, item in pages:
        text, seconds = _timed(lambda: run(html, url), repeat)  # noqa: B023 (called at once)
        assert isinstance(text, str)
        cpu_s.append(seconds)
        counts = snippet_counts(item, text)
        tp, fp, fn = tp + counts[0], fp + counts[1], fn + counts[2]
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    f1 = 2 * precision * recall / (precision + recall)
    return precision, recall, f1, 1000 * statistics.mean(cpu_s)


def extract_only(pages: list[tuple[str, str, str, Any]], repeat: int) -> float:
    """Our extraction's CPU ms a page from an already parsed tree (as in a crawl)."""
    from selectolax.lexbor import LexborHTMLParser

    from crawler.extract import extract

    cpu_s = []
    for _, url, html, _ in pages:
        best_s = float("inf")
        for _ in range(repeat):
            tree = LexborHTMLParser(html)
            started = time.process_time()
            extract(tree, url)
            best_s = min(best_s, time.process_time() - started)
        cpu_s.append(best_s)
    return 1000 * statistics.mean(cpu_s)


def docs_report(docs: Path, repeat: int) -> int:
    """Our extraction's CPU ms a page on every HTML file under `docs` (a documentation
    site, such as Debian's python3.11-doc), from an already parsed tree."""
    from crawler.charset import decode_html_as

    files = sorted(docs.rglob("*.html"))
    if not files:
        print(f"error: {docs} holds no .html file", file=sys.stderr)
        return 2
    pages = []
    for path in files:
        html, _ = decode_html_as(path.read_bytes(), None)
        pages.append(("", path.as_uri(), html, None))
    cpu_ms = extract_only(pages, repeat)
    print(f"{len(pages)} pages of {docs}: {cpu_ms:.3f} CPU ms a page (mean, best of {repeat})")
    return 0


def snippets_report(tests: Path, split: str, contenders: list[str], repeat: int) -> int:
    if not (tests / "evaldata.json").is_file():
        print(f"error: {tests} holds no evaldata.json (see --help)", file=sys.stderr)
        return 2
    pages = load_trafilatura(tests, split)
    print(f"{len(pages)} pages of trafilatura's corpus ({split}); snippets found or not")
    print(f"{'':32} {'P':>6} {'R':>6} {'F1':>6} {'CPU ms':>7}")
    for contender in contenders:
        for name, run in CONTENDERS[contender]().items():
            precision, recall, f1, cpu_ms = measure_snippets(name, run, pages, repeat)
            print(f"{name:32} {precision:6.3f} {recall:6.3f} {f1:6.3f} {cpu_ms:7.2f}")
        if contender == "ours":
            print(f"{'ours (extract, tree given)':32} {'':6} {'':6} {'':6}", end="")
            print(f" {extract_only(pages, repeat):7.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="article-extraction-benchmark checkout")
    parser.add_argument(
        "--trafilatura", type=Path, help="trafilatura's tests/ folder (evaldata.json, cache, eval)"
    )
    parser.add_argument("--docs", type=Path, help="time ours on every .html file under DIR")
    parser.add_argument("--split", choices=("heldout", "dev", "all"), default="heldout")
    parser.add_argument("--only", default=",".join(CONTENDERS), help="comma-separated contenders")
    parser.add_argument("--repeat", type=int, default=3, help="runs a page; the best CPU time")
    parser.add_argument("--worst", type=int, default=0, help="list the N worst pages (token F1)")
    args = parser.parse_args()
    if args.docs is not None:
        return docs_report(args.docs, args.repeat)
    if args.trafilatura is not None:
        return snippets_report(args.trafilatura, args.split, args.only.split(","), args.repeat)
    if args.data is None or not (args.data / "ground-truth.json").is_file():
        print(f"error: {args.data} holds no ground-truth.json (see --help)", file=sys.stderr)
        return 2
    pages = load(args.data, args.split)
    print(f"{len(pages)} pages ({args.split}); CPU ms a page: mean, best of {args.repeat}")
    print(f"{'':32} {'token F1':>8} {'P':>6} {'R':>6} {'shingle F1':>10} {'CPU ms':>7}")
    for contender in args.only.split(","):
        for name, run in CONTENDERS[contender]().items():
            row = measure(name, run, pages, args.repeat, args.worst)
            f1, p, r = row["token"]  # type: ignore[misc]
            print(
                f"{name:32} {f1:8.3f} {p:6.3f} {r:6.3f} {row['shingle'][0]:10.3f}"  # type: ignore[index]
                f" {row['cpu_ms']:7.2f}"
            )
            for key, p, r in row.get("worst", []):  # type: ignore[attr-defined]
                print(f"    {key[:12]} P={p:.2f} R={r:.2f}")
        if contender == "ours":
            print(f"{'ours (extract, tree given)':32} {'':8} {'':6} {'':6} {'':10}", end="")
            print(f" {extract_only(pages, args.repeat):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
