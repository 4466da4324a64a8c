"""What every request carries and which way it goes: --header, cookies, --proxy."""

from __future__ import annotations

import base64
import json
import socket
import time
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from crawler.config import Settings
from crawler.cookies import CookieJar
from tests.conftest import Site, by_url, crawl, html, read_records
from tests.proxies import HttpProxy, Socks5Proxy
from tests.test_cli import assert_one_line_error, run_cli_async, run_main

SECRET = "S3cretPass"


def seeds_file(tmp_path: Path, *urls: str) -> Path:
    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"{url}\n" for url in urls))
    return path


def small_site(site: Site) -> list[str]:
    site.page("/robots.txt", body="User-agent: *\nAllow: /\n", content_type="text/plain")
    site.page("/", "home", ["/a", "/b"])
    site.page("/a", "a", ["/b"])
    site.page("/b", "b")
    return [f"{site.url}/", f"{site.url}/a", f"{site.url}/b"]


def login_site(site: Site) -> None:
    """/login sets a session cookie and links to /private, which wants it."""

    async def login(_request: web.Request) -> web.Response:
        response = web.Response(text=html("login", ["/private"]), content_type="text/html")
        response.set_cookie("session", "s1", httponly=True)
        return response

    async def private(request: web.Request) -> web.Response:
        if request.cookies.get("session") != "s1":
            return web.Response(status=403, text="log in first")
        return web.Response(text=html("private"), content_type="text/html")

    site.handle("/login", login)
    site.handle("/private", private)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --header


async def test_a_header_goes_with_every_request_robots_txt_included(site: Site, tmp_path):
    small_site(site)

    records = await crawl(
        tmp_path,
        [f"{site.url}/"],
        ignore_robots=False,
        header=(("X-Crawl-Token", "t0k"), ("accept", "text/html")),
    )

    assert len(records) == 3
    assert sorted(site.paths()) == ["/", "/a", "/b", "/robots.txt"]
    for hit in site.hits:
        assert hit.headers["X-Crawl-Token"] == "t0k"
        assert hit.headers.getall("Accept") == ["text/html"]  # the user's replaces ours
        assert hit.headers["Accept-Encoding"].startswith("gzip")


async def test_headers_from_a_toml_table(site: Site, tmp_path):
    small_site(site)
    config = tmp_path / "crawl.toml"
    config.write_text('quiet = true\n[header]\nAccept-Language = "fr"\n')

    code, out, err = await run_cli_async(
        "--config", str(config), str(seeds_file(tmp_path, f"{site.url}/"))
    )

    assert code == 0, err
    assert len(out.splitlines()) == 3
    assert {hit.headers["Accept-Language"] for hit in site.hits} == {"fr"}


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--header", "User-Agent: evil"], "--user-agent"),
        (["--header", "accept-encoding: zstd"], "decode"),
        (["--header", "Cookie: a=b"], "--cookies"),
        (["--header", "Bad Name: x"], "invalid header name 'Bad Name'"),
        (["--header", "NoColon"], "'Name: value'"),
    ],
)
def test_bad_headers_are_refused_with_one_line(tmp_path, flags, named):
    assert_one_line_error(run_main(str(seeds_file(tmp_path, "http://127.0.0.1:9/")), *flags), named)


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[header]\nX-Token = "S3cretPass\\r\\nInjected: 1"\n', "control character"),
        ("[header]\nX-Count = 3\n", "table of strings"),
        # One 'Name: value' string is a header, as --header's is; without a colon it is not.
        ('header = "X-A"\n', "'Name: value'"),
        ("header = 5\n", "table"),
    ],
)
def test_bad_header_tables_are_refused_without_showing_values(tmp_path, toml, named):
    config = tmp_path / "crawl.toml"
    config.write_text(toml)
    seeds = seeds_file(tmp_path, "http://127.0.0.1:9/")

    result = run_main("--config", str(config), str(seeds))

    assert_one_line_error(result, "header", named)
    assert SECRET not in result.stderr


# Cookies


async def test_a_login_cookie_set_by_one_page_is_sent_to_the_next(site: Site, tmp_path):
    login_site(site)
    site.redirect("/enter", "/private")

    records = by_url(await crawl(tmp_path, [f"{site.url}/login"]))

    assert records[f"{site.url}/private"]["status"] == 200
    assert site.count("/private") == 1


async def test_the_jar_sends_each_host_what_aiohttps_own_matching_sends() -> None:
    jar = CookieJar()
    set_cookies = {
        "http://www.example.com/": ["site=1; Domain=example.com", "host=2"],
        "http://127.0.0.1:8080/a/": ["ip=3; Path=/a"],
        "https://sub.example.org/": ["deep=4; Domain=sub.example.org; Secure"],
    }
    for url, headers in set_cookies.items():
        jar.update_cookies_from_headers(headers, URL(url))
    for url in (
        "http://example.com/x",
        "http://www.example.com/x",
        "http://a.b.example.com/",
        "http://example.net/",
        "http://127.0.0.1:8080/a/b",
        "http://127.0.0.1:8080/b",
        "http://127.0.0.2/a/",
        "https://x.sub.example.org/",
        "http://x.sub.example.org/",
        "http://org/",
        "http://localhost/",
    ):
        ours = jar.filter_cookies(URL(url))
        theirs = aiohttp.CookieJar.filter_cookies(jar, URL(url))
        assert sorted(ours.items()) == sorted(theirs.items()), url
    jar.update_cookies({"everywhere": "5"})  # no URL: a cookie for every host
    assert list(jar.filter_cookies(URL("http://example.net/"))) == ["everywhere"]


async def test_no_cookies_keeps_none(site: Site, tmp_path):
    login_site(site)

    records = by_url(await crawl(tmp_path, [f"{site.url}/login"], cookies=False))

    assert records[f"{site.url}/private"]["status"] == 403


async def test_a_cookies_txt_logs_the_crawl_in_with_only_the_cookies_that_apply(
    site: Site, tmp_path
):
    login_site(site)
    future = int(time.time()) + 3600
    cookies = tmp_path / "cookies.txt"
    cookies.write_text(
        "# Netscape HTTP Cookie File\n"
        "\n"
        "127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\ts1\n"
        f"#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t{future}\thttp_only\th1\n"
        "127.0.0.1\tFALSE\t/\tFALSE\t1000\texpired\tx\n"
        "127.0.0.1\tFALSE\t/\tTRUE\t0\tsecure_only\tx\n"
        "127.0.0.1\tFALSE\t/elsewhere\tFALSE\t0\tother_path\tx\n"
        "127.0.0.2\tFALSE\t/\tFALSE\t0\tother_host\tx\n"
    )

    records = await crawl(tmp_path, [f"{site.url}/private"], cookies=str(cookies))

    assert records[0]["status"] == 200
    (hit,) = site.hits
    sent = dict(pair.split("=") for pair in hit.headers["Cookie"].split("; "))
    assert sent == {"session": "s1", "http_only": "h1"}


async def test_a_cookies_txt_with_a_bom_and_an_expiry_past_year_9999_is_read(site: Site, tmp_path):
    login_site(site)
    cookies = tmp_path / "cookies.txt"
    cookies.write_bytes(
        b"\xef\xbb\xbf# Netscape HTTP Cookie File\r\n"  # as some exporters save it
        b"127.0.0.1\tFALSE\t/\tFALSE\t99999999999999999999\tsession\ts1\r\n"
    )

    records = await crawl(tmp_path, [f"{site.url}/private"], cookies=str(cookies))

    assert records[0]["status"] == 200
    (hit,) = site.hits
    assert hit.headers["Cookie"] == "session=s1"


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (f"# comment\n127.0.0.1\tFALSE\t/\t{SECRET}\n", ":2: not a Netscape cookies.txt line"),
        (f"127.0.0.1\tMAYBE\t/\tFALSE\t0\tname\t{SECRET}\n", ":1: "),
        (f"127.0.0.1\tFALSE\t/\tFALSE\tsoon\tname\t{SECRET}\n", "expiry"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_bad_cookies_file_is_one_line_that_shows_no_value(tmp_path, content, named):
    cookies = tmp_path / "cookies.txt"
    if isinstance(content, bytes):
        cookies.write_bytes(content)
    else:
        cookies.write_text(content)

    result = run_main(str(seeds_file(tmp_path, "http://127.0.0.1:9/")), "--cookies", str(cookies))

    assert_one_line_error(result, str(cookies), named)
    assert SECRET not in result.stderr


def test_a_missing_cookies_file_is_named(tmp_path):
    result = run_main(
        str(seeds_file(tmp_path, "http://127.0.0.1:9/")), "--cookies", str(tmp_path / "no.txt")
    )
    assert_one_line_error(result, "cookies file not found")


async def test_with_state_the_cookie_jar_comes_back_on_resume(site: Site, tmp_path):
    login_site(site)
    seeds = seeds_file(tmp_path, f"{site.url}/login")
    output, state = tmp_path / "pages.jsonl", tmp_path / "state"
    args = [str(seeds), "-o", str(output), "--state", str(state), "--quiet"]

    code, _, err = await run_cli_async(*args, "--max-pages", "1")  # /login only
    assert code == 0, err
    assert (state / "cookies.json").exists()
    assert site.count("/private") == 0
    code, _, err = await run_cli_async(*args, "--max-pages", "5")

    assert code == 0, err
    records = by_url(read_records(output))
    assert records[f"{site.url}/private"]["status"] == 200


async def test_a_damaged_cookie_jar_in_the_state_is_left_behind_and_the_crawl_resumes(
    site: Site, tmp_path
):
    login_site(site)
    seeds = seeds_file(tmp_path, f"{site.url}/login")
    output, state = tmp_path / "pages.jsonl", tmp_path / "state"
    args = [str(seeds), "-o", str(output), "--state", str(state), "--quiet"]
    code, _, err = await run_cli_async(*args, "--max-pages", "1")
    assert code == 0, err
    (state / "cookies.json").write_bytes(b"r\x00\x00\x00\x00.")  # no JSON; a broken pickle

    code, _, err = await run_cli_async(*args, "--max-pages", "5")

    assert code == 0, err
    assert "cannot restore the cookies" in err and "Traceback" not in err
    records = by_url(read_records(output))
    assert records[f"{site.url}/private"]["status"] == 403  # resumed, without the login


# Proxies


@pytest.mark.parametrize("proxy_type", [HttpProxy, Socks5Proxy])
async def test_every_request_goes_through_the_proxy_with_its_credentials(
    site: Site, tmp_path, proxy_type
):
    pages = small_site(site)
    async with proxy_type("crawler", SECRET) as proxy:
        records = await crawl(
            tmp_path, [pages[0]], ignore_robots=False, proxy=proxy.url_with("crawler", SECRET)
        )

    assert sorted(r["url"] for r in records) == pages
    assert all(r["status"] == 200 for r in records)
    assert sorted(proxy.paths) == sorted(site.paths()) == ["/", "/a", "/b", "/robots.txt"]
    assert proxy.refused == 0


@pytest.mark.parametrize("proxy_type", [HttpProxy, Socks5Proxy])
async def test_through_a_proxy_a_link_to_a_non_public_address_never_goes_out(
    site: Site, site2: Site, tmp_path, proxy_type
):
    # The proxy resolves and connects for us, where the guard cannot look: an address
    # written in the URL, and localhost, are checked before the request goes to it.
    port = URL(site.url).port
    others = [f"{site2.url}/secret", f"http://localhost:{port}/admin", f"http://[::1]:{port}/x"]
    site.page("/", "home", others)
    site2.page("/secret", "secret")
    async with proxy_type() as proxy:
        records = await crawl(tmp_path, [f"{site.url}/"], any_host=True, proxy=proxy.url)

    assert {r["url"]: r["error"] for r in records} == {
        f"{site.url}/": None,
        **dict.fromkeys(others, "blocked_address"),
    }
    assert proxy.paths == ["/"] and not site2.hits


async def test_through_socks5_names_are_resolved_by_the_crawl_so_the_guard_sees_where_they_lead(
    site: Site, tmp_path
):
    # socks5:// resolves names on this side: the SOCKS library did it out of the guard's
    # sight, so a name leading to 127.0.0.1 went through the proxy to it.
    port = URL(site.url).port
    seed, inside = f"http://site.test:{port}/", f"http://inside.test:{port}/admin"
    site.page("/", "home", [inside])
    site.page("/admin", "admin")
    names = ["site.test:127.0.0.1", "inside.test:127.0.0.1"]
    async with Socks5Proxy() as proxy:
        records = await crawl(tmp_path, [seed], any_host=True, proxy=proxy.url, resolve=names)

    assert {r["url"]: r["error"] for r in records} == {seed: None, inside: "blocked_address"}
    assert proxy.paths == ["/"] and set(site.paths()) == {"/"}


async def test_a_socks_proxy_that_hangs_up_is_a_proxy_error_and_the_crawl_goes_on(
    site: Site, tmp_path
):
    closed = f"http://127.0.0.1:{free_port()}/"  # the proxy cannot connect, and hangs up
    small_site(site)
    async with Socks5Proxy() as proxy:
        records = await crawl(tmp_path, [closed, f"{site.url}/b"], proxy=proxy.url)

    assert {r["url"]: r["error"] for r in records} == {closed: "proxy_error", f"{site.url}/b": None}


async def test_a_proxy_that_refuses_us_is_a_proxy_error_and_the_crawl_goes_on(site: Site, tmp_path):
    pages = small_site(site)
    async with Socks5Proxy("crawler", "right") as proxy:
        records = await crawl(tmp_path, pages, proxy=proxy.url_with("crawler", "wrong"))

    assert [r["error"] for r in records] == ["proxy_error"] * 3
    assert proxy.refused == 3 and not site.hits


async def test_http_proxy_from_the_environment_unless_no_proxy_names_the_host(
    site: Site, tmp_path, monkeypatch
):
    pages = small_site(site)
    async with HttpProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        await crawl(tmp_path, [pages[0]])
        through_proxy = len(proxy.paths)
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        await crawl(tmp_path, [pages[0]])

    assert through_proxy == 3
    assert len(proxy.paths) == 3  # none more: NO_PROXY names 127.0.0.1
    assert len(site.hits) == 6


@pytest.mark.parametrize(
    ("environment", "named"),
    [
        ({"HTTPS_PROXY": f"socks5://u:{SECRET}@127.0.0.1:1080"}, "HTTPS_PROXY"),
        ({"http_proxy": f"http://u:{SECRET}@127.0.0.1:1/path"}, "HTTP_PROXY"),
    ],
)
def test_a_bad_proxy_in_the_environment_is_one_line_without_its_password(
    tmp_path, monkeypatch, environment, named
):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    result = run_main(str(seeds_file(tmp_path, "http://127.0.0.1:9/")))
    assert_one_line_error(result, named)
    assert SECRET not in result.stderr


def test_a_bad_proxy_url_is_one_line_without_its_password(tmp_path):
    seeds = seeds_file(tmp_path, "http://127.0.0.1:9/")
    result = run_main(str(seeds), "--proxy", f"ftp://user:{SECRET}@127.0.0.1:21")
    assert_one_line_error(result, "--proxy", "socks5://")
    assert SECRET not in result.stderr


def test_settings_redacted_hide_the_proxy_password_and_secret_headers():
    settings = Settings(
        proxy=f"http://user:{SECRET}@127.0.0.1:3128",
        header=(("Authorization", f"Bearer {SECRET}"), ("Accept-Language", "fr")),
    )

    redacted = settings.redacted()

    assert SECRET not in repr(redacted)
    assert SECRET not in repr(replace(settings, header=()))  # the proxy is left out of repr()
    assert redacted.proxy == "http://user:****@127.0.0.1:3128"
    assert dict(redacted.header)["Accept-Language"] == "fr"


async def test_no_proxy_password_is_printed_or_stored_anywhere(site: Site, tmp_path):
    small_site(site)
    seeds = seeds_file(tmp_path, f"{site.url}/")
    http_proxy = await HttpProxy("crawler", SECRET).start()
    socks_proxy = await Socks5Proxy("crawler", "other").start()
    runs = {
        "through": http_proxy.url_with("crawler", SECRET),
        "refused": socks_proxy.url_with("crawler", SECRET),
        "dead": f"http://crawler:{SECRET}@127.0.0.1:{free_port()}",
        "dead_socks": f"socks5://crawler:{SECRET}@127.0.0.1:{free_port()}",
    }
    printed = []
    try:
        for name, proxy in runs.items():
            code, out, err = await run_cli_async(
                str(seeds),
                "-o",
                str(tmp_path / f"{name}.jsonl"),
                "--state",
                str(tmp_path / f"{name}-state"),
                "--stats",
                str(tmp_path / f"{name}-stats.json"),
                "--proxy",
                proxy,
                "--retries",
                "0",
            )
            assert code == 0, err
            printed += [out, err]
    finally:
        await http_proxy.stop()
        await socks_proxy.stop()

    assert len(read_records(tmp_path / "through.jsonl")) == 3
    for name, err in zip(runs, printed[1::2], strict=True):
        stats = json.loads((tmp_path / f"{name}-stats.json").read_text())
        if name != "through":  # robots.txt could not be fetched, so the seed is not either
            assert "robots.txt" in err and "(proxy_error)" in err
            assert stats["errors"] == {"robots_unreachable": 1}
    token = base64.b64encode(f"crawler:{SECRET}".encode())
    for text in printed:
        assert SECRET not in text
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "crawl.toml":
            data = path.read_bytes()
            assert SECRET.encode() not in data and token not in data, path


async def test_a_crawl_of_one_host_reuses_its_keep_alive_connections(tmp_path: Path) -> None:
    # Connections the server saw, by the client's port: a pool that closed a connection
    # just given back (as one that counted every release did) makes one each few pages.
    client_ports: set[int] = set()
    pages = 400

    async def handler(request: web.Request) -> web.Response:
        client_ports.add(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        if request.path == "/":
            body = html("index", [f"/p{i}" for i in range(pages)])
        else:
            body = html(request.path)
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    server = web.TCPSite(runner, "127.0.0.1", 0)
    await server.start()
    try:
        seed = f"http://127.0.0.1:{runner.addresses[0][1]}/"
        records = await crawl(tmp_path, [seed], concurrency=8, per_host=8)
    finally:
        await runner.cleanup()
    assert len(records) == pages + 1
    assert len(client_ports) <= 8 + 1  # the workers' connections, and robots.txt's
