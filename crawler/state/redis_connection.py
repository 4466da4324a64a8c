"""One connection to Redis that all of a process's coroutines share, their commands pipelined.

redis-py's asyncio client takes a connection from a pool for each command, sends
it, waits for the reply under a timeout of its own and gives the connection back:
several awaits, a lock and two timers a command, which cost a `--redis` crawl more
client CPU than the rest of a page's work in the store. Here a command is packed by
hiredis and written, with every other command of the same event-loop turn, in one
send; replies are parsed by hiredis's reader and answer the callers' futures in
order, since Redis answers a connection's commands in the order they came. So no
pool and no lock: a caller that gives up (cancelled) leaves its reply to be read
and dropped. A hung Redis is for the caller to notice (RedisStore's heartbeat does,
with a timeout) and `abort`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import Any

import hiredis
import redis
from redis.connection import SSLConnection, parse_url

# How Redis (6 and later; before 6) answers AUTH when it asks for no password.
NO_PASSWORD_SET = ("called without any password configured", "no password is set")


class RedisConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self._reader = hiredis.Reader()
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._unsent: list[bytes] = []
        self._transport: asyncio.Transport | None = None
        self._lost: redis.ConnectionError | None = None

    @classmethod
    async def open(cls, url: str, timeout_s: float) -> RedisConnection:
        """Connect to the Redis of a redis://, rediss:// or unix:// URL, and log in to
        its user and database, if any."""
        options = parse_url(url)  # type: ignore[no-untyped-call]  # redis-py's, unannotated
        loop = asyncio.get_running_loop()
        if "path" in options:
            connecting = loop.create_unix_connection(cls, options["path"])
        else:
            tls = (
                ssl.create_default_context()
                if options.get("connection_class") is SSLConnection
                else None
            )
            connecting = loop.create_connection(
                cls, options.get("host", "localhost"), options.get("port", 6379), ssl=tls
            )
        try:
            # Not wait_for, which in 3.11 may swallow a cancel that comes as the connection
            # is made (the Redis feeder's did: a process went on after Ctrl-C).
            async with asyncio.timeout(timeout_s):
                _, connection = await connecting
        except (OSError, TimeoutError) as exc:
            raise redis.ConnectionError(f"cannot connect: {exc or 'timed out'}") from None
        if options.get("password"):
            user = [options["username"]] if options.get("username") else []
            try:
                await connection.call("AUTH", *user, options["password"])
            except redis.ResponseError as exc:
                # A server that asks no password lets us in, as it lets redis-py (which
                # --redis's start-up check uses) and redis-cli.
                if not any(reply in str(exc) for reply in NO_PASSWORD_SET):
                    raise
        if options.get("db"):
            await connection.call("SELECT", options["db"])
        return connection

    def call(self, *args: str | bytes | int | float) -> asyncio.Future[Any]:
        """Send a command; the future is its reply, or a redis error."""
        # hiredis's stub says a 1-tuple; it takes any number of arguments.
        return self.send(hiredis.pack_command(args))  # type: ignore[arg-type]

    def send(self, command: bytes) -> asyncio.Future[Any]:
        """Send a command packed by `hiredis.pack_command`; the future is its reply."""
        future = asyncio.get_running_loop().create_future()
        if self._lost is not None:
            future.set_exception(self._lost)
            return future
        if not self._unsent:
            future.get_loop().call_soon(self._flush)
        self._unsent.append(command)
        self._waiting.append(future)
        return future

    def abort(self) -> None:
        """Drop the connection: every caller still waiting gets a ConnectionError."""
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _flush(self) -> None:
        if self._lost is None:
            assert self._transport is not None  # open() returns a connected one
            self._transport.write(b"".join(self._unsent))
        self._unsent.clear()

    # -- asyncio.Protocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        try:
            while (reply := reader.gets()) is not False:
                future = self._waiting.popleft()
                if future.done():  # its caller was cancelled
                    continue
                if isinstance(reply, hiredis.ReplyError):
                    future.set_exception(_error(str(reply)))
                else:
                    future.set_result(reply)
        except hiredis.ProtocolError as exc:
            self._lose(redis.ConnectionError(f"bad reply from Redis: {exc}"))
            if self._transport is not None:
                self._transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lose(redis.ConnectionError(f"connection lost: {exc or 'closed by the server'}"))

    def _lose(self, error: redis.ConnectionError) -> None:
        if self._lost is None:
            self._lost = error
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(self._lost)


def _error(message: str) -> redis.ResponseError:
    """The redis-py exception of an error reply (NOSCRIPT: the script must be loaded)."""
    if message.startswith("NOSCRIPT"):
        return redis.exceptions.NoScriptError(message)
    return redis.ResponseError(message)
