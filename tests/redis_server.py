"""A real redis-server on 127.0.0.1 and a free port, for the tests of --redis."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

REDIS_SERVER = "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_path() -> str:
    """The redis-server binary; a clear failure when it is missing (the README installs it)."""
    path = REDIS_SERVER if os.path.exists(REDIS_SERVER) else shutil.which("redis-server")
    if path is None:
        pytest.fail("redis-server is not installed (apt-get install -y redis-server)")
    return path


class RedisServer:
    def __init__(self, directory: Path, port: int | None = None, durable: bool = False) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.durable = durable  # every write on disk before it is acknowledged
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        persistence = ["--appendonly", "yes", "--appendfsync", "always"]
        command = [redis_server_path(), "--bind", "127.0.0.1", "--port", str(self.port)]
        command += ["--dir", str(self.directory), "--save", ""]
        command += persistence if self.durable else ["--appendonly", "no"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client().ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise
                time.sleep(0.02)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait()
            self.process = None
