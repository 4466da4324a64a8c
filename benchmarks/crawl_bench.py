"""Crawl a generated site with our crawler, Crawlee, Scrapy and wget, and print one table.

The site (benchmarks/site.py, or with --docs Debian's Python 3.11 documentation,
benchmarks/docs_site.py) is served by nginx on 127.0.0.1, pinned to CPU 0;
everything timed runs pinned to CPU 1. Each round runs, one after the other:
our crawler, Crawlee for Python, Scrapy, `wget --recursive` (if installed), and the two ceilings of
benchmarks/fetch_ceiling.py (a bare aiohttp fetch loop over the manifest, and
the same loop with link extraction). Every figure is the timed process's own:
wall time from start to exit (interpreter start included), and user+sys CPU and
peak RSS from the os.wait4() of a small launcher process that starts it.

    python benchmarks/crawl_bench.py [--pages 20000] [--runs 3] [--concurrency 64]
        [--variant 'warc=--warc {dir} --text'] [--baseline main] [--api]
        [--no-crawlee] [--no-scrapy] [--no-wget] [--no-ceilings] [--latency-ms MS] [--docs]

`--latency-ms MS` makes every response wait MS first, as a real network does
(aiohttp's static handler serves then: nginx has no such setting).

`--variant LABEL=ARGS` also times ours with those options (`{dir}` becomes a
fresh directory per run); `--baseline REV` also times the crawler as it is at git
revision REV (checked out under OUT/), in the same rounds; `--api` also times a
crawl through the Python API with an on_page hook that returns one field.

Crawlee and Scrapy run with this Python if it has them (`pip install -e '.[bench]'`);
otherwise each is installed into a venv of its own (benchmarks/out/NAME-venv) on first use.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import importlib.util
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
CRAWLER_CPU, SERVER_CPU = 1, 0
BUSY_FRACTION = 0.1  # of the CPUs before we start, or of one CPU during a run: not quiet


def _load_site_module() -> ModuleType:
    # Imported by path: under its own name, `import site` gives the stdlib module,
    # which Python imports at startup.
    spec = importlib.util.spec_from_file_location("bench_site", BENCH_DIR / "site.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


site = _load_site_module()


@dataclass
class Run:
    """One timed process, and how what it output compares with the manifest."""

    started_at: float  # time.time() at start, to place the output's timestamps
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    exit_code: int
    pages: int = 0  # records output (crawlers) or pages fetched (ceilings)
    missing: int = 0  # manifest pages never output
    duplicates: int = 0  # records beyond the first for one URL
    extra: int = 0  # output URLs that are not manifest pages
    failed: int = 0  # records whose status is not 200, or that carry an error
    first_record_s: float | None = None  # from process start to the first record
    others_cpu_s: float = 0.0  # CPU used meanwhile by anything but this and the server

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s

    @property
    def others_share(self) -> float:
        """Of one CPU, the share other processes took during the run."""
        return self.others_cpu_s / self.wall_s

    @property
    def cpu_s_per_1000(self) -> float:
        return 1000 * self.cpu_s / self.pages if self.pages else float("nan")


# How to fill in a Run's counts from the files the run left: (files' stem, run) -> None.
Check = Callable[[Path, Run], None]


@dataclass
class Contender:
    name: str
    slug: str  # file names of its runs
    command: Callable[[Path], list[str]]  # argv that crawls, writing to the given output
    check: Check
    runs: list[Run] = field(default_factory=list)


# Runs argv[2:] and writes its wall time and os.wait4() figures to argv[1] as JSON. The
# timed process must be a grandchild: a process's ru_maxrss starts at its parent's peak
# RSS (Linux carries it across fork and exec), and this script's peak, after generating a
# site and reading outputs, is larger than a crawler's. The launcher's own is about 9 MiB.
_LAUNCHER = """
import json, os, sys, time
started_at, started = time.time(), time.monotonic()
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
figures = {
    "started_at": started_at,
    "wall_s": time.monotonic() - started,
    "cpu_s": usage.ru_utime + usage.ru_stime,
    "peak_rss_mib": usage.ru_maxrss / 1024,
    "exit_code": os.waitstatus_to_exitcode(status),
}
with open(sys.argv[1], "w") as out:
    json.dump(figures, out)
"""


def measure(command: list[str], stem: Path) -> Run:
    """Run `command` to its end, stdout to stem.out and stderr to stem.log."""
    figures = stem.with_suffix(".rusage.json")
    launcher = [sys.executable, "-S", "-c", _LAUNCHER, str(figures), *command]
    with open(stem.with_suffix(".log"), "wb") as err, open(stem.with_suffix(".out"), "wb") as out:
        subprocess.run(launcher, stdout=out, stderr=err, check=True)
    return Run(**json.loads(figures.read_text(encoding="utf-8")))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _timestamp(value: str | float) -> float:
    """Ours writes ISO 8601 times, the Scrapy spider seconds since the epoch."""
    return datetime.fromisoformat(value).timestamp() if isinstance(value, str) else value


def docs_site(directory: Path, port: int) -> Any:
    """Debian's Python 3.11 documentation copied to `directory`, as a site to crawl."""
    spec = importlib.util.spec_from_file_location("bench_docs", BENCH_DIR / "docs_site.py")
    assert spec is not None and spec.loader is not None
    docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs)
    manifest = docs.ensure(directory, port)
    gone = frozenset(manifest["missing_files"])
    return site.Site(directory, port, manifest["urls"], manifest["generator"], gone)


def _compare_urls(manifest: set[str], urls: list[str], run: Run) -> None:
    """Against the manifest, the URLs a crawler output or tried: missing, repeated, extra."""
    counts = Counter(urls)
    run.missing = len(manifest - counts.keys())
    run.duplicates = sum(n - 1 for n in counts.values())
    run.extra = len(counts.keys() - manifest)


def check_crawl(
    manifest: set[str], stem: Path, run: Run, gone: frozenset[str] = frozenset()
) -> None:
    """Every manifest page must be in stem.jsonl exactly once, and nothing else. The
    URLs in `gone` name no file: a 404 record for them is no failure, and no record
    is no miss (Scrapy and Crawlee output none for an error status)."""
    records = read_jsonl(stem.with_suffix(".jsonl"))
    run.pages = len(records)
    _compare_urls(manifest, [record["url"] for record in records], run)
    run.missing -= len(gone - {record["url"] for record in records})
    run.failed = sum(
        1
        for r in records
        if (r.get("status") != 200 or r.get("error"))
        and not (r["url"] in gone and r.get("status") == 404)
    )
    if records:
        first = min(_timestamp(r["fetched_at"]) for r in records)
        run.first_record_s = first - run.started_at


_WGET_FETCHED = re.compile(r" URL:(\S+) \[")
_WGET_FAILED = re.compile(r"^(\S+):\n\S+ \S+ ERROR \d+", re.MULTILINE)


def check_wget(manifest: set[str], stem: Path, run: Run) -> None:
    """wget -nv logs a line for each URL it saved, and the URL and an ERROR line for
    each it could not."""
    log = stem.with_suffix(".log").read_text(encoding="utf-8", errors="replace")
    fetched, failed = _WGET_FETCHED.findall(log), _WGET_FAILED.findall(log)
    run.pages = len(fetched)
    _compare_urls(manifest, fetched + failed, run)
    run.failed = len(failed)


def wget_command(seed: str, output: Path, max_depth: int) -> list[str]:
    """wget's recursive crawl: one request at a time, each page saved, parsed for links
    and deleted; robots.txt ignored and stylesheets not fetched, as ours does."""
    directory = output.with_suffix(".wget")
    shutil.rmtree(directory, ignore_errors=True)
    command = ["wget", "--recursive", "--level", str(max_depth), "-e", "robots=off"]
    command += ["--reject", "css", "--no-verbose", "--delete-after"]
    return [*command, "--directory-prefix", str(directory), seed]


def check_ceiling(pages: int, gone: int, stem: Path, run: Run) -> None:
    """fetch_ceiling.py prints its counts as one JSON object; `gone` URLs name no file."""
    text = stem.with_suffix(".out").read_text(encoding="utf-8").strip()
    counts = json.loads(text) if text else {"pages": 0, "ok": 0}
    run.pages = counts["pages"]
    run.missing = pages - counts["pages"]
    run.failed = counts["pages"] - counts["ok"] - gone


def ours_command(
    seeds: Path, output: Path, concurrency: int, per_host: int, max_depth: int, quiet: bool = True
) -> list[str]:
    command = [sys.executable, "-m", "crawler", str(seeds), "-o", str(output)]
    command += ["--concurrency", str(concurrency), "--per-host", str(per_host)]
    command += ["--ignore-robots", "--max-depth", str(max_depth)]
    return [*command, "--quiet"] if quiet else command


# The peers: (slug, name, requirement, the script that crawls with it).
PEERS = (
    ("crawlee", "Crawlee", "crawlee[parsel]", "crawlee_crawler.py"),
    ("scrapy", "Scrapy", "scrapy>=2.13", "scrapy_spider.py"),
)


def peer_command(
    python: Path, script: str, seed: str, output: Path, concurrency: int, max_depth: int
) -> list[str]:
    command = [str(python), str(BENCH_DIR / script), seed, str(output)]
    return [*command, "--concurrency", str(concurrency), "--max-depth", str(max_depth)]


def contender_python(module: str, requirement: str, venv: Path | None) -> Path:
    """A Python that can import `module`: this one if it can (the `bench` extra), else
    `venv`'s, creating the venv and installing `requirement` into it first if needed."""
    if venv is None and importlib.util.find_spec(module) is not None:
        return Path(sys.executable)
    venv = venv or OUT_DIR / f"{module}-venv"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    log = venv.with_name(venv.name + "-install.log")
    print(f"installing {requirement} into {venv} (log: {log}) ...", flush=True)
    started = time.monotonic()
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, stdout=out)
        subprocess.run(
            [str(python), "-m", "pip", "install", requirement],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    print(f"installed {requirement} in {time.monotonic() - started:.0f} s", flush=True)
    return python


def package_version(python: Path | str, package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return result.stdout.strip() or "?"


def git_revision() -> str:
    result = subprocess.run(
        ["git", "-C", str(BENCH_DIR), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or "?"


def crawler_digest() -> str:
    """A hash of the crawler's sources, to notice edits made while the benchmark runs."""
    digest = hashlib.sha256()
    for path in sorted((BENCH_DIR.parent / "crawler").rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def pinning() -> tuple[int | None, int | None]:
    """(crawler CPU, server CPU), or Nones where the machine cannot give each its own."""
    cpus = os.sched_getaffinity(0)
    if shutil.which("taskset") and {CRAWLER_CPU, SERVER_CPU} <= cpus:
        return CRAWLER_CPU, SERVER_CPU
    return None, None


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU time of all CPUs since boot, in clock ticks."""
    with open("/proc/stat", encoding="ascii") as stat:
        ticks = [int(n) for n in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def process_tree_ticks(root: int) -> int:
    """CPU time of process `root` and its children (nginx's master and worker), in ticks."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:  # it ended while we looked
            continue
        if int(entry.name) == root or int(fields[1]) == root:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def busy_fraction(interval_s: float = 1.0) -> float:
    """How busy all CPUs are over `interval_s`, from 0 to 1; the load average lags minutes."""
    busy_before, total_before = machine_ticks()
    time.sleep(interval_s)
    busy_after, total_after = machine_ticks()
    return (busy_after - busy_before) / max(1, total_after - total_before)


def measure_beside(server_pid: int, command: list[str], stem: Path) -> Run:
    """measure(), and how much CPU the rest of the machine took meanwhile."""
    busy_before, server_before = machine_ticks()[0], process_tree_ticks(server_pid)
    run = measure(command, stem)
    busy_after, server_after = machine_ticks()[0], process_tree_ticks(server_pid)
    others = (busy_after - busy_before) - (server_after - server_before)
    run.others_cpu_s = max(0.0, others / os.sysconf("SC_CLK_TCK") - run.cpu_s)
    return run


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def describe(run: Run) -> str:
    return (
        f"{run.pages:,} pages in {run.wall_s:.1f} s ({run.pages_per_s:,.0f} pages/s), "
        f"CPU {run.cpu_s:.1f} s, peak RSS {run.peak_rss_mib:.0f} MiB, "
        f"missing {run.missing} dup {run.duplicates} extra {run.extra} failed {run.failed}, "
        f"others' CPU {run.others_share:.0%}" + (f", exit {run.exit_code}" if run.exit_code else "")
    )


def summarize(contender: Contender) -> dict[str, Any]:
    runs = contender.runs
    rates = [run.pages_per_s for run in runs]
    firsts = [run.first_record_s for run in runs if run.first_record_s is not None]
    return {
        "pages_per_s": statistics.median(rates),
        "pages_per_s_min": min(rates),
        "pages_per_s_max": max(rates),
        "cpu_s_per_1000": statistics.median(run.cpu_s_per_1000 for run in runs),
        "peak_rss_mib": max(run.peak_rss_mib for run in runs),
        "first_record_s": statistics.median(firsts) if firsts else None,
        "pages": statistics.median(run.pages for run in runs),
        "missing": max(run.missing for run in runs),
        "duplicates": max(run.duplicates for run in runs),
        "extra": max(run.extra for run in runs),
        "failed": max(run.failed for run in runs),
        "exit_codes": sorted({run.exit_code for run in runs}),
        "others_share": max(run.others_share for run in runs),
    }


def table(contenders: list[Contender]) -> str:
    header = (
        f"{'':30} {'pages/s median (min-max)':>26} {'CPU s/1000':>10} {'peak RSS':>9} "
        f"{'1st page':>8} {'pages':>7}  {'missing/dup/extra/failed':>24}  complete  others"
    )
    lines = [header, "-" * len(header)]
    for contender in contenders:
        s = summarize(contender)
        rate = f"{s['pages_per_s']:,.0f} ({s['pages_per_s_min']:,.0f}-{s['pages_per_s_max']:,.0f})"
        first = f"{s['first_record_s']:.2f} s" if s["first_record_s"] is not None else "-"
        counts = f"{s['missing']}/{s['duplicates']}/{s['extra']}/{s['failed']}"
        complete = s["missing"] == s["duplicates"] == s["extra"] == s["failed"] == 0
        complete = complete and s["exit_codes"] == [0]
        lines.append(
            f"{contender.name:30} {rate:>26} {s['cpu_s_per_1000']:>10.2f} "
            f"{s['peak_rss_mib']:>5.0f} MiB {first:>8} {s['pages']:>7,.0f}  {counts:>24}  "
            f"{'yes' if complete else 'NO':8}  {s['others_share']:>6.0%}"
        )
    return "\n".join(lines)


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median of `values`: the order statistics
    k and n+1-k whose binomial odds of straddling it reach `confidence`; None if
    too few values reach it at all."""
    ordered, n = sorted(values), len(values)
    below = 0.0  # P(fewer than k of n fall below the median), for k = 1, 2, ...
    k = 0
    while k < n // 2:
        below += math.comb(n, k) / 2**n
        if 1 - 2 * below < confidence:
            break
        k += 1
    return (ordered[k - 1], ordered[n - k]) if k else None


def paired_line(other: Contender, ours: Contender) -> str:
    """`other`'s pages/s over ours round by round: both ran minutes apart in each
    round, so the ratio cancels the machine's drift that the columns' medians keep."""
    ratios = [a.pages_per_s / b.pages_per_s for a, b in zip(other.runs, ours.runs, strict=True)]
    interval = median_interval(ratios)
    spread = (
        f"95% interval of the median {interval[0]:.3f}-{interval[1]:.3f}"
        if interval
        else f"range {min(ratios):.3f}-{max(ratios):.3f} (too few rounds for an interval)"
    )
    return f"round by round {statistics.median(ratios):.3f}x pages/s, {spread}"


def ratio_line(ours: Contender, other: Contender) -> str:
    a, b = summarize(ours), summarize(other)
    return (
        f"ours / {other.name.split()[0]}: {a['pages_per_s'] / b['pages_per_s']:.2f}x pages/s, "
        f"{a['cpu_s_per_1000'] / b['cpu_s_per_1000']:.2f}x CPU per page, "
        f"{a['peak_rss_mib'] / b['peak_rss_mib']:.2f}x peak RSS"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000, help="pages in the site")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each contender")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight")
    parser.add_argument("--max-depth", type=int, default=50, help="depth limit of both crawlers")
    parser.add_argument("--port", type=int, default=18765, help="port to serve the site on")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where sites and runs go")
    parser.add_argument(
        "--docs",
        action="store_true",
        help="crawl Debian's Python 3.11 documentation (python3.11-doc), not a generated site",
    )
    parser.add_argument(
        "--scrapy-venv", type=Path, help="Scrapy's venv (default: this Python if it has Scrapy)"
    )
    parser.add_argument(
        "--crawlee-venv", type=Path, help="Crawlee's venv (default: this Python if it has it)"
    )
    parser.add_argument("--no-scrapy", action="store_true", help="leave Scrapy out")
    parser.add_argument("--no-crawlee", action="store_true", help="leave Crawlee out")
    parser.add_argument("--no-wget", action="store_true", help="leave wget out")
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0,
        help="each response waits this long, as over a network (served by aiohttp, not nginx)",
    )
    parser.add_argument("--no-ceilings", action="store_true", help="leave the ceilings out")
    parser.add_argument(
        "--crawlers-anywhere",
        action="store_true",
        help="pin only the server: each crawler may use every CPU, as on a user's machine "
        "(a crawler's threads, ours deflating --warc records, then run beside it)",
    )
    parser.add_argument(
        "--with-state", action="store_true", help="also time ours with --state (a fresh DIR)"
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=ARGS",
        help="also time ours with these options; {dir} is a fresh directory (repeatable)",
    )
    parser.add_argument("--baseline", metavar="REV", help="also time ours at git revision REV")
    parser.add_argument(
        "--api", action="store_true", help="also time a crawl through the API with on_page"
    )
    return parser.parse_args()


def variant_contender(spec: str, ours: Callable[[Path], list[str]], check: Check) -> Contender:
    label, _, options = spec.partition("=")
    if not label or not options:
        raise SystemExit(f"--variant wants LABEL=ARGS, got {spec!r}")

    def command(output: Path) -> list[str]:
        directory = output.with_suffix(f".{label}")
        shutil.rmtree(directory, ignore_errors=True)
        return [*ours(output), *options.replace("{dir}", str(directory)).split()]

    return Contender(f"ours {options}", f"ours-{label}", command, check)


def compile_bytecode(tree: Path) -> None:
    """Compile the crawler package in `tree` to bytecode, as `pip install` does.

    Run from a checkout (an editable install), with PYTHONDONTWRITEBYTECODE set as it
    may be in a development shell, every run compiled the package from source: 60-80 ms
    of a run that the peers, installed with their bytecode, never pay."""
    compileall.compile_dir(tree / "crawler", quiet=1)


def baseline_contender(
    revision: str, out: Path, ours: Callable[[Path], list[str]], check: Check
) -> Contender:
    """Ours as it is at `revision`: a detached worktree, run from inside it.

    `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH:
    run from the repository, it would import today's crawler whatever PYTHONPATH says.
    """
    commit = subprocess.run(
        ["git", "rev-parse", "--short", revision], capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = out / f"baseline-{commit}"
    if not tree.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), commit],
            check=True,
            capture_output=True,
        )
    compile_bytecode(tree)

    def command(output: Path) -> list[str]:
        return ["env", "-C", str(tree), f"PYTHONPATH={tree}", *ours(output)]

    return Contender(f"ours @{revision} ({commit})", "baseline", command, check)


def api_command(seeds: Path, output: Path, concurrency: int, max_depth: int) -> list[str]:
    command = [sys.executable, str(BENCH_DIR / "api_crawl.py"), str(seeds), str(output)]
    return [*command, "--concurrency", str(concurrency), "--max-depth", str(max_depth)]


def build_contenders(
    args: argparse.Namespace, the_site: Any, seeds: Path
) -> tuple[list[Contender], str]:
    """What to time, in the order of a round, and their versions for the report."""
    check = partial(check_crawl, set(the_site.urls), gone=the_site.gone)
    contenders = [
        Contender(
            "ours",
            "ours",
            lambda output: ours_command(
                seeds, output, args.concurrency, args.concurrency, args.max_depth
            ),
            check,
        )
    ]
    if args.with_state:
        contenders.append(
            Contender(
                "ours --state",
                "ours-state",
                lambda output: [*ours(output), "--state", str(output.with_suffix(".state"))],
                check,
            )
        )
    ours = contenders[0].command
    for spec in args.variant:
        contenders.append(variant_contender(spec, ours, check))
    if args.baseline:
        contenders.append(baseline_contender(args.baseline, args.out, ours, check))
    if args.api:
        contenders.append(
            Contender(
                "ours via the API, on_page",
                "api",
                lambda output: api_command(seeds, output, args.concurrency, args.max_depth),
                check,
            )
        )
    versions = f"crawler {git_revision()}, aiohttp {package_version(sys.executable, 'aiohttp')}"
    for slug, name, requirement, script in PEERS:
        if getattr(args, f"no_{slug}"):
            continue
        python = contender_python(slug, requirement, getattr(args, f"{slug}_venv"))
        version = package_version(python, slug)
        versions += f"; {name} {version}"
        if slug == "scrapy":
            versions += f", Twisted {package_version(python, 'twisted')}"
        contenders.append(
            Contender(
                f"{name} {version}",
                slug,
                partial(
                    peer_command,
                    python,
                    script,
                    the_site.index_url,
                    concurrency=args.concurrency,
                    max_depth=args.max_depth,
                ),
                check,
            )
        )
    if not args.no_wget and not shutil.which("wget"):
        print("wget is not installed (apt-get install -y wget): left out")
    elif not args.no_wget:
        wget_version = subprocess.run(
            ["wget", "--version"], capture_output=True, text=True, check=False
        ).stdout.split()[2]
        versions += f"; wget {wget_version}"
        contenders.append(
            Contender(
                f"wget {wget_version}",
                "wget",
                lambda output: wget_command(the_site.index_url, output, args.max_depth),
                partial(check_wget, set(the_site.urls)),
            )
        )
    if not args.no_ceilings:
        ceiling = ceiling_command(the_site, args.concurrency)
        at_ceiling = partial(check_ceiling, len(the_site.urls), len(the_site.gone))
        contenders.append(
            Contender("ceiling: aiohttp fetch", "fetch", lambda _: ceiling, at_ceiling)
        )
        contenders.append(
            Contender(
                "ceiling: + selectolax + yarl",
                "fetch-parse",
                lambda _: [*ceiling, "--parse"],
                at_ceiling,
            )
        )
    return contenders, versions


def ceiling_command(the_site: Any, concurrency: int) -> list[str]:
    manifest = the_site.directory / site.MANIFEST
    command = [sys.executable, str(BENCH_DIR / "fetch_ceiling.py"), str(manifest)]
    return [*command, "--concurrency", str(concurrency)]


def run_rounds(
    contenders: list[Contender],
    rounds: int,
    server: Any,
    warm_up: list[str],
    runs_dir: Path,
    cpu: int | None,
) -> None:
    """Time every contender once per round, in turn, each pinned to `cpu`."""
    runs_dir.mkdir(exist_ok=True)
    # One untimed pass so that no contender pays for nginx's cold caches.
    measure(site.pinned(warm_up, cpu), runs_dir / "warm-up")
    for round_number in range(1, rounds + 1):
        for contender in contenders:
            stem = runs_dir / f"{contender.slug}-{round_number}"
            output = stem.with_suffix(".jsonl")
            output.unlink(missing_ok=True)  # a run that writes nothing must not pass
            shutil.rmtree(output.with_suffix(".state"), ignore_errors=True)
            command = site.pinned(contender.command(output), cpu)
            run = measure_beside(server.pid, command, stem)
            contender.check(stem, run)
            contender.runs.append(run)
            print(f"run {round_number}/{rounds} {contender.name}: {describe(run)}", flush=True)


def main() -> int:
    args = parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    crawler_cpu, server_cpu = pinning()
    if args.crawlers_anywhere:
        crawler_cpu = None
    busy, digest = busy_fraction(), crawler_digest()
    if busy > BUSY_FRACTION:
        print(
            f"warning: the CPUs were {busy:.0%} busy before starting: something else runs; "
            "wall-clock figures will suffer more than CPU figures"
        )

    started = time.monotonic()
    if args.docs:
        the_site = docs_site(args.out / f"docs-{args.port}", args.port)
    else:
        the_site = site.ensure(args.out / f"site-{args.pages}-{args.port}", args.pages, args.port)
    site_mib = sum(f.stat().st_size for f in the_site.directory.rglob("*.html")) / 2**20
    print(
        f"site: {len(the_site.urls):,} pages, {site_mib:.0f} MiB, ready in "
        f"{time.monotonic() - started:.1f} s at {the_site.directory}",
        flush=True,
    )
    seeds = args.out / "seeds.txt"
    seeds.write_text(the_site.index_url + "\n", encoding="utf-8")
    compile_bytecode(BENCH_DIR.parent)
    contenders, versions = build_contenders(args, the_site, seeds)
    runs_dir = args.out / "runs"
    with site.serve(the_site.directory, args.port, server_cpu, args.latency_ms) as server:
        warm_up = ceiling_command(the_site, args.concurrency)
        run_rounds(contenders, args.runs, server, warm_up, runs_dir, crawler_cpu)

    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    if crawler_cpu is not None:
        pinned_to = f"server pinned to CPU {server_cpu}, crawlers to CPU {crawler_cpu}"
    elif args.crawlers_anywhere and server_cpu is not None:
        pinned_to = f"server pinned to CPU {server_cpu}, crawlers on any CPU"
    else:
        pinned_to = "NOT pinned (taskset missing or fewer than 2 CPUs)"
    print()
    print(
        f"crawl benchmark, {date}: {len(the_site.urls):,} pages ({site_mib:.0f} MiB), "
        f"{args.runs} runs each, concurrency {args.concurrency}, max depth {args.max_depth}"
    )
    print(
        f"machine: {os.cpu_count()} CPUs ({cpu_model()}), Python {platform.python_version()}; "
        f"server {server.name}; {pinned_to}"
    )
    print(f"versions: {versions} (sources {digest})")
    if crawler_digest() != digest:
        print("warning: the crawler's sources changed while the benchmark ran")
    print(f"CPUs busy before starting: {busy:.0%}")
    print()
    print(table(contenders))
    disturbed = max(summarize(contender)["others_share"] for contender in contenders)
    if disturbed > BUSY_FRACTION:
        print(
            f"warning: other processes took up to {disturbed:.0%} of a CPU during a run "
            "(column 'others'): that run's wall-clock figures are suspect"
        )
    by_slug = {contender.slug: contender for contender in contenders}
    print()
    if "fetch-parse" in by_slug:
        ours, ceiling = summarize(by_slug["ours"]), summarize(by_slug["fetch-parse"])
        print(f"ours / fetch+parse ceiling: {ours['pages_per_s'] / ceiling['pages_per_s']:.0%}")
    if "ours-state" in by_slug:
        plain, state = summarize(by_slug["ours"]), summarize(by_slug["ours-state"])
        print(
            f"ours with --state / without: {state['pages_per_s'] / plain['pages_per_s']:.2f}x "
            f"pages/s, {state['cpu_s_per_1000'] / plain['cpu_s_per_1000']:.2f}x CPU per page"
        )
    plain = summarize(by_slug["ours"])
    for contender in contenders:
        if contender.slug not in (
            "ours",
            "ours-state",
            "crawlee",
            "scrapy",
            "wget",
            "fetch",
            "fetch-parse",
        ):
            other = summarize(contender)
            print(
                f"{contender.name} / ours: {other['pages_per_s'] / plain['pages_per_s']:.3f}x "
                f"pages/s, {other['cpu_s_per_1000'] / plain['cpu_s_per_1000']:.3f}x CPU per page; "
                + paired_line(contender, by_slug["ours"])
            )
    for slug in ("crawlee", "scrapy", "wget"):
        if slug in by_slug:
            print(ratio_line(by_slug["ours"], by_slug[slug]))

    results = {
        "date": date,
        "args": {k: str(v) for k, v in vars(args).items()},
        "server": server.name,
        "versions": versions,
        "crawler_sources": digest,
        "contenders": {
            c.slug: {"name": c.name, "summary": summarize(c), "runs": [asdict(r) for r in c.runs]}
            for c in contenders
        },
    }
    results_file = args.out / f"crawl_bench-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    results_file.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"\nall figures: {results_file}; logs and outputs: {runs_dir}")
    return 0 if all(run.exit_code == 0 for c in contenders for run in c.runs) else 1


if __name__ == "__main__":
    sys.exit(main())
