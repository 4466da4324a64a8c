"""Bound what one HTML page can cost the parser: the markup Lexbor takes longer than linear on.

Lexbor's tree builder is quadratic in three shapes a hostile page can take, measured with
selectolax 1.0.2 (benchmarks/hostile_pages.py):

- nesting: a start tag such as <div> looks for an open <p> down the stack of open elements, so
  40,000 nested <div>s (440 KB) took 2.8 s and 450,000 did not finish;
- attributes: each new attribute of an element is compared with those before it, so one
  element with 100,000 attributes (0.9 MB) took 37 s;
- options: each <option> of a <select> runs the select's selectedness over all its options,
  so 20,000 options took 2.3 s.

`HtmlParser.parse()` is how the crawl parses a page. A small page is parsed on the event loop,
as before: its worst shape costs little. A larger one is first looked at: a cheap sampled count
says whether it may hold one of those shapes. If not, and it is not very large, it is parsed as
a plain page, timed (on the loop; or, where the process has more than one CPU, its tree built
in a thread beside the loop): the first such parse to take longer than its budget (a shape the
look missed) sends every larger page of the rest of the crawl to the guarded threads. Other
pages are parsed in a thread (Lexbor lets go of the GIL), so that they cannot hold the loop
whatever their shape, with their markup bounded first where the count says so. `bounded()`
reads the page as the HTML tokenizer does (comments, raw text, quoted attribute values), keeps
an estimate of the stack of open elements meant never to be lower than the parser's, and edits
the markup only where a bound is passed:

- at MAX_DEPTH open elements (Chromium's cap, 512), an end tag for the innermost one goes
  before the next start tag, so deeper elements become its siblings, as Chromium attaches
  them: their text and links stay in the page;
- after MAX_ATTRIBUTES attributes, an element's further attributes are dropped;
- after MAX_OPTIONS options, a <select> is closed and a new one opened.

A page of some other slow shape, or one that hides its shape from the counts, still gets its
record: after a budget of CPU time for its size, its markup is bounded and parsed again, and the
first parse, which cannot be stopped, is left to end on its own; while it runs, every large
page is bounded first. A page whose markup was edited gets the error kind "html_too_complex",
with the title, links and text of the bounded markup.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import random
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from selectolax.lexbor import LexborHTMLParser

from crawler.parse import ParsedPage, parse_html
from crawler.threads import beside_loop

MAX_DEPTH = 512
MAX_ATTRIBUTES = 64
MAX_OPTIONS = 256
# At most this many characters a page is parsed on the event loop: the slowest shape of this
# size measured 0.07 s (6,500 nested <div>s), the cost of a thread hand-off is saved.
INLINE_MAX_CHARS = 32 * 1024
# At most this many, a page the sampled look finds plain is parsed as a plain page is, until
# one such parse takes longer than its budget (a shape the look missed): then, for the rest of
# the crawl, every page over INLINE_MAX_CHARS goes to the guarded threads. On one CPU, it is
# parsed on the event loop: a thread's hand-off cost more than the parse (on the Python docs,
# 127 KB a page, 2.42 ms of CPU a page against 2.11 inline). With more, its tree is built in a
# thread beside the loop, and only what `parse_html` reads in it is read on the loop.
LOOKED_INLINE_MAX_CHARS = 256 * 1024
# The CPU time a parse may take before the page's markup is bounded and parsed again: 15 times
# what plain HTML takes (Lexbor parses it at about 60 MB/s), and a margin for a busy machine.
_BUDGET_BASE_S = 0.25
_BUDGET_CHARS_PER_S = 4_000_000
_MIN_WAIT_S = 0.05
_THREAD_CPU_CLOCKS = hasattr(time, "pthread_getcpuclockid")
# What sends a page to `bounded()` before Lexbor sees it: one window of _WINDOW characters at
# a random place in each _PERIOD of the page (so 1/64 of it is read, and a hostile stretch
# longer than a period cannot be missed) holding more start tags than end tags that close
# one of them, of elements that nothing else closes, by _MAX_NET_OPENS (the Python docs'
# pages: at most 9 in any 1 KiB), no "<" or ">" at all (the inside of a huge tag), or more
# than _MAX_OPTIONS_SEEN options. A plain page sent there only costs the pass. Nesting spread
# thinner than that is left to the budget.
_PERIOD = 64 * 1024
_WINDOW = 1024
_MAX_NET_OPENS = 16
_MAX_OPTIONS_SEEN = 8

# What may follow "<": a comment, a bogus comment or doctype, an end tag, or a start tag.
_MARKUP = re.compile(r"<(?:(!--)|([!?]|/(?![A-Za-z]))|(/?)([A-Za-z][^\t\n\f\r />]*))")
_ATTRIBUTE = (
    r"[^\t\n\f\r />][^\t\n\f\r />=]*+"
    r"(?:[\t\n\f\r ]*+=[\t\n\f\r ]*+(?:\"[^\"]*+\"|'[^']*+'|[^\t\n\f\r >]*+))?+"
)
# The rest of a tag after its name, as the tokenizer reads it: a ">" inside a quoted value
# does not end it. Group 1 is the "/" of a self-closing tag, group 2 the ">" (none at EOF).
_TAG_REST = re.compile(rf"(?:[\t\n\f\r ]++|/(?!>)|{_ATTRIBUTE})*+(/?)(>)?")
_ONE_ATTRIBUTE = re.compile(rf"[\t\n\f\r /]*+({_ATTRIBUTE})")
_SHORT_TAG = 2 * MAX_ATTRIBUTES  # a tag this short cannot hold MAX_ATTRIBUTES attributes

_VOID = frozenset(
    "area base basefont bgsound br col embed frame hr img input keygen link meta param source "  # noqa: SIM905
    "track wbr".split()
)
# Their content is text to the tokenizer, up to their end tag (plaintext: to the end).
_RAW_TEXT = frozenset("script style xmp iframe noembed noframes textarea title".split())  # noqa: SIM905
# Where a search for an element "in scope" stops.
_SCOPE = frozenset("applet caption html table td th marquee object template".split())  # noqa: SIM905
# "Special" elements: an end tag that is no block's looks for its element no further down.
_SPECIAL = _SCOPE | frozenset(
    "address area article aside base basefont bgsound blockquote body br button center col "  # noqa: SIM905
    "colgroup dd details dir div dl dt embed fieldset figcaption figure footer form frame "
    "frameset h1 h2 h3 h4 h5 h6 head header hgroup hr iframe img input keygen li link listing "
    "main menu meta nav noembed noframes noscript ol p param plaintext pre script search "
    "section select source style summary tbody textarea tfoot thead title tr track ul wbr "
    "xmp".split()
)
_HEADINGS = frozenset("h1 h2 h3 h4 h5 h6".split())  # noqa: SIM905
# Start tags that close an open <p> first.
_CLOSES_P = _HEADINGS | frozenset(
    "address article aside blockquote center details dialog dir div dl fieldset figcaption "  # noqa: SIM905
    "figure footer form header hgroup hr listing main menu nav ol p pre search section summary "
    "table ul xmp li dd dt plaintext".split()
)
# Start tags that close the same element when it is open in table scope.
_CLOSES_IN_TABLE = {
    "td": ("td", "th"),
    "th": ("td", "th"),
    "tr": ("tr",),
    "tbody": ("tbody", "thead", "tfoot"),
    "thead": ("tbody", "thead", "tfoot"),
    "tfoot": ("tbody", "thead", "tfoot"),
}
_LIST_ITEMS = {"li": ("li",), "dd": ("dd", "dt"), "dt": ("dd", "dt")}
_BUTTON_SCOPE = _SCOPE | {"button"}
_TABLE_SCOPE = frozenset(("html", "table", "template"))
_TABLE_PARTS = frozenset("table caption colgroup tbody thead tfoot tr td th".split())  # noqa: SIM905
_LIST_ITEM_STOP = _SPECIAL - {"address", "div", "p"}
_MAX_WALK = 64
_NOT_PUSHED = _VOID | frozenset(("html", "head", "body"))
_FOREIGN = frozenset(("svg", "math"))
# HTML start tags that end foreign content; "/>" closes any other element inside it.
_BREAK_OUT = _CLOSES_P | frozenset(
    "b big body br code em embed font head i img meta nobr ruby s small span strike strong "  # noqa: SIM905
    "sub sup tt u var".split()
)
# Elements that a later tag closes anyway (the next <td>, <li>, <p>, <option>, <a>...): a run
# of them open is no deep nesting, as an unclosed table or a run of <a>s is not.
_CLOSED_ANYWAY = (
    _VOID
    | _HEADINGS
    | _TABLE_PARTS
    | frozenset("html head body p li dd dt option optgroup a button nobr select".split())  # noqa: SIM905
)
_TAG_NAME = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)")
_RAW_TEXT_END = {name: re.compile(rf"</{name}[\t\n\f\r />]", re.IGNORECASE) for name in _RAW_TEXT}


class _Stack:
    """The open elements, as many or more than the parser has: an end tag pops only what it
    surely pops, and a start tag closes only what it surely closes."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.open: dict[str, int] = {}  # how many of each are open
        self.foreign = 0  # open <svg> and <math> elements
        self.options = 0  # options in the innermost open <select>

    def push(self, name: str) -> None:
        self.names.append(name)
        self.open[name] = self.open.get(name, 0) + 1
        if name in _FOREIGN:
            self.foreign += 1
        elif name == "select":
            self.options = 0

    def pop_to(self, index: int) -> None:
        for name in self.names[index:]:
            self.open[name] -= 1
            if name in _FOREIGN:
                self.foreign -= 1
        del self.names[index:]

    def close(self, targets: tuple[str, ...], stop: frozenset[str]) -> None:
        """Pop the innermost of `targets` and all above it, unless a `stop` element is above
        it, or it is more than _MAX_WALK down: then it is left open, which keeps the estimate
        high and the work per tag bounded."""
        if not any(self.open.get(target) for target in targets):
            return
        names = self.names
        for index in range(len(names) - 1, max(-1, len(names) - 1 - _MAX_WALK), -1):
            name = names[index]
            if name in targets:
                self.pop_to(index)
                return
            if name in stop:
                return

    def start(self, name: str) -> None:
        """What an HTML start tag closes before its element is pushed."""
        names = self.names
        if not names:
            return
        if name in _CLOSES_P:
            self.close(("p",), _BUTTON_SCOPE)
        top = names[-1] if names else ""
        if name in _LIST_ITEMS:
            self.close(_LIST_ITEMS[name], _LIST_ITEM_STOP)
        elif (name in _HEADINGS and top in _HEADINGS) or (
            (name == "option" or name == "optgroup") and top == "option"
        ):
            self.pop_to(len(names) - 1)
        elif name in _CLOSES_IN_TABLE:
            self.close(_CLOSES_IN_TABLE[name], _TABLE_SCOPE)
        elif name in ("a", "button", "nobr", "select"):
            self.close((name,), _SPECIAL)

    def end(self, name: str) -> None:
        """An end tag: its element and all above it, if it is surely closed."""
        if name in _TABLE_PARTS:  # closes the cell it is in, too
            self.close((name,), _TABLE_SCOPE)
        elif name not in ("html", "head", "body", "br"):
            self.close((name,), _SCOPE if name in _SPECIAL else _SPECIAL)


def bounded(html: str) -> str:
    """`html` with its nesting, attributes and options bounded (see the module docstring)."""
    pieces: list[str] = []  # the edited page, if it needs editing
    copied = 0  # how much of `html` is in `pieces`
    stack = _Stack()
    names = stack.names
    position = 0
    end = len(html)
    while position < end:
        markup = _MARKUP.search(html, position)
        if markup is None:
            break
        comment, bogus, slash, name = markup.groups()
        if comment is not None:
            position = _comment_end(html, markup.end())
            continue
        if bogus is not None:
            close = html.find(">", markup.end())
            position = end if close == -1 else close + 1
            continue
        rest = _TAG_REST.match(html, markup.end())
        assert rest is not None  # every part of the pattern may be empty
        if rest.group(2) is None:
            break  # a tag cut by the end of the page is no tag
        position = rest.end()
        name = name.lower()
        edits: list[tuple[int, int, str]] = []  # html[start:stop] is to be the text
        if slash:
            stack.end(name)
        elif name == "plaintext" and not stack.foreign:
            break  # the rest of the page is text
        else:
            in_foreign = stack.foreign and name not in _BREAK_OUT
            raw_text = name in _RAW_TEXT and not stack.foreign
            if not in_foreign:
                stack.start(name)
            if name == "option" and names and names[-1] == "select":
                stack.options += 1
                if stack.options > MAX_OPTIONS:
                    edits.append((markup.start(), markup.start(), "</select><select>"))
                    stack.options = 1
            self_closed = rest.group(1) and (in_foreign or name in _FOREIGN)
            if not (name in _NOT_PUSHED or raw_text or self_closed):
                if len(names) >= MAX_DEPTH:
                    edits.append((markup.start(), markup.start(), f"</{names[-1]}>"))
                    stack.pop_to(len(names) - 1)
                stack.push(name)
            if raw_text:
                position = _raw_text_end(html, name, position)
        if rest.end() - markup.start() > _SHORT_TAG:
            kept = _first_attributes(html, markup.end(), rest.start(1))
            if kept is not None:
                edits.append((markup.end(), rest.start(1), kept))
        for start, stop, text in edits:
            pieces += (html[copied:start], text)
            copied = stop
    if not pieces:
        return html
    pieces.append(html[copied:])
    return "".join(pieces)


def _first_attributes(html: str, start: int, stop: int) -> str | None:
    """The tag's first MAX_ATTRIBUTES attributes, if it has more; else None."""
    attributes = _ONE_ATTRIBUTE.finditer(html, start, stop)
    kept = [match.group(1) for match in itertools.islice(attributes, MAX_ATTRIBUTES + 1)]
    if len(kept) <= MAX_ATTRIBUTES:
        return None
    return " " + " ".join(kept[:MAX_ATTRIBUTES])


def _comment_end(html: str, start: int) -> int:
    """Where a comment whose "<!--" ends at `start` ends: "-->", "--!>", or "<!-->"."""
    if html.startswith(">", start):
        return start + 1
    if html.startswith("->", start):
        return start + 2
    ends = [i for i in (html.find("-->", start), html.find("--!>", start)) if i != -1]
    if not ends:
        return len(html)
    first = min(ends)
    return first + (3 if html.startswith("-->", first) else 4)


def _raw_text_end(html: str, name: str, start: int) -> int:
    """Where the text of a <script>, <style>, <textarea>... that starts at `start` ends."""
    match = _RAW_TEXT_END[name].search(html, start)
    return len(html) if match is None else match.start()


def may_be_slow(html: str, rng: random.Random) -> bool:
    """Whether windows of the page hint at a shape Lexbor is slow on (see _PERIOD)."""
    for period in range(0, len(html), _PERIOD):
        start = period + rng.randrange(_PERIOD - _WINDOW)
        stop = start + _WINDOW
        if stop > len(html):
            start, stop = max(0, len(html) - _WINDOW), len(html)
        window = html[start:stop]
        if ("<" not in window and ">" not in window) or window.count("<option") > _MAX_OPTIONS_SEEN:
            return True
        if _net_opens(window) > _MAX_NET_OPENS:
            return True
    return False


def _net_opens(window: str) -> int:
    """Start tags in `window` less the end tags that close one of them: an end tag for
    nothing open in the window (a bogus one, which the parser ignores) hides no nesting."""
    opened: dict[str, int] = {}
    opens = 0
    for slash, name in _TAG_NAME.findall(window):
        name = name.lower()
        if name in _CLOSED_ANYWAY:
            continue
        if not slash:
            opened[name] = opened.get(name, 0) + 1
            opens += 1
        elif opened.get(name):
            opened[name] -= 1
            opens -= 1
    return opens


_Parsed = tuple[LexborHTMLParser, ParsedPage, bool]


def _parsed(html: str, agent: str, edited: bool = False) -> _Parsed:
    tree = LexborHTMLParser(html)
    return tree, parse_html(tree, agent), edited


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask where there is one (Linux,
    which `taskset` narrows), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _timed_tree(html: str) -> tuple[LexborHTMLParser, float]:
    """The tree of `html`, and the CPU time building it took this thread."""
    started_s = time.thread_time()
    tree = LexborHTMLParser(html)
    return tree, time.thread_time() - started_s


def _bounded_parsed(html: str, agent: str) -> _Parsed:
    markup = bounded(html)
    return _parsed(markup, agent, markup is not html)


_T = TypeVar("_T")


class _Job(Generic[_T]):
    """`function(html)` in a daemon thread of its own (one that cannot be stopped must not
    keep the process from ending either), and the CPU time it has taken."""

    def __init__(self, function: Callable[[str], _T], html: str) -> None:
        self._clock: int | None = None
        self._started_s = time.monotonic()
        self.future = beside_loop(functools.partial(self._run, function, html), "crawler-parse")

    def cpu_s(self) -> float:
        if not _THREAD_CPU_CLOCKS:  # macOS, Windows: the time since it started
            return time.monotonic() - self._started_s
        try:
            return time.clock_gettime(self._clock) if self._clock is not None else 0.0
        except OSError:  # the thread has just ended
            return 0.0

    def _run(self, function: Callable[[str], _T], html: str) -> _T:
        if _THREAD_CPU_CLOCKS:
            self._clock = time.pthread_getcpuclockid(threading.get_ident())
        try:
            return function(html)
        finally:
            self._clock = None


class HtmlParser:
    """Parses a crawl's pages so that none holds the event loop longer than a plain page of
    its size would: see the module docstring. `agent`: the crawler's robots.txt name, whose
    <meta name> robots directives are obeyed beside those of <meta name=robots>."""

    def __init__(self, agent: str = "robots") -> None:
        self._agent = agent.lower()
        self._runaways = 0  # parses given up on that still run
        self._random = random.Random()
        # As many pages parse at once as there are cores: a tree takes some 25 times its page's
        # size in memory (260 MB for 10 MB of paragraphs). A parse given up on leaves its place.
        cpus = usable_cpus()
        self._threads = asyncio.Semaphore(cpus)
        # Where a plain large page's tree is built: threads that live as long as the parser (one
        # a page took 60-100 us of the loop's time to start), leaving the loop a CPU of its own.
        # On one CPU the hand-off only adds to the work: it is built on the loop.
        self._beside_loop = (
            ThreadPoolExecutor(cpus - 1, thread_name_prefix="crawler-parse") if cpus > 1 else None
        )
        self._inline_overran = False  # a plain large page took longer than its budget

    async def parse(self, html: str) -> _Parsed:
        """The page's tree, what `parse_html` reads in it, and whether its markup had to be
        bounded. A large page's are read in a thread too: a page of 500,000 links took 1.2 s."""
        size = len(html)
        if size <= INLINE_MAX_CHARS:
            return _parsed(html, self._agent)
        suspect = bool(self._runaways) or may_be_slow(html, self._random)
        if not suspect and size <= LOOKED_INLINE_MAX_CHARS and not self._inline_overran:
            return await self._plain(html)
        async with self._threads:
            return await self._parse_in_threads(html, suspect)

    async def _plain(self, html: str) -> _Parsed:
        """A page parsed as a plain one: its tree built beside the loop where there is a
        CPU for it (Lexbor lets go of the GIL), else on the loop; timed against its budget."""
        if self._beside_loop is not None:
            # Trees built ahead of the loop's turn to read them would pile up (64 pages in
            # flight made the peak RSS 48 MiB -> 110 on the generated site).
            async with self._threads:
                loop = asyncio.get_running_loop()
                tree, spent_s = await loop.run_in_executor(self._beside_loop, _timed_tree, html)
        else:
            tree, spent_s = _timed_tree(html)
        started_s = time.thread_time()
        parsed = tree, parse_html(tree, self._agent), False
        if spent_s + time.thread_time() - started_s > len(html) / _BUDGET_CHARS_PER_S:
            self._inline_overran = True
        return parsed

    async def _parse_in_threads(self, html: str, suspect: bool) -> _Parsed:
        bounded_parsed = functools.partial(_bounded_parsed, agent=self._agent)
        if suspect or self._runaways:
            return await _Job(bounded_parsed, html).future
        first = _Job(functools.partial(_parsed, agent=self._agent), html)
        budget_s = _BUDGET_BASE_S + len(html) / _BUDGET_CHARS_PER_S
        # CPU time, not the clock's: on a busy machine a plain page may take long to parse.
        while (left_s := budget_s - first.cpu_s()) > 0:
            done, _ = await asyncio.wait({first.future}, timeout=max(left_s, _MIN_WAIT_S))
            if done:
                return first.future.result()
        self._runaways += 1
        first.future.add_done_callback(self._runaway_ended)
        bounded_parse = await _Job(bounded_parsed, html).future
        if not bounded_parse[2]:  # none of the known shapes: only slow, so the first will do
            return await first.future
        return bounded_parse

    def close(self) -> None:
        """Let the threads beside the loop end once the crawl is over: a finished crawl
        kept (its Crawler's figures read) kept them alive, one set for each."""
        if self._beside_loop is not None:
            self._beside_loop.shutdown(wait=False)
            self._beside_loop = None

    def _runaway_ended(self, future: asyncio.Future[_Parsed]) -> None:
        self._runaways -= 1
        if not future.cancelled():
            future.exception()  # retrieved: a parse given up on has nobody else to tell
