"""`python -m crawler.demo`: crawl a small site served on 127.0.0.1, no internet needed.

The site shows what the crawler does with the usual traps: a link cycle, many
spellings of one URL, a redirect chain and loop, a GBK page, a page robots.txt
forbids, a missing page, and links to other hosts (listed, not followed). The
crawl runs through the same code as `python -m crawler`, with any extra flags
given here (e.g. `python -m crawler.demo -o demo.jsonl`).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from crawler.__main__ import main as crawler_main

TOPICS = ("bloom-filters", "politeness", "canonical-urls", "robots-txt", "resuming")


def _page(title: str, links: Sequence[str], charset: str = "utf-8", text: str = "") -> bytes:
    anchors = "\n".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    document = (
        f'<!doctype html><html><head><meta charset="{charset}"><title>{title}</title>'
        f"</head><body><h1>{title}</h1><p>{text}</p><ul>{anchors}</ul></body></html>"
    )
    return document.encode(charset)


def site_pages() -> dict[str, tuple[int, dict[str, str], bytes]]:
    """path -> (status, headers, body) for every page of the demo site."""
    html = {"Content-Type": "text/html"}
    pages: dict[str, tuple[int, dict[str, str], bytes]] = {
        "/robots.txt": (
            200,
            {"Content-Type": "text/plain"},
            b"User-agent: *\nDisallow: /private/\n",
        ),
        "/": (
            200,
            html,
            _page(
                "Demo site",
                [
                    *(f"/topics/{t}.html" for t in TOPICS),
                    "/zh/",
                    "/old-home",
                    "/private/notes",
                    "/missing",
                    "/loop/a",
                    "https://example.org/elsewhere",
                    "mailto:demo@example.org",
                ],
                text="Every link here is a trap or a page.",
            ),
        ),
        "/zh/": (
            200,
            html,
            _page(
                "中文页面：布隆过滤器",
                ["../topics/bloom-filters.html"],
                charset="gbk",
                text="这一页用 GBK 编码。",
            ),
        ),
        "/private/notes": (200, html, _page("Private", [])),
    }
    for i, topic in enumerate(TOPICS):
        following = TOPICS[(i + 1) % len(TOPICS)]
        pages[f"/topics/{topic}.html"] = (
            200,
            html,
            _page(
                topic.replace("-", " ").title(),
                [
                    f"{following}.html",
                    f"./{following}.html#top",
                    f"/topics/../topics/{following}.html",
                    f"/topics/{topic}/part-1.html",
                    "/",
                ],
            ),
        )
        for part in (1, 2):
            pages[f"/topics/{topic}/part-{part}.html"] = (
                200,
                html,
                _page(f"{topic} part {part}", [f"part-{part % 2 + 1}.html", f"../{topic}.html"]),
            )
    for source, target in (
        ("/old-home", "/moved"),
        ("/moved", "/"),
        ("/loop/a", "/loop/b"),
        ("/loop/b", "/loop/a"),
    ):
        pages[source] = (301, {"Location": target}, b"")
    return pages


async def _serve(
    pages: dict[str, tuple[int, dict[str, str], bytes]],
    ready: threading.Event,
    stop: asyncio.Event,
    address: list[str],
) -> None:
    async def handler(request: web.Request) -> web.Response:
        status, headers, body = pages.get(request.path, (404, {}, b"not found"))
        return web.Response(status=status, headers=headers, body=body)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    address.append(f"http://127.0.0.1:{runner.addresses[0][1]}/")
    ready.set()
    await stop.wait()
    await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    ready, address = threading.Event(), list[str]()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    server = threading.Thread(
        target=loop.run_until_complete,
        args=(_serve(site_pages(), ready, stop, address),),
        daemon=True,
    )
    server.start()
    ready.wait()
    print(f"crawler demo: serving a small site at {address[0]}", file=sys.stderr)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            seeds = Path(scratch, "seed-urls.txt")
            seeds.write_text(f"# the demo site\n{address[0]}\n", "utf-8")
            return crawler_main([str(seeds), *(sys.argv[1:] if argv is None else argv)])
    finally:
        loop.call_soon_threadsafe(stop.set)
        server.join(timeout=5)


if __name__ == "__main__":
    sys.exit(main())
