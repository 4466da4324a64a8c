"""Instructions a page of a crawl, under valgrind's callgrind: a figure the machine's load
does not move, for changes of a few percent that wall-clock runs on a shared machine
cannot tell apart.

    python benchmarks/instructions_bench.py [--pages 2000] [--baseline REV] [--option=--text ...]

For this tree and, with --baseline, the crawler at REV (a worktree, as crawl_bench.py
makes one): a crawl of the generated site, and a crawl of its first page alone (the
startup, subtracted), each under callgrind. Prints millions of instructions a page,
and how many of them are libcrypto's: valgrind does not emulate SHA-NI, so SHA-1
counts about ten times its real cost there (time it apart, with timeit). Slow: about
50 times a normal crawl. A few thousand pages weigh the first pages of a crawl, which
find most of the new links, more than a whole crawl does. Needs valgrind
(`apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crawl_bench import OUT_DIR, baseline_contender, ours_command, read_jsonl, site

_FUNCTION_LINE = re.compile(r"\s*([\d,]+) \(.*?\)\s+.*\[(?P<object>.*)\]$")


def instructions(prefix: list[str], command: list[str], out_file: Path) -> tuple[int, int]:
    """All instructions of `command` under callgrind, run by `prefix` (which valgrind does
    not follow into), and those in libcrypto."""
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}"]
    run = subprocess.run(
        [*prefix, *valgrind, *command],
        capture_output=True,
        text=True,
        check=True,
    )
    total = int(re.search(r"Collected : (\d+)", run.stderr).group(1))
    annotated = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(out_file)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    crypto = 0
    for line in annotated.splitlines():
        match = _FUNCTION_LINE.match(line)
        if match and "libcrypto" in match["object"]:
            crypto += int(match.group(1).replace(",", ""))
    return total, crypto


def per_page(
    label: str,
    prefix: list[str],
    command: Callable[[Path, list[str]], list[str]],
    work: Path,
    options: list[str],
) -> None:
    output = work / "pages.jsonl"
    whole, whole_crypto = instructions(prefix, command(output, options), work / "crawl.cg")
    pages = len(read_jsonl(output))
    start, start_crypto = instructions(
        prefix, command(output, [*options, "--max-pages", "1"]), work / "start.cg"
    )
    crawl = (whole - start) / (pages - 1)
    crypto = (whole_crypto - start_crypto) / (pages - 1)
    print(
        f"{label}: {crawl / 1e6:.3f} M instructions a page ({crypto / 1e6:.3f} M in libcrypto), "
        f"startup {start / 1e6:,.0f} M, {pages:,} pages",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--port", type=int, default=18766)
    parser.add_argument("--baseline", metavar="REV", help="also count the crawler at REV")
    parser.add_argument(
        "--option", action="append", default=[], help="a crawler option for both (repeatable)"
    )
    args = parser.parse_args()
    the_site = site.ensure(OUT_DIR / f"site-{args.pages}-{args.port}", args.pages, args.port)
    work = Path(tempfile.mkdtemp(prefix="instructions-"))
    seeds = work / "seeds.txt"
    seeds.write_text(the_site.index_url + "\n", encoding="utf-8")

    def ours(output: Path, options: list[str]) -> list[str]:
        return [*ours_command(seeds, output, 64, 64, 50), *options]

    with site.serve(the_site.directory.resolve(), args.port):
        per_page("ours", [], ours, work, args.option)
        if args.baseline:  # run from its worktree: `env -C TREE PYTHONPATH=TREE`
            tree_prefix = baseline_contender(args.baseline, OUT_DIR, lambda _: [], print).command
            per_page(f"ours @{args.baseline}", tree_prefix(work), ours, work, args.option)


if __name__ == "__main__":
    main()
