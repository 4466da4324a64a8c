"""Near-duplicate detection: precision and recall on planted pairs, and the index at scale.

    python benchmarks/simhash_bench.py --data DIR        # planted pairs from real articles
    python benchmarks/simhash_bench.py --index 1000000   # lookup time and memory
    python benchmarks/simhash_bench.py --redis-index 1000000   # the shared index (--redis)
    python benchmarks/simhash_bench.py --chinese         # one Chinese sentence changed

DIR is a checkout of scrapinghub/article-extraction-benchmark (see
extract_eval.py): its 181 hand-extracted article bodies are the texts. For each
article, a near-duplicate is planted four ways, each a change a crawler meets on
the same page fetched twice or under two URLs:

- **date**: a dateline prepended ("Updated 3 March 2021, 10:31 GMT" vs another);
- **ad**: an advertisement paragraph (25 words) inserted in the middle;
- **comments**: a comment section (3 comments, 60 words) appended;
- **words**: 3 words replaced by others.

Recall is the share of planted pairs found near (crawler.simhash.near). The distinct pairs
are every pair of two different articles (16,290 pairs), plain and each wrapped in
the same long template (300 words of menus, footer and cookie notice, as when
extraction fails and keeps the page's frame): precision counts the pairs flagged
that are planted ones, among all flagged.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import random
import resource
import sys
import time
from itertools import combinations
from pathlib import Path

from crawler.simhash import (
    MAX_DISTANCE,
    MAX_GROUPS_CHANGED,
    SHINGLE_TOKENS,
    SimhashIndex,
    distance,
    near,
    simhash,
)

_AD = (
    "Advertisement. Get 50% off your first year of unlimited digital access to award winning "
    "journalism, offers, newsletters and more. Subscribe today and cancel anytime you like."
)
_COMMENTS = (
    "Comments (3). John: Great article, thanks for sharing this with us. "
    "Maria: I disagree with the conclusion, the numbers from last year tell another story. "
    "Sam: Does anyone know where the full report can be found? I could not find a link in "
    "the text above, and the official site is down today. Reply. Report abuse."
)
_TEMPLATE_WORDS = [
    "Home",
    "News",
    "World",
    "Business",
    "Technology",
    "Science",
    "Health",
    "Sports",
    "Entertainment",
    "Opinion",
    "Video",
    "Podcasts",
    "Newsletters",
    "Subscribe",
    "Sign",
    "in",
    "Search",
    "Menu",
    "Close",
    "Privacy",
    "Policy",
    "Terms",
    "of",
    "Service",
    "Cookie",
    "settings",
    "We",
    "use",
    "cookies",
    "to",
    "improve",
    "your",
    "experience",
    "and",
    "to",
    "show",
    "you",
    "personalised",
    "advertising.",
    "By",
    "continuing",
    "you",
    "agree",
    "to",
    "our",
    "use",
    "of",
    "cookies.",
    "Accept",
    "all",
    "Manage",
    "preferences",
    "About",
    "us",
    "Contact",
    "Careers",
    "Advertise",
    "with",
    "us",
    "Help",
    "centre",
    "Accessibility",
    "Sitemap",
    "Follow",
    "us",
    "on",
    "Twitter",
    "Facebook",
    "Instagram",
    "LinkedIn",
    "YouTube",
    "RSS",
    "Copyright",
    "2024",
    "The",
    "Daily",
    "Example",
    "Media",
    "Group.",
    "All",
    "rights",
    "reserved.",
    "Most",
    "read",
    "Trending",
    "now",
    "Editor's",
    "picks",
    "Related",
    "stories",
    "More",
    "from",
    "this",
    "section",
]


def planted(text: str, rng: random.Random) -> dict[str, tuple[str, str]]:
    paragraphs = text.split("\n")
    middle = len(paragraphs) // 2
    words = text.split(" ")
    changed = list(words)
    for i in rng.sample(range(len(words)), min(3, len(words))):
        changed[i] = rng.choice(["however", "report", "people", "yesterday", "market"])
    return {
        "date": (
            "Updated 3 March 2021, 10:31 GMT\n" + text,
            "Updated 4 March 2021, 18:02 GMT\n" + text,
        ),
        "ad": (text, "\n".join([*paragraphs[:middle], _AD, *paragraphs[middle:]])),
        "comments": (text, text + "\n" + _COMMENTS),
        "words": (text, " ".join(changed)),
    }


def planted_html(html: str, body: str, rng: random.Random) -> dict[str, tuple[str, str]]:
    """The same four changes made to a page's HTML, for the crawl's own path:
    extraction, then SimHash of the main text."""
    start = html.find("<p", html.find("<body"))
    paragraphs = [i for i in range(start, len(html)) if html.startswith("<p>", i)] or [start]
    middle = paragraphs[len(paragraphs) // 2]
    end = html.rfind("</p>") + 4
    words = [w for w in set(body.split()) if len(w) > 6 and w.isalpha() and html.count(w) == 1]
    changed = html
    for word in rng.sample(sorted(words), min(3, len(words))):
        changed = changed.replace(word, "market")
    return {
        "date": (
            html[:start] + "<p>Updated 3 March 2021, 10:31 GMT</p>" + html[start:],
            html[:start] + "<p>Updated 4 March 2021, 18:02 GMT</p>" + html[start:],
        ),
        "ad": (html, f'{html[:middle]}<div class="ad-slot"><p>{_AD}</p></div>{html[middle:]}'),
        "comments": (
            html,
            f'{html[:end]}<section id="comments"><h3>3 comments</h3><p>{_COMMENTS}</p></section>'
            + html[end:],
        ),
        "words": (html, changed),
    }


def _extracted_simhash(html: str, url: str, shingle_tokens: int) -> int | None:
    from selectolax.lexbor import LexborHTMLParser

    from crawler.extract import extract

    return simhash(extract(LexborHTMLParser(html), url).main_text, shingle_tokens)


def html_pairs_report(pages: list[tuple[str, str, str]], shingle_tokens: int) -> None:
    rng = random.Random(24)
    print("pages with planted changes -> extract -> SimHash of the main text:")
    found: dict[str, int] = {}
    for url, html, body in pages:
        for kind, (a, b) in planted_html(html, body, rng).items():
            fa = _extracted_simhash(a, url, shingle_tokens)
            fb = _extracted_simhash(b, url, shingle_tokens)
            near_pair = fa is not None and fb is not None and near(fa, fb)
            found[kind] = found.get(kind, 0) + near_pair
    for kind, hits in found.items():
        print(f"  recall, {kind:9} {hits / len(pages):.3f}  ({hits}/{len(pages)})")
    hits = sum(found.values())
    print(f"  recall, all       {hits / (4 * len(pages)):.3f}")
    prints = [_extracted_simhash(html, url, shingle_tokens) for url, html, _ in pages]
    false = sum(a is not None and b is not None and near(a, b) for a, b in combinations(prints, 2))
    pairs = len(pages) * (len(pages) - 1) // 2
    print(f"  distinct pages: {false} of {pairs} pairs flagged")


def template(text: str) -> str:
    frame = " ".join(_TEMPLATE_WORDS * 4)  # ~330 words, as a page's frame often has
    half = len(frame) // 2
    return frame[:half] + "\n" + text + "\n" + frame[half:]


def pairs_report(texts: list[str], shingle_tokens: int) -> None:
    rng = random.Random(24)
    print(f"shingles of {shingle_tokens} tokens; near-duplicate: crawler.simhash.near")
    found: dict[str, int] = {}
    for text in texts:
        for kind, (a, b) in planted(text, rng).items():
            fa, fb = simhash(a, shingle_tokens), simhash(b, shingle_tokens)
            assert fa is not None and fb is not None
            found[kind] = found.get(kind, 0) + near(fa, fb)
    planted_hits = sum(found.values())
    for kind, hits in found.items():
        print(f"  recall, {kind:9} {hits / len(texts):.3f}  ({hits}/{len(texts)})")
    print(f"  recall, all       {planted_hits / (4 * len(texts)):.3f}")
    for name, wrap in (("distinct", str), ("distinct + template", template)):
        prints = [simhash(wrap(t), shingle_tokens) for t in texts]
        false = sum(
            near(a, b)  # type: ignore[arg-type]
            for a, b in combinations(prints, 2)
        )
        pairs = len(texts) * (len(texts) - 1) // 2
        precision = planted_hits / (planted_hits + false) if planted_hits + false else 1.0
        print(f"  {name:20}: {false} of {pairs} pairs flagged; precision {precision:.4f}")


_LIMITS = (MAX_DISTANCE, MAX_GROUPS_CHANGED)  # the shared index's, as crawler.state.redis's
_SENTENCES = [
    "另据了解，相关部门还将在下月召开专题会议，对下一阶段工作作出具体安排。",
    "记者注意到，不少市民对此表示欢迎，认为这一做法切实解决了群众的实际困难。",
    "专家建议，有关方面应加强宣传引导，让更多人了解政策内容和办理流程。",
]


def chinese_report(articles: int, parts: int) -> None:
    """One sentence added to, or put in the place of another in, Chinese articles made of
    `parts` main texts of tests/data/extract_pages (about 300 characters each); and the
    distances between those main texts, each with another."""
    pages = Path(__file__).parent.parent / "tests" / "data" / "extract_pages"
    texts = [path.read_text(encoding="utf-8").strip() for path in sorted(pages.rglob("*.txt"))]
    texts = [
        t for t in texts if sum("\u4e00" <= c <= "\u9fff" for c in t) > 100 and t.count("。") > 2
    ]
    rng = random.Random(5)
    found = {"added": 0, "replaced": 0}
    lengths = []
    for _ in range(articles):
        article = "\n".join(rng.sample(texts, parts))
        lengths.append(len(article))
        sentences = [s for s in article.replace("。", "。\0").split("\0") if s.strip()]
        i = rng.randrange(1, len(sentences) - 1)
        new = rng.choice(_SENTENCES)
        changed = {
            "added": [*sentences[:i], new, *sentences[i:]],
            "replaced": [*sentences[:i], new, *sentences[i + 1 :]],
        }
        before = simhash(article)
        for kind, after in changed.items():
            found[kind] += near(before, simhash("".join(after)))  # type: ignore[arg-type]
    print(f"{articles} Chinese articles of {parts} texts, {sum(lengths) // len(lengths)} chars:")
    for kind, hits in found.items():
        print(f"  recall, a sentence {kind:8} {hits / articles:.3f}  ({hits}/{articles})")
    prints = [simhash(t) for t in texts]
    pairs = list(combinations(prints, 2))
    gaps = [distance(a, b) for a, b in pairs]  # type: ignore[arg-type]
    flagged = sum(near(a, b) for a, b in pairs)  # type: ignore[arg-type]
    print(
        f"  distinct texts: {len(gaps)} pairs, {flagged} found near, smallest distance"
        f" {min(gaps)} bits"
    )


def index_report(n: int, lookups: int) -> None:
    rng = random.Random(7)
    gc.collect()
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    index = SimhashIndex()
    started = time.process_time()
    for i in range(n):
        index.add(rng.getrandbits(64), f"https://example.com/articles/{i:07d}.html")
    add_s = time.process_time() - started
    after_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queries = [rng.getrandbits(64) for _ in range(lookups)]
    started = time.process_time()
    for q in queries:
        index.first_near(q)
    miss_s = time.process_time() - started
    print(f"{n:,} random fingerprints (CPU time, process_time):")
    print(f"  add:    {1e6 * add_s / n:.2f} us each")
    print(f"  lookup: {1e6 * miss_s / lookups:.2f} us each (random, mostly no match)")
    print(f"  peak RSS grew {(after_kb - before_kb) / 1024:.0f} MB (fingerprints and URLs)")


def redis_index_report(n: int) -> None:
    """The shared index of --redis in a redis-server of its own: memory and Redis CPU."""
    import socket

    import redis
    from redis_bench import start_redis

    from crawler.state.redis import SCRIPTS

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start_redis(port, None)
    try:
        client = redis.Redis(port=port)
        near = client.register_script(SCRIPTS["near"])
        rng = random.Random(7)
        before = client.info("memory")["used_memory"]
        pipe = client.pipeline(transaction=False)
        for i in range(n):
            f = rng.getrandbits(64)
            url = f"https://example.com/articles/{i:07d}.html"
            near(args=["crawler:{bench}:", f >> 32, f & 0xFFFFFFFF, url, *_LIMITS], client=pipe)
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()
        grown = client.info("memory")["used_memory"] - before
        client.config_resetstat()
        for i in range(10_000):
            f = rng.getrandbits(64)
            url = f"https://example.com/more/{i:07d}.html"
            near(args=["crawler:{bench}:", f >> 32, f & 0xFFFFFFFF, url, *_LIMITS], client=pipe)
        pipe.execute()
        usec = client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]
        print(f"{n:,} fingerprints in Redis: {grown / n:.0f} bytes each (used_memory);")
        print(f"  then a lookup and insert takes {usec:.1f} us of Redis CPU (commandstats)")
    finally:
        server.terminate()
        server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="article-extraction-benchmark checkout")
    parser.add_argument("--shingle-tokens", type=int, default=SHINGLE_TOKENS)
    parser.add_argument("--index", type=int, default=0, help="fingerprints for the index bench")
    parser.add_argument("--lookups", type=int, default=100_000)
    parser.add_argument("--redis-index", type=int, default=0, help="fingerprints, in Redis")
    parser.add_argument("--chinese", action="store_true", help="one Chinese sentence changed")
    args = parser.parse_args()
    if args.chinese:
        for parts in (1, 2, 4, 8):
            chinese_report(200, parts)
    if args.data:
        truth = json.loads((args.data / "ground-truth.json").read_text(encoding="utf-8"))
        texts = [v["articleBody"] for _, v in sorted(truth.items()) if v["articleBody"].strip()]
        pairs_report(texts, args.shingle_tokens)
        pages = []
        for key, value in sorted(truth.items()):
            html = gzip.decompress((args.data / "html" / f"{key}.html.gz").read_bytes()).decode()
            pages.append((value.get("url", ""), html, value["articleBody"]))
        html_pairs_report(pages, args.shingle_tokens)
    if args.index:
        index_report(args.index, args.lookups)
    if args.redis_index:
        redis_index_report(args.redis_index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
