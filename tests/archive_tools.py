"""The webrecorder tools the archive tests run as real readers: pywb, cdxj-indexer, py-wacz.

They live in a venv of their own (pywb pins redis<3, which the crawler cannot use):

    python3 -m venv .venv-archive && .venv-archive/bin/pip install -r tests/archive-tools.txt

CRAWLER_ARCHIVE_TOOLS names another bin directory. Without the tools a test skips,
unless CI is set: there it fails.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("CRAWLER_ARCHIVE_TOOLS", ROOT / ".venv-archive" / "bin"))


def tool(name: str) -> str:
    """The path of the archive tool `name`; skips (fails in CI) if it is not installed."""
    path = TOOLS / name
    if not path.exists():
        message = f"{path} is missing: pip install -r tests/archive-tools.txt into .venv-archive"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def run_tool(name: str, *args: str, cwd: Path | None = None) -> str:
    """Run an archive tool; its stdout, after checking it succeeded."""
    done = subprocess.run([tool(name), *args], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, f"{name} {args}: {done.stdout}{done.stderr}"
    return done.stdout
