"""A synthetic broad web on loopback: many hosts, pages made from their URL, counted at the server.

Every host is its own address, 127.16.0.0 upwards (all of 127.0.0.0/8 is loopback
on Linux), on one port; no name needs DNS. A process holds at most
`HOSTS_PER_PROCESS` listening sockets (the hard limit on open files here is
20,000), so 10^5 hosts take seven processes.

The pages form levels, like a heap: level 0 holds the `seeds` first pages, and
page i of level d has pages k*i .. k*i+k-1 of level d+1 as its children, `pages`
pages in all. A page links to its children and, up to `links` links, to pages of
levels up to its own plus one, chosen by a hash of its number: most links, as on
the web, lead to pages already seen, and none to a deeper level, so a page's
breadth-first depth is its level. (A crawler must still finish shallower pages
before it claims a deeper page's links: a link back to a page whose parent is
not fetched yet would otherwise give that page too great a depth.) The first
`same_host` children of a page are on its host; the others are on consecutive
hosts, so that a web of as many pages as hosts reaches nearly all.
Every tenth page also links to /private/<n> on its host, a page with no links.

robots.txt, by host number h: one in `DISALLOW_EVERY` disallows /private/, one in
`DELAY_EVERY` asks for a Crawl-delay of `crawl_delay_s` (1 s unless told), the
first `slow_hosts` hosts (0 ..) ask for Crawl-delay 10, one in `NOT_FOUND_EVERY`
answers 404 (everything allowed), and the others allow everything.

The servers count what they see: each page's fetches (so a page fetched twice is
seen), robots.txt fetches, requests before a host's robots.txt was read, fetches
robots.txt disallows, and two requests to a Crawl-delay host closer than its
delay. `BroadWeb.counters()` sums them over the processes.

    with BroadWeb(hosts=100_000, pages=1_000_000) as web:
        seeds = web.seed_urls()
        ...
        print(web.counters())
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import os
import random
import resource
import socket
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

HOSTS_PER_PROCESS = 16_000
FIRST_ADDRESS = (127 << 24) | (16 << 16)  # 127.16.0.0: clear of 127.0.0.1
DISALLOW_EVERY = 10
DELAY_EVERY = 50
NOT_FOUND_EVERY = 40
SLOW_DELAY_S = 10
PRIVATE_EVERY = 10  # pages that also link to /private/<n>
FILLER = "lorem ipsum dolor sit amet " * 1000


@dataclass(frozen=True)
class Shape:
    """The web's structure: which page is where, and what it links to."""

    hosts: int
    pages: int
    seeds: int = 1
    children: int = 10  # k
    links: int = 30
    same_host: int = 2  # of the children, how many are on the parent's host
    slow_hosts: int = 1  # hosts 0 .. slow_hosts-1 ask for Crawl-delay 10
    port: int = 0
    filler_bytes: int = 1500  # text on each page besides its links
    crawl_delay_s: float = 1.0  # of the hosts one in DELAY_EVERY asks it of

    def level_starts(self) -> list[int]:
        """The first page of each level, and `pages` at the end."""
        starts, size = [0], self.seeds
        while starts[-1] < self.pages:
            starts.append(min(self.pages, starts[-1] + size))
            size *= self.children
        return starts

    def level(self, n: int, starts: list[int]) -> int:
        for depth in range(len(starts) - 1):
            if n < starts[depth + 1]:
                return depth
        raise ValueError(n)

    def parent(self, n: int, starts: list[int]) -> tuple[int, int] | None:
        """(parent, which child n is), or None for a seed."""
        depth = self.level(n, starts)
        if depth == 0:
            return None
        index = n - starts[depth]
        return starts[depth - 1] + index // self.children, index % self.children

    def host(self, n: int, starts: list[int]) -> int:
        while True:
            up = self.parent(n, starts)
            if up is None:
                return n % self.hosts
            parent, child = up
            if child >= self.same_host:
                # The others numbered across their level: consecutive ones, consecutive
                # hosts, so that every host is used.
                depth = self.level(n, starts)
                index = (n - starts[depth]) // self.children * (self.children - self.same_host)
                return (starts[depth] + index + child - self.same_host) % self.hosts
            n = parent

    def links_of(self, n: int, starts: list[int]) -> list[int]:
        """The pages `n` links to: its children, then pages no deeper than they are."""
        depth = self.level(n, starts)
        if depth + 2 < len(starts):  # level depth+1 exists
            first = starts[depth + 1] + (n - starts[depth]) * self.children
            children = list(range(first, min(first + self.children, starts[depth + 2])))
            reach = starts[depth + 2]
        else:
            children, reach = [], self.pages
        rng = random.Random(n)
        others = [rng.randrange(reach) for _ in range(self.links - len(children))]
        return children + others

    def pages_at_depth(self) -> list[int]:
        starts = self.level_starts()
        return [b - a for a, b in itertools.pairwise(starts)]

    def robots(self, h: int) -> tuple[int, str]:
        """(status, body) of host h's robots.txt."""
        if h < self.slow_hosts:
            return 200, f"User-agent: *\nCrawl-delay: {SLOW_DELAY_S}\n"
        if h % NOT_FOUND_EVERY == 1:
            return 404, "not found"
        rules = "User-agent: *\n"
        if h % DISALLOW_EVERY == 3:
            rules += "Disallow: /private/\n"
        if h % DELAY_EVERY == 7:
            rules += f"Crawl-delay: {self.crawl_delay_s:g}\n"
        return 200, rules + "Allow: /\n"

    def delay_s(self, h: int) -> float:
        if h < self.slow_hosts:
            return SLOW_DELAY_S
        return self.crawl_delay_s if h % DELAY_EVERY == 7 and h % NOT_FOUND_EVERY != 1 else 0.0

    def disallows_private(self, h: int) -> bool:
        return h >= self.slow_hosts and h % DISALLOW_EVERY == 3 and h % NOT_FOUND_EVERY != 1

    def origin(self, h: int) -> str:
        return f"http://{address(h)}:{self.port}"


def address(h: int) -> str:
    return socket.inet_ntoa((FIRST_ADDRESS + h).to_bytes(4, "big"))


def host_number(ip: str) -> int:
    return int.from_bytes(socket.inet_aton(ip), "big") - FIRST_ADDRESS


class _Counters:
    def __init__(self, shape: Shape, first_host: int, last_host: int) -> None:
        self.fetches = bytearray(shape.pages)  # of pages on this process's hosts
        self.private = 0
        self.robots = bytearray(last_host - first_host)
        self.requests = 0
        self.twice = 0
        self.before_robots = 0
        self.disallowed = 0
        self.too_soon = 0
        self.connections = self.most_connections = 0  # open at once, in this process
        self.accepted = 0  # connections made in all
        self.shortest_gap_ms = 1e9  # between two requests to a Crawl-delay host
        self.wrong_host = 0
        self.last_start: dict[int, float] = {}

    def summary(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "pages": sum(1 for c in self.fetches if c),
            "private": self.private,
            "twice": self.twice,
            "robots": sum(1 for c in self.robots if c),
            "robots_twice": sum(1 for c in self.robots if c > 1),
            "before_robots": self.before_robots,
            "disallowed": self.disallowed,
            "too_soon": self.too_soon,
            "most_connections": self.most_connections,
            "connections": self.accepted,
            "shortest_gap_ms": round(self.shortest_gap_ms),
            "wrong_host": self.wrong_host,
        }


class _Http(asyncio.Protocol):
    """HTTP/1.1 with keep-alive, GET only, for one host."""

    def __init__(self, server: _Server, h: int) -> None:
        self._server, self._h = server, h
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        counters = self._server.counters
        counters.connections += 1
        counters.accepted += 1
        counters.most_connections = max(counters.most_connections, counters.connections)

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.counters.connections -= 1

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (end := self._buffer.find(b"\r\n\r\n")) >= 0:
            head, self._buffer = self._buffer[:end], self._buffer[end + 4 :]
            path = head.split(b" ", 2)[1].decode("latin-1")
            status, body = self._server.answer(self._h, path)
            assert self._transport is not None
            self._transport.write(
                b"HTTP/1.1 %d X\r\nContent-Type: text/html; charset=utf-8\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (status, len(body), body)
            )


class _Server:
    def __init__(self, shape: Shape, first_host: int, last_host: int) -> None:
        self.shape = shape
        self.first_host = first_host
        self.starts = shape.level_starts()
        self.counters = _Counters(shape, first_host, last_host)

    def answer(self, h: int, path: str) -> tuple[int, bytes]:
        shape, counters = self.shape, self.counters
        counters.requests += 1
        if path == "/robots.txt":
            counters.robots[h - self.first_host] += 1
            status, text = shape.robots(h)
            return status, text.encode()
        if not counters.robots[h - self.first_host]:
            counters.before_robots += 1
        delay_s = shape.delay_s(h)
        if delay_s:
            now = time.monotonic()
            last = counters.last_start.get(h)
            # The crawler's margin is 10 ms; the server's clock reads it a little later.
            if last is not None and now - last < delay_s - 0.005:
                counters.too_soon += 1
                counters.shortest_gap_ms = min(counters.shortest_gap_ms, (now - last) * 1000)
            counters.last_start[h] = now
        kind, _, number = path.lstrip("/").partition("/")
        if not number.isdigit() or int(number) >= shape.pages:
            counters.wrong_host += 1
            return 404, b"no such page"
        n = int(number)
        if shape.host(n, self.starts) != h:
            counters.wrong_host += 1
            return 404, b"not on this host"
        if kind == "private":
            if shape.disallows_private(h):
                counters.disallowed += 1
            counters.private += 1
            return 200, b"<title>private</title><p>nothing to follow</p>"
        if kind != "p":
            counters.wrong_host += 1
            return 404, b"no such page"
        if counters.fetches[n]:
            counters.twice += 1
        counters.fetches[n] = min(255, counters.fetches[n] + 1)
        return 200, self.page(h, n).encode()

    def page(self, h: int, n: int) -> str:
        shape, starts = self.shape, self.starts
        links = []
        for m in shape.links_of(n, starts):
            target = shape.host(m, starts)
            prefix = "" if target == h else shape.origin(target)
            links.append(f'<a href="{prefix}/p/{m}">page {m}</a>')
        if n % PRIVATE_EVERY == 0:
            links.append(f'<a href="/private/{n}">private</a>')
        filler = FILLER[: self.shape.filler_bytes]
        return f"<html><head><title>p{n}</title></head><body>{''.join(links)}{filler}</body></html>"


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard one; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def _listen(h: int, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address(h), port))
    sock.listen(64)
    sock.setblocking(False)
    return sock


def _serve(shape: Shape, first_host: int, last_host: int, control: Connection) -> None:
    raise_open_files_limit()
    try:
        sockets = [_listen(h, shape.port) for h in range(first_host, last_host)]
    except OSError as exc:
        control.send(f"cannot listen: {exc}")
        return
    asyncio.run(_serve_async(_Server(shape, first_host, last_host), sockets, control))


async def _serve_async(server: _Server, sockets: list[socket.socket], control: Connection) -> None:
    loop = asyncio.get_running_loop()
    for h, sock in enumerate(sockets, server.first_host):
        await loop.create_server(lambda h=h: _Http(server, h), sock=sock, backlog=64)
    done = loop.create_future()

    def on_control() -> None:
        try:
            message = control.recv()
        except EOFError:
            message = "stop"
        if message == "counters":
            control.send(server.counters.summary())
        elif not done.done():
            done.set_result(None)

    loop.add_reader(control.fileno(), on_control)
    control.send("ready")
    await done


class BroadWeb:
    """The servers of a `Shape`, started in processes of their own; a context manager."""

    def __init__(self, hosts: int, pages: int, **shape: Any) -> None:
        self.shape = Shape(hosts, pages, **shape)
        self._processes: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []

    def __enter__(self) -> BroadWeb:
        for attempt in range(5):
            port = random.randrange(20_000, 30_000)
            self.shape = Shape(**{**self.shape.__dict__, "port": port})
            try:
                self._start()
                return self
            except OSError:
                self.stop()
                if attempt == 4:
                    raise
        return self

    def _start(self) -> None:
        context = multiprocessing.get_context("fork")
        hosts = self.shape.hosts
        for first in range(0, hosts, HOSTS_PER_PROCESS):
            ours, theirs = context.Pipe()
            last = min(hosts, first + HOSTS_PER_PROCESS)
            process = context.Process(
                target=_serve, args=(self.shape, first, last, theirs), daemon=True
            )
            process.start()
            theirs.close()
            self._processes.append((process, ours))
        for _, control in self._processes:
            answer = control.recv()
            if answer != "ready":
                raise OSError(answer)

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        for process, control in self._processes:
            with contextlib.suppress(OSError):
                control.send("stop")
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
            control.close()
        self._processes = []

    def counters(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for _, control in self._processes:
            control.send("counters")
        for _, control in self._processes:
            for name, value in control.recv().items():
                if name == "shortest_gap_ms":
                    total[name] = min(total.get(name, value), value)
                else:
                    total[name] = total.get(name, 0) + value
        return total

    def seed_urls(self) -> list[str]:
        starts = self.shape.level_starts()
        shape = self.shape
        return [f"{shape.origin(shape.host(n, starts))}/p/{n}" for n in range(shape.seeds)]

    def expected_depth(self, url: str) -> int | None:
        """The breadth-first depth of `url` (a page's level), or None if it is not a page."""
        path = url.split("/", 3)[3]
        kind, _, number = path.partition("/")
        starts = self.shape.level_starts()
        if not number.isdigit():
            return None
        level = self.shape.level(int(number), starts)
        return level + (kind == "private")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    raise_open_files_limit()
    with BroadWeb(args.hosts, args.pages, seeds=args.seeds) as web:
        print("pages per depth:", web.shape.pages_at_depth(), flush=True)
        print("\n".join(web.seed_urls()), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(10)
                print(web.counters(), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
