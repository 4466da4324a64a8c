"""A seed's user:password: sent to its origin as Basic credentials, and written nowhere."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from crawler.config import ConfigError
from crawler.credentials import seed_credentials
from crawler.urls import without_userinfo
from tests.conftest import Site, html, read_records
from tests.test_cli import run_cli_async, run_main

SECRET = "s3cr3t-Pa55"
TOKEN = base64.b64encode(f"crawler:{SECRET}".encode()).decode()


def protected(site: Site, other: Site) -> None:
    """`site` answers 401 to a request without crawler:SECRET; its home page links to a
    relative page, to itself with the password in the link, to `other` and to a redirect
    there."""
    pages = {
        "/": html(
            "home",
            [
                "a.html",
                f"http://crawler:{SECRET}@{site.host}:{site.port}/b.html",
                f"{other.url}/elsewhere",
                "/away",
            ],
        ),
        "/a.html": html("a", ["/"]),
        "/b.html": html("b"),
    }

    async def guarded(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Basic {TOKEN}":
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
        if request.path == "/away":
            raise web.HTTPFound(f"{other.url}/moved")
        if request.path not in pages:
            return web.Response(status=404)
        return web.Response(text=pages[request.path], content_type="text/html")

    for path in [*pages, "/away", "/robots.txt"]:
        site.handle(path, guarded)
    other.page("/elsewhere", "elsewhere")
    other.page("/moved", "moved")


async def test_a_seeds_password_goes_to_its_origin_only_and_is_written_nowhere(
    site: Site, site2: Site, tmp_path: Path
) -> None:
    protected(site, site2)
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, stderr = await run_cli_async(
        "-",
        "-o",
        str(out / "pages.jsonl"),
        "--warc",
        str(out / "warc"),
        "--stats",
        str(out / "stats.json"),
        "--state",
        str(out / "state"),
        "--allow-host",
        site2.host,
        "--allow-private-addresses",  # 127.0.0.2 is not a seed's address
        stdin=f"http://crawler:{SECRET}@{site.host}:{site.port}/\n",
    )
    assert code == 0, stderr
    report = await run_cli_async("report", str(out / "pages.jsonl"), "-o", str(out / "report.html"))
    assert report[0] == 0, report[2]

    records = read_records(out / "pages.jsonl")
    assert {r["url"]: (r["status"], r["final_url"]) for r in records} == {
        f"{site.url}/": (200, f"{site.url}/"),
        f"{site.url}/a.html": (200, f"{site.url}/a.html"),
        f"{site.url}/b.html": (200, f"{site.url}/b.html"),
        f"{site.url}/away": (200, f"{site2.url}/moved"),
        f"{site2.url}/elsewhere": (200, f"{site2.url}/elsewhere"),
    }
    home = next(r for r in records if r["url"] == f"{site.url}/")
    assert f"{site.url}/b.html" in home["links"]
    assert {hit.headers.get("Authorization") for hit in site.hits} == {f"Basic {TOKEN}"}
    assert site2.hits and all("Authorization" not in hit.headers for hit in site2.hits)
    assert SECRET not in stdout + stderr + report[1] + report[2]
    written = [path for path in out.rglob("*") if path.is_file()]
    assert len(written) >= 6
    for path in written:
        data = path.read_bytes()
        assert SECRET.encode() not in data and TOKEN.encode() not in data, path
    requests = [
        record.http_headers.get_header("Authorization")
        for warc in (out / "warc").glob("*.warc.gz")
        for record in ArchiveIterator(warc.open("rb"))
        if record.rec_type == "request"
        and record.rec_headers.get_header("WARC-Target-URI").startswith(site.url)
    ]
    assert requests and set(requests) == {"Basic <redacted>"}  # authenticated, not how
    stats = json.loads((out / "stats.json").read_text())
    assert stats["records"] == 5


def test_userinfo_is_taken_off_a_url_and_nothing_else() -> None:
    assert without_userinfo("http://u:p@h/") == "http://h/"
    assert without_userinfo("https://u@h:8080/a@b?c@d") == "https://h:8080/a@b?c@d"
    assert without_userinfo("http://h/a@b?u:p@c") == "http://h/a@b?u:p@c"


def test_a_seeds_credentials_are_percent_decoded_and_one_origin_has_one_pair() -> None:
    seeds, sent = seed_credentials(["http://us%40er:p%C3%A4ss@h/", "http://h/x", "https://h/"])
    assert seeds == ["http://h/", "http://h/x", "https://h/"]
    assert sent == {"http://h": "Basic " + base64.b64encode("us@er:päss".encode()).decode()}
    with pytest.raises(ConfigError, match="http://h different") as refused:
        seed_credentials(["http://u:pw1@h/", "http://u:pw2@h/x"])
    assert "pw1" not in str(refused.value) and "pw2" not in str(refused.value)


def test_a_seeds_password_is_not_printed_in_messages_about_it(tmp_path: Path) -> None:
    # A URL given where the seeds file goes, and a file whose lines are refused or warned of.
    refused = run_main(f"https://crawler:{SECRET}@127.0.0.1:9/", "--max-depth", "0")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(
        f"ftp://crawler:{SECRET}@127.0.0.1:9/\n"
        f"http://crawler:{SECRET}@127.0.0.1:9/{'x' * 100}\n"
        f"http://crawler:{SECRET}@127.0.0.1:9/ # the home page\n"
    )
    output = str(tmp_path / "o.jsonl")
    warned = run_main(
        str(seeds), "--max-url-length", "60", "-o", output, "--ignore-robots", "--retries", "0"
    )

    assert refused.returncode == 2 and "seeds file not found" in refused.stderr
    assert len(warned.stderr.splitlines()) > 3, warned.stderr
    for result in (refused, warned):
        assert SECRET not in result.stdout + result.stderr
