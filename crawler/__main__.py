"""CLI: flags -> Settings -> run -> exit code (0 done, 2 bad input, 130/143 interrupted)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.api import Crawler, event_loop_runner
from crawler.config import (
    STDOUT,
    ConfigError,
    Settings,
    load_settings,
    make_directory,
    print_error,
    print_stderr,
    read_seeds,
    silence,
)
from crawler.files import check_outputs
from crawler.malloc import keep_freed_memory
from crawler.observe.progress import Reporter, count
from crawler.sinks import OutputClosed

if TYPE_CHECKING:
    from crawler.observe.dashboard import WatchedFigures
    from crawler.state.redis_rounds import SharedRounds

log = logging.getLogger("crawler")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
SIGNAL_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"crawler: {record.levelname.lower()}: {record.getMessage()}"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to sys.stderr as it is at each message: the live status line replaces it
    with a proxy that prints above the line instead of over it."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # its reader went away, or its disk is full
            silence(sys.stderr)
        else:
            super().handleError(record)


def _configure_logging() -> None:
    handler = _StderrHandler()
    handler.setFormatter(_Formatter())
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False


def _fill_closed_standard_streams() -> None:
    """Put /dev/null on fds 0-2 if the crawler was started without them (`>&-`): a file
    the crawl opens would otherwise get that number, and what is meant for stdout or
    stderr would be written into it (records into a WARC file). Python leaves
    sys.stdout None for a closed fd 1, and records are not sent there."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
    if sys.stdin is None:
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (for the process's life)
    if sys.stderr is None:  # else print(file=sys.stderr) would write to stdout
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    _fill_closed_standard_streams()
    try:
        if arguments[:1] == ["report"]:  # a seeds file named "report" is ./report
            from crawler.observe.report import main as report

            return report(arguments[1:])
        return _crawl(arguments)
    except KeyboardInterrupt:
        # Ctrl-C before the crawl watches for it (seeds typed at a terminal, a large
        # --since being indexed) ends the command as one during the crawl does.
        return SIGNAL_EXIT_CODES[signal.SIGINT]


def _crawl(arguments: list[str]) -> int:
    _configure_logging()
    try:
        settings = load_settings(arguments)
        assert settings.seeds is not None  # load_settings asks for it
        if settings.output == STDOUT and sys.stdout is None:
            raise ConfigError("stdout is closed; write the records with -o FILE")
        seeds = read_seeds(settings.seeds, settings.max_url_length)
        if settings.revisit is not None:
            check_outputs(settings)  # before DIR is made; a crawler's open() checks them too
            return _revisit(settings, seeds)
        crawler = Crawler(seeds, settings)
        crawler.open()
    except ConfigError as exc:
        print_error(str(exc))
        return EXIT_BAD_INPUT
    except OSError as exc:  # a file the crawl opens, or makes (a full disk, a size limit)
        print_error(f"cannot open {exc.filename or 'the crawl files'}: {exc.strerror}")
        return EXIT_BAD_INPUT
    if crawler.complete:
        print_stderr(
            f"crawler: crawl in {settings.state} is complete "
            f"({count(crawler.figures()['records'], 'record')}); --fresh starts over"
        )
        asyncio.run(crawler.close())
        return EXIT_OK
    keep_freed_memory()
    code = _run(settings, crawler)
    # A reader that stops reading (`| head`) ends the crawl, as it does for any Unix tool.
    failure = crawler.failure
    if failure is not None and not isinstance(failure, OutputClosed):
        print_error(str(failure))
        code = EXIT_FAILED
    return code


def _revisit(settings: Settings, seeds: list[str]) -> int:
    """--revisit DIR: round after round, each a recrawl from the one before, until a
    signal; rerun with the same DIR, it goes on in the round it was in. With --redis,
    the round is the one the processes of the crawl are in, shared through Redis."""
    from crawler.revisit import drop_spent, round_paths, rounds_in

    assert settings.revisit is not None
    directory = make_directory(settings.revisit, "--revisit")
    number = max(rounds_in(directory), default=1)
    shared = _shared_rounds(settings, directory)
    pending: list[int] = []  # a signal between rounds, when no event loop watches for one

    def between_rounds() -> int | None:
        """Note signals here (a round's or a wait's handlers note them in its own list,
        which it has told by its exit code); the exit code of one noted, if any."""
        for signum in SIGNAL_EXIT_CODES:
            signal.signal(signum, lambda signum, _frame: pending.append(signum))
        return SIGNAL_EXIT_CODES[signal.Signals(pending[0])] if pending else None

    if settings.dashboard is not None:
        from crawler.observe.dashboard import same_port_each_round

        settings = replace(settings, dashboard=same_port_each_round(settings.dashboard))
    last: WatchedFigures | None = None  # the dashboard's, of the last round run
    keep_freed_memory()
    while (code := between_rounds()) is None:
        if shared is not None:
            # A process that joins between rounds waits for the next, as the others do.
            number = shared.current()
            if number > 1 and (
                code := _wait_for_round(partial(shared.first_due, number - 1), settings, last)
            ):
                return code
            if (code := between_rounds()) is not None:
                return code
        paths = round_paths(directory, number, settings.since)
        if shared is None:
            round_settings = replace(
                settings,
                output=str(paths.output),
                state=str(paths.state),
                since=str(paths.since) if paths.since is not None else None,
            )
        else:  # the state, and the previous round, are in Redis
            round_settings = replace(
                settings,
                output=str(paths.output),
                crawl_id=shared.round_crawl_id(number),
                since=settings.since if number == 1 else None,
            )
        crawler = Crawler(seeds, round_settings)
        crawler.open()
        if shared is None:  # now this round's files say where the crawl is
            drop_spent(directory, number)
        if crawler.complete:
            asyncio.run(crawler.close())
        else:
            log.info("round %d: %s", number, paths.output)
            code = _run(round_settings, crawler)
            last = crawler.dashboard_figures
            if crawler.failure is not None:
                print_error(str(crawler.failure))
                return EXIT_FAILED
            if code != EXIT_OK:  # interrupted
                return code
        between_rounds()  # a signal from now on ends the loop, once the round is told over
        if shared is not None:
            shared.finished(number)
        elif between_rounds() is None:
            code = _wait_for_round(partial(_earliest_due, paths.output, settings), settings, last)
            if code is not None:
                return code
        number += 1
    return code


def _shared_rounds(settings: Settings, directory: Path) -> SharedRounds | None:
    if settings.redis is None:
        return None
    from crawler.state.redis_rounds import SharedRounds

    assert settings.crawl_id is not None  # Settings asks for it with --redis
    return SharedRounds(settings.redis, settings.crawl_id, directory)


def _earliest_due(output: Path, settings: Settings) -> str | None:
    """When the first page of the round written to `output` is due again."""
    from crawler.history import open_history

    history = open_history(str(output), [d for d in (settings.warc,) if d is not None])
    try:
        return history.earliest_due()
    finally:
        history.close()


def _wait_for_round(
    first_due: Callable[[], str | None], settings: Settings, last: WatchedFigures | None
) -> int | None:
    """Sleep until the first page of the round just made is due (`first_due()`, worked
    out in a thread: it may index the round's records, 16 s at 10^6 pages); a signal's
    exit code if one came first. With --dashboard, the page and /metrics show the `last`
    round's figures meanwhile, from the start: a scraper met a closed port while the
    index was built."""
    from crawler.revisit import seconds_until

    received: list[signal.Signals] = []

    async def sleep() -> None:
        woken = asyncio.Event()

        _note_signals(received, woken.set)
        async with contextlib.AsyncExitStack() as watched:
            waiting: WatchedFigures | None = None
            if settings.dashboard is not None and last is not None:
                from crawler.observe.dashboard import between_rounds

                waiting = await watched.enter_async_context(between_rounds(settings, last))
            finding = asyncio.ensure_future(asyncio.to_thread(first_due))
            await asyncio.wait(
                [finding, asyncio.ensure_future(woken.wait())], return_when=asyncio.FIRST_COMPLETED
            )
            if received:
                return
            due = finding.result()
            if waiting is not None:
                waiting["next_round_at"] = due
            # A round none of whose records got a time (every page fetched or refused
            # gets one: a round of none, or of internal errors alone) is followed after
            # the shortest interval, not at once: the rounds followed each other without
            # end, a file and a robots.txt request each, hundreds a minute.
            wait_s = seconds_until(due) if due is not None else settings.revisit_min_interval
            if wait_s > 0:
                log.info(
                    "next round in %.1f s, %s",
                    wait_s,
                    "when its first page is due"
                    if due is not None
                    else "as no page has a time to be due (--revisit-min-interval)",
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), wait_s)

    asyncio.run(sleep())
    return SIGNAL_EXIT_CODES[received[0]] if received else None


def _note_signals(
    received: list[signal.Signals],
    on_signal: Callable[[], None],
    on_second: Callable[[], None] | None = None,
) -> None:
    """SIGINT and SIGTERM noted in `received` as they come, and `on_signal` called in the
    running loop for each. With asyncio's add_signal_handler, the loop alone learnt of
    a signal, by a callback it would run later: one that came as a loop was ending was
    lost, and a --revisit process went on, round after round, after its SIGTERM.
    `on_second` is called at once for a second signal, not by the loop: one busy with
    work it does not pause for (packaging a WACZ, minutes for 100 GiB) ran it only after."""
    loop = asyncio.get_running_loop()

    def note(signum: int, _frame: object) -> None:
        received.append(signal.Signals(signum))
        if on_second is not None and len(received) > 1:
            on_second()
        with contextlib.suppress(RuntimeError):  # the loop is closed: `received` tells
            loop.call_soon_threadsafe(on_signal)

    for signum in SIGNAL_EXIT_CODES:
        signal.signal(signum, note)


def _run(settings: Settings, crawler: Crawler) -> int:
    received: list[signal.Signals] = []
    reporter = Reporter(crawler.figures, settings)

    async def supervise() -> None:
        def on_signal() -> None:
            log.warning(
                "interrupted: finishing requests in flight (%s again to quit now)",
                received[0].name,
            )
            crawler.stop()

        def on_second() -> None:  # the state is consistent after every commit
            reporter.clear()
            os._exit(SIGNAL_EXIT_CODES[received[-1]])

        _note_signals(received, on_signal, on_second)
        async with crawler, reporter:
            await crawler.crawl()

    try:
        event_loop_runner(settings.uvloop)(supervise())
    except ConfigError as exc:  # bad input found only once the crawl runs
        print_error(str(exc))
        return EXIT_BAD_INPUT
    except Exception as exc:
        if exc is not crawler.failure:  # reported by main(); anything else is a bug
            raise
    reporter.finish()
    return SIGNAL_EXIT_CODES[received[0]] if received else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
