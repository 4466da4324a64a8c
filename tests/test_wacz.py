"""--warc's CDXJ index and --wacz FILE, checked by the readers archivists use: pywb's
indexers, `wacz validate`, pywb's replay, and a reader that opens the WACZ the way
ReplayWeb.page (wabac.js) does."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import heapq
import io
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import surt
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from crawler.sinks import wacz as wacz_sink
from crawler.sinks.cdxj import index_path, surt_key
from crawler.sinks.wacz import write_wacz
from tests.archive_tools import replaywebpage, run_tool
from tests.browser import Chromium
from tests.conftest import Site, Wayback, crawl, html
from tests.test_cli import run_main
from tests.test_state import Run, build_graph_site
from tests.test_traps import raw
from tests.test_warc import warc_files

IMAGE = bytes(range(256)) * 8


def archive_site(site: Site) -> dict[str, tuple[int, bytes | str]]:
    """A site with one capture of each kind; path -> (status, payload as sent)."""
    home = html("Home", ["/a", "/moved", "/same1", "/same2", "/missing", "/logo.png"])
    same = html("Same", ["/"])
    zipped = gzip.compress(html("Zipped", body="<p>squeezed</p>").encode())
    chunks = [html("Chunked").encode(), b"<p>more</p>"]
    served: dict[str, tuple[int, bytes | str]] = {
        "/": (200, home),
        "/a": (200, html("A", ["/gz", "/chunked", "/q?b=2&a=1"], body="<p>Alpha text</p>")),
        "/moved": (302, ""),
        "/b": (200, html("B")),
        "/same1": (200, same),
        "/same2": (200, same),
        "/missing": (404, html("Not here")),
        "/logo.png": (200, IMAGE),
        "/q?b=2&a=1": (200, html("Query")),
        "/gz": (200, zipped),
        "/chunked": (200, b"".join(chunks)),
        "/robots.txt": (200, "User-agent: *\nAllow: /\n"),
    }
    for path in ("/", "/a", "/b", "/same1", "/same2", "/missing", "/q?b=2&a=1"):
        status, body = served[path]
        site.page(path, body=body, status=status)
    site.redirect("/moved", "/b")
    site.page("/logo.png", content_type="image/png", body=IMAGE)
    site.page("/robots.txt", content_type="text/plain", body=served["/robots.txt"][1])

    async def gz(_request: web.Request) -> web.Response:
        headers = {"Content-Encoding": "gzip", "Content-Type": "text/html"}
        return web.Response(body=zipped, headers=headers)

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
        return response

    site.handle("/gz", gz)
    site.handle("/chunked", chunked)
    return served


def archive_paths(tmp_path: Path) -> tuple[Path, Path]:
    """Where a test's crawl writes its WARC files, and its WACZ."""
    return tmp_path / "warc", tmp_path / "crawl.wacz"


def as_bytes(body: str | bytes) -> bytes:
    return body.encode() if isinstance(body, str) else body


def our_index(warc: Path) -> list[str]:
    """The lines of every index in `warc`, each file checked to be sorted, merged."""
    per_file = []
    for path in warc_files(warc):
        lines = index_path(warc, path.name).read_text().splitlines(keepends=True)
        assert lines == sorted(lines), f"{path.name}'s index is not sorted"
        per_file.append(lines)
    return list(heapq.merge(*per_file))


def listed_pages(wacz: Path, tmp_path: Path) -> Path:
    """The pages `wacz` lists, less its header line, as the crawl listed them, in a file."""
    with zipfile.ZipFile(wacz) as package:
        _, *lines = package.read("pages/pages.jsonl").splitlines(keepends=True)
    path = tmp_path / "listed.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def assert_index_is_cdxj_indexers(warc: Path) -> list[str]:
    """Our index, line for line what webrecorder's cdxj-indexer makes of the WARC files."""
    ours = our_index(warc)
    theirs = run_tool("cdxj-indexer", "--sort", *map(str, warc_files(warc)))
    assert "".join(ours) == theirs
    return ours


async def test_the_index_is_line_for_line_the_one_pywbs_indexers_write(
    site: Site, tmp_path: Path
) -> None:
    archive_site(site)
    warc = tmp_path / "warc"
    await crawl(tmp_path, [site.url + "/"], warc=str(warc), ignore_robots=False, warc_max_size=4096)
    files = warc_files(warc)
    assert len(files) > 2, "the files rotated, each with an index of its own"
    ours = assert_index_is_cdxj_indexers(warc)
    captures = Counter(json.loads(line.split(" ", 2)[2])["url"] for line in ours)
    assert set(captures) == {site.url + path for path in archive_site(site)}
    assert all(count == 1 for count in captures.values())
    # pywb's own indexer (`wb-manager reindex`), older than cdxj-indexer, differs in
    # three ways only: it writes the digest without its "sha1:" label, no status for a
    # revisit record (whose HTTP headers it does not parse), and "unk" for a response
    # without a Content-Type, where cdxj-indexer leaves "mime" out.
    root = tmp_path / "pywb"
    root.mkdir()
    run_tool("wb-manager", "init", "c", cwd=root)
    for path in files:
        shutil.copy(path, root / "collections" / "c" / "archive")
    run_tool("wb-manager", "reindex", "c", cwd=root)
    pywb = (root / "collections" / "c" / "indexes" / "index.cdxj").read_text().splitlines()
    assert pywb == [as_pywb_indexes_it(line) for line in ours]


def as_pywb_indexes_it(line: str) -> str:
    key, timestamp, fields_json = line.rstrip("\n").split(" ", 2)
    fields = json.loads(fields_json)
    fields = {"url": fields.pop("url"), "mime": fields.pop("mime", "unk"), **fields}
    fields["digest"] = fields["digest"].removeprefix("sha1:")
    if fields["mime"] == "warc/revisit":
        del fields["status"]
    return f"{key} {timestamp} {json.dumps(fields)}"


async def test_kills_and_a_stop_then_resume_leave_an_index_that_matches_the_warc_exactly(
    site: Site, tmp_path: Path
) -> None:
    urls = build_graph_site(site)
    warc, wacz = archive_paths(tmp_path)
    run = Run(site, tmp_path, "--warc", str(warc), "--warc-max-size", "20000", "--wacz", str(wacz))
    rng = random.Random(int(os.environ.get("KILL_SEED", "2026")))  # vary it to stress
    for _ in range(2):
        assert await run.interrupted_after(rng.randrange(5, 70), signal.SIGKILL) == -9
    assert not wacz.exists(), "a crawl killed before its end has no WACZ"
    # Stopped (Ctrl-C), a crawl packages what it has; its indexes are sorted then.
    assert await run.interrupted_after(rng.randrange(5, 70), signal.SIGINT) == 130
    with zipfile.ZipFile(wacz) as stopped:
        assert stopped.testzip() is None and "pages/pages.jsonl" in stopped.namelist()
    assert await run.interrupted_after(rng.randrange(5, 70), signal.SIGKILL) == -9
    code, err = await run.until_done()
    assert code == 0, err
    ours = assert_index_is_cdxj_indexers(warc)
    indexed = Counter(json.loads(line.split(" ", 2)[2])["url"] for line in ours)
    assert all(indexed[url] == 1 for url in urls)
    assert sorted(p.name for p in warc.glob("*.cdxj")) == sorted(
        index_path(warc, p.name).name for p in warc_files(warc)
    )
    assert not list(warc.glob("*.tmp")) and not list(tmp_path.glob("*.partial"))
    assert "Validation succeeded" in run_tool("wacz", "validate", "-f", str(wacz))
    with zipfile.ZipFile(wacz) as package:
        pages = package.read("pages/pages.jsonl").decode().splitlines()[1:]
    listed = Counter(json.loads(line)["url"] for line in pages)
    assert sorted(listed) == sorted(urls) and set(listed.values()) == {1}


async def test_a_finished_crawl_that_lost_its_wacz_packages_it_again_without_fetching(
    site: Site, tmp_path: Path
) -> None:
    site.page("/p/0", "Zero", ["/p/1"])
    site.page("/p/1", "One")
    warc, wacz = archive_paths(tmp_path)
    run = Run(site, tmp_path, "--warc", str(warc), "--wacz", str(wacz))
    code, err = await run.until_done()
    assert code == 0, err
    first = zipfile.ZipFile(wacz).namelist()
    wacz.unlink()
    partial = tmp_path / "crawl.wacz.partial"
    partial.write_bytes(b"PK torn")  # what a kill while packaging leaves
    fetched = len(site.hits)
    code, err = await run.until_done()
    assert code == 0 and "complete" in err, err
    assert len(site.hits) == fetched
    assert zipfile.ZipFile(wacz).namelist() == first and not partial.exists()
    assert "Validation succeeded" in run_tool("wacz", "validate", "-f", str(wacz))


async def test_pywb_replays_the_wacz_and_the_warc_directory_byte_for_byte(
    site: Site, tmp_path: Path, wayback: Wayback
) -> None:
    served = archive_site(site)
    # A page cut at --max-bytes replays as what was kept, and ends: its head promised
    # the server's length, and a browser waited for bytes the archive never had.
    site.page("/big", body="x" * 10_000, content_type="text/plain")
    warc, wacz = archive_paths(tmp_path)
    seeds = [site.url + "/", site.url + "/big"]
    await crawl(
        tmp_path, seeds, warc=str(warc), wacz=str(wacz), ignore_robots=False, max_bytes=4096
    )
    served["/big"] = (200, "x" * 4096)
    assert "Validation succeeded" in run_tool("wacz", "validate", "-f", str(wacz))
    for path in warc_files(warc):
        check = subprocess.run(
            [sys.executable, "-m", "warcio.cli", "check", str(path)], capture_output=True
        )
        assert check.returncode == 0, check.stdout
    stamps = {
        json.loads(fields)["url"]: stamp
        for _, stamp, fields in (line.split(" ", 2) for line in our_index(warc))
    }
    collections = (
        wayback.collection("fromwacz", wacz, unpack_wacz=True),
        wayback.warc_directory("fromwarc", warc),  # a pywb collection too
    )
    async with aiohttp.ClientSession(auto_decompress=False) as client:
        for collection in collections:
            for path, (status, body) in served.items():
                url = site.url + path
                replay = f"{collection}/{stamps[url]}id_/{url}"
                async with (
                    asyncio.timeout(10),
                    client.get(replay, allow_redirects=False) as response,
                ):
                    assert response.status == status, (collection, path)
                    assert await response.read() == as_bytes(body), (collection, path)


class ReplayWebPageReader:
    """A WACZ opened as wabac.js (ReplayWeb.page) opens it: datapackage.json, then
    indexes/index.idx, a binary search in it, one gzip member of indexes/index.cdx.gz
    read by its range, and one WARC record read by its range in archive/."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path)
        self.package = json.loads(self.zip.read("datapackage.json"))
        idx = self.zip.read("indexes/index.idx").decode().splitlines()
        assert idx[0].startswith("!meta 0 ")
        meta = json.loads(idx[0].split(" ", 2)[2])
        assert meta["format"] == "cdxj-gzip-1.0"
        self.cdx = "indexes/" + meta["filename"]
        self.blocks = [
            (line.split(" {", 1)[0], json.loads("{" + line.split(" {", 1)[1])) for line in idx[1:]
        ]
        assert [prefix for prefix, _ in self.blocks] == sorted(p for p, _ in self.blocks)

    def range(self, name: str, offset: int, length: int) -> bytes:
        """Bytes of a stored entry, found through its local header as wabac.js does."""
        info = self.zip.getinfo(name)
        assert info.compress_type == zipfile.ZIP_STORED, f"{name} must be stored"
        with open(self.path, "rb") as f:
            f.seek(info.header_offset)
            header = f.read(30)
            name_length, extra_length = struct.unpack("<HH", header[26:30])
            f.seek(info.header_offset + 30 + name_length + extra_length + offset)
            return f.read(length)

    def lookup(self, url: str) -> list[dict[str, Any]]:
        """The captures of `url`: wabac's search of the .idx (the blocks before key + " 9999",
        back to the first whose key does not start with the URL's), then those blocks."""
        key = surt.surt(url)
        before = [block for block in self.blocks if block[0] < key + " 9999"]
        chosen: list[dict[str, Any]] = []
        for prefix, block in reversed(before):
            chosen.insert(0, block)
            if not prefix.split(" ")[0].startswith(key.split("?")[0]):
                break
        captures = []
        for block in chosen:
            member = self.range(self.cdx, block["offset"], block["length"])
            assert "sha256:" + hashlib.sha256(member).hexdigest() == block["digest"]
            for line in gzip.decompress(member).decode().splitlines():
                line_key, _, fields = line.split(" ", 2)
                if line_key == key:
                    captures.append(json.loads(fields))
        return captures

    def record(self, capture: dict[str, Any]) -> Any:
        member = self.range(
            "archive/" + capture["filename"], int(capture["offset"]), int(capture["length"])
        )
        return next(iter(ArchiveIterator(io.BytesIO(gzip.decompress(member)))))


async def test_replaywebpage_finds_every_capture_and_page_through_the_idx(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = archive_site(site)
    warc, wacz = archive_paths(tmp_path)
    await crawl(
        tmp_path, [site.url + "/"], warc=str(warc), wacz=str(wacz), text=True, ignore_robots=False
    )
    # The same crawl in index blocks of 2 lines, so that a lookup has blocks to choose from,
    # and as ZIP64, as a crawl past 4 GiB is written (the limit lowered to 1,000 bytes).
    pages = listed_pages(wacz, tmp_path)
    small_blocks = tmp_path / "blocks.wacz"
    write_wacz(small_blocks, warc_files(warc), pages, lines_per_block=2)
    zip64 = tmp_path / "zip64.wacz"
    with monkeypatch.context() as patch:
        patch.setattr(zipfile, "ZIP64_LIMIT", 1000)
        write_wacz(zip64, warc_files(warc), pages)
    assert "Validation succeeded" in run_tool("wacz", "validate", "-f", str(zip64))
    with zipfile.ZipFile(zip64) as package:
        with open(zip64, "rb") as raw:
            raw.seek(package.getinfo("pages/pages.jsonl").header_offset + 30)
            extra = raw.read(len("pages/pages.jsonl") + 4)[-4:]
        assert struct.unpack("<H", extra[:2])[0] == 1, "the ZIP64 extra field is there"
    for path in (wacz, small_blocks, zip64):
        reader = ReplayWebPageReader(path)
        assert reader.package["wacz_version"] == "1.1.1"
        resources = {r["path"]: r for r in reader.package["resources"]}
        for name in reader.zip.namelist():
            if name.startswith("datapackage"):
                continue
            data = reader.zip.read(name)
            assert resources.pop(name) == {
                "name": name.rsplit("/", 1)[1].lower(),
                "path": name,
                "hash": "sha256:" + hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
            }
        assert not resources, "a resource that is no file of the WACZ"
        digest = json.loads(reader.zip.read("datapackage-digest.json"))
        assert (
            digest["hash"]
            == "sha256:" + hashlib.sha256(reader.zip.read("datapackage.json")).hexdigest()
        )
        for page, (status, body) in served.items():
            (capture,) = reader.lookup(site.url + page)
            record = reader.record(capture)
            assert record.rec_headers.get_header("WARC-Target-URI") == site.url + page
            if record.rec_type == "response":
                assert record.http_headers.get_statuscode() == str(status)
                assert record.raw_stream.read() == as_bytes(body)
    assert len(ReplayWebPageReader(small_blocks).blocks) > 3
    with zipfile.ZipFile(wacz) as package:
        header, *lines = package.read("pages/pages.jsonl").decode().splitlines()
    assert json.loads(header) == {
        "format": "json-pages-1.0",
        "id": "pages",
        "title": "All Pages",
        "hasText": True,
    }
    pages = {entry["url"]: entry for entry in map(json.loads, lines)}
    html_pages = ["/", "/a", "/b", "/same1", "/same2", "/q?b=2&a=1", "/gz", "/chunked"]
    assert sorted(pages) == sorted(site.url + path for path in html_pages)
    assert pages[site.url + "/a"]["title"] == "A" and "Alpha text" in pages[site.url + "/a"]["text"]
    assert pages[site.url + "/"]["ts"].endswith("Z") and len({p["id"] for p in pages.values()}) == 8


# Hosts `surt` keys alike and apart: a `www` stripped or not, IPv4 addresses it parses
# or not, default ports, and names crawler.sinks.cdxj leaves to `surt` itself.
HOSTS = [
    "127.0.0.1:8080",
    "Example.COM",
    "www.example.com:80",
    "www2.a.b:443",
    "[::1]",
    "WWW1.Example.com:443",
    "www.www.example.com",
    "www",
    "www.com:8080",
    "wwwx.example.com",
    "xn--bcher-kva.example",
    "a-b.c-d.example:65535",
    "0.0.0.0",
    "10.0.0.8:80",
    "0.8.0.0",
    "255.255.255.255:1",
    "www.127.0.0.1",
    "1.2.3.4a",
    "example.com.",
    "a..b",
    "_srv.example.com",
    "b\u00fccher.example",
    "2130706433",
    "0x7f.0.0.1",
    "example.com:0080",
]


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("host", HOSTS)
def test_the_index_key_of_an_origin_is_surts(scheme: str, host: str) -> None:
    url = f"{scheme}://{host}/"
    assert surt_key(url) == surt.surt(url)


@given(
    st.sampled_from(["http", "https"]),
    st.sampled_from(HOSTS),
    st.text(alphabet="aZ09._~-/%?#;()=&@:+ \u00e4", max_size=20),
)
def test_the_index_key_is_surts_for_every_url(scheme: str, host: str, path: str) -> None:
    url = f"{scheme}://{host}/{path}"
    assert surt_key(url) == surt.surt(url)


def test_wacz_needs_warc_and_a_wacz_name_and_no_redis(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    for args, says in (
        (["--wacz", "x.wacz"], "--wacz needs --warc DIR"),
        (["--warc", "w", "--wacz", "x.zip"], "must end in .wacz"),
        (["--warc", "w", "--wacz", "no/such/x.wacz"], "does not exist"),
        (
            [
                "--warc",
                "w",
                "--wacz",
                "x.wacz",
                "--redis",
                "redis://127.0.0.1:9/0",
                "--crawl-id",
                "c",
            ],
            "with --redis",
        ),
    ):
        done = run_main(str(seeds), *args, cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert says in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("warc", [False, True])
async def test_surt_is_imported_only_for_an_odd_host_and_the_index_only_with_warc(
    site: Site, tmp_path: Path, warc: bool
) -> None:
    site.page("/", "Home")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(site.url + "/\n")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "crawler",
        str(seeds),
        "-o",
        str(tmp_path / "o"),
        "--quiet",
        "--allow-private-addresses",
        *(["--warc", str(tmp_path / "w")] if warc else []),
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    assert process.returncode == 0, err
    imported = {line.rsplit("|", 1)[-1].strip() for line in err.decode().splitlines()}
    assert ("crawler.sinks.cdxj" in imported) == warc and "surt" not in imported
    assert "crawler.sinks.jsonl" in imported
    if warc:
        (index,) = (tmp_path / "w").glob("*.cdxj")
        assert index.read_text().startswith("1,0,0,127:")


def frames(tree: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield tree["frame"]
    for child in tree.get("childFrames", []):
        yield from frames(child)


def file_handler(path: Path) -> Callable[[web.Request], Awaitable[web.FileResponse]]:
    async def handler(_request: web.Request) -> web.FileResponse:
        return web.FileResponse(path)

    return handler


async def test_replaywebpage_itself_replays_the_wacz_in_chromium(
    site: Site, tmp_path: Path
) -> None:
    player = replaywebpage()
    archive_site(site)
    warc, wacz = archive_paths(tmp_path)
    await crawl(tmp_path, [site.url + "/"], warc=str(warc), wacz=str(wacz), ignore_robots=False)

    async def embed(request: web.Request) -> web.Response:
        url = json.dumps(request.query["url"])
        return web.Response(
            content_type="text/html",
            text='<script src="/ui.js"></script><replay-web-page source="/crawl.wacz" '
            f'replayBase="/replay/" embed="replayonly" url={url}></replay-web-page>',
        )

    async def service_worker_not_yet_active(request: web.Request) -> web.Response:
        # The player's frame loads before the service worker that serves it may be active; the
        # player reloads it three times 100 ms apart, which a loaded machine outlasts. A site
        # that embeds the player answers here as this does: reload once the worker is ready.
        return web.Response(
            content_type="text/html",
            text="<script>navigator.serviceWorker.ready.then(() => location.reload())</script>",
        )

    # aiohttp's FileResponse answers Range requests, which ReplayWeb.page reads the WACZ by.
    app = web.Application()
    app.router.add_get("/embed", embed)
    app.router.add_get("/replay/", service_worker_not_yet_active)
    app.router.add_get("/ui.js", file_handler(player / "ui.js"))
    app.router.add_get("/replay/sw.js", file_handler(player / "sw.js"))
    app.router.add_get("/crawl.wacz", file_handler(wacz))
    runner = web.AppRunner(app)
    await runner.setup()
    server = web.TCPSite(runner, "127.0.0.1", 0)
    await server.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    expected = {  # a page, a gzip-encoded one, a chunked one, a revisit, a redirect's target
        "/a": "A|Alpha text",
        "/gz": "Zipped|squeezed",
        "/chunked": "Chunked|more",
        "/same2": "Same|/",
        "/moved": "B|",
    }
    try:
        async with Chromium(tmp_path / "chromium") as browser:
            call = (await browser.new_tab()).send
            await call("Page.enable")
            for path, shows in expected.items():
                await call("Page.navigate", url=f"{base}/embed?url={site.url}{path}")
                async with asyncio.timeout(30):
                    while (seen := await replayed(call)) is None or not seen.startswith(shows):
                        await asyncio.sleep(0.05)
    finally:
        await runner.cleanup()


async def replayed(call: Any) -> str | None:
    """The title and text of the page ReplayWeb.page replays (its frame at .../mp_/URL)."""
    tree = (await call("Page.getFrameTree"))["frameTree"]
    for frame in frames(tree):
        if "mp_/" in frame["url"]:
            world = await call("Page.createIsolatedWorld", frameId=frame["id"])
            result = await call(
                "Runtime.evaluate",
                expression="document.title + '|' + (document.body ? document.body.innerText : '')",
                contextId=world["executionContextId"],
            )
            return result["result"].get("value")
    return None


async def test_a_warc_file_that_holds_no_capture_has_an_empty_index(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nothing listens on: no exchange to archive
        closed.bind(("127.0.0.1", 0))
        seed = f"http://127.0.0.1:{closed.getsockname()[1]}/"
    records = await crawl(tmp_path, [seed], warc=str(tmp_path / "warc"), retries=0)
    assert [r["error"] for r in records] == ["connection_error"]
    (warc_file,) = (tmp_path / "warc").glob("*.warc.gz")
    assert index_path(tmp_path / "warc", warc_file.name).read_bytes() == b""


async def test_a_wacz_of_no_capture_has_an_index_every_gzip_reader_reads(tmp_path: Path) -> None:
    """Its index.cdx.gz was 0 bytes: no gzip file for gzip -t and zcat (RFC 1952: a
    gzip file is a series of members). It is one empty member, which the .idx lists no
    block of."""
    with socket.socket() as closed:  # a port nothing listens on: no exchange to archive
        closed.bind(("127.0.0.1", 0))
        seed = f"http://127.0.0.1:{closed.getsockname()[1]}/"
    warc, wacz = archive_paths(tmp_path)
    await crawl(tmp_path, [seed], warc=str(warc), wacz=str(wacz), retries=0)
    with zipfile.ZipFile(wacz) as package:
        index = package.read("indexes/index.cdx.gz")
    tested = subprocess.run(["gzip", "-t"], input=index, capture_output=True)
    assert (tested.returncode, tested.stderr) == (0, b"")
    with gzip.open(io.BytesIO(index)) as lines:
        assert lines.read() == b""
    reader = ReplayWebPageReader(wacz)
    assert reader.blocks == [] and reader.lookup(seed) == []
    assert "Validation succeeded" in run_tool("wacz", "validate", "-f", str(wacz))


async def test_pages_jsonl_lists_no_page_that_failed_nor_the_redirect_that_led_to_it(
    site: Site, tmp_path: Path
) -> None:
    site.page("/", "Home", ["/moved", "/cut", "/ok"])
    site.redirect("/moved", "/broken")
    site.page("/broken", body=b"no gzip at all", headers={"Content-Encoding": "gzip"})
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n"
    site.handle("/cut", raw(head + b"<title>cut</title>"))  # then the connection closes
    site.page("/ok", "OK")
    warc, wacz = archive_paths(tmp_path)

    records = await crawl(tmp_path, [site.url + "/"], warc=str(warc), wacz=str(wacz))

    errors = {r["url"]: r["error"] for r in records}
    assert errors[site.url + "/moved"] == "decoding_error"
    assert errors[site.url + "/cut"] == "connection_error"
    with zipfile.ZipFile(wacz) as package:
        _, *lines = package.read("pages/pages.jsonl").decode().splitlines()
    # A page that failed is no page to open; /moved's capture is a redirect to nothing.
    assert sorted(json.loads(line)["url"] for line in lines) == [site.url + "/", site.url + "/ok"]


async def test_an_index_block_whose_first_key_holds_a_brace_is_found_by_its_key(
    site: Site, tmp_path: Path
) -> None:
    # A query keeps { and } as they are (the URL Standard's query percent-encode set),
    # and so does the index key: the .idx line's key and timestamp are cut at " {".
    queries = ["/q?a={x}", "/q?a={x}&b=1", "/q?a=b", "/q?a={y}"]
    site.page("/", "Home", queries)
    for query in queries:
        site.page(query, "Q")
    warc, wacz = archive_paths(tmp_path)
    await crawl(tmp_path, [site.url + "/"], warc=str(warc), wacz=str(wacz))
    one_a_block = tmp_path / "blocks.wacz"
    write_wacz(one_a_block, warc_files(warc), listed_pages(wacz, tmp_path), lines_per_block=1)

    reader = ReplayWebPageReader(one_a_block)

    lines = gzip.decompress(reader.zip.read("indexes/index.cdx.gz")).decode().splitlines()
    assert [prefix for prefix, _ in reader.blocks] == [line.split(" {", 1)[0] for line in lines]
    for query in queries:
        (capture,) = reader.lookup(site.url + query)
        assert capture["url"] == site.url + query


async def test_each_crawl_lists_its_own_pages_though_another_wrote_into_its_directory(
    site: Site, tmp_path: Path
) -> None:
    pages = build_graph_site(site, delay_s=0)
    other = Site()  # another site, crawled into the same DIR under the same prefix
    other.page("/", "Other", ["/more"])
    other.page("/more", "More")
    await other.start()
    warc = tmp_path / "warc"
    (tmp_path / "b").mkdir()
    first = Run(site, tmp_path, "--warc", str(warc), "--wacz", str(tmp_path / "first.wacz"))
    try:
        assert await first.interrupted_after(5, signal.SIGINT) == 130  # stopped, to resume
        second = tmp_path / "second.wacz"
        await crawl(tmp_path / "b", [other.url + "/"], warc=str(warc), wacz=str(second))
    finally:
        await other.stop()

    code, err = await first.until_done()

    assert code == 0, err
    for wacz, expected in (
        (tmp_path / "first.wacz", pages),
        (second, [other.url + "/", other.url + "/more"]),
    ):
        with zipfile.ZipFile(wacz) as package:
            _, *lines = package.read("pages/pages.jsonl").splitlines()
        listed = [json.loads(line)["url"] for line in lines]
        assert sorted(listed) == sorted(expected), wacz.name


async def test_a_crawl_begun_by_a_version_that_listed_pages_in_dir_goes_on_there(
    site: Site, tmp_path: Path
) -> None:
    pages = build_graph_site(site, delay_s=0)
    warc, wacz = archive_paths(tmp_path)
    run = Run(site, tmp_path, "--warc", str(warc), "--wacz", str(wacz))
    assert await run.interrupted_after(5, signal.SIGINT) == 130
    (run.state / "wacz-pages.jsonl").rename(warc / "crawl.pages.jsonl")  # as it was kept

    code, err = await run.until_done()

    assert code == 0, err
    with zipfile.ZipFile(wacz) as package:
        _, *lines = package.read("pages/pages.jsonl").splitlines()
    assert sorted(json.loads(line)["url"] for line in lines) == sorted(pages)


def test_packaging_stopped_by_ctrl_c_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API's run() raises KeyboardInterrupt out of the packaging: its .partial file
    was left beside the package (the CLI quits with os._exit; its resume sweeps it)."""

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(wacz_sink, "_write_entries", interrupted)
    pages = tmp_path / "pages.jsonl"
    pages.write_bytes(b"")
    with pytest.raises(KeyboardInterrupt):
        wacz_sink.write_wacz(tmp_path / "crawl.wacz", [], pages)
    assert list(tmp_path.iterdir()) == [pages]
