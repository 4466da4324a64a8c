"""What each default costs a page, on its own: instructions with it on and with it off.

    python benchmarks/defaults_cost.py [--pages 500] [--sites generated,docs] [--only NAME ...]

For each site (the generated one, and Debian's Python 3.11 docs: benchmarks/docs_site.py),
a crawl under valgrind's callgrind with every default on, then one with each default
turned off in turn (or an option turned on), each less a crawl of its first page alone
(the startup, with the same imports). Prints millions of instructions a page and the
difference from the plain crawl, the figure the machine's load does not move.

The defaults a user cannot turn off are turned off here by the crawler's own
runner (this file, run as `defaults_cost.py --crawl OFF -- ARGS`), which replaces one
function before calling the CLI:

- `sha1`: no payload digest (`content_digest` is then null). valgrind does not emulate
  SHA-NI, so libcrypto's instructions are shown apart, and the digest's real cost is
  timed natively, per page of the site, with the rest of the script's figures;
- `description+canonical`: parse.py's one CSS query without `link[rel][href]` and with
  only `meta[name=robots]`, so that neither field is found (nofollow still is).

`Page` objects cannot be turned off: their cost (a `Page` made as the engine makes
one, then its record) is timed natively against a dict of the same fields.

Needs valgrind (`apt-get install valgrind`). About 50 times a normal crawl: some
minutes for the whole table.
"""

from __future__ import annotations

import argparse
import glob
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# What each variant adds to the plain crawl's command, and what the runner turns off.
VARIANTS: dict[str, tuple[list[str], str | None]] = {
    "all defaults": ([], None),
    "no cookie jar (--no-cookies)": (["--no-cookies"], None),
    "no address guard (--allow-private-addresses)": (["--allow-private-addresses"], None),
    "no SHA-1 payload digest": ([], "sha1"),
    "no description and canonical": ([], "description+canonical"),
    "--text": (["--text"], None),
    "--warc DIR": (["--warc", "{dir}"], None),
    "--warc DIR --text": (["--warc", "{dir}", "--text"], None),
}
_WITHOUT_HEAD_FIELDS = "title, base[href], meta[name=robots][content], a[href], area[href]"


def crawl_without(off: str, argv: list[str]) -> int:
    """Run the CLI with `off` turned off (see the module's docstring)."""
    import crawler.fetch
    import crawler.parse
    from crawler.__main__ import main

    if off == "sha1":
        crawler.fetch.payload_digest = lambda payload: None  # type: ignore[assignment,return-value]
    elif off == "description+canonical":
        crawler.parse._WANTED = _WITHOUT_HEAD_FIELDS
    elif off != "none":
        raise SystemExit(f"nothing called {off!r} to turn off")
    return main(argv)


def native_figures(site_dir: Path) -> dict[str, float]:
    """Microseconds a page, timed natively (best of 5): SHA-1 of the site's pages,
    and a Page made and recorded against a dict of the same fields."""
    from crawler.fetch import payload_digest
    from crawler.page import Page

    bodies = [
        Path(f).read_bytes() for f in sorted(glob.glob(f"{site_dir}/**/*.html", recursive=True))
    ]
    bodies = bodies[:1000]

    def digests() -> None:
        for body in bodies:
            payload_digest(body)

    url, referrer = "http://127.0.0.1:8080/a/b.html", "http://127.0.0.1:8080/a/"
    links = [f"http://127.0.0.1:8080/a/{n}.html" for n in range(30)]

    def page() -> None:
        Page(
            url, 2, referrer, final_url=url, status=200, elapsed_ms=1.5,
            content_type="text/html", bytes=10000, content_digest="sha1:X", error=None,
            truncated=False, response=None,
        ).record()  # fmt: skip

    def plain_dict() -> None:
        {  # noqa: B018
            "url": url, "final_url": url, "status": 200, "depth": 2, "referrer": referrer,
            "fetched_at": "2026-11-24T00:00:00.000+00:00", "elapsed_ms": 1.5,
            "content_type": "text/html", "bytes": 10000, "content_digest": "sha1:X",
            "title": None, "description": None, "canonical": None, "links": links,
            "error": None, "truncated": False, "kind": "page",
        }  # fmt: skip

    def best_us(function: Callable[[], None], per: int) -> float:
        return 1e6 * min(timeit.repeat(function, number=1, repeat=5)) / per

    rounds = 10_000
    return {
        "sha1": best_us(digests, len(bodies)),
        "page": best_us(lambda: [page() for _ in range(rounds)], rounds),
        "dict": best_us(lambda: [plain_dict() for _ in range(rounds)], rounds),
        "mean_bytes": sum(map(len, bodies)) / len(bodies),
    }


def measure_site(name: str, the_site: object, work: Path, only: list[str]) -> None:
    from crawl_bench import ours_command, read_jsonl
    from instructions_bench import instructions

    seeds = work / "seeds.txt"
    seeds.write_text(the_site.index_url + "\n", encoding="utf-8")  # type: ignore[attr-defined]
    runner = [sys.executable, __file__, "--crawl"]
    plain: float | None = None
    print(f"\n{name}: M instructions a page (libcrypto's apart), difference from all defaults")
    for label, (options, off) in VARIANTS.items():
        if only and label != "all defaults" and not any(o in label for o in only):
            continue
        directory = work / f"warc-{time.monotonic_ns()}"
        options = [o.replace("{dir}", str(directory)) for o in options]
        output = work / "pages.jsonl"
        crawl = ours_command(seeds, output, 64, 64, 50)[3:]  # after `python -m crawler`
        command = [*runner, off or "none", "--", *crawl, *options]
        whole, whole_crypto = instructions([], command, work / "crawl.cg")
        pages = len(read_jsonl(output))
        start, start_crypto = instructions([], [*command, "--max-pages", "1"], work / "start.cg")
        per_page = (whole - start) / (pages - 1) / 1e6
        crypto = (whole_crypto - start_crypto) / (pages - 1) / 1e6
        own = per_page - crypto
        if plain is None:
            plain = own
        print(
            f"  {label:48} {own:7.3f} M (+{crypto:.3f} M libcrypto)  "
            f"{own - plain:+7.3f} M ({(own - plain) / plain:+6.1%}), {pages:,} pages",
            flush=True,
        )


def main() -> int:
    if "--crawl" in sys.argv:  # the runner: defaults_cost.py --crawl OFF -- ARGS
        at = sys.argv.index("--crawl")
        return crawl_without(sys.argv[at + 1], sys.argv[at + 3 :])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=500, help="pages of the generated site")
    parser.add_argument("--sites", default="generated,docs", help="generated, docs or both")
    parser.add_argument("--port", type=int, default=18768)
    parser.add_argument(
        "--only", action="append", default=[], help="only the variants naming this (repeatable)"
    )
    args = parser.parse_args()
    from crawl_bench import BENCH_DIR, OUT_DIR, compile_bytecode, docs_site, site

    compile_bytecode(BENCH_DIR.parent)
    work = Path(tempfile.mkdtemp(prefix="defaults-cost-"))
    for name in args.sites.split(","):
        if name == "docs":
            the_site = docs_site(OUT_DIR / f"docs-{args.port}", args.port)
        else:
            directory = OUT_DIR / f"site-{args.pages}-{args.port}"
            the_site = site.ensure(directory, args.pages, args.port)
        native = native_figures(the_site.directory)
        print(
            f"\n{name} ({len(the_site.urls):,} pages, {native['mean_bytes'] / 1000:.0f} KB "
            f"a page on average), natively: SHA-1 payload digest {native['sha1']:.1f} us a "
            f"page; a Page made and recorded {native['page']:.2f} us, a dict of its fields "
            f"{native['dict']:.2f} us"
        )
        with site.serve(the_site.directory.resolve(), args.port):
            measure_site(name, the_site, work, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
