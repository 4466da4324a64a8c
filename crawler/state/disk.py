"""A crawl kept in a --state directory: resumable after `kill -9` at any moment.

A state directory holds `crawl.sqlite` (in WAL mode: the frontier, a log of
what each page changed, and robots.txt rules as they are read: state/robots.py)
and `visited.bloom` (the Bloom filter, memory-mapped and changed in place); the
breadth-first gate keeps there the pages it holds (crawler/state/held.py), each
written as it is held. After a page is fetched, or taken from the gate, one
synchronous step:

1. hands the page to the sinks (the --warc archive, the output file),
2. commits, in one SQLite transaction, the page's new links as frontier rows and
   one log row: which request is done, each sink's position (file and length)
   and the record count after it, and the visited-set keys it claimed (and
   deletes its held row, if it was held),
3. sets those keys' bits in the Bloom filter.

The bits come last on purpose: a URL's bit is never set before the URL is
safely queued, so a crash cannot make a page look seen that no one will fetch.
Until then a claim lives in a small in-memory set. Appending only, a commit
writes one or two database pages; once a second, a checkpoint records in the
filter's header how far the log is in its bits, then deletes the finished
requests' frontier rows and all but the last log row.

On resume, each sink's file is cut back to its committed position (dropping a
torn or uncommitted line or WARC record), the log past the header's position is replayed into the
filter and folded into the frontier, the pages held at the crash are held again
(their frontier rows dropped), and every row still in the frontier, those in
flight at the crash included, is queued again. So after `kill -9` at any moment,
each page appears in the output exactly once, and at most the URLs in flight at
the crash are fetched a second time (and those of pages held whole for an API
consumer, whose responses are not written down).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from crawler.bloom import BloomFileError, BloomFilter
from crawler.config import ConfigError, Settings
from crawler.cookies import CookieJar
from crawler.frontier import Request, SqliteFrontier
from crawler.page import Page
from crawler.sinks import OUTPUT, Sinks, WriteFailed, open_sinks
from crawler.state import LocalStore, check_visited_set_fits
from crawler.state.held import HeldTable
from crawler.state.host_counts import SqliteClaims, SqliteHostCounts
from crawler.state.robots import SqliteRobotsRules
from crawler.stats import Stats
from crawler.urls import host_of, visit_keys

log = logging.getLogger(__name__)

# 2: frontier.kind and frontier.lastmod, for sitemaps; 3: log.missed_urls, hosts;
# 4: log.positions, for --warc. The robots table (crawler/state/robots.py) came later
# without a new version: made if missing, and ignored by a crawler that predates it.
SCHEMA_VERSION = 4
# log: one row per commit, appended: the page done, each sink's position (JSON, by
# sink name) and the record count after it, the visited-set keys it claimed,
# newline-separated, and the filter's expected missed URLs after it.
# claims (--max-pages-per-host): the records each host has or will have, written with
# the commit that queued them, for the hosts it claimed (a checkpoint wrote all of them
# in its stats: 1.65 s at 10^6 hosts, each second; and at a checkpoint only, a kill -9
# lost the claims since, and hosts went past their limit). Made if missing, as robots is.
# simhash (--extract): each page's fingerprint (16 hex digits) and the first URL that
# had it, in commit order, committed with the page's record: the near-duplicate
# index is read back from it on resume.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS log (
    seq INTEGER PRIMARY KEY,
    done_host TEXT,
    done_seq INTEGER,
    positions TEXT NOT NULL,
    records INTEGER NOT NULL,
    keys TEXT NOT NULL,
    missed_urls REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS hosts (host TEXT PRIMARY KEY, records INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS simhash (fingerprint TEXT PRIMARY KEY, url TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims (host TEXT PRIMARY KEY, records INTEGER NOT NULL) WITHOUT ROWID;
"""
DATABASE, BLOOM, LOCK, COOKIES = "crawl.sqlite", "visited.bloom", "lock", "cookies.json"
OLD_SPILL_FILE = "held.sqlite"  # where older versions spilled held pages, as scratch
# The counters no record holds (retries, dropped URLs), in log.positions beside the sinks':
# committed with each page, they resume where the last commit left them, never lower
# (/metrics would show a drop, which Prometheus takes for a reset: a spike in rate()).
UNRECORDED = "unrecorded"
CHECKPOINT_EVERY_S = 1.0  # header of the filter, journal pruning, stats
# The settings that decide which pages a crawl outputs; a resume must keep them.
SHAPING_SETTINGS = (
    "max_depth",
    "allow_host",
    "any_host",
    "include",
    "exclude",
    "max_url_length",
    "max_pages_per_host",
    "max_path_depth",
    "max_query_params",
    "drop_repeating_paths",
    "expected_urls",
    "fp_rate",
    "sitemaps",
)


class JournaledVisited:
    """The visited set of a state directory: a claim becomes bits only once journaled."""

    def __init__(self, bloom: BloomFilter) -> None:
        self.bloom = bloom
        self._pending: set[str] = set()

    def add(self, key: str) -> bool:
        return self.add_many([key])[0]

    def add_many(self, keys: Sequence[str]) -> list[bool]:
        results = self.bloom.check_many(keys)
        pending = self._pending
        for i, key in enumerate(keys):
            if results[i]:
                if key in pending:
                    results[i] = False
                else:
                    pending.add(key)
        return results

    def settle(self, keys: Iterable[str]) -> None:
        """`keys` are journaled: make them bits."""
        keys = list(keys)
        self.bloom.update(keys)
        self._pending.difference_update(keys)


class DiskStore(LocalStore):
    """A crawl's state in a directory, safe against `kill -9` at any moment."""

    # Set by _open() and _connect(), which are __init__'s, split off so that a failure
    # anywhere in them releases the directory's lock.
    bloom: BloomFilter
    visited: JournaledVisited
    frontier: SqliteFrontier
    held: HeldTable
    robots: SqliteRobotsRules
    stats: Stats
    sinks: Sinks
    _db: sqlite3.Connection
    _host_counts: SqliteHostCounts
    _claims: SqliteClaims
    _offset: int  # the output's committed length
    _meta_to_start: dict[str, Any]
    _log_seq: int
    _checkpointed_at: float

    def __init__(self, settings: Settings, seeds: Sequence[str]) -> None:
        assert settings.state is not None  # open_store() chose this store for it
        check_visited_set_fits(settings, settings.fp_rate)  # before the directory is made
        self._directory = Path(settings.state)
        self._cookie_jar: CookieJar | None = None
        self._lock_fd = _lock(self._directory, settings.fresh)
        try:
            self._open(settings, seeds)
            super().__init__(settings)
            self._restore_fingerprints()
        except sqlite3.Error as exc:
            os.close(self._lock_fd)
            raise ConfigError(
                f"--state {self._directory}: {DATABASE} is not a crawl's state "
                f"({exc}); use --fresh to start over"
            ) from None
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _open(self, settings: Settings, seeds: Sequence[str]) -> None:
        directory = self._directory
        meta = self._connect()
        shape = crawl_shape(settings, seeds)
        output_path = os.path.abspath(settings.output) if settings.output else None
        # A crawl has started once its first commit (the seeds) is in: that writes "shape".
        self.resumed = "shape" in meta
        if self.resumed:
            shape = self._check_resume(settings, meta, shape, output_path)
            positions = json.loads(meta["positions"])
            offset = positions.get(OUTPUT, 0)
            self.stats = self._restored_stats(meta, output_path, offset)
            self.stats.restore_unrecorded(positions.get(UNRECORDED, {}))
        else:
            self._db.close()
            _remove_state_files(directory)
            self._connect()
            positions, offset = None, 0
            self.stats = Stats()
            self.stats.hosts = self._host_counts = SqliteHostCounts(self._db)
        self.stats.claims_per_host = self._claims = SqliteClaims(self._db)
        self._offset = offset
        self._meta_to_start = (
            {}
            if self.resumed
            else {
                "schema": SCHEMA_VERSION,
                "shape": json.dumps(shape),
                "output_path": output_path or "",
            }
        )
        try:
            self.bloom = BloomFilter.open(
                directory / BLOOM, shape["expected_urls"], shape["fp_rate"]
            )
        except BloomFileError as exc:
            raise ConfigError(f"--state {directory}: {exc}; use --fresh to start over") from None
        self.visited = JournaledVisited(self.bloom)
        self._log_seq = self._replay_log()
        if self.resumed:
            self.bloom.expected_missed_urls = float(meta["missed_urls"])
        if self.resumed:
            self._checkpoint()
        self.held = HeldTable(self._db, self._log_positions if settings.warc else None)
        if self.resumed and len(self.held):
            self.visited.add_many(visit_keys(self.held.reclaim()))
        self.frontier = SqliteFrontier(self._db, last_seq=self.held.last_seq)
        self.robots = SqliteRobotsRules(self._db)
        # Finished: nothing queued, in flight or held at a clean end, or --max-pages reached.
        self.complete = self.resumed and (
            not (len(self.frontier) or len(self.held))
            or 0 < settings.max_pages <= self.stats.records
        )
        self.sinks = open_sinks(settings, positions, finished=self.complete)
        self._checkpointed_at = time.monotonic()
        if self.resumed and not self.complete:
            log.info(
                "resuming from %s: %s records so far, %s URLs queued",
                directory,
                f"{self.stats.records:,}",
                f"{len(self.frontier):,}",
            )

    def _connect(self) -> dict[str, str]:
        """Open the database; return its meta table."""
        # Opened and closed beside the API's event loop (crawler/api.py), used on it: by
        # one thread at a time, never two at once.
        self._db = sqlite3.connect(
            self._directory / DATABASE, isolation_level=None, check_same_thread=False
        )
        # One process has the directory (flock), so no shared-memory index for readers.
        self._db.execute("PRAGMA locking_mode=EXCLUSIVE")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        meta = dict(self._db.execute("SELECT name, value FROM meta"))
        schema = int(meta.get("schema", SCHEMA_VERSION))
        if schema != SCHEMA_VERSION:
            raise ConfigError(
                f"--state {self._directory} was written by another version of the crawler "
                f"(state format {schema}, this one reads {SCHEMA_VERSION}); finish that crawl "
                "with it, or use --fresh to start over"
            )
        last = self._db.execute(
            "SELECT positions, records, missed_urls FROM log ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        if last is not None:
            meta.update(positions=last[0], records=last[1], missed_urls=last[2])
        return meta

    def _restored_stats(self, meta: dict[str, str], output_path: str | None, offset: int) -> Stats:
        """The figures at the last checkpoint, plus the records committed since then.

        Checkpoints save the figures once a second; records commit one by one. So the
        records between the checkpoint's output length and the committed one are read
        back and counted again: the figures of every record stay exact across kills.
        Without an output file, only the checkpoint's figures and the record count remain.
        """
        stats = Stats(json.loads(meta.get("stats", "{}")))
        self._db.executemany(  # kept in its stats by an older crawler; a row is newer
            "INSERT OR IGNORE INTO claims VALUES (?, ?)", stats.claims_per_host.figures().items()
        )
        stats.hosts = self._host_counts = SqliteHostCounts(self._db)
        counted_to = int(meta.get("stats_offset", 0))
        if output_path is None:
            stats.records = int(meta["records"])
        elif counted_to < offset:
            with open(output_path, "rb") as output:
                output.seek(counted_to)
                since = output.read(offset - counted_to)
            for line in since.splitlines():
                page = Page.from_record(orjson.loads(line))
                stats.count(page, host_of(page.url))
        stats.restored_records = stats.records
        return stats

    def _check_resume(
        self,
        settings: Settings,
        meta: dict[str, str],
        shape: dict[str, Any],
        output_path: str | None,
    ) -> dict[str, Any]:
        saved = json.loads(meta["shape"])
        changed = [name for name in shape if shape[name] != saved.get(name)]
        if changed and not settings.force_resume:
            raise ConfigError(
                f"--state {self._directory} belongs to a crawl with other "
                f"{', '.join(name.replace('_', '-') for name in changed)}; "
                "use --force-resume to continue it anyway, or --fresh to start over"
            )
        if changed:
            log.warning("resuming despite changed settings: %s", ", ".join(changed))
            for name in ("expected_urls", "fp_rate"):  # the filter on disk keeps its size
                shape[name] = saved[name]
        if meta["output_path"] != (output_path or ""):
            raise ConfigError(
                f"--state {self._directory} writes to {meta['output_path'] or 'no file'}, "
                f"not {output_path or 'no file'}; give the same -o, or --fresh to start over"
            )
        if output_path is None:
            return shape
        offset = json.loads(meta["positions"]).get(OUTPUT, 0)
        size = os.path.getsize(output_path) if os.path.exists(output_path) else 0
        if size < offset:
            raise ConfigError(
                f"{output_path} is shorter ({size:,} bytes) than the crawl wrote "
                f"({offset:,}); it was changed outside the crawler. Use --fresh to start over"
            )
        return shape

    def _restore_fingerprints(self) -> None:
        """The near-duplicate index as the committed pages left it (--extract)."""
        index = self.near_duplicates
        if index is None or not self.resumed:
            return
        from crawler.simhash import from_hex

        for fingerprint, url in self._db.execute(
            "SELECT fingerprint, url FROM simhash ORDER BY rowid"
        ):
            index.add(from_hex(fingerprint), url)

    def _replay_log(self) -> int:
        """Set the bits of keys logged after the filter's last checkpoint; the log's end."""
        replayed = 0
        for (keys,) in self._db.execute(
            "SELECT keys FROM log WHERE seq > ? AND keys != ''", (self.bloom.journal_position,)
        ):
            claims = keys.split("\n")
            self.bloom.replay(claims)
            replayed += len(claims)
        if replayed:
            log.info("replayed %s visited-set claims from the log", f"{replayed:,}")
        return self._db.execute("SELECT max(seq) FROM log").fetchone()[0] or 0

    def save(
        self, done: Request | None, page: Page | None, new: list[Request], claimed: list[str]
    ) -> None:
        keys = visit_keys([*(r.url for r in new), *claimed])
        if page is not None:
            self.sinks.write(page)
        positions_json = self._positions()
        counted = page is not None and done is not None
        records = self.stats.records + counted
        self._log_seq += 1
        try:
            self._db.execute("BEGIN")
            if done is not None:
                self.held.forget(done)
            self.frontier.push(new)
            if self._max_pages_per_host:  # its claims, with the URLs they queue
                self._claims.save()
            self._db.execute(
                "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    self._log_seq,
                    done.host if done else None,
                    done.seq if done else None,
                    positions_json,
                    records,
                    "\n".join(keys),
                    self.bloom.expected_missed_urls,
                ),
            )
            if page is not None and "simhash" in page.fields:
                self._db.execute(
                    "INSERT OR IGNORE INTO simhash VALUES (?, ?)",
                    (page.fields["simhash"], page.url),
                )
            if self._meta_to_start:
                self._set_meta(**self._meta_to_start)
                self._meta_to_start = {}
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise WriteFailed(f"cannot write the crawl state in {self._directory}: {exc}") from None
        self.visited.settle(keys)
        if page is not None and done is not None:
            self.stats.count(page, done.host)
        if time.monotonic() - self._checkpointed_at >= CHECKPOINT_EVERY_S:
            self._checkpoint()

    def _positions(self) -> str:
        """The sinks' positions and the unrecorded counters, as a log row keeps them."""
        positions = self.sinks.positions()
        self._offset = positions.get(OUTPUT, 0)
        return json.dumps({**positions, UNRECORDED: self.stats.unrecorded()})

    def _log_positions(self) -> None:
        """A log row that commits the sinks' positions alone (in a held page's transaction)."""
        self._log_seq += 1
        self._db.execute(
            "INSERT INTO log VALUES (?, NULL, NULL, ?, ?, '', ?)",
            (
                self._log_seq,
                self._positions(),
                self.stats.records,
                self.bloom.expected_missed_urls,
            ),
        )

    def _checkpoint(self) -> None:
        """Mark the log as applied to the filter, then fold it into the frontier."""
        self.bloom.journal_position = self._log_seq
        self.bloom.checkpoint()
        self._compact()
        self._save_cookies()
        self._checkpointed_at = time.monotonic()

    def keep_cookies(self, jar: CookieJar) -> None:
        """Restore `jar` as the crawl left it; save it at every checkpoint it changed by."""
        path = self._directory / COOKIES
        if self.resumed and path.exists():
            try:
                jar.load(path)
            except Exception as exc:  # a damaged file fails as the unpickler happens to fail
                log.warning("cannot restore the cookies from %s (%r); going on without", path, exc)
        self._cookie_jar = jar

    def _save_cookies(self) -> None:
        """Cookies are saved as at the checkpoint: a crash loses at most a second of them."""
        if self._cookie_jar is None or not self._cookie_jar.changed:
            return
        try:
            self._cookie_jar.save_atomically(self._directory / COOKIES)
        except OSError as exc:
            raise WriteFailed(f"cannot save the cookies in {self._directory}: {exc}") from None

    def _compact(self) -> None:
        """Delete the frontier rows of pages done, and the log rows that said so.

        The last log row stays: it holds the sinks' committed positions. Its keys and
        every earlier row's are in the filter's bits, as its header says.
        """
        try:
            self._db.execute("BEGIN")
            self._db.execute(
                "DELETE FROM frontier WHERE (host, seq) IN "
                "(SELECT done_host, done_seq FROM log WHERE done_host IS NOT NULL)"
            )
            self._db.execute("UPDATE log SET done_host = NULL, done_seq = NULL, keys = ''")
            self._db.execute("DELETE FROM log WHERE seq < ?", (self._log_seq,))
            stats = self.stats.as_dict(per_host=False)
            self._set_meta(stats=json.dumps(stats), stats_offset=self._offset)
            self._host_counts.save()
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise WriteFailed(f"cannot write the crawl state in {self._directory}: {exc}") from None

    def _set_meta(self, **values: Any) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
            [(name, str(value)) for name, value in values.items()],
        )

    def close(self) -> None:
        try:
            self._checkpoint()
            self._host_counts.close()
            self._claims.close()
            self._db.close()
            self.bloom.close()
            self.sinks.close()
        finally:
            os.close(self._lock_fd)


def crawl_shape(
    settings: Settings, seeds: Sequence[str], names: Sequence[str] = SHAPING_SETTINGS
) -> dict[str, Any]:
    """The seeds and the settings `names`, as JSON values: what a crawl must keep."""
    shape: dict[str, Any] = {"seeds": sorted(set(seeds))}
    for name in names:
        value = getattr(settings, name)
        shape[name] = list(value) if isinstance(value, tuple) else value
    return shape


def _lock(directory: Path, fresh: bool) -> int:
    """Make `directory` ours for this run: one crawler at a time; --fresh empties it."""
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"--state {directory} is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot use --state {directory}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"--state {directory} is in use by another crawler") from None
    if fresh:
        _remove_state_files(directory)
    return fd


def _remove_state_files(directory: Path) -> None:
    """Only the crawler's own files: a state directory may hold the user's too."""
    for name in (DATABASE, DATABASE + "-wal", DATABASE + "-shm", BLOOM, COOKIES, OLD_SPILL_FILE):
        (directory / name).unlink(missing_ok=True)
