"""pywb, the reference replay tool, run from its own virtual environment.

pywb 2.10 pins redis==2.10.6, which cannot share a venv with the crawler's
redis>=5.3, so it lives apart: $PYWB_VENV, or .venv-pywb beside the repository
(`python3 -m venv .venv-pywb && .venv-pywb/bin/pip install pywb==2.10.0`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_VENV = Path(os.environ.get("PYWB_VENV", Path(__file__).parent.parent / ".venv-pywb"))


def pywb_bin(name: str) -> Path:
    """A pywb command; the test is skipped without pywb, unless under CI."""
    path = _VENV / "bin" / name
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"pywb is not installed at {_VENV} (see tests/pywb.py)")
        pytest.skip(f"pywb is not installed at {_VENV} (see tests/pywb.py)")
    return path


def cdxj(warc_files: list[Path]) -> list[dict[str, Any]]:
    """pywb's CDXJ index of `warc_files`: each line's JSON, with its URL key and timestamp."""
    out = subprocess.run(
        [pywb_bin("cdx-indexer"), "-j", *map(str, warc_files)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = []
    for line in out.splitlines():
        key, stamp, fields = line.split(" ", 2)
        lines.append({"urlkey": key, "timestamp": stamp, **json.loads(fields)})
    return lines


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def wayback(root: Path, warc_files: list[Path]) -> Iterator[str]:
    """pywb serving one collection of `warc_files` (copied in); yields its base URL."""
    root.mkdir(parents=True, exist_ok=True)
    manager = pywb_bin("wb-manager")
    subprocess.run([manager, "init", "crawls"], cwd=root, check=True, capture_output=True)
    subprocess.run(
        [manager, "add", "crawls", *map(str, warc_files)],
        cwd=root,
        check=True,
        capture_output=True,
    )
    port = _free_port()
    server = subprocess.Popen(
        [pywb_bin("wayback"), "--bind", "127.0.0.1", "-p", str(port)],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/crawls/"
    try:
        deadline = time.monotonic() + 30
        while True:  # pywb gives no sign of readiness but answering
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("pywb did not start") from None
                time.sleep(0.05)
        yield base
    finally:
        server.terminate()
        server.wait()


def replay(base: str, url: str) -> tuple[int, bytes]:
    """What pywb replays for `url` through `id_` (the capture as it was): status and body.

    `base` may end with a timestamp: the capture closest to it is replayed."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    try:
        with opener.open(f"{base}id_/{url}", timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
