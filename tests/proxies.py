"""Small proxies on 127.0.0.1 for the tests: HTTP (absolute-form GET) and SOCKS5 (CONNECT).

Each counts what passes through it. No maintained SOCKS5 server is on PyPI as a
test dependency (pproxy's last release is from 2024), so a minimal one is here:
CONNECT only, with no authentication or with a user name and password (RFC 1928, 1929).
"""

from __future__ import annotations

import asyncio
import base64
import re
import struct
from collections.abc import Callable

GET_LINE = re.compile(rb"GET (\S+) HTTP/1\.1\r\n")


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    tap: Callable[[bytes], None] | None = None,
) -> None:
    try:
        while data := await reader.read(65536):
            if tap is not None:
                tap(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


class _Proxy:
    def __init__(self, user: str | None = None, password: str | None = None) -> None:
        self.user, self.password = user, password
        self.port = 0
        self.refused = 0  # clients that gave no or wrong credentials
        self.paths: list[str] = []  # the request targets of the GETs that went through
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def url_with(self, user: str, password: str) -> str:
        return f"{self.scheme}://{user}:{password}@127.0.0.1:{self.port}"

    scheme = ""

    async def start(self) -> _Proxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aenter__(self) -> _Proxy:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            await self.handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class HttpProxy(_Proxy):
    """Forwards `GET http://host:port/path` requests, one per connection; records each path."""

    scheme = "http"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")[:-2]
        method, target, version = request_line.split(" ")
        headers = dict(line.split(": ", 1) for line in header_lines)
        if self.user is not None:
            expected = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            if headers.get("Proxy-Authorization") != f"Basic {expected}":
                self.refused += 1
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n")
                writer.write(b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                return
        host_port, _, path = target.removeprefix("http://").partition("/")
        host, _, port = host_port.partition(":")
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port or 80))
        kept = {
            name: value
            for name, value in headers.items()
            if name.lower() not in ("proxy-authorization", "proxy-connection", "connection")
        }
        self.paths.append(f"/{path}")
        lines = [f"{method} /{path} {version}", *(f"{k}: {v}" for k, v in kept.items())]
        upstream_writer.write(("\r\n".join([*lines, "Connection: close"]) + "\r\n\r\n").encode())
        # One request per connection: tell the client so, then relay the body to its end.
        response_head = await upstream_reader.readuntil(b"\r\n\r\n")
        status_line, *response_lines = response_head.decode("latin-1").split("\r\n")[:-2]
        response_lines = [
            line for line in response_lines if not line.lower().startswith("connection:")
        ]
        writer.write(
            ("\r\n".join([status_line, *response_lines, "Connection: close"]) + "\r\n\r\n").encode(
                "latin-1"
            )
        )
        await _pipe(upstream_reader, writer)


class Socks5Proxy(_Proxy):
    """SOCKS5 CONNECT; records the GET lines sent through it."""

    scheme = "socks5"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _version, n_methods = await reader.readexactly(2)
        methods = await reader.readexactly(n_methods)
        wanted = 0x02 if self.user is not None else 0x00
        if wanted not in methods:
            writer.write(b"\x05\xff")
            return
        writer.write(bytes([5, wanted]))
        if wanted == 0x02:
            _auth_version, user_length = await reader.readexactly(2)
            user = (await reader.readexactly(user_length)).decode()
            (password_length,) = await reader.readexactly(1)
            password = (await reader.readexactly(password_length)).decode()
            if (user, password) != (self.user, self.password):
                self.refused += 1
                writer.write(b"\x01\x01")
                return
            writer.write(b"\x01\x00")
        _version, command, _reserved, address_type = await reader.readexactly(4)
        if address_type == 0x01:
            host = ".".join(str(b) for b in await reader.readexactly(4))
        elif address_type == 0x03:
            (length,) = await reader.readexactly(1)
            host = (await reader.readexactly(length)).decode()
        else:
            writer.write(b"\x05\x08\x00\x01" + bytes(6))  # address type not supported
            return
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        if command != 0x01:
            writer.write(b"\x05\x07\x00\x01" + bytes(6))  # command not supported
            return
        upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        writer.write(b"\x05\x00\x00\x01" + bytes(6))
        unread = bytearray()  # what the client sent since its last complete line

        def tap(data: bytes) -> None:
            unread.extend(data)
            self.paths.extend(match.decode() for match in GET_LINE.findall(unread))
            if (end := unread.rfind(b"\r\n")) >= 0:
                del unread[: end + 2]

        await asyncio.gather(_pipe(reader, upstream_writer, tap), _pipe(upstream_reader, writer))
