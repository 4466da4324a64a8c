"""A deterministic static site to crawl, and a local server for it.

`generate()` writes N pages of 5-15 KB of HTML in nested directories, each with
20-40 links: the page's parent and children in a tree rooted at /index.html (so
every page is a few levels from the index), plus random cross links. Links come
in every form a crawler meets: relative (`c.html`, `../a/b.html`, `./c.html`),
root-relative (`/x/y.html`) and absolute (`http://127.0.0.1:PORT/...`), some
with `#fragments`, some repeated on one page, and some to hosts the crawl must
never reach (`.invalid` names, 127.0.0.2). Absolute links carry the port, so a
site is generated for one port. `manifest.json` beside the pages lists the
canonical URL of every page: a complete crawl outputs each exactly once.

`serve()` runs nginx on 127.0.0.1 with its own config in a temporary directory,
or aiohttp's static handler in a subprocess when nginx is not installed.

    python benchmarks/site.py --pages 20000 --out DIR --port 18765
    python benchmarks/site.py --out DIR --port 18765 --serve   # until Ctrl-C
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import json
import posixpath
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
MANIFEST = "manifest.json"
FAN_OUT = 8  # children per page: 20,000 pages are 5 levels below the index
SEED = 20240229

_TEXT = (
    "crawler frontier politeness robots sitemap canonical fragment anchor index archive "
    "report summary history garden river mountain station library museum harbour market "
    "bridge tower village meadow forest orchard valley island canyon desert glacier "
    "network protocol server client request response header payload latency bandwidth "
    "the a of and to in is that for on with as by at from this be are was it an or "
    "quickly slowly carefully often rarely always never between under over through "
    "analysis method result table figure section chapter volume edition reference note"
)
_WORDS = _TEXT.split()
_SECTION_NAMES = "news blog docs wiki shop help about archive people places events guides"
_SECTIONS = _SECTION_NAMES.split()
_OFFSITE = (
    "http://other.invalid/",
    "https://cdn.example.invalid/static/",
    "http://tracker.invalid/click?to=",
    "http://127.0.0.2:9/",
)


@dataclass(frozen=True)
class Site:
    directory: Path
    port: int
    urls: list[str]  # canonical URL of every page; urls[0] is the index
    generator: str  # digest of the site.py that wrote it
    gone: frozenset[str] = frozenset()  # URLs linked to that name no file (404)

    @property
    def index_url(self) -> str:
        return self.urls[0]


def page_paths(pages: int, rng: random.Random) -> list[str]:
    """URL paths of the pages, page 0 being /index.html; 1 to 3 directories deep."""
    paths = ["/index.html"]
    for number in range(1, pages):
        depth = 1 + number % 3
        parts = [rng.choice(_SECTIONS)] + [
            f"{rng.choice(_WORDS)}{rng.randrange(10)}" for _ in range(depth - 1)
        ]
        paths.append(f"/{'/'.join(parts)}/{rng.choice(_WORDS)}-{number}.html")
    return paths


def _sentences(rng: random.Random, count: int) -> list[str]:
    """A pool of sentences, so that filling 200 MB of pages is not one choice per word."""
    pool = []
    for _ in range(count):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 18))]
        pool.append(" ".join(words).capitalize() + ".")
    return pool


def _link_forms(source: str, target: str, port: int, rng: random.Random) -> str:
    """One way of writing a link from page `source` to page `target`."""
    roll = rng.random()
    if roll < 0.35:
        href = posixpath.relpath(target, posixpath.dirname(source))
        if rng.random() < 0.1 and not href.startswith("."):
            href = "./" + href
    elif roll < 0.7:
        href = target
    else:
        href = f"http://{HOST}:{port}{target}"
    if rng.random() < 0.15:
        href += f"#sec-{rng.randrange(1, 6)}"
    return href


def _page_links(number: int, paths: list[str], port: int, rng: random.Random) -> list[str]:
    """19-39 hrefs: tree neighbours, cross links, repeats, one or two out-of-scope links."""
    pages = len(paths)
    targets = [0]
    if number:
        targets.append((number - 1) // FAN_OUT)
    targets += range(number * FAN_OUT + 1, min(number * FAN_OUT + FAN_OUT, pages - 1) + 1)
    total = rng.randint(19, 39)  # and the footer's mailto: makes 20-40
    offsite = rng.randint(1, 2)
    repeats = rng.randint(1, 3)
    while len(targets) < total - offsite - repeats:
        targets.append(rng.randrange(pages))
    source = paths[number]
    hrefs = [_link_forms(source, paths[t], port, rng) for t in targets]
    hrefs += [rng.choice(hrefs) for _ in range(repeats)]
    hrefs += [f"{rng.choice(_OFFSITE)}page-{rng.randrange(1000)}.html" for _ in range(offsite)]
    rng.shuffle(hrefs)
    return hrefs


def render_page(
    number: int, paths: list[str], port: int, rng: random.Random, pool: list[str]
) -> str:
    """The HTML of one page: a nav list, headings, paragraphs with links among the text."""
    hrefs = _page_links(number, paths, port, rng)
    title = " ".join(rng.choice(_WORDS) for _ in range(4)).title()
    nav, body_links = hrefs[:5], hrefs[5:]
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title} - page {number}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<link rel="stylesheet" href="/static/site.css">\n</head>\n<body>\n<nav><ul>\n',
        *(f'<li><a href="{href}">{rng.choice(_WORDS).title()}</a></li>\n' for href in nav),
        f"</ul></nav>\n<main>\n<h1>{title}</h1>\n",
    ]
    size = sum(map(len, parts))
    target_size = rng.randint(5_700, 14_800) - 250  # room for the closing tags
    section = 0
    while True:
        all_placed = not body_links
        if rng.random() < 0.2:
            section += 1
            chunk = f'<h2 id="sec-{section}">{rng.choice(pool)[:-1]}</h2>\n'
        else:
            sentences = [rng.choice(pool) for _ in range(rng.randint(2, 6))]
            for _ in range(min(len(body_links), rng.randint(1, 3))):
                anchor = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))
                position = rng.randrange(len(sentences) + 1)
                sentences.insert(position, f'<a href="{body_links.pop()}">{anchor}</a>')
            chunk = f"<p>{' '.join(sentences)}</p>\n"
        if all_placed and size + len(chunk) > target_size:
            break
        parts.append(chunk)
        size += len(chunk)
    parts.append(
        "</main>\n<footer><p>Generated for the crawl benchmark. "
        '<a href="mailto:webmaster@example.invalid">Write to us</a>.</p></footer>\n'
    )
    parts.append("</body>\n</html>\n")
    return "".join(parts)


def generate(directory: Path, pages: int = 20_000, port: int = 18765, seed: int = SEED) -> Site:
    """Write the site and its manifest; the same arguments always give the same bytes."""
    if pages < 1:
        raise ValueError("a site needs at least one page")
    rng = random.Random(seed)
    paths = page_paths(pages, rng)
    pool = _sentences(rng, 4000)
    directory.mkdir(parents=True, exist_ok=True)
    for number, path in enumerate(paths):
        file = directory / path.lstrip("/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(render_page(number, paths, port, rng, pool), encoding="utf-8")
    urls = [f"http://{HOST}:{port}{path}" for path in paths]
    manifest = {
        "pages": pages,
        "port": port,
        "seed": seed,
        "generator": generator_digest(),
        "urls": urls,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=0), encoding="utf-8")
    return Site(directory, port, urls, manifest["generator"])


def generator_digest() -> str:
    """Changes whenever this file does, so that a site made by an older version is remade."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def load(directory: Path) -> Site | None:
    """The site already generated in `directory`, or None if there is none."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Site(directory, manifest["port"], manifest["urls"], manifest.get("generator", ""))


def ensure(directory: Path, pages: int, port: int) -> Site:
    """The site in `directory` if it was made with these arguments, else a new one there."""
    site = load(directory)
    if (
        site is not None
        and site.port == port
        and len(site.urls) == pages
        and site.generator == generator_digest()
    ):
        return site
    shutil.rmtree(directory, ignore_errors=True)
    return generate(directory, pages, port)


@dataclass(frozen=True)
class Server:
    name: str  # what serves the site, as the benchmark reports it
    pid: int


def nginx_binary() -> str | None:
    # Debian puts nginx in /usr/sbin, which is not on every user's PATH.
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def _nginx_config(site_dir: Path, port: int, prefix: Path) -> str:
    return f"""\
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    types {{ text/html html; application/json json; }}
    default_type application/octet-stream;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen {HOST}:{port} backlog=4096;
        root {site_dir.resolve()};
    }}
}}
"""


def pinned(command: list[str], cpu: int | None) -> list[str]:
    """`command` run on CPU `cpu` only, or anywhere if `cpu` is None."""
    return command if cpu is None else ["taskset", "-c", str(cpu), *command]


def _wait_until_answering(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            detail = log.read_text(errors="replace") if log.exists() else ""
            raise RuntimeError(f"the server exited with {process.returncode}: {detail.strip()}")
        connection = http.client.HTTPConnection(HOST, port, timeout=1)
        try:
            connection.request("GET", "/index.html")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            connection.close()
        time.sleep(0.05)
    raise RuntimeError(f"the server did not answer on {HOST}:{port} within 15 s")


def port_is_free(port: int) -> bool:
    connection = http.client.HTTPConnection(HOST, port, timeout=1)
    try:
        connection.connect()
    except OSError:
        return True
    finally:
        connection.close()
    return False


@contextlib.contextmanager
def serve(
    site_dir: Path, port: int, cpu: int | None = None, latency_ms: float = 0
) -> Iterator[Server]:
    """Serve `site_dir` on 127.0.0.1:`port` (pinned to `cpu` if given) until the block ends.

    With `latency_ms`, each response waits that long first, as over a real network:
    nginx has no such setting, so aiohttp's static handler serves then."""
    if not port_is_free(port):
        raise RuntimeError(f"port {port} on {HOST} is already in use; pick another with --port")
    with tempfile.TemporaryDirectory(prefix="bench-server-") as temp:
        prefix = Path(temp)
        log = prefix / "error.log"
        nginx = nginx_binary() if not latency_ms else None
        if nginx is not None:
            version = subprocess.run(
                [nginx, "-v"], capture_output=True, text=True, check=False
            ).stderr.strip()
            name = version.removeprefix("nginx version: ")
            config = prefix / "nginx.conf"
            config.write_text(_nginx_config(site_dir, port, prefix), encoding="utf-8")
            # -e: nginx writes startup errors to /var/log/nginx until it has read the config.
            command = [nginx, "-p", str(prefix), "-c", str(config), "-e", str(log)]
        else:
            why = f"{latency_ms:g} ms a response" if latency_ms else "nginx not installed"
            name = f"aiohttp static handler ({why})"
            command = [sys.executable, __file__, "--out", str(site_dir), "--port", str(port)]
            command += ["--aiohttp-server", "--latency-ms", str(latency_ms)]
        with open(log, "ab") as stderr:
            process = subprocess.Popen(
                pinned(command, cpu), stdout=subprocess.DEVNULL, stderr=stderr
            )
        try:
            _wait_until_answering(port, process, log)
            yield Server(name, process.pid)
        finally:
            # SIGQUIT is nginx's graceful stop; aiohttp's runner stops on SIGTERM.
            process.send_signal(signal.SIGQUIT if nginx else signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _run_aiohttp_server(site_dir: Path, port: int, latency_ms: float) -> None:
    import asyncio

    from aiohttp import web

    @web.middleware
    async def wait(request: web.Request, handler: Any) -> web.StreamResponse:
        await asyncio.sleep(latency_ms / 1000)
        return await handler(request)

    app = web.Application(middlewares=[wait] if latency_ms else [])
    app.router.add_static("/", site_dir)
    # access_log=None: a log line per request would cost more than serving the file.
    web.run_app(app, host=HOST, port=port, access_log=None, print=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000, help="pages (default 20000)")
    parser.add_argument("--out", type=Path, required=True, help="directory to write the site to")
    parser.add_argument("--port", type=int, default=18765, help="port the site is served on")
    parser.add_argument("--seed", type=int, default=SEED, help="random seed of the site")
    parser.add_argument(
        "--serve", action="store_true", help="serve DIR until Ctrl-C (generating it if missing)"
    )
    parser.add_argument("--aiohttp-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency-ms", type=float, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.aiohttp_server:  # serve()'s fallback child
        _run_aiohttp_server(args.out, args.port, args.latency_ms)
        return
    if args.serve:
        site = load(args.out) or generate(args.out, args.pages, args.port, args.seed)
        with serve(site.directory, site.port) as server:
            print(f"{server.name} serving {len(site.urls)} pages at {site.index_url}")
            # Handlers rather than KeyboardInterrupt: a shell's background job ignores
            # SIGINT, and SIGTERM would kill us before the server is stopped.
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, lambda *_: None)
            signal.pause()
        return
    started = time.monotonic()
    site = generate(args.out, args.pages, args.port, args.seed)
    size = sum(f.stat().st_size for f in args.out.rglob("*.html"))
    print(
        f"{len(site.urls)} pages, {size / 2**20:.1f} MiB, in {time.monotonic() - started:.1f} s; "
        f"manifest {args.out / MANIFEST}; index {site.index_url}"
    )


if __name__ == "__main__":
    main()
