#!/bin/sh
# The archive tools tests/test_wacz.py runs as real readers, into .venv-archive/
# (tests/archive_tools.py): pywb, cdxj-indexer and py-wacz from PyPI, in a venv of their
# own (pywb pins redis<3), and ReplayWeb.page's built ui.js and sw.js from npm.
set -e
cd "$(dirname "$0")/.."
python3 -m venv .venv-archive
.venv-archive/bin/pip install -q -r tests/archive-tools.txt
cd .venv-archive
rm -rf replaywebpage package
npm pack --silent replaywebpage@2.5.3 >/dev/null
tar xzf replaywebpage-2.5.3.tgz
mv package replaywebpage
rm replaywebpage-2.5.3.tgz
