"""A real documentation site for the benchmarks: Debian's python3.11-doc, and its manifest.

`ensure(directory, port)` copies the HTML documentation (`apt-get install -y
python3.11-doc`: /usr/share/doc/python3.11/html) into `directory`, and writes
beside it the manifest crawl_bench.py checks crawls against: every URL a complete
crawl from /index.html outputs, found by reading the copied files themselves (no
server, no crawler): each page's `<a href>`s resolved with urllib, fragments
dropped, kept if they stay on 127.0.0.1:PORT, and followed if they name an HTML
file. A link to a file that is not there is in the manifest too, as the 404 every
crawler records for it (`missing_files`). Its pages are larger than the generated
site's (up to 1.5 MB; 127 KB on average) with many links each, some to source
text files (`_sources/*.txt`), fetched but not parsed.

    python benchmarks/docs_site.py --out DIR --port 18767
"""

from __future__ import annotations

import argparse
import hashlib
import json
import posixpath
import shutil
from collections import deque
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

SOURCE = Path("/usr/share/doc/python3.11/html")
HOST = "127.0.0.1"
MANIFEST = "manifest.json"


def generator_digest(source: Path) -> str:
    """Changes when this file or the documentation's file list does."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted(source.rglob("*.html")):
        digest.update(str(path.relative_to(source)).encode())
    return digest.hexdigest()[:12]


def _file_of(root: Path, path: str) -> Path:
    """The file nginx serves for URL `path` (a directory's index.html)."""
    relative = unquote(path).lstrip("/")
    if not relative or relative.endswith("/"):
        relative += "index.html"
    return root / relative


def reachable(root: Path, port: int) -> tuple[list[str], list[str]]:
    """(every URL reachable from /index.html that names a file, those that name none)."""
    origin = f"http://{HOST}:{port}"
    start = f"{origin}/index.html"
    seen = {start}
    queue = deque([start])
    missing = []
    while queue:
        url = queue.popleft()
        file = _file_of(root, urlsplit(url).path)
        if not file.is_file():
            missing.append(url)
            continue
        if file.suffix != ".html":
            continue
        tree = LexborHTMLParser(file.read_bytes())
        for node in tree.css("a[href]"):
            link = urljoin(url, node.attributes.get("href") or "").partition("#")[0]
            parts = urlsplit(link)
            if parts.scheme != "http" or parts.netloc != f"{HOST}:{port}":
                continue
            # Canonical as every contender writes it: no dot segments, nothing empty.
            path = posixpath.normpath(parts.path) + ("/" if parts.path.endswith("/") else "")
            link = origin + path.replace("//", "/") + (f"?{parts.query}" if parts.query else "")
            if link not in seen:
                seen.add(link)
                queue.append(link)
    found = [url for url in seen if url not in set(missing)]
    return [start, *sorted(set(found) - {start})], sorted(missing)


def ensure(directory: Path, port: int, source: Path = SOURCE) -> dict[str, object]:
    """The documentation copied into `directory` with its manifest, made if not there."""
    if not (source / "index.html").is_file():
        raise SystemExit(f"no documentation at {source}: apt-get install -y python3.11-doc")
    manifest_file = directory / MANIFEST
    digest = generator_digest(source)
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        if manifest["port"] == port and manifest["generator"] == digest:
            return manifest
    except (OSError, ValueError, KeyError):
        pass
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(source, directory, symlinks=True)
    found, missing = reachable(directory, port)
    manifest = {
        "port": port,
        "source": str(source),
        "generator": digest,
        "urls": [*found, *missing],
        "missing_files": missing,
    }
    manifest_file.write_text(json.dumps(manifest, indent=0), encoding="utf-8")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--port", type=int, default=18767)
    parser.add_argument("--source", type=Path, default=SOURCE)
    args = parser.parse_args()
    manifest = ensure(args.out, args.port, args.source)
    urls, missing = manifest["urls"], manifest["missing_files"]
    print(f"{len(urls):,} URLs ({len(missing)} name no file) in {args.out}")


if __name__ == "__main__":
    main()
