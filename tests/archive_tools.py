"""The tools the archive tests run as real readers: pywb, cdxj-indexer, py-wacz, and
ReplayWeb.page in Chromium.

The first three live in a venv of their own (pywb pins redis<3, which the crawler
cannot use), and ReplayWeb.page's built ui.js and sw.js beside it:

    sh tests/install-archive-tools.sh      # .venv-archive/bin, .venv-archive/replaywebpage

CRAWLER_ARCHIVE_TOOLS names another bin directory. Chromium is Debian's `chromium`.
Without a tool a test skips, unless CI is set: there it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("CRAWLER_ARCHIVE_TOOLS", ROOT / ".venv-archive" / "bin"))


def tool(name: str) -> str:
    """The path of the archive tool `name`; skips (fails in CI) if it is not installed."""
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


def _missing(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def run_tool(name: str, *args: str, cwd: Path | None = None) -> str:
    """Run an archive tool; its stdout, after checking it succeeded."""
    done = subprocess.run([tool(name), *args], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, f"{name} {args}: {done.stdout}{done.stderr}"
    return done.stdout
