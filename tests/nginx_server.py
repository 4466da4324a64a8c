"""A real nginx on 127.0.0.1 and a free port, serving a directory, for the recrawl tests.

nginx sends ETag and Last-Modified for static files and answers conditional requests
with 304 itself, as most sites' front servers do. Its access log records, per request,
the status, the body bytes sent and the validators the crawler sent.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.redis_server import free_port

_LOG_FORMAT = (
    "$request_uri\\t$status\\t$body_bytes_sent\\t$http_if_none_match\\t$http_if_modified_since"
)


def nginx_path() -> str:
    """The nginx binary; a clear failure when it is missing (apt-get install -y nginx)."""
    path = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is not installed (apt-get install -y nginx)")
        pytest.skip("nginx is not installed (apt-get install -y nginx)")
    return path


@dataclass
class Served:
    """One line of the access log."""

    path: str
    status: int
    body_bytes: int
    if_none_match: str
    if_modified_since: str


class Nginx:
    def __init__(self, root: Path, prefix: Path) -> None:
        self.root, self.prefix = root, prefix
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Nginx:
        self.prefix.mkdir(parents=True, exist_ok=True)
        config = self.prefix / "nginx.conf"
        config.write_text(
            # As root, nginx's workers would be nobody, who cannot read pytest's tmp_path.
            ("user root root;\n" if os.geteuid() == 0 else "")
            + f"""\
worker_processes 1;
daemon off;
pid {self.prefix}/nginx.pid;
error_log {self.prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format recrawl escape=none "{_LOG_FORMAT}";
    access_log {self.prefix}/access.log recrawl;
    types {{ text/html html; }}
    default_type application/octet-stream;
    client_body_temp_path {self.prefix}/client_body;
    proxy_temp_path {self.prefix}/proxy;
    fastcgi_temp_path {self.prefix}/fastcgi;
    uwsgi_temp_path {self.prefix}/uwsgi;
    scgi_temp_path {self.prefix}/scgi;
    server {{
        listen 127.0.0.1:{self.port};
        root {self.root.resolve()};
    }}
}}
""",
            encoding="utf-8",
        )
        command = [nginx_path(), "-p", str(self.prefix), "-c", str(config)]
        command += ["-e", str(self.prefix / "error.log")]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break  # answering
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError((self.prefix / "error.log").read_text()) from None
                time.sleep(0.02)
        self.served()  # the probe is not the crawl's
        return self

    def served(self) -> list[Served]:
        """The requests served since the last call (the log is read and emptied)."""
        log = self.prefix / "access.log"
        if not log.exists():
            return []
        lines = log.read_text(encoding="utf-8").splitlines()
        log.write_text("", encoding="utf-8")  # nginx appends with O_APPEND: writes go on at 0
        served = []
        for line in lines:
            path, status, body, etag, since = line.split("\t")
            served.append(
                Served(
                    path,
                    int(status),
                    int(body),
                    "" if etag == "-" else etag,
                    "" if since == "-" else since,
                )
            )
        return served

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
