"""The command line as a user meets it: bad input, config files, exit codes, signals."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import json
import os
import resource
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest

from crawler import Crawler
from crawler.__main__ import log, main
from crawler.config import GROUPS, OPTIONS, ConfigError, Settings, load_settings, read_seeds
from tests.conftest import Site, link_and_fifo, read_records

ROOT = Path(__file__).resolve().parent.parent


def run_cli(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def run_main(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`crawler.__main__.main(args)` in this process, its output captured as run_cli's: for
    input refused before any crawl, where a process only adds 0.3 s of start-up. The
    process's own exit and streams are run_cli's tests; the logger main() sets up is
    given back after."""
    out, err = io.StringIO(), io.StringIO()
    handlers, level, propagate = log.handlers[:], log.level, log.propagate
    directory = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's --help
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        os.chdir(directory)
        log.handlers[:], log.propagate = handlers, propagate
        log.setLevel(level)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


async def run_cli_async(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """The CLI as a child process, while the test's own loop serves the site."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawler",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate(stdin.encode() if stdin else None)
    return process.returncode, out.decode(), err.decode()


def assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("crawler: error:")
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0]


def test_a_missing_seeds_file_is_named(tmp_path):
    assert_one_line_error(run_cli(str(tmp_path / "nope.txt")), "nope.txt", "not found")


def test_an_empty_seeds_file_is_an_error(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n# only a comment\n\n")
    assert_one_line_error(run_main(str(seeds)), "seeds.txt")


def test_a_seeds_file_without_a_valid_url_is_an_error(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("example.com\nftp://example.com/\n")
    result = run_main(str(seeds))
    assert result.returncode == 2
    assert "seeds.txt:1: skipped" in result.stderr
    assert "seeds.txt:2: skipped" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("crawler: error:")


def test_a_seed_without_a_scheme_suggests_the_https_url_and_is_still_an_error(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("example.com\n")
    result = run_main("seeds.txt", cwd=tmp_path)
    assert result.returncode == 2
    warning, error = result.stderr.strip().splitlines()
    assert warning == (
        "crawler: warning: seeds.txt:1: skipped, 'example.com' has no scheme; "
        "did you mean https://example.com/?"
    )
    assert error.startswith("crawler: error:") and "no valid http(s) URL" in error


def test_a_comment_in_another_encoding_is_skipped_without_a_warning(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes("# 中文注释\nhttp://127.0.0.1:9/\n".encode("gbk"))
    result = run_cli(
        "seeds.txt", "-o", "out.jsonl", "--quiet", "--ignore-robots", "--retries", "0", cwd=tmp_path
    )
    assert (result.returncode, result.stderr) == (0, "")


async def crawl_seeds_file(data: bytes, tmp_path: Path) -> tuple[int, str, list[dict[str, Any]]]:
    """The CLI's exit code, stderr and records for a seeds file of these bytes."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes(data)
    output = tmp_path / "out.jsonl"
    code, _, err = await run_cli_async(str(seeds), "-o", str(output), "--quiet")
    return code, err, read_records(output)


async def test_a_seeds_file_in_utf16_with_a_byte_order_mark_is_read(site: Site, tmp_path):
    # What PowerShell 5's `>` and Notepad's "Unicode" write.
    site.page("/", "home")

    code, err, records = await crawl_seeds_file(
        f"# seeds\r\n{site.url}/\r\n".encode("utf-16"), tmp_path
    )

    assert (code, err) == (0, "")
    assert [r["title"] for r in records] == ["home"]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_seeds_file_in_utf16_without_a_byte_order_mark_is_read(encoding, tmp_path, caplog):
    # What .NET's Encoding.Unicode.GetBytes, `iconv -t UTF-16LE` and some exporters write.
    seeds = tmp_path / "seeds.txt"
    comment = "# 一份种子清单：这些网址是每天要抓取的中文网站的首页和搜索页\n"  # 一 is U+4E00
    seeds.write_bytes(f"{comment}http://a.test/搜索\r\nhttp://b.test/\n".encode(encoding))

    assert read_seeds(str(seeds), 2048) == ["http://a.test/%E6%90%9C%E7%B4%A2", "http://b.test/"]
    assert caplog.messages == []


async def test_a_seeds_file_in_gbk_is_read_as_gbk_with_a_warning(site: Site, tmp_path):
    # What older Notepads save on a Chinese Windows.
    site.page("/搜索", "search")

    code, err, records = await crawl_seeds_file(
        f"# 种子\n{site.url}/搜索\n".encode("gbk"), tmp_path
    )

    assert code == 0
    assert err.splitlines() == [
        f"crawler: warning: {tmp_path / 'seeds.txt'}:2: not UTF-8; read as gbk, as its bytes "
        "suggest (save the file as UTF-8 to be sure)"
    ]
    assert [r["url"] for r in records] == [f"{site.url}/%E6%90%9C%E7%B4%A2"]
    assert site.count("/%E6%90%9C%E7%B4%A2") == 1, site.paths()


def test_a_seed_with_a_comment_after_it_is_read_as_a_browser_reads_it_and_warned_of(
    tmp_path, caplog
):
    # Silently, `http://host/  # home` was http://host/%20%20, and a tab vanished from a path.
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/  # home\nhttp://127.0.0.1:9/a\tb\nhttp://127.0.0.1:9/c\n")

    urls = read_seeds(str(seeds), 2083)

    assert urls == ["http://127.0.0.1:9/%20%20", "http://127.0.0.1:9/ab", "http://127.0.0.1:9/c"]
    assert [record.getMessage() for record in caplog.records] == [
        f"{seeds}:1: 'http://127.0.0.1:9/  # home' has whitespace in it, read as "
        "http://127.0.0.1:9/%20%20 (as a browser reads it; a comment needs a line of its own)",
        f"{seeds}:2: 'http://127.0.0.1:9/a\\tb' has whitespace in it, read as "
        "http://127.0.0.1:9/ab (as a browser reads it; a comment needs a line of its own)",
    ]


def test_a_seed_with_another_scheme_is_not_said_to_have_none(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("mailto:a@example.com\nexample.com:8080/a\n")
    result = run_main("seeds.txt", cwd=tmp_path)
    assert result.stderr.strip().splitlines()[:2] == [
        "crawler: warning: seeds.txt:1: skipped, not an absolute http(s) URL: "
        "'mailto:a@example.com'",
        "crawler: warning: seeds.txt:2: skipped, 'example.com:8080/a' has no scheme; "
        "did you mean https://example.com:8080/a?",
    ]


def test_a_seed_without_a_scheme_is_refused_by_the_api_with_the_same_suggestion():
    with pytest.raises(ConfigError, match=r"did you mean https://example\.com/a\?"):
        Crawler(["example.com/a"])


def test_stats_into_a_missing_directory_is_refused_up_front(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    missing = tmp_path / "no-such-dir" / "stats.json"
    result = run_main(str(seeds), "-o", str(tmp_path / "out.jsonl"), "--stats", str(missing))
    assert_one_line_error(result, str(missing), "does not exist")
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("flag", ["--warc", "--revisit"])
def test_a_file_where_a_directory_is_wanted_is_named_as_such(tmp_path, flag):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    result = run_main(str(seeds), flag, str(seeds))
    assert_one_line_error(result, f"cannot use {flag} {seeds}: it is a file, not a directory")
    assert seeds.read_text() == "http://127.0.0.1:9/\n"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (gzip.compress(b"http://a.test/\n", mtime=0), "is gzip-compressed; give it uncompressed"),
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 40, "is not text (it holds NUL bytes)"),
    ],
)
def test_a_binary_seeds_file_is_one_line_not_a_warning_a_line(data, says, tmp_path):
    # A warning for each "line" of it flooded the terminal, then the error came.
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes(data)
    result = run_main(str(seeds))
    assert result.stderr.splitlines() == [f"crawler: error: seeds file {seeds} {says}"]
    assert result.returncode == 2


def test_a_directory_as_seeds_file_is_an_error(tmp_path):
    assert_one_line_error(run_main(str(tmp_path)), "directory")


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "100000000"], "--concurrency must be <= 100,000"),
        (["--max-depth", "-1"], "--max-depth"),
        (["--timeout", "abc"], "--timeout"),
        (["--fp-rate", "2"], "--fp-rate"),
        (["--max-bytes", "1.5"], "--max-bytes"),
        (["--include", "("], "--include"),
        (["--allow-host", "http://x/"], "--allow-host"),
        (["--no-such-flag"], "--no-such-flag"),
        # As a config file's mistyped key is told its name
        (["--max-dpeth", "3"], "unrecognized arguments: --max-dpeth 3 (did you mean --max-depth?)"),
        (["--exlude", "/cart"], "(did you mean --exclude?)"),
        (["--ouptut=x.jsonl"], "(did you mean --output?)"),
        # Only a flag spelled in full: a later --max-depth-bytes would change what it means
        (["--max-dep", "3"], "unrecognized arguments: --max-dep 3 (did you mean --max-depth?)"),
        (["--ignore-rob"], "(did you mean --ignore-robots?)"),
        (["--state", "dir"], "-o"),
        # Flags that do nothing without another: no archive, no revisits, in silence
        (["--warc-prefix", "site"], "--warc-prefix only makes sense with --warc DIR"),
        (["--max-sitemaps", "5"], "--max-sitemaps only makes sense with --sitemaps"),
        (["--revisit-interval", "600"], "--revisit-interval only makes sense with --revisit"),
        (["--lease-s", "5"], "--lease-s only makes sense with --redis URL"),
        (["--force-resume"], "with --state DIR or --revisit DIR"),
        # It crawled, and every resume was refused ("shorter than the crawl wrote")
        (["--state", "dir", "-o", "/dev/null"], "/dev/null is not one"),
        (["--expected-urls", "100000000000000"], "--expected-urls"),
        (["--user-agent", "bot\r\nX-Injected: 1"], "--user-agent has a control character"),
        (["--proxy", "http://user:secret@proxy:99999"], "--proxy has an invalid host or port"),
        (["--proxy", "http://[::1"], "--proxy has an invalid host or port"),
        (["--redis", "http://127.0.0.1:6379/0", "--crawl-id", "x"], "must be a redis:// URL"),
        (["--redis", "redis://:s@127.0.0.1:6379/abc", "--crawl-id", "x"], "database by number"),
        (["--redis", "redis://127.0.0.1:99999/0", "--crawl-id", "x"], "Port out of range"),
        # redis-py passed an option it does not know to its connection: a TypeError traceback
        (["--redis", "redis://127.0.0.1:6379/0?foo=1", "--crawl-id", "x"], "query option"),
        (["--redis", "redis://127.0.0.1:6379/0?protocol=9", "--crawl-id", "x"], "either 2 or 3"),
        # Not a file named "-", as it was: stdout is -o's (and no stats file is a stream).
        (["--stats", "-"], "--stats must name a file, not -"),
        # A due date past the year 9999 is none: every page was an internal_error.
        (["--revisit-interval", "1e12"], "--revisit-interval must be <= 3,153,600,000"),
        (["--revisit-max-interval", "1e300"], "--revisit-max-interval must be <= 3,153,600,000"),
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path, flags, named):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    assert_one_line_error(run_main(str(seeds), *flags), named)


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("concurency = 3\n", "did you mean 'concurrency'"),
        ("max-depth = 3\n", "did you mean 'max_depth'"),
        ("concurrency = 'many'\n", "concurrency"),
        ("concurrency = 0\n", "concurrency"),
        ("any_host = 1\n", "any_host"),
        ("delay = [1]\n", "delay"),
        ("not toml at all\n", "TOML"),
        # A table, as in a pyproject.toml: it said "did you mean 'crawl_id'?"
        ("[crawler]\nmax_depth = 3\n", "unknown table [crawler]; the keys go at the top level"),
    ],
)
def test_bad_config_files_name_the_key(tmp_path, toml, named):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    config = tmp_path / "crawl.toml"
    config.write_text(toml)
    assert_one_line_error(run_main("--config", str(config), str(seeds)), named)


# Bad values by an option's kind: as a flag's argument, and as a TOML value.
BAD_FLAG_VALUES = {
    "int": ["x", "1.5", "", "1e3"],
    "float": ["x", "nan", "inf", "", "1e400"],
    "str": [""],
    "path": [""],
    "headers": ["no colon", "Bad Name: v", "X-A: a\x01b", "Host: h"],
    "cookies": [""],
    "address": ["", "x", "70000", "host:"],
}
BAD_TOML_VALUES = {
    "int": ['"5"', "1.5", "true", "[1]", "1979-05-27"],
    "float": ['"5"', "true", "nan", "inf", "[1]"],
    "bool": ['"yes"', "1", "[true]"],
    "str": ["5", '""', "[]"],
    "path": ["5", '""', "true"],
    "list": ["5", "[1]", '["ok", 2]'],
    "headers": ["5", "{A = 5}", '{"Bad Name" = "v"}', "[1]"],
    "cookies": ["5", '""', "[]"],
    "address": ['"x"', "70000", "-1", "true", "[]"],
}


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.name)
def test_every_option_refuses_bad_values_by_flag_and_by_key_naming_it(tmp_path, option):
    # The whole table, so that an option added later is held to the same rules.
    for value in BAD_FLAG_VALUES.get(option.kind, []):
        with pytest.raises(ConfigError) as flagged:
            load_settings(["seeds.txt", f"{option.flag}={value}"])
        assert str(flagged.value).startswith(option.flag), (option.flag, value)
        assert "\n" not in str(flagged.value)
    if option.kind == "bool":
        with pytest.raises(ConfigError, match=option.flag):
            load_settings(["seeds.txt", f"{option.flag}=yes"])
    config = tmp_path / "crawl.toml"
    for value in BAD_TOML_VALUES[option.kind]:
        config.write_text(f"{option.name} = {value}\n")
        with pytest.raises(ConfigError) as keyed:
            load_settings(["seeds.txt", "--config", str(config)])
        assert f"key '{option.name}'" in str(keyed.value), (option.name, value)
        assert "\n" not in str(keyed.value)


def test_output_never_overwrites_the_seeds_file(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    assert_one_line_error(run_main(str(seeds), "-o", str(seeds)), "seeds file")
    assert seeds.read_text() == "http://127.0.0.1:9/\n"


PREVIOUS_RECORD = {
    "url": "http://127.0.0.1:9/",
    "final_url": "http://127.0.0.1:9/",
    "status": 200,
    "depth": 0,
    "referrer": None,
    "fetched_at": "2026-11-25T03:18:52.832+00:00",
    "content_type": "text/html",
    "content_digest": "sha1:YY6QBSZNVNWHJKBMTWCBACIGFRAAASJB",
    "etag": None,
    "last_modified": None,
    "links": [],
    "error": None,
}


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--stats", "seeds.txt"], "--stats seeds.txt is the seeds file"),
        (["--config", "crawl.toml", "--stats", "crawl.toml"], "is the config file"),
        (["--cookies", "cookies.txt", "-o", "cookies.txt"], "is the --cookies file"),
        (["--since", "previous.jsonl", "-o", "previous.jsonl"], "name the same file"),
        (["--since", "previous.jsonl", "--stats", "previous.jsonl"], "is the --since file"),
        (["-o", "previous.jsonl", "--stats", "previous.jsonl"], "is the -o file"),
        (["-o", "previous.jsonl", "--stats", "./previous.jsonl"], "is the -o file"),
        (["-o", "x.wacz", "--warc", "warc", "--wacz", "x.wacz"], "is the -o file"),
        # A file where the crawl makes a directory: the stats were never written (a
        # warning, exit 0), and a state directory or a WARC file was left by a refusal.
        (["--stats", "warc", "--warc", "warc"], "--stats warc is the --warc directory"),
        (["-o", "warc", "--warc", "warc"], "-o warc is the --warc directory"),
        (["--warc", "warc.wacz", "--wacz", "warc.wacz"], "--wacz warc.wacz is the --warc"),
        (["-o", "warc", "--state", "warc"], "-o warc is the --state directory"),
        (["-o", "out.jsonl", "--stats", "warc/", "--state", "warc"], "the --state directory"),
        (["--stats", "warc", "--revisit", "warc"], "--stats warc is the --revisit directory"),
    ],
)
def test_no_output_overwrites_a_file_the_crawl_reads_or_another_output(tmp_path, flags, named):
    files = {
        "seeds.txt": "http://127.0.0.1:9/\n",
        "crawl.toml": "max_depth = 1\n",
        "cookies.txt": "# Netscape HTTP Cookie File\n",
        "previous.jsonl": json.dumps(PREVIOUS_RECORD) + "\n",
        "x.wacz": "a package\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)

    assert_one_line_error(run_main("seeds.txt", *flags, cwd=tmp_path), named)
    assert {name: (tmp_path / name).read_text() for name in files} == files
    assert not (tmp_path / "warc").exists()
    assert not (tmp_path / "warc.wacz").exists()


async def test_fresh_with_a_bad_warc_dir_leaves_the_state_to_resume(site: Site, tmp_path):
    # --fresh emptied the state directory before --warc was found to be a file: the
    # command was refused, and the crawl it would have resumed was gone.
    site.page("/", "home", ["/a", "/b"])
    site.page("/a", "a")
    site.page("/b", "b")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    (tmp_path / "file").write_text("not a directory\n")
    crawl = [str(seeds), "-o", str(tmp_path / "out.jsonl"), "--state", str(tmp_path / "st")]
    code, _, err = await run_cli_async(*crawl, "--max-pages", "2", "--quiet")
    assert code == 0, err
    state = {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    code, _, err = await run_cli_async(*crawl, "--fresh", "--warc", str(tmp_path / "file"))
    assert (code, err.count("\n")) == (2, 1), err
    assert "--warc" in err and "it is a file, not a directory" in err
    assert {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == state


def test_stats_into_a_directory_the_user_may_not_write_is_refused_up_front():
    # Root may write anywhere: as root, the crawler runs as nobody (setpriv).
    unprivileged = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("needs setpriv to run the crawler as a user other than root")
    prefix = unprivileged if os.geteuid() == 0 else []
    work = Path(tempfile.mkdtemp())  # not tmp_path: its parent is root's alone
    try:
        work.chmod(0o777)
        (work / "seeds.txt").write_text("http://127.0.0.1:9/\n")
        (work / "locked").mkdir(mode=0o555)
        (work / "locked").chmod(0o555)
        flags = ["-o", "out.jsonl", "--stats", "locked/stats.json"]
        result = subprocess.run(
            [*prefix, sys.executable, "-m", "crawler", "seeds.txt", *flags],
            capture_output=True,
            text=True,
            cwd=work,
            timeout=60,
        )
        assert_one_line_error(result, "cannot write locked/stats.json: permission denied")
        assert not (work / "out.jsonl").exists()
    finally:
        shutil.rmtree(work)


def test_the_stats_file_is_written_through_a_link_and_into_a_fifo_left_in_place(tmp_path):
    # A rename over the path would put a plain file where the link, a FIFO or, for
    # root, /dev/null was.
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    outputs = link_and_fifo(tmp_path, "stats.json")
    quick = ("-o", str(tmp_path / "out.jsonl"), "--ignore-robots", "--retries", "0")

    assert run_cli(str(seeds), *quick, "--stats", str(outputs.link)).returncode == 0
    assert run_cli(str(seeds), *quick, "--stats", str(outputs.fifo)).returncode == 0

    assert outputs.link.is_symlink()
    assert json.loads(outputs.target.read_text())["records"] == 1
    assert stat.S_ISFIFO(outputs.fifo.stat().st_mode)
    written = outputs.read_fifo().decode()
    last = written[written.rindex('{\n  "records"') :]  # written at the start and at the end
    assert json.loads(last)["records"] == 1


def test_the_example_config_lists_every_key_with_its_default():
    example = tomllib.loads((ROOT / "config.example.toml").read_text())
    text = (ROOT / "config.example.toml").read_text()
    defaults = Settings()
    for option in OPTIONS:
        default = getattr(defaults, option.name)
        if default is None:
            assert f"# {option.name} = " in text, option.name
        else:
            expected = list(default) if isinstance(default, tuple) else default
            if option.kind == "headers":
                expected = dict(default)
            assert example[option.name] == expected, option.name


def test_the_help_of_retries_names_the_statuses_retried():
    # It said "429 or 5xx": a 501 or a 505 is an answer, and is not asked again.
    from crawler.fetch import RETRY_STATUSES

    (retries,) = [option for option in OPTIONS if option.name == "retries"]
    named = {int(word) for word in retries.help.replace(",", " ").split() if word.isdigit()}
    assert named == RETRY_STATUSES


def test_help_lists_every_flag_in_the_section_of_what_it_is_for():
    result = run_cli("--help")
    assert result.returncode == 0
    titles = [title for title, _ in GROUPS.values()]
    assert titles == [
        "what to crawl",
        "politeness",
        "limits and traps",
        "output",
        "state and Redis",
        "network",
        "recrawling",
    ]
    # Each section: from its "title:" line to the next section's.
    starts = [result.stdout.index(f"\n{title}:\n") for title in titles]
    ends = [*starts[1:], len(result.stdout)]
    texts = [result.stdout[a:b] for a, b in zip(starts, ends, strict=True)]
    sections = dict(zip(GROUPS, texts, strict=True))
    for option in OPTIONS:
        assert f"  {option.flag} " in sections[option.group] or (
            f"  {option.flag}," in sections[option.group]
        ), option.name
    assert result.stdout.startswith("usage: crawler [options] [SEEDS]\n")
    assert "measured" not in result.stdout  # help speaks of the user's choice, not our tests
    assert "crawler report PAGES.jsonl" in result.stdout  # the subcommand is told of too


async def test_bad_seed_lines_are_skipped_and_the_rest_crawled(site: Site, tmp_path):
    site.page("/", "home")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"# seeds\n\nnot a url\n{site.url}/\n")
    output = tmp_path / "out.jsonl"

    code, _, err = await run_cli_async(str(seeds), "-o", str(output), "--quiet")

    assert code == 0
    assert "seeds.txt:3: skipped, not an absolute http(s) URL: 'not a url'" in err
    assert [r["title"] for r in read_records(output)] == ["home"]


async def test_a_seed_longer_than_max_url_length_is_skipped_as_a_link_would_be(
    site: Site, tmp_path
):
    site.page("/", "home")
    long_seed = f"{site.url}/{'a' * 100}"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{long_seed}\n{site.url}/\n")
    output = tmp_path / "out.jsonl"

    code, _, err = await run_cli_async(
        str(seeds), "-o", str(output), "--quiet", "--max-url-length", "100"
    )

    assert code == 0
    assert f"seeds.txt:1: skipped, {len(long_seed)} characters, past --max-url-length 100" in err
    assert [r["url"] for r in read_records(output)] == [f"{site.url}/"]
    assert site.count(f"/{'a' * 100}") == 0


async def test_seeds_from_stdin_and_records_on_stdout(site: Site):
    site.page("/", "home", ["/a"])
    site.page("/a", "A")

    code, out, _ = await run_cli_async("-", "--quiet", stdin=f"{site.url}/\n")

    assert code == 0
    assert [json.loads(line)["title"] for line in out.splitlines()] == ["home", "A"]


def test_a_config_files_key_for_an_option_not_set_is_taken(tmp_path):
    # A file may hold the settings of crawls with --warc and without; a flag may not.
    config = tmp_path / "crawl.toml"
    config.write_text('warc_prefix = "site"\nmax_sitemaps = 5\n')
    settings = load_settings(["seeds.txt", "--config", str(config)])
    assert (settings.warc_prefix, settings.max_sitemaps, settings.warc) == ("site", 5, None)
    assert load_settings(["seeds.txt", "--sitemaps", "--max-sitemaps", "5"]).max_sitemaps == 5


def test_a_config_file_in_utf16_is_read_and_one_in_gbk_is_told_to_be_utf8(tmp_path):
    # Notepad's "Unicode" is UTF-16 with a byte order mark; an older Notepad on a Chinese
    # Windows saves GBK, which was "'utf-8' codec can't decode byte 0xd6 in position 2".
    config = tmp_path / "crawl.toml"
    for encoding in ("utf-16", "utf-16-le", "utf-16-be"):  # with a byte order mark, or none
        config.write_bytes("# 中文注释\nmax_depth = 2\n".encode(encoding))
        assert load_settings(["seeds.txt", "--config", str(config)]).max_depth == 2
    config.write_bytes("max_depth = 2\n# 中文注释\n".encode("gbk"))
    with pytest.raises(ConfigError) as refused:
        load_settings(["seeds.txt", "--config", str(config)])
    assert str(refused.value) == (
        f"{config}: line 2 is not UTF-8, which TOML files are (save it as UTF-8)"
    )


def test_a_config_file_may_give_the_dashboards_port_as_a_number(tmp_path):
    # As a TOML file writes a port; it was refused ("must be a string").
    config = tmp_path / "crawl.toml"
    config.write_text("dashboard = 8080\n")
    assert load_settings(["seeds.txt", "--config", str(config)]).dashboard == "8080"
    assert Settings(dashboard="127.0.0.1:0").dashboard == "127.0.0.1:0"


async def test_flags_override_the_config_file(site: Site, tmp_path):
    site.page("/", "home", [f"/{n}" for n in range(5)])
    for n in range(5):
        site.page(f"/{n}", str(n))
    config = tmp_path / "crawl.toml"
    config.write_text("max_pages = 1\nquiet = true\n")
    output = tmp_path / "out.jsonl"

    code, _, _ = await run_cli_async(
        "--config", str(config), "-", "-o", str(output), "--max-pages", "3", stdin=f"{site.url}/\n"
    )

    assert code == 0
    assert len(read_records(output)) == 3


async def test_a_header_flag_wins_for_its_name_and_keeps_the_config_files_others(
    site: Site, tmp_path
):
    # A --header replaced the whole [header] table: the file's token was not sent.
    site.page("/", "home")
    config = tmp_path / "crawl.toml"
    config.write_text('[header]\nAuthorization = "Bearer t"\nAccept-Language = "zh"\n')

    code, _, err = await run_cli_async(
        "--config", str(config), "-", "-o", str(tmp_path / "out.jsonl"), "--quiet",
        "--ignore-robots", "--header", "accept-language: fr", "--header", "X-Trace: 1",
        stdin=f"{site.url}/\n",
    )  # fmt: skip

    assert code == 0, err
    [hit] = site.hits
    sent = {name: hit.headers.get(name) for name in ("Authorization", "Accept-Language", "X-Trace")}
    assert sent == {"Authorization": "Bearer t", "Accept-Language": "fr", "X-Trace": "1"}


def test_ctrl_c_while_the_seeds_are_read_exits_130_without_a_traceback(tmp_path):
    fifo = tmp_path / "seeds.fifo"  # read as a terminal is: until the user is done
    os.mkfifo(fifo)
    process = subprocess.Popen(
        [sys.executable, "-m", "crawler", str(fifo)],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    opened: list[int] = []  # the crawler is reading once its end of the FIFO is open
    writer = threading.Thread(target=lambda: opened.append(os.open(fifo, os.O_WRONLY)))
    writer.start()
    writer.join(timeout=30)
    assert opened, "the crawler never opened its seeds file"

    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    os.close(opened[0])

    assert process.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


async def test_ctrl_c_drains_flushes_and_exits_130(site: Site, tmp_path):
    first_request = asyncio.Event()

    async def slow(request):
        first_request.set()
        await asyncio.sleep(0.3)
        return await fast(request)

    async def fast(request):
        from aiohttp import web

        n = int(request.path.strip("/") or 0)
        body = "".join(f'<a href="/{n * 10 + i}">x</a>' for i in range(1, 11))
        return web.Response(text=f"<title>{n}</title>{body}", content_type="text/html")

    site.handle("/", slow)
    for n in range(1, 200):
        site.handle(f"/{n}", slow)
    output = tmp_path / "out.jsonl"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawler",
        "-",
        "-o",
        str(output),
        "--quiet",
        stdin=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    process.stdin.write(f"{site.url}/\n".encode())
    process.stdin.close()

    await first_request.wait()
    process.send_signal(signal.SIGINT)
    _, err = await process.communicate()

    assert process.returncode == 130
    assert b"Traceback" not in err
    records = read_records(output)  # every line is whole JSON
    assert len(records) < 50


def test_the_demo_crawls_its_own_site(tmp_path):
    output = tmp_path / "demo.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "crawler.demo", "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    records = read_records(output)
    titles = {r["title"] for r in records}
    assert "中文页面：布隆过滤器" in titles
    assert {r["error"] for r in records} >= {None, "robots_disallowed"}
    assert "pages" in result.stderr


async def test_stats_file_and_summary_come_from_the_same_numbers(site: Site, tmp_path):
    site.page("/", "home", ["/a", "/missing"])
    site.page("/a", "A")
    stats_path = tmp_path / "stats.json"

    code, _, err = await run_cli_async(
        "-", "-o", str(tmp_path / "out.jsonl"), "--stats", str(stats_path), stdin=f"{site.url}/\n"
    )

    assert code == 0
    stats = json.loads(stats_path.read_text())
    assert stats["records"] == 3
    assert stats["statuses"] == {"200": 2, "404": 1}
    assert stats["depths"] == {"0": 1, "1": 2}
    assert stats["hosts_top"] == {f"127.0.0.1:{site.port}": 3}
    assert stats["visited"]["urls"] == 3
    assert stats["visited"]["fp_rate"] < 1e-6
    assert "expected_missed_urls" in stats["visited"]
    assert stats["rate_history"][-1]["records"] == 3
    assert "status 404" in err and "visited set" in err


async def test_quiet_silences_the_summary(site: Site, tmp_path):
    site.page("/", "home")

    code, _, err = await run_cli_async(
        "-", "-o", str(tmp_path / "out.jsonl"), "--quiet", stdin=f"{site.url}/\n"
    )

    assert code == 0
    assert err == ""


@pytest.mark.parametrize("stderr", ["a pipe whose reader went away", "a full disk"])
async def test_a_crawl_whose_stderr_cannot_be_written_goes_on_and_exits_0(
    site: Site, tmp_path, stderr
):
    # `2>&1 | head -1`, and `2>>crawl.log` on a disk that filled: the summary's write
    # failed there, and the crawl that had written every record exited 1 with a
    # traceback no one could read.
    site.page("/", "home", ["/a"])
    site.page("/a", "a")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"not a url\n{site.url}/\n")  # a warning, then the summary
    output = tmp_path / "out.jsonl"
    if stderr == "a full disk":
        target = os.open("/dev/full", os.O_WRONLY)
    else:
        read_end, target = os.pipe()
        os.close(read_end)  # every write to stderr now fails
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", str(seeds), "-o", str(output), stderr=target
    )
    os.close(target)

    assert await process.wait() == 0
    assert [record["title"] for record in read_records(output)] == ["home", "a"]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [(["nope.txt"], 2), (["report", "nope.jsonl"], 2), (["report", "out.jsonl"], 0)],
)
def test_exit_codes_hold_when_stderr_cannot_be_written(tmp_path, arguments, code):
    # The error's line cannot be written: the exit code still says what happened (it
    # was 1, from the traceback of the failed write).
    (tmp_path / "out.jsonl").write_text('{"url": "http://a.test/", "status": 200}\n')
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "crawler", *arguments], cwd=tmp_path, stderr=full, timeout=60
        )
    assert result.returncode == code


def test_records_for_a_closed_stdout_are_refused_not_written_into_the_warc_file(tmp_path):
    # Started without fd 1 (`>&-`), the crawl's first file took its number: the JSON
    # lines went into the WARC file, and the command exited 0.
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    result = subprocess.run(
        [sys.executable, "-m", "crawler", str(seeds), "--warc", str(tmp_path / "warc")],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(1),
        timeout=60,
    )
    assert_one_line_error(result, "stdout is closed", "-o FILE")
    assert not (tmp_path / "warc").exists()
    assert not (tmp_path / "warc.wacz").exists()


def test_a_closed_stdin_is_an_empty_seeds_file(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "crawler", "-"],
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.close(0),
        timeout=60,
    )
    assert_one_line_error(result, "seeds file stdin is empty")


async def test_a_crawl_without_stderr_keeps_its_summary_out_of_the_records(site: Site):
    site.page("/", "home")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawler",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        preexec_fn=lambda: os.close(2),
    )
    out, _ = await process.communicate(f"{site.url}/\n".encode())

    assert process.returncode == 0
    assert [json.loads(line)["title"] for line in out.decode().splitlines()] == ["home"]


async def test_a_reader_that_stops_reading_ends_the_crawl_quietly(site: Site, tmp_path):
    site.page("/", "home", [f"/{n}" for n in range(200)])
    for n in range(200):
        site.page(f"/{n}", str(n), delay_s=0.01)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    pipeline = (
        f"{shlex.quote(sys.executable)} -m crawler {seeds} --quiet | head -1; "
        'echo "crawler exit ${PIPESTATUS[0]}" >&2'
    )

    process = await asyncio.create_subprocess_exec(
        "bash", "-c", pipeline, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()

    assert json.loads(out)["title"] == "home"
    assert err.decode() == "crawler exit 0\n"


async def test_an_output_that_fills_its_disk_keeps_only_whole_records(site: Site, tmp_path):
    # A file size limit fails the write as a full disk does. The record being written
    # was left torn at the end of -o, and a JSON-lines reader failed on the file.
    site.page("/", "home", [f"/{n}" for n in range(100)])
    for n in range(100):
        site.page(f"/{n}", f"page {n}")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    output = tmp_path / "out.jsonl"

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (5000, 5000))

    command = [sys.executable, "-m", "crawler", str(seeds), "-o", str(output), "--quiet"]
    process = await asyncio.create_subprocess_exec(
        *command, stderr=asyncio.subprocess.PIPE, preexec_fn=limit_file_size
    )
    _, err = await process.communicate()

    assert process.returncode == 1
    assert err.decode() == f"crawler: error: cannot write {output}: File too large\n"
    records = read_records(output)  # each line whole JSON
    assert 0 < len(records) < 101
    assert output.read_bytes().endswith(b"}\n")


def test_a_state_that_cannot_be_made_is_one_line_naming_the_problem(tmp_path):
    # A file size limit (or a full disk) below the visited set's 3.4 MiB: "cannot open
    # None: File too large".
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    result = subprocess.run(
        [sys.executable, "-m", "crawler", str(seeds), "-o", "out.jsonl", "--state", "state"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000)),
        timeout=60,
    )
    assert_one_line_error(result, "cannot open the crawl files: File too large")


async def test_a_second_ctrl_c_while_the_wacz_is_packaged_quits_at_once(site: Site, tmp_path):
    """Packaging (minutes for 100 GiB of WARC) holds the event loop; a second Ctrl-C
    waited for its end, then quit without a word."""
    site.page("/", "home")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site.url}/\n")
    slow_packaging = (  # the package takes a minute, as a large crawl's does
        "import sys, time; import crawler.sinks.wacz as wacz; "
        "wacz.write_wacz = lambda *args, **kwargs: time.sleep(60); "
        "from crawler.__main__ import main; sys.exit(main(sys.argv[1:]))"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", slow_packaging, str(seeds), "-o", str(tmp_path / "out.jsonl"),
        "--warc", str(tmp_path / "warc"), "--wacz", str(tmp_path / "crawl.wacz"),
        "--ignore-robots", stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    while b"packaging the crawl as" not in await process.stderr.readline():
        pass
    for _ in range(20):  # Ctrl-C, Ctrl-C...: two signals at once are one to Python
        process.send_signal(signal.SIGINT)
        with contextlib.suppress(TimeoutError):
            assert await asyncio.wait_for(process.wait(), 0.5) == 130
            return
    raise AssertionError("Ctrl-C pressed for 10 s, and the crawl still packaged")
