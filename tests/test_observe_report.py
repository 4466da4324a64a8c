"""`python -m crawler report`: the HTML report of a real crawl, opened in headless chromium."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from crawler.observe.display import display_host, display_url
from crawler.observe.report import MAX_CONTENT_TYPES, OTHER_CONTENT_TYPES, analyse
from tests.browser import Chromium
from tests.conftest import Site, crawl, html, link_and_fifo, read_records
from tests.test_cli import run_main

CLI = [sys.executable, "-m", "crawler"]
LINKS = ["/a", "/missing", "/gone", "/old", "/dup1", "/dup2"]
SAME_BODY = html("same", body="<p>the same words at two addresses</p>")


def report(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, "report", *args], capture_output=True)


def report_in_process(*args: str) -> subprocess.CompletedProcess[bytes]:
    """`report` through main() in this process (see run_main), its output as report's."""
    result = run_main("report", *args)
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.encode(), result.stderr.encode()
    )


async def crawl_site(site: Site, tmp_path: Path) -> tuple[Path, Path]:
    links = "".join(f'<a href="{path}">{path}</a>' for path in LINKS)
    site.page("/", body=f'<!doctype html><html lang="en"><title>home</title>{links}</html>')
    site.page("/a", "a", ["/missing"])
    site.page("/missing", status=404, body="no")
    site.page("/gone", status=500, body="oops")
    site.redirect("/old", "/a", status=301)
    site.page("/dup1", body=SAME_BODY)
    site.page("/dup2", body=SAME_BODY)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    records, stats = tmp_path / "pages.jsonl", tmp_path / "stats.json"
    process = await asyncio.create_subprocess_exec(
        *CLI,
        str(seeds),
        "-o",
        str(records),
        "--stats",
        str(stats),
        "--ignore-robots",
        "--text",
        "--quiet",
        "--retries",
        "0",
    )
    assert await process.wait() == 0
    return records, stats


async def test_the_report_of_a_crawl_opens_offline_with_its_figures_charts_and_tables(
    site: Site, tmp_path: Path
) -> None:
    records, stats_path = await crawl_site(site, tmp_path)
    output = tmp_path / "report.html"
    result = await asyncio.to_thread(
        report, str(records), "--stats", str(stats_path), "-o", str(output)
    )
    assert result.returncode == 0, result.stderr
    stats = json.loads(stats_path.read_text())
    async with Chromium(tmp_path / "profile") as browser:
        tab = await browser.new_tab()
        await tab.open(output.as_uri())
        assert tab.requested == [output.as_uri()]  # nothing from elsewhere, not even a font
        shown = await tab.figures()
        assert shown["records"] == str(stats["records"]) == "7"
        assert shown["errors"] == str(sum(stats["errors"].values()))
        assert shown["hosts"] == str(stats["host_count"])
        assert shown["broken"] == "2"
        bars = await tab.evaluate(
            "[...document.querySelectorAll('#chart-statuses rect.bar title')]"
            ".map(t => t.textContent)"
        )
        assert sorted(bars) == sorted(f"{s}: {n}" for s, n in stats["statuses"].items())
        headings = await tab.evaluate(
            "[...document.querySelectorAll('.chart-box')]"
            ".map(box => box.closest('section').querySelector('h2').textContent)"
        )  # each says what it counts: records by what, in what unit
        assert all(re.search(r"\b(by|per)\b", heading) for heading in headings), headings
        assert "Records by fetch time (ms)" in headings
        charts = await tab.drawn_charts(".chart-box")
        assert charts == {
            "chart-time": True,
            "chart-statuses": True,
            "chart-depths": True,
            "chart-content_types": True,
            "chart-hosts": True,
            "chart-errors": False,
            "chart-latency": True,
            "chart-sizes": True,
            "chart-languages": True,
        }  # no record has an error field: that one says so in words
        tables = await tab.evaluate(
            "Object.fromEntries([...document.querySelectorAll('table')].map(t => [t.id,"
            " [...t.tBodies[0].rows].map(r => [...r.cells].map(c => c.innerText.trim()))]))"
        )
        broken = {row[0].removeprefix(site.url): row for row in tables["broken"]}
        assert broken["/missing"][1:3] == ["404", "2"]
        assert sorted(broken["/missing"][3].split("\n")) == [f"{site.url}/", f"{site.url}/a"]
        assert broken["/gone"][1] == "500"
        assert [site.url + "/old", site.url + "/a", "301"] in tables["redirects"]
        (duplicate,) = tables["duplicates"]
        assert duplicate[1] == "2"
        assert sorted(duplicate[2].split("\n")) == [f"{site.url}/dup1", f"{site.url}/dup2"]
        assert tables["languages"]
        assert await tab.evaluate("document.getElementById('chart-errors').innerText") == (
            "Errors by kind: none"  # a report is the crawl's end: no "yet"
        )
        # A line of zeros (no page in a while) has an axis of 0 to 1.1, not to 1.10e-9.
        axis = await tab.evaluate(
            "(() => { const box = document.createElement('div'); document.body.append(box);"
            " Charts.line(box, [[0, 0], [1, 0]], 'Pages/s', String);"
            " const labels = [...box.querySelectorAll('text')].map(t => t.textContent);"
            " box.remove(); return labels; })()"
        )
        assert axis[:3] == ["0", "0.550", "1.10"]
        png = await tab.screenshot(tmp_path / "report.png")
        assert png.startswith(b"\x89PNG") and len(png) > 10_000
        # On a phone the page fits the screen; a wide table scrolls in its own box.
        assert await tab.width_in(360) == 360
        assert tab.errors == []
        await tab.close()


def test_a_report_of_a_missing_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = report_in_process(str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "r.html"))
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        f"crawler: error: cannot read {tmp_path / 'nope.jsonl'}: no such file"
    ]


def test_a_report_of_a_file_that_is_no_crawl_is_one_line_and_exit_2(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\nhttp://b.test/\n")
    result = report_in_process(str(seeds), "-o", str(tmp_path / "r.html"))
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        f"crawler: error: {seeds} is not a crawl's JSONL output: none of its 2 lines "
        "is a JSON record"
    ]
    assert not (tmp_path / "r.html").exists()


def test_a_report_never_overwrites_its_records(tmp_path: Path) -> None:
    records = one_record(tmp_path)
    result = report_in_process(str(records), "-o", str(records))
    assert result.returncode == 2 and "refusing to overwrite" in result.stderr.decode()
    assert records.read_text().startswith('{"url"')


def test_a_report_never_overwrites_its_stats_file(tmp_path: Path) -> None:
    records = one_record(tmp_path)
    stats = tmp_path / "stats.json"
    stats.write_text('{"records": 1}')
    result = report_in_process(str(records), "--stats", str(stats), "-o", str(stats))
    assert result.stderr.decode().splitlines() == [
        f"crawler: error: -o {stats} is the --stats file; refusing to overwrite it"
    ]
    assert result.returncode == 2 and stats.read_text() == '{"records": 1}'


def test_bad_report_arguments_are_one_line_naming_what_the_user_gave(tmp_path: Path) -> None:
    records = tmp_path / "pages.jsonl"
    records.write_text('{"url": "http://a.test/", "status": 200, "depth": 0}\n')
    cases = {
        (): "crawler: error: the following arguments are required: PAGES.jsonl",
        (str(tmp_path),): f"crawler: error: cannot read {tmp_path}: it is a directory",
        (str(records), "-o", str(tmp_path)): (
            f"crawler: error: cannot write {tmp_path}: it is a directory"
        ),
        (str(records), "-o", str(tmp_path / "no-dir" / "r.html")): (
            f"crawler: error: cannot write {tmp_path / 'no-dir' / 'r.html'}: "
            f"directory {tmp_path / 'no-dir'} does not exist"
        ),
        (str(records), "-o", ""): "crawler: error: -o must not be empty",
        # Only a flag spelled in full, and a mistyped one is told its name
        (str(records), "--stat", "s.json"): (
            "crawler: error: unrecognized arguments: --stat s.json (did you mean --stats?)"
        ),
        (str(records), "--outptu=r.html"): (
            "crawler: error: unrecognized arguments: --outptu=r.html (did you mean --output?)"
        ),
    }
    for args, message in cases.items():
        result = report_in_process(*args)
        assert (result.returncode, result.stderr.decode().splitlines()) == (2, [message])


def test_a_crawls_directory_given_for_records_is_told_what_to_give(tmp_path: Path) -> None:
    """`report` of a --revisit directory, or of a --state one, said only "it is a
    directory": it names the records to give."""
    revisit = tmp_path / "fresh"
    revisit.mkdir()
    for number in (1, 2, 12):
        (revisit / f"round-{number:05d}.jsonl").write_text("")
    (revisit / "round-00012.state").mkdir()
    state = tmp_path / "state"
    state.mkdir()
    (state / "crawl.sqlite").write_bytes(b"")
    told = {
        revisit: f"of a --revisit crawl; give one of its rounds' records, such as "
        f"{revisit / 'round-00012.jsonl'}",
        state: "of a crawl's state; give the records the crawl wrote (its -o file)",
    }
    for directory, says in told.items():
        result = report_in_process(str(directory))
        assert (result.returncode, result.stderr.decode().splitlines()) == (
            2,
            [f"crawler: error: cannot read {directory}: it is a directory {says}"],
        )


def test_a_report_written_through_a_link_or_into_a_fifo_leaves_them_in_place(
    tmp_path: Path,
) -> None:
    records = one_record(tmp_path)
    outputs = link_and_fifo(tmp_path, "report.html")

    assert report(str(records), "-o", str(outputs.link)).returncode == 0
    assert report(str(records), "-o", str(outputs.fifo)).returncode == 0

    assert outputs.link.is_symlink()
    assert outputs.target.read_text().startswith("<!doctype html>")
    assert stat.S_ISFIFO(outputs.fifo.stat().st_mode)
    assert outputs.read_fifo().startswith(b"<!doctype html>")


def test_records_with_fields_of_the_wrong_type_are_skipped_and_said(tmp_path: Path) -> None:
    records = tmp_path / "pages.jsonl"
    records.write_text(
        '{"url": "http://a.test/", "status": 200, "depth": 0}\n'
        '{"url": "http://a.test/x", "status": "404", "depth": 1}\n'
        '{"url": "http://a.test/y", "status": 200, "links": [["nested"]]}\n'
        '{"url": "http://a.test/z", "status": 200, "fetched_at": "yesterday"}\n'
    )
    result = report_in_process(str(records), "-o", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "r.html").read_text()
    assert "3 lines that are not JSON records were skipped" in page
    assert 'data-figure="records">1<' in page


def test_a_stats_file_with_fields_of_the_wrong_type_is_one_line_and_exit_2(
    tmp_path: Path,
) -> None:
    records = one_record(tmp_path)
    stats = tmp_path / "stats.json"
    stats.write_text('{"records": 1, "elapsed_s": "long"}')
    result = report_in_process(str(records), "--stats", str(stats), "-o", str(tmp_path / "r.html"))
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        f"crawler: error: --stats {stats} is not a stats file (its elapsed_s is not a crawl's)"
    ]


def test_a_report_to_dev_stdout_goes_down_the_pipe_and_ends_quietly_when_it_closes(
    tmp_path: Path,
) -> None:
    records = tmp_path / "pages.jsonl"
    records.write_text('{"url": "http://a.test/", "status": 200, "depth": 0}\n')

    result = report(str(records), "-o", "/dev/stdout")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"<!doctype html>")

    pipeline = f"{' '.join(CLI)} report {records} -o /dev/stdout | head -1; exit ${{PIPESTATUS[0]}}"
    closed = subprocess.run(["bash", "-c", pipeline], capture_output=True)
    assert closed.returncode == 0 and b"error" not in closed.stderr
    assert os.path.islink("/dev/stdout")


def test_a_report_to_dash_goes_to_stdout_as_the_crawls_records_do(tmp_path: Path) -> None:
    # `-o -` wrote a file named "-" in the working directory, and nothing down the pipe.
    records = tmp_path / "pages.jsonl"
    records.write_text('{"url": "http://a.test/", "status": 200, "depth": 0}\n')

    result = subprocess.run(
        [*CLI, "report", str(records), "-o", "-"], capture_output=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"<!doctype html>")
    assert result.stderr.decode().splitlines() == ["crawler: report of 1 record on stdout"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pages.jsonl"]

    from_stdin = subprocess.run(
        [*CLI, "report", "-"], input=records.read_bytes(), capture_output=True, cwd=tmp_path
    )
    assert (from_stdin.returncode, from_stdin.stderr.decode().splitlines()) == (
        2,
        ["crawler: error: the records must be a file (the report reads them twice), not -"],
    )


def test_a_line_cut_short_is_skipped_and_said(tmp_path: Path) -> None:
    records = tmp_path / "pages.jsonl"
    records.write_text('{"url": "http://a.test/", "status": 200, "depth": 0}\n{"url": "http://a.te')
    result = report_in_process(str(records), "-o", str(tmp_path / "r.html"))
    assert result.returncode == 0
    page = (tmp_path / "r.html").read_text()
    assert "1 lines that are not JSON records were skipped" in page
    assert 'data-figure="records">1<' in page


def one_record(directory: Path) -> Path:
    records = directory / "pages.jsonl"
    records.write_text('{"url": "http://a.test/", "status": 200, "depth": 0}\n')
    return records


def validated_page(site: Site, path: str, body: str, etag: str) -> None:
    """A page that answers 304 to a request naming its ETag."""

    async def handler(request: web.Request) -> web.Response:
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(text=body, content_type="text/html", headers={"ETag": etag})

    site.handle(path, handler)


async def test_the_report_of_a_recrawl_counts_its_304s_as_unchanged_not_redirected(
    site: Site, tmp_path: Path
) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    home = html("home", ["/same", "/edited", "/dropped"])
    validated_page(site, "/", home, '"home"')
    site.page("/dropped", "linked by the first crawl's home page only")
    validated_page(site, "/same", html("same", body="x" * 900), '"same"')
    validated_page(site, "/edited", html("edited, first"), '"v1"')
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    flags = ["--ignore-robots", "--quiet"]
    crawl = await asyncio.create_subprocess_exec(*CLI, str(seeds), "-o", str(first), *flags)
    assert await crawl.wait() == 0
    validated_page(site, "/", html("home", ["/same", "/edited", "/new"]), '"home2"')
    validated_page(site, "/edited", html("edited, second"), '"v2"')
    site.page("/new", "new")
    stats = tmp_path / "stats.json"
    recrawl = await asyncio.create_subprocess_exec(
        *CLI, str(seeds), "-o", str(second), "--since", str(first), "--stats", str(stats), *flags
    )
    assert await recrawl.wait() == 0

    result = report(str(second), "--stats", str(stats), "-o", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "r.html").read_text()
    tiles = dict(re.findall(r'data-figure="(\w+)">([^<]*)<', page))
    assert tiles["redirects"] == "0"  # a 304 is no redirect
    assert (tiles["changed"], tiles["unchanged"], tiles["new"]) == ("2", "1", "1")
    assert "unchanged (1 answered 304)" in page
    (same,) = [r for r in read_records(second) if r["status"] == 304]
    assert tiles["saved"] == f"{same['bytes']:,} B"  # under a KiB
    downloaded = sum(r["bytes"] for r in read_records(second) if r["status"] == 200)
    assert tiles["bytes"] == f"{downloaded:,} B"
    assert tiles["gone"] == "1"  # /dropped, which no record shows


def test_content_types_made_up_by_a_server_take_bounded_memory(tmp_path: Path) -> None:
    records = tmp_path / "pages.jsonl"
    with records.open("w") as f:
        for i in range(3000):
            f.write(f'{{"url": "http://a.test/{i}", "status": 200, "content_type": "x/{i}"}}\n')
    figures = analyse(str(records))
    assert len(figures.content_types) == MAX_CONTENT_TYPES + 1
    assert figures.content_types[OTHER_CONTENT_TYPES] == 3000 - MAX_CONTENT_TYPES


async def test_a_content_type_that_opens_a_comment_in_a_script_leaves_the_charts_drawn(
    site: Site, tmp_path: Path
) -> None:
    """'<!--<script>' in the report's data (a header the server wrote) put the HTML
    parser in a state where the data's </script> closed nothing: every chart was gone."""
    site.page("/", "home", ["/odd"])
    site.page("/odd", "odd", content_type="text/html<!--<script>")
    records = await crawl(tmp_path, [f"{site.url}/"])
    assert {r["content_type"] for r in records} >= {"text/html<!--<script>"}
    output = tmp_path / "report.html"
    result = report_in_process(str(tmp_path / "pages.jsonl"), "-o", str(output))
    assert result.returncode == 0, result.stderr
    async with Chromium(tmp_path / "profile") as browser:
        tab = await browser.new_tab()
        await tab.open(output.as_uri())
        charts = await tab.drawn_charts(".chart-box")
        assert charts["chart-content_types"] and charts["chart-statuses"], charts
        bars = await tab.evaluate(
            "[...document.querySelectorAll('#chart-content_types text')].map(t => t.textContent)"
        )
        assert "text/html<!--<script>" in bars
        assert tab.errors == []
        await tab.close()


async def test_the_report_shows_hosts_in_unicode_and_pages_with_their_titles_escaped(
    tmp_path: Path,
) -> None:
    """Hosts were shown in Punycode (xn--fiq228c.xn--fiqs8s) and pages by URL alone: the
    Unicode form is shown, as browsers show it, the links still go to the URL crawled,
    and a page's title is under its link, as text."""
    home, search = "http://xn--fiq228c.xn--fiqs8s/", "http://xn--fiq228c.xn--fiqs8s/%E6%90%9C"
    spoof = "http://xn--pple-43d.com/"  # a Cyrillic "а" among Latin letters: kept in Punycode
    hostile = "<img src=x onerror=alert(1)></td></table><script>alert(2)</script>"
    records = tmp_path / "pages.jsonl"
    records.write_text(
        "".join(
            json.dumps(record, ensure_ascii=False) + "\n"
            for record in (
                {"url": home, "status": 200, "title": "中文首页", "elapsed_ms": 900, "bytes": 9000},
                {"url": search, "status": 404, "title": hostile, "referrer": home, "bytes": 10},
                {"url": spoof, "status": 200, "title": "apple", "elapsed_ms": 5, "bytes": 5},
            )
        )
    )
    output = tmp_path / "report.html"
    assert report_in_process(str(records), "-o", str(output)).returncode == 0
    async with Chromium(tmp_path / "profile") as browser:
        tab = await browser.new_tab()
        await tab.open(output.as_uri())
        tables = await tab.evaluate(
            "Object.fromEntries([...document.querySelectorAll('table')].map(t => [t.id,"
            " [...t.tBodies[0].rows].map(r => r.cells[0].innerText.trim())]))"
        )
        assert tables["slowest"] == ["http://中文.中国/\n中文首页", f"{spoof}\napple"]
        assert tables["broken"] == [f"http://中文.中国/%E6%90%9C\n{hostile}"]
        hrefs = await tab.evaluate("[...document.querySelectorAll('#largest a')].map(a => a.href)")
        assert hrefs == [home, search, spoof]
        bars = await tab.evaluate(
            "[...document.querySelectorAll('#chart-hosts rect.bar title')].map(t => t.textContent)"
        )
        assert sorted(bars) == ["xn--pple-43d.com: 1", "中文.中国: 2"]
        assert await tab.evaluate("document.querySelectorAll('img').length") == 0
        assert tab.errors == []
        await tab.close()


def test_records_kept_gzip_compressed_are_read_as_since_reads_them(tmp_path: Path) -> None:
    """`report pages.jsonl.gz` said "none of its 3 lines is a JSON record"."""
    lines = "".join(
        json.dumps({"url": f"http://a.test/{n}", "status": 404 if n == 2 else 200, "depth": 1})
        + "\n"
        for n in range(5)
    ).encode()
    plain, compressed = tmp_path / "pages.jsonl", tmp_path / "pages.jsonl.gz"
    plain.write_bytes(lines)
    compressed.write_bytes(gzip.compress(lines))
    for records in (plain, compressed):
        result = report_in_process(str(records), "-o", str(tmp_path / f"{records.name}.html"))
        assert result.returncode == 0, result.stderr
    as_plain = (tmp_path / "pages.jsonl.html").read_text()
    as_gzip = (tmp_path / "pages.jsonl.gz.html").read_text()
    assert 'data-figure="records">5<' in as_gzip and 'data-figure="broken">1<' in as_gzip
    assert as_gzip.split("<header>")[1] == as_plain.split("<header>")[1].replace(
        "pages.jsonl,", "pages.jsonl.gz,"
    )
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(lines)[:-12])
    result = report_in_process(str(cut), "-o", str(tmp_path / "cut.html"))
    assert (result.returncode, result.stderr.decode().splitlines()) == (
        2,
        [f"crawler: error: {cut} is cut short: its gzip stream ends early"],
    )


async def test_a_report_served_over_http_asks_for_nothing_else(tmp_path: Path) -> None:
    """Served by a web server, the report had Chromium ask for /favicon.ico: a 404, and
    a console error, on a page meant to need nothing but itself."""
    records = one_record(tmp_path)
    output = tmp_path / "report.html"
    assert report_in_process(str(records), "-o", str(output)).returncode == 0
    asked: list[str] = []

    async def serve(request: web.Request) -> web.StreamResponse:
        asked.append(request.path)
        if request.path == "/report.html":
            return web.FileResponse(output)
        if request.path == "/next":  # a page after it, once its own requests are made
            return web.Response(text='<link rel="icon" href="data:,">', content_type="text/html")
        raise web.HTTPNotFound()

    app = web.Application()
    app.router.add_get("/{path:.*}", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with Chromium(tmp_path / "profile") as browser:
            tab = await browser.new_tab()
            await tab.open(f"{base}/report.html")
            assert tab.errors == []
            await tab.open(f"{base}/next")
            assert asked == ["/report.html", "/next"]
            assert tab.errors == []
            await tab.close()
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("host", "shown"),
    [
        ("xn--fiq228c.xn--fiqs8s", "中文.中国"),
        ("xn--mnchen-3ya.de:8080", "münchen.de:8080"),
        ("xn--r8jz45g.jp", "例え.jp"),  # Han and kana: one name's mix
        ("xn--pple-43d.com", "xn--pple-43d.com"),  # Cyrillic among Latin: kept
        ("xn--ls8h.la", "xn--ls8h.la"),  # a symbol: kept
        ("xn--a.test", "xn--a.test"),  # not Punycode: as it is
        ("xn--é.test", "xn--é.test"),  # a hand-made record's: as it is, not a crash
        ("example.com", "example.com"),
    ],
)
def test_a_host_is_shown_in_unicode_where_a_browser_shows_it(host: str, shown: str) -> None:
    assert display_host(host) == shown
    assert display_url(f"http://{host}/a?b=xn--fiq228c") == f"http://{shown}/a?b=xn--fiq228c"


def test_redirects_and_duplicates_show_the_title_of_the_page_they_are(tmp_path: Path) -> None:
    from selectolax.lexbor import LexborHTMLParser

    home = "http://xn--fiq228c.xn--fiqs8s/"
    same = {"status": 200, "bytes": 10, "content_digest": "sha1:SAME", "title": "同一页 <i>"}
    records = tmp_path / "pages.jsonl"
    records.write_text(
        "".join(
            json.dumps(record) + "\n"
            for record in (
                {"url": f"{home}old", "final_url": home, "status": 200, "title": "首页"},
                {"url": f"{home}a", **same},
                {"url": f"{home}b", **same},
            )
        )
    )
    output = tmp_path / "report.html"
    assert report_in_process(str(records), "-o", str(output)).returncode == 0
    tree = LexborHTMLParser(output.read_text())

    def cells(table: str) -> list[str]:
        return [cell.text(separator="|") for cell in tree.css(f"#{table} tbody td")]

    assert cells("redirects") == ["http://中文.中国/old", "http://中文.中国/|首页", "200"]
    assert cells("duplicates")[:2] == ["sha1:SAME|同一页 <i>", "2"]
    assert not tree.css("#duplicates i")  # the title is text
