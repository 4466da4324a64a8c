"""The tools the archive tests run as real readers: pywb, cdxj-indexer, py-wacz, and
ReplayWeb.page in Chromium.

The first three live in a venv of their own (pywb pins redis<3, which the crawler
cannot use), and ReplayWeb.page's built ui.js and sw.js beside it:

    sh tests/install-archive-tools.sh      # .venv-archive/bin, .venv-archive/replaywebpage

CRAWLER_ARCHIVE_TOOLS names another bin directory. Chromium is Debian's `chromium`.
Without a tool a test fails: the README's test command installs them all.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("CRAWLER_ARCHIVE_TOOLS", ROOT / ".venv-archive" / "bin"))


def tool(name: str) -> str:
    """The path of the archive tool `name`; fails if it is not installed."""
    return str(_installed(TOOLS / name))


def replaywebpage() -> Path:
    """The directory of ReplayWeb.page's ui.js and sw.js."""
    return _installed(TOOLS.parent / "replaywebpage" / "sw.js").parent


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        _missing("chromium is missing: apt-get install chromium")
    return str(path)


def _installed(path: Path) -> Path:
    if not path.exists():
        _missing(f"{path} is missing: run sh tests/install-archive-tools.sh")
    return path


def _missing(message: str) -> NoReturn:
    pytest.fail(message)


def run_tool(name: str, *args: str, cwd: Path | None = None) -> str:
    """Run an archive tool; its stdout, after checking it succeeded."""
    done = subprocess.run([tool(name), *args], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, f"{name} {args}: {done.stdout}{done.stderr}"
    return done.stdout


@contextmanager
def pywb(root: Path) -> Iterator[str]:
    """pywb's `wayback` serving the collections in `root`, on a free loopback port. It
    lists root/collections at each request: a collection added while it runs is served."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = root / "wayback.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [tool("wayback"), "-p", str(port), "-b", "127.0.0.1"],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 60
        while not _answers(port):
            assert process.poll() is None, f"wayback exited before serving: {log.read_text()}"
            assert time.monotonic() < deadline, "wayback did not serve within 60 s"
            time.sleep(0.05)  # it binds the port at the end of its start, and tells no one
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait()


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return False
    return True
