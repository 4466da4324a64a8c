"""Link canonicalization two ways, and hosts made ASCII two ways.

    python benchmarks/canonicalize_bench.py                # the 20,000-page site, ~2 min
    python benchmarks/canonicalize_bench.py --pages 2000   # a smoke run, ~10 s

Links: every page of benchmarks/site.py's site is parsed once (untimed, with the crawler's
parser), then each way makes every page's list of canonical links, as the engine does:
- ours: `crawler.urls.canonical_links`, our resolver with WHATWG's leniencies; ada only
  makes non-ASCII hosts ASCII.
- ada: `ada_url.join_url(page, href)`, WHATWG's whole resolve in C++, then our canonical
  rules on its result (escapes, hosts, userinfo, which are not WHATWG's), which is
  `canonicalize()` of an absolute URL, mostly its fast path.
Figures are ns per link, the best of --runs passes (the two ways take turns, pass by pass,
so a busy machine slows both), and the links the two ways disagree on.

Hosts: the inputs of web-platform-tests' IdnaTestV2.json (tests/data/) through
- yarl, the way crawler/urls.py made hosts ASCII before (the idna package, then Python's
  IDNA2003 codec when that fails), with yarl's caches cleared before each pass;
- `ada_url.idna.encode`, the way it does now;
and how many of the cases `canonicalize()` of the code under test gets wrong.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import ada_url
import yarl
from selectolax.lexbor import LexborHTMLParser

from crawler.parse import parse_html
from crawler.urls import canonical_links, canonicalize

BENCH_DIR = Path(__file__).resolve().parent
IDNA_TESTS = BENCH_DIR.parent / "tests" / "data" / "IdnaTestV2.json"

Page = tuple[str, list[str]]  # canonical URL, hrefs as written


def _load_site_module() -> ModuleType:
    # By path: `import site` is the stdlib's module.
    spec = importlib.util.spec_from_file_location("bench_site", BENCH_DIR / "site.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def read_pages(directory: Path, pages: int, port: int) -> list[Page]:
    site = _load_site_module().ensure(directory, pages, port)
    return [
        (
            url,
            parse_html(
                LexborHTMLParser((site.directory / url.split("/", 3)[3]).read_bytes())
            ).hrefs,
        )
        for url in site.urls
    ]


def links_ours(base: str, hrefs: list[str]) -> list[str]:
    return canonical_links(hrefs, base)


def links_ada(base: str, hrefs: list[str]) -> list[str]:
    join = ada_url.join_url
    seen: dict[str, None] = {}
    for href in hrefs:
        try:
            url = canonicalize(join(base, href))
        except ValueError:  # ada: no valid URL
            continue
        if url is not None:
            seen[url] = None
    return list(seen)


def host_yarl(host: str) -> str | None:
    try:
        return yarl.URL.build(scheme="http", host=host).raw_host
    except (ValueError, UnicodeError):
        return None


def host_ada(host: str) -> str | None:
    try:
        return ada_url.idna.encode(host).decode("ascii") or None
    except UnicodeEncodeError:  # a lone surrogate: a few cases have one
        return None


def best_of(runs: int, ways: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Seconds of the fastest pass of each way; the ways take turns pass by pass."""
    best = dict.fromkeys(ways, float("inf"))
    for _ in range(runs):
        for name, way in ways.items():
            started = time.perf_counter()
            way()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def bench_links(pages: list[Page], runs: int) -> None:
    count = sum(len(hrefs) for _, hrefs in pages)
    ways = {"ours": links_ours, "ada": links_ada}
    seconds = best_of(
        runs, {name: lambda way=way: [way(b, h) for b, h in pages] for name, way in ways.items()}
    )
    differ = sum(links_ours(b, h) != links_ada(b, h) for b, h in pages)
    print(f"links: {len(pages):,} pages, {count:,} links, best of {runs}")
    for name, total in seconds.items():
        per_link_ns, per_page_us = total / count * 1e9, total / len(pages) * 1e6
        print(f"  {name:<5} {per_link_ns:7.0f} ns/link  {per_page_us:7.1f} µs/page")
    print(f"  pages whose link lists differ: {differ}")


def bench_hosts(runs: int) -> None:
    cases = [c for c in json.loads(IDNA_TESTS.read_text("utf-8")) if isinstance(c, dict)]
    cases = [c for c in cases if c["input"]]
    hosts = [c["input"] for c in cases]

    def yarl_pass() -> None:
        yarl.cache_clear()
        for host in hosts:
            host_yarl(host)

    def ada_pass() -> None:
        for host in hosts:
            host_ada(host)

    seconds = best_of(runs, {"yarl (before)": yarl_pass, "ada (now)": ada_pass})
    print(f"hosts: {len(hosts):,} IdnaTestV2 inputs, best of {runs}")
    for name, total in seconds.items():
        print(f"  {name:<14} {total / len(hosts) * 1e9:7.0f} ns/host")
    wrong = sum(
        canonicalize(f"https://{c['input']}/x")
        != (None if c["output"] is None else f"https://{c['output']}/x")
        for c in cases
    )
    print(f"  IdnaTestV2 cases canonicalize() gets wrong: {wrong} of {len(cases):,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--port", type=int, default=18765, help="the port the site's links name")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "out", help="where the site goes")
    args = parser.parse_args()
    pages = read_pages(args.out / f"site-{args.pages}-{args.port}", args.pages, args.port)
    bench_links(pages, args.runs)
    bench_hosts(args.runs)


if __name__ == "__main__":
    main()
