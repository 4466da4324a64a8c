"""Main content (--extract): the text a reader came for, as plain text and Markdown,
and the page's metadata, from the tree the crawl has already parsed (selectolax, Lexbor).

How the main content is found, in the manner of Readability (Arc90, then Mozilla's
Readability.js):

1. On a copy of the tree, what is never content goes: scripts, navigation, footers,
   asides, form controls, ruby readings, hidden elements, a site's header (an
   article's header stays when it holds a lead paragraph), and elements whose class
   or id names a kind of boilerplate (comments, share bars, cookie notices and
   consent managers' banners, ads, meta lines...), but not inside code, where a
   highlighter's "comment" is code.
2. Each block (an element with 25 characters of text of its own, not mostly links,
   an in-page link weighing 0.3) gives points to its ancestors, five levels up, a
   smaller share at each: one, one per comma, one per 100 characters up to three. A
   <div> of lines between <br>s is their parent, and takes the first share.
3. The best-scored element, its score weighed by its class or id (`article-body`
   for, `sidebar` against) and by how little of its text is links, is the main
   content; or an ancestor that holds more of it, by Readability.js's rules (the one
   that holds three other close candidates, a parent that scores higher, the parent
   of an only child; and the parent of a list or table that scores half as well).
   Its siblings that score nearly as well, or share its class (or are <section>s of
   a document, as it is), or are paragraphs of prose, come with it, and so does a
   lead paragraph near it in an element of its own (class `lead`, `intro`,
   `standfirst`...). On a forum thread the top is one post: the others, elements of
   its tag and class under ancestors alike, come too, in page order.
4. That content is written out block by block, as plain text and as Markdown,
   leaving out a block that is mostly links (a list of related stories), a heading
   that repeats the page's title (or a reply's "Re: " and the title), a heading's
   permalink ("¶"), a code viewer's line numbers, and a page's machinery labels
   ("Advertisement", "Related", a Chinese article's editor line).
5. A page whose body gives next to nothing (a single-page app before its script runs)
   is read again with its <noscript>'s content; and the articleBody of its JSON-LD is
   the main text when it is more than twice what the page shows.

It reads the tree through a few CSS queries and one walk of the kept part: about
3 ms a page (benchmarks/extract_eval.py measures it, and its accuracy), and some 0.3 s
a MB of markup. `MainContent` runs it on the event loop for a small page, and in a
thread for a larger one: on the loop, a 9 MB page held every other page of the crawl
for 3 s.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import quote, urljoin

from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawler.htmlguard import INLINE_MAX_CHARS
from crawler.page import Page
from crawler.parse import copy_of
from crawler.simhash import CJK_CHARACTER, simhash, to_hex
from crawler.urls import canonicalize, document_base, without_userinfo

# Never content: their text is no part of what a reader reads.
_STRIPPED_TAGS = [
    "script",
    "style",
    "noscript",
    "template",
    "rp",
    "rt",
    "iframe",
    "svg",
    "canvas",
    "nav",
    "aside",
    "footer",
    "button",
    "select",
    "input",
    "textarea",
    "label",
    "dialog",
    "menu",
    "figcaption",
    "object",
    "embed",
]
_STRIPPED_TAGS_BUT_NOSCRIPT = [tag for tag in _STRIPPED_TAGS if tag != "noscript"]
# Class and id words of boilerplate, matched as whole class names or ids, or as a
# prefix before a hyphen or underscore ("comment-list", "share_bar").
_BOILERPLATE_WORDS = [
    "ad",
    "ads",
    "adv",
    "advert",
    "advertisement",
    "advertising",
    "banner",
    "breadcrumb",
    "breadcrumbs",
    "byline",
    "comment",
    "comments",
    "cookie",
    "cookies",
    "consent",
    "gdpr",
    # Consent managers' banners, named after them: #didomi-host, #onetrust-consent-sdk,
    # .optanon-alert-box-wrapper, #usercentrics-root, #CybotCookiebotDialog.
    "didomi",
    "onetrust",
    "optanon",
    "usercentrics",
    "cybotcookiebotdialog",
    "disqus",
    "footer",
    "share",
    "sharing",
    "social",
    "sidebar",
    "newsletter",
    "subscribe",
    "subscription",
    "signup",
    "promo",
    "related",
    "recommended",
    "recirculation",
    "navbar",
    "nav",
    "menu",
    "masthead",
    "popup",
    "modal",
    "outbrain",
    "taboola",
    "tags",
    "tag-list",
    "author-bio",
    "author-box",
    "caption",
    "credit",
    "image-credit",
    "photo-credit",
    "gallery",
    "slideshow",
    "skip-link",
    "sr-only",
    "visually-hidden",
    "print-only",
    "screen-reader-text",
    # Blogging platforms' share, like and related-posts widgets, and post meta lines.
    "sharedaddy",
    "jp-relatedposts",
    "addtoany",
    "shariff",
    "yarpp-related",
    "crp_related",
    "meta",
    "postmetadata",
    "entry-footer",
]
# Boilerplate as a whole class name or id only: a forum post's "author" line and
# "signature" (Open Journal Systems' "author_guidelines" are a page's content), and
# MediaWiki's "[edit]" after each heading.
_WHOLE_NAMES = ["author", "signature", "mw-editsection"]
# Boilerplate as a whole class name: MediaWiki's infobox (a table of the facts the article
# tells), list of references (in a "reflist" or "mw-references-wrap" of its own) and
# navigation box at the foot.
_WHOLE_CLASS_NAMES = ["infobox", "references", "navbox"]
_BOILERPLATE_NAMES = frozenset(_BOILERPLATE_WORDS)
_WHOLE_BOILERPLATE_NAMES = _BOILERPLATE_NAMES | frozenset(_WHOLE_NAMES + _WHOLE_CLASS_NAMES)
_META = ("-meta", "_meta")
# Boilerplate as a part of a class name between hyphens or underscores: a recipe card's
# stars and votes ("wprm-recipe-rating", "tasty-recipes-rating") and its nutrition label
# ("wprm-nutrition-label-container", "tasty-recipes-nutrition"), which the card's
# plugin names after itself.
_PART_NAMES = frozenset(["rating", "ratings", "nutrition"])
_NAME_PARTS = re.compile(r"[-_]")
# One CSS query finds the elements whose class or id holds one of the words anywhere
# (a word that holds another is found by it: "nav" finds "navbox", "rating" "ratings");
# `_named_boilerplate` then checks the whole-name-or-prefix rule. Lexbor matches a
# selector list one selector at a time: the 6 exact selectors a word took 1.5 ms a page,
# 4 times the rest of the extraction.
# A whole class name is found by a class selector, cheaper still.
_ALL_WORDS = _BOILERPLATE_WORDS + _WHOLE_NAMES
_MAY_BE_BOILERPLATE = ", ".join(
    [
        f"[class*={word} i], [id*={word} i]"
        for word in _ALL_WORDS
        if not any(other != word and other in word for other in _ALL_WORDS)
    ]
    + [f".{name}" for name in _WHOLE_CLASS_NAMES if not any(other in name for other in _ALL_WORDS)]
    + [f"[class*={part} i]" for part in ("rating", "nutrition")]
)
_HIDDEN_OR_ASIDE = (
    '[hidden], [aria-hidden="true"], [role=navigation], [role=banner], '
    "[role=contentinfo], [role=complementary], [role=dialog], [role=alert], "
    '[style*="display:none" i], [style*="display: none" i], '
    '[style*="visibility:hidden" i], [itemprop=comment], [itemprop=author]'
)
# A class such as <body class="nav-closed"> says nothing about the body's content.
# Readability.js's "ok maybe it's a candidate": a class that also says this.
_MAYBE_CONTENT = re.compile(r"article|body|column|content|main|entry")
_NEVER_BOILERPLATE = frozenset(["html", "body", "main", "article"])
_POSITIVE = re.compile(
    r"article|body|content|entry|main|page|post|story|text|blog|prose|hentry|articlebody",
    re.I,
)
_NEGATIVE = re.compile(
    r"comment|com-|contact|foot|footer|footnote|masthead|media|meta|outbrain|promo|related|"
    r"scroll|share|shoutbox|sidebar|skyscraper|sponsor|shopping|tags|tool|widget|hidden|"
    r"caption|credit|byline|author|nav|menu|social|subscribe|newsletter|cookie|banner|\bad",
    re.I,
)
_BLOCK_TAGS = frozenset(
    "address article blockquote body center dd details div dl dt fieldset figcaption figure "  # noqa: SIM905
    "h1 h2 h3 h4 h5 h6 hr li main ol p pre section summary table tbody td tfoot th thead tr "
    "ul".split()
)
_TEXT_TAGS = frozenset(("p", "pre", "li"))
_LIST_TAGS = frozenset(("ul", "ol", "dl", "table", "tbody"))
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_MIN_BLOCK_CHARS = 25
# Content whose best-scored part holds less than this share of the points of the page's
# blocks is widened to the ancestor that holds at least the second share.
_SHARE_KEPT = 0.5
_SHARE_HELD = 0.75
# Main text this short may be a page whose text is in <noscript>, for browsers without scripts.
_SHORT_CHARS = 200
# Main text this short, beside comments of more text, may be a discussion's first post.
_THREAD_CHARS = 600
_COMMENTS = "[class*=comment i]"
_HEADLINE_CHARS = 10
_LEAD_CHARS = 80
# A lead's class: one of these words as a class name, after a hyphen or an underscore
# ("article-excerpt", "story_dek"), or first before a hyphen ("lead-text"). One query finds
# the classes that hold a word anywhere, and `_named_lead` checks the rule: Lexbor matches
# a selector list a selector at a time, and the 4 selectors a word were a fifth of the
# extraction's time on the Python docs.
_LEAD_WORDS = ("lead", "intro", "standfirst", "excerpt", "subtitle", "dek")
_MAY_BE_LEAD = ", ".join(f"[class*={word} i]" for word in _LEAD_WORDS)
_COMMAS = (",", "，", "、")  # CJK text has its own commas
_TITLE_PARTS = re.compile(r"(\s+[-|–—:·•»/]+\s+)")
# Chinese titles join their parts without spaces ("标题_新闻中心_某某网", "标题-某某网",
# "【标题】某某网"): separators that are never inside a word, and "-" beside a CJK character.
_CJK_CHARACTER = "\u3000-\u9fff\uf900-\ufaff\uff00-\uffef"
_TIGHT_TITLE_PARTS = re.compile(
    f"[_|｜－—–【】]+|(?<=[{_CJK_CHARACTER}])-+|-+(?=[{_CJK_CHARACTER}])"
)
# Labels of a page's machinery, left inside the content by many sites: never content alone.
_LABELS = frozenset(
    [
        "ad",
        "advert",
        "advertisement",
        "advertising",
        "sponsored",
        "share",
        "share this",
        "tags",
        "comments",
        "comment",
        "post a comment",
        "caption",
        "close",
        "trending",
        "related",
        "read more",
        "see more",
        "continue reading",
        "back to gallery",
        "image",
        "image copyright",
        "follow us",
        "like this",
        "share this:",
        "related posts",
        "anzeige",
        "werbung",
        "teilen",
        "teilen mit",
        "teilen sie dies mit",
        "gefällt mir",
        "weiterlesen",
        "mehr zum thema",
        "ähnliche beiträge",
        "artikel zum thema",
        "kommentare",
        "publicidad",
        "compartir",
        "leer más",
        "publicité",
        "partager",
        "lire aussi",
        "lire la suite",
        "pubblicità",
        "condividi",
        "leggi anche",
        # Chinese, simplified and traditional where they differ.
        "广告",
        "廣告",
        "分享",
        "分享到",
        "分享至",
        "相关阅读",
        "相關閱讀",
        "相关新闻",
        "相關新聞",
        "相关文章",
        "相關文章",
        "推荐阅读",
        "推薦閱讀",
        "延伸阅读",
        "延伸閱讀",
        "展开全文",
        "阅读全文",
        "閱讀全文",
        "查看更多",
        "返回搜狐，查看更多",
        "网友评论",
        "網友評論",
        "返回顶部",
        "返回頂部",
    ]
)
# A forum reply's subject: "Re: ", "AW: " (German), "Sv: ", "回复：" and the thread's title.
_REPLY = re.compile(r"^(?:re|aw|sv|vs|回复|回覆|答复)\s*[:：]\s*")
# A Chinese news article's last lines: who edited it ("（责任编辑：李明）", "(责编：赵敏)"),
# and where it came from ("本文来源：都市晨报 责任编辑：王芳_NN1234", NetEase's).
# A WeChat article's credits ("文字 | 林小园　图片 | 林小园", "编辑丨阿青") are alike.
_CREDIT = re.compile(
    r"[（(【\[]?\s*(?:责任编辑|責任編輯|责编|責編|编辑|編輯|校对|校對|(?:本文)?[来來]源"
    r"|文字|撰文|图片|圖片|摄影|攝影|排版|审核|審核|美编|美編)\s*[:：|｜丨]"
)
# Lines a platform puts around every article: a WeChat account's call to follow it
# ("▼ 点击上方蓝字关注我们 ▼", "长按识别二维码 关注...") and its end mark ("- END -"), a
# novel site's lines among a chapter's ("请记住本书首发域名：...", "天才一秒记住本站地址：...",
# "手机用户请浏览m....阅读", "本章未完，请点击下一页继续阅读"), and a page's note to a browser
# without scripts ("Please enable JavaScript...").
_PLATFORM_LINE = re.compile(
    r"[\W_]*(?:点击上方.{0,12}关注|點擊上方.{0,12}關注|长按.{0,6}二维码|長按.{0,6}二維碼|扫码关注"
    r"|(?:请|請|天才一秒|一秒)?(?:记住|記住)本(?:书|書|站)|(?:请|請)?(?:记住|記住).{0,8}(?:域名|网址|網址)"
    r"|手机(?:版|用户|用戶)?.{0,16}(?:网址|網址|浏览|瀏覽|访问|訪問)|本章未完.{0,4}(?:请|請)?点击下一页"
    r"|end[\W_]*$|(?:please\s+)?(?:enable|turn on)\s+javascript"
    r"|javascript\s+is\s+(?:disabled|required))",
    re.IGNORECASE,
)
# A Chinese page's meta line ("发布时间：2025-03-10　来源：县林业局　浏览次数：1024"): two
# or more of these labels in a short block, which is never content, and on a page of
# little text was its best-scored block, the same on every page of the site.
_META_LABEL = re.compile(
    r"(?:发布|发表|更新|时间|日期|来源|來源|作者|编辑|編輯|点击|點擊|点击数|浏览|瀏覽|阅读|閱讀"
    r"|浏览次数|阅读次数|字号|字號)\s*[:：]"
)
# Headings of a document's sections whose links are their content: a reference's "See
# also" (MDN, Microsoft Learn, man pages, Wikipedia) and its specifications' table (MDN).
_SEE_ALSO = frozenset(
    [
        "see also",
        "specifications",
        "specification",
        "siehe auch",
        "voir aussi",
        "véase también",
        "vedi anche",
        "参见",
        "參見",
        "另请参阅",
        "另請參閱",
        "関連項目",
        "参照",
    ]
)
# A notebook cell's prompt ("In [1]:", "Out[12]:", "In [ ]:", "In [*]:"), beside its code.
_NOTEBOOK_PROMPT = re.compile(r"(?:In|Out)\s*\[[\d\s*]*\]:")
_META_LINE_CHARS = 100
_PLATFORM_LINE_CHARS = 80
# A Chinese site's footer: the licence every site shows ("京ICP证030173号", "沪ICP备05012345号",
# "京公网安备 11000002000088号"), in a block of a few lines.
_SITE_LICENCE = re.compile(r"ICP\s*[备證证]|公网安备|公網安備")
_FOOTER_CHARS = 300
# What a heading's permalink shows (Sphinx's and MkDocs' "¶", rustdoc's "§", Docusaurus'
# zero-width space, GitHub's icon, which leaves nothing), and space.
_PERMALINK_MARKS = "¶§#🔗\u200b \t\n"
# What ends a label ("Share:", "分享到：").
_LABEL_END = ":.…!：。！"
# A block's points go to its ancestors up to five levels, a share less at each (as
# Readability.js does), so that an article cut into many small wrappers still adds up.
_ANCESTOR_DIVISORS = (1, 2, 6, 9, 12)
# Text is escaped where CommonMark would read it as markup: emphasis, code, links,
# raw HTML and autolinks ("<"), and an entity ("&amp;" written out in the page).
_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<"})
_MD_ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")
# What opens a block at the start of a line: a heading, a quote, a list item, a
# thematic break or setext underline, a code fence. Its first character is escaped
# (an ordered list's "1." or "1)" at its punctuation).
_MD_BLOCK_START = re.compile(
    r"^(?:#{1,6}(?=[ \t]|$)|>|[-+](?=[ \t]|$)|-(?=-*[ \t]*$)|=(?==*[ \t]*$)|~(?=~~)"
    r"|(\d{1,9})(?=[.)](?:[ \t]|$)))",
    re.MULTILINE,
)
_MD_BLOCK_START_CHARS = frozenset("#>-+=~0123456789")
# A heading's trailing "#"s after a space, which CommonMark drops as a closing sequence.
_MD_CLOSING_HASHES = re.compile(r"(?<=[ \t])(#+[ \t]*)$")
# A JSON escape of a UTF-16 surrogate (paired ones too, which json.loads joins).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# An ordered list's start, as HTML's rules for parsing integers find it (a negative one
# has no CommonMark form), and the largest number a CommonMark list item can have.
_HTML_INTEGER = re.compile(r"[\t\n\f\r ]*\+?([0-9]+)")
_MAX_LIST_NUMBER = 999_999_999
_CODE_TAGS = frozenset(("code", "kbd", "samp", "tt"))
_CODE_BLOCKS = _CODE_TAGS | {"pre"}
_BACKTICKS = re.compile("`+")
_WHITESPACE = re.compile(r"\s+")
# Elements nested deeper are written as their flat text (Python's stack has limits).
_MAX_DEPTH = 150
# What a browser leaves unescaped in a fragment (all but controls, space, '"<>`').
_ATTACHMENT = re.compile(
    r"\.(?:pdf|docx?|xlsx?|pptx?|wps|et|dps|odt|ods|odp|rtf|csv|zip|rar|7z)$", re.IGNORECASE
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_FRAGMENT_KEPT = "!#$%&'()*+,-./:;=?@[\\]^_{|}~"


@dataclass(slots=True)
class Extracted:
    """What --extract adds to a record."""

    main_text: str
    markdown: str
    metadata: dict[str, Any] = field(default_factory=dict)


class MainContent:
    """--extract's step of a crawl: `add` gives a page its main content, in a thread
    when the page is larger than the parser would parse on the event loop."""

    def __init__(self) -> None:
        # As many at once as there are cores: a copy of the tree is some 25 times the page.
        self._threads = asyncio.Semaphore(os.cpu_count() or 1)

    async def add(self, page: Page, url: str) -> None:
        if len(page.body) <= INLINE_MAX_CHARS:
            add_main_content(page, url)
            return
        async with self._threads:
            await asyncio.to_thread(add_main_content, page, url)


def add_main_content(page: Page, url: str) -> None:
    """--extract: `page`'s main_text, markdown, metadata and simhash fields (an HTML page
    of `url`, as fetched; a page without a word of main text gets no simhash)."""
    tree = page.tree
    if tree is None:
        return
    found = extract(tree, url, page.encoding)
    fields = page.fields
    fields["main_text"] = found.main_text
    fields["markdown"] = found.markdown
    fields["metadata"] = found.metadata
    fingerprint = simhash(found.main_text)
    if fingerprint is not None:
        fields["simhash"] = to_hex(fingerprint)


def extract(tree: LexborHTMLParser, url: str, encoding: str = "utf-8") -> Extracted:
    """The main content of `tree` (a page of `url`, in `encoding`, a Python codec) and its
    metadata; `tree` is left as it was."""
    metadata = page_metadata(tree)
    # The links' base is the one the crawl follows them from (the frozen base URL).
    base: str | None = url
    base_node = tree.css_first("base[href]")
    if base_node is not None and (base_href := base_node.attrs.get("href")):
        base = document_base(base_href, url, encoding)
    titles = _titles(tree, metadata)
    writer = _written(tree, _Writer(base, titles, encoding), noscript=False)
    text = writer.text()
    if len(text) < _SHORT_CHARS and _noscript_chars(tree) > len(text):
        # A single-page app's text for a browser without scripts, which a crawler is.
        with_noscript = _written(tree, _Writer(base, titles, encoding), noscript=True)
        if len(with_noscript.text()) > len(text):
            writer, text = with_noscript, with_noscript.text()
    if (
        len(text) < _THREAD_CHARS
        and metadata.get("opengraph", {}).get("og:type") != "article"
        and _comment_chars(tree) > len(text)
    ):
        # A discussion's page (an old Reddit thread, Lemmy, Hacker News): a short post,
        # and its replies, which it calls comments, are the most of its text; not an
        # article's (a blog's "open thread" too), whose comments are its readers'.
        thread = _written(tree, _Writer(base, titles, encoding), noscript=False, comments=True)
        if len(thread.text()) > len(text):
            writer, text = thread, thread.text()
    article_body = _article_body(metadata)
    if len(article_body) > 2 * len(text):
        # The page shows a teaser, or nothing until a script runs; its JSON-LD has it all.
        writer = _Writer(base, titles, encoding)
        writer.write_article_body(article_body)
    return Extracted(writer.text(), writer.markdown(), metadata)


def _noscript_chars(tree: LexborHTMLParser) -> int:
    """The length of the text in the page's <noscript>s (a tracking pixel's has none)."""
    return sum(len(node.text(deep=True).strip()) for node in tree.css("noscript"))


def _comment_chars(tree: LexborHTMLParser) -> int:
    """The length of the text in the page's elements its classes call comments (those
    inside another not counted again)."""
    nodes = tree.css(_COMMENTS)
    ids = {node.mem_id for node in nodes}
    return sum(len(node.text(deep=True).strip()) for node in nodes if not _ancestors(node) & ids)


def _written(
    tree: LexborHTMLParser, writer: _Writer, noscript: bool, comments: bool = False
) -> _Writer:
    """`writer`, having written the main content of `tree`'s body, <noscript>'s content
    in it or not, and the elements its classes call comments or not."""
    work = copy_of(tree)
    body = work.body
    if body is None:
        return writer
    if noscript:
        for node in body.css("noscript"):
            node.unwrap()
        work.strip_tags(_STRIPPED_TAGS_BUT_NOSCRIPT)
    else:
        work.strip_tags(_STRIPPED_TAGS)
    for header in body.css("header"):
        # A site's header goes; an article's may hold its lead, a paragraph of its own or
        # one its class names so ("article-excerpt").
        if not any(map(_named_lead, header.css(_MAY_BE_LEAD))) and not any(
            len(p.text(deep=True)) >= _LEAD_CHARS for p in header.css("p")
        ):
            header.decompose()
    for node in body.css(_MAY_BE_BOILERPLATE):
        if (
            node.tag not in _NEVER_BOILERPLATE
            and _named_boilerplate(node)
            and not _in_code(node)
            and not (comments and node.css_matches(_COMMENTS))
        ):
            node.decompose()
    for node in body.css(_HIDDEN_OR_ASIDE):
        if node.tag not in _NEVER_BOILERPLATE and not _a_reply(node):
            node.decompose()
    roots = _main_nodes(body)
    lead = _lead(roots)
    if lead is not None:
        roots.insert(0, lead)
    for root in roots:
        writer.render(root)
    writer.end_block()
    if roots[0].mem_id == body.mem_id and len(writer.text()) < _SHORT_CHARS:
        # No block of prose, the page's own: a list page (a news site's "滚动新闻", a
        # forum's topics, an archive) whose content is its list of headlines.
        headlines = _headline_list(body)
        if headlines is not None and len(headlines.text()) > 2 * len(writer.text()):
            writer.blocks.clear()
            writer.keep_links = True
            writer.render(headlines)
            writer.end_block()
    return writer


def _headline_list(body: LexborNode) -> LexborNode | None:
    """The list whose items are headlines (a link of _HEADLINE_CHARS or more each, five
    at least) holding the most of their text, if the page has one."""
    best, best_chars = None, 0
    for node in body.css("ul, ol"):
        items = [child for child in node.iter() if child.tag == "li"]
        lengths = [
            max((len(link.text(deep=True).strip()) for link in item.css("a")), default=0)
            for item in items
        ]
        headlines = sum(length >= _HEADLINE_CHARS for length in lengths)
        if headlines >= 5 and headlines >= 0.8 * len(items) and sum(lengths) > best_chars:
            best, best_chars = node, sum(lengths)
    return best


def _article_body(metadata: dict[str, Any]) -> str:
    """The articleBody of the page's JSON-LD Article, or ""."""
    for value in _json_ld_objects(metadata.get("json_ld", [])):
        body = value.get("articleBody")
        if isinstance(body, str) and _is_article(value):
            return body.strip()
    return ""


def _lead(roots: list[LexborNode]) -> LexborNode | None:
    """A lead paragraph (a "standfirst") just before the content, in its own element."""
    first = roots[0]
    ancestor = first.parent
    kept = {root.mem_id for root in roots}
    for _ in range(3):
        if ancestor is None or ancestor.tag in ("body", "html"):
            return None
        for node in ancestor.css(_MAY_BE_LEAD):
            if (
                node.mem_id in kept
                or not _named_lead(node)
                or len(node.text(deep=True).strip()) < _MIN_BLOCK_CHARS
            ):
                continue
            inside = node.parent
            while inside is not None and inside.mem_id not in kept:
                inside = inside.parent
            if inside is None:
                return node
        ancestor = ancestor.parent
    return None


def _named_lead(node: LexborNode) -> bool:
    """Whether `node`'s class names a lead (see _LEAD_WORDS)."""
    classes = (node.attrs.get("class") or "").lower()
    names = classes.split()
    return any(
        word in names
        or f"-{word}" in classes
        or f"_{word}" in classes
        or classes.startswith(f"{word}-")
        for word in _LEAD_WORDS
    )


def _named_boilerplate(node: LexborNode) -> bool:
    """Whether one of the class names or the id is a boilerplate word, or the class
    attribute or the id starts with one and a hyphen or underscore ("comment-list",
    "share_bar"), or a class name is a kind of meta ("crawler-post-meta": a post's
    date and number)."""
    attributes = node.attrs
    classes = (attributes.get("class") or "").strip().lower()
    if _MAYBE_CONTENT.search(classes):  # "entry share": an entry that can be shared
        return False
    if any(name in _WHOLE_BOILERPLATE_NAMES or name.endswith(_META) for name in classes.split()):
        return True
    if any(not _PART_NAMES.isdisjoint(_NAME_PARTS.split(name)) for name in classes.split()):
        return True
    for value in (classes, (attributes.get("id") or "").strip().lower()):
        if value in _WHOLE_BOILERPLATE_NAMES:
            return True
        for i, character in enumerate(value):
            if character in "-_" and value[:i] in _BOILERPLATE_NAMES:
                return True
            if character == " ":
                break
    return False


def _a_reply(node: LexborNode) -> bool:
    """Whether `node` is a comment of a discussion (schema.org's DiscussionForumPosting,
    as Discourse marks a topic's replies up): a post of the thread, not a reader's
    comment under an article."""
    if node.attrs.get("itemprop") != "comment":
        return False
    parent = node.parent
    while parent is not None and parent.is_element_node:
        if "DiscussionForumPosting" in (parent.attrs.get("itemtype") or ""):
            return True
        parent = parent.parent
    return False


def _in_code(node: LexborNode) -> bool:
    """Whether `node` is inside code, where a highlighter's class names a kind of token
    ("token comment" is a comment in the code, not a page's comments)."""
    parent = node.parent
    while parent is not None:
        if parent.tag in _CODE_BLOCKS:
            return True
        parent = parent.parent
    return False


def _titles(tree: LexborHTMLParser, metadata: dict[str, Any]) -> frozenset[str]:
    """The page's <title>, each part of it between " - ", " | ", "_" and the like (the
    site's name is one), the title without its first or last parts, and og:title,
    casefolded: a heading that is one of them is the headline."""
    title = tree.css_first("title")
    found = {title.text() if title is not None else ""}
    found.add(metadata.get("opengraph", {}).get("og:title", ""))
    for value in list(found):
        pieces = _TITLE_PARTS.split(value)  # parts, and the separators between them
        for i in range(0, len(pieces), 2):
            part = pieces[i]
            found.add(part)
            found.update(_TIGHT_TITLE_PARTS.split(part))
            # "json — JSON encoder and decoder — Python 3.11 documentation": the headline
            # is two parts of three, the site's name left out.
            found.add("".join(pieces[: i + 1]))
            found.add("".join(pieces[i:]))
    return frozenset(" ".join(value.split()).casefold() for value in found) - {""}


def _main_nodes(body: LexborNode) -> list[LexborNode]:
    """The element holding the main content, with its siblings that hold more of it."""
    scores: dict[int, float] = {}
    nodes: dict[int, LexborNode] = {}
    links = _link_texts(body)
    blocks: list[tuple[LexborNode, float]] = []  # where each block's points start, and them
    for block in body.css("p, pre, td, blockquote, li, div, section, article, dd"):
        own, breaks = _own_text(block)
        if own < _MIN_BLOCK_CHARS:
            continue
        text = block.text(deep=True)
        if _link_chars(block, links) > 0.5 * len(text) or _meta_line(text):
            continue
        points = 1 + sum(map(text.count, _COMMAS)) + min(len(text) // 100, 3)
        # Paragraphs that are lines between <br>s, in a <div> (a novel's chapter, an old
        # site's page): the <div> is their parent, as Readability.js makes it.
        ancestor = block if breaks >= 2 and block.tag not in _TEXT_TAGS else block.parent
        if ancestor is not None:
            blocks.append((ancestor, points))
        for divisor in _ANCESTOR_DIVISORS:
            if ancestor is None or ancestor.tag == "html":
                break
            key = ancestor.mem_id
            if key not in nodes:
                nodes[key] = ancestor
                scores[key] = 0.0
            scores[key] += points / divisor
            ancestor = ancestor.parent
    if not scores:
        return [body]
    near_points = dict(scores)  # before the class weights
    for key, node in nodes.items():
        scores[key] *= 1 + _class_weight(node) / 50
    best = sorted(scores, key=scores.__getitem__, reverse=True)[:5]
    weighed = {key: scores[key] * (1 - _link_density(nodes[key], links)) for key in best}
    top_key = max(weighed, key=weighed.__getitem__)
    leader = nodes[top_key]
    top = _widened(leader, weighed, nodes, scores)
    while (parent := top.parent) is not None and parent.tag not in ("body", "html"):
        if any(child.mem_id != top.mem_id for child in parent.iter()) and not (
            # A list or a table is a part of the content (a recipe's steps, without its
            # ingredients, their items too short to score), seldom all of it.
            top.tag in _LIST_TAGS
            and scores.get(parent.mem_id, 0.0) >= 0.5 * scores.get(top.mem_id, 0.0)
        ):
            break
        top = parent  # an only child: its parent holds the same, and its siblings count
    top_key = top.mem_id
    top_score = scores.get(top_key, 0.0)
    parent = top.parent
    if parent is None or top.tag == "body":
        return [top]
    threshold = max(10.0, top_score * 0.2)
    top_class = top.attrs.get("class")
    kept = []
    for sibling in parent.iter():
        key = sibling.mem_id
        if key == top_key:
            kept.append(sibling)
        elif key in scores:
            # Articles cut into sections of one class (between ads), or a document's
            # <section>s (Sphinx gives them no class): each is content.
            alike = sibling.attrs.get("class") == top_class and (
                top_class is not None or (top.tag == "section" and sibling.tag == "section")
            )
            if scores[key] * (1 - _link_density(sibling, links)) >= (0 if alike else threshold):
                kept.append(sibling)
        elif _a_paragraph(sibling) and _is_prose(sibling, links):
            kept.append(sibling)
    posts = _alike_elsewhere(body, top, kept, links)
    roots = _in_page_order(body, kept + posts) if posts else kept
    cells = _cells(roots, links)
    if cells is not None:
        return cells
    if posts:
        return roots
    total = sum(points for _, points in blocks)
    if (
        sum(near_points.get(root.mem_id, 0.0) for root in kept) < _SHARE_KEPT * total
        # Not where the page names its content ("article-body"): the rest is not content.
        and max(_class_weight(leader), _class_weight(top)) <= 0
    ):
        holder = _holder(top, kept, blocks, total, links)
        if holder is not None:
            return [holder]
    return kept


def _holder(
    top: LexborNode,
    kept: list[LexborNode],
    blocks: list[tuple[LexborNode, float]],
    total: float,
    links: dict[int, float],
) -> LexborNode | None:
    """The element the page marks as its content (<main>, <article>, role=main) that
    holds the content where the kept elements hold less than half the points of the
    page's blocks (`total`): a page cut into many small parts, none of which outscores
    the others by much (a Javadoc class: its description, summaries and details in
    sections of their own). The first such ancestor of `top` whose blocks have three
    quarters of the points, if its text is not mostly links; or None."""
    kept_ids = {root.mem_id for root in kept}
    held: dict[int, float] = {}
    kept_points = 0.0
    for start, points in blocks:
        node: LexborNode | None = start
        while node is not None and node.tag not in ("body", "html"):
            key = node.mem_id
            held[key] = held.get(key, 0.0) + points
            if key in kept_ids:
                kept_points += points
            node = node.parent
    if kept_points >= _SHARE_KEPT * total:
        return None
    for ancestor in _ancestor_nodes(top):
        if (
            ancestor.tag in ("main", "article") or ancestor.attrs.get("role") == "main"
        ) and held.get(ancestor.mem_id, 0.0) >= _SHARE_HELD * total:
            return ancestor if _link_density(ancestor, links) < 0.5 else None
    return None


def _alike_elsewhere(
    body: LexborNode, top: LexborNode, kept: list[LexborNode], links: dict[int, float]
) -> list[LexborNode]:
    """The other posts of a thread (a forum's, a Q&A page's), which are no siblings of
    the top: elements of the top's tag and class, under ancestors of the same tags and
    classes; and where the top is or holds a post marked up as a schema.org post's `text`
    (Stack Exchange's question and answers, under wrappers of their own: "question",
    "answer"), the others of its tag and class so marked up. Each holds a block of text
    and is not mostly links."""
    shape = _shape(top)
    found = [node for node in _of_tag_and_class(body, top) if _alike_shapes(_shape(node), shape)]
    texts = [top] if top.attrs.get("itemprop") == "text" else top.css('[itemprop="text"]')
    for kind in {(post.tag, post.attrs.get("class")): post for post in texts}.values():
        found += [
            node for node in _of_tag_and_class(body, kind) if node.attrs.get("itemprop") == "text"
        ]
    if not found:
        return []
    inside = {node.mem_id for root in kept for node in root.traverse()}
    found = [
        node
        for node in _in_page_order(body, found)
        if node.mem_id not in inside
        and _post_chars(node.text(deep=True).strip()) >= _MIN_BLOCK_CHARS
        and _link_density(node, links) < 0.5
        and not _ancestors(node) & inside
    ]
    # A post inside another found one (a quoted post) goes with it.
    outer = {node.mem_id for node in found}
    return [node for node in found if not _ancestors(node) & outer]


def _cells(roots: list[LexborNode], links: dict[int, float]) -> list[LexborNode] | None:
    """A notebook's cells, where the content found is in some of them: `roots` in two or
    more children of their common ancestor that share a class name ("cell", "jp-Cell"),
    and the run of that ancestor's children around them sharing it, those of other
    classes (its code cells, beside its text cells) if not mostly links; or None."""
    if len(roots) < 2:
        return None
    lines = [_ancestor_nodes(root) for root in roots]
    common = set.intersection(*({node.mem_id for node in line} for line in lines))
    if not common:
        return None
    holders: dict[int, LexborNode] = {}
    for root, line in zip(roots, lines, strict=True):
        child = root
        for ancestor in line:
            if ancestor.mem_id in common:
                break
            child = ancestor
        holders[child.mem_id] = child
    if len(holders) < 2 or any(child.parent is None for child in holders.values()):
        return None
    shared = set.intersection(
        *(set((child.attrs.get("class") or "").split()) for child in holders.values())
    )
    parent = next(iter(holders.values())).parent
    if not shared or parent is None:
        return None
    run: list[LexborNode] = []
    for child in parent.iter():
        if not child.is_element_node:  # a comment between cells
            continue
        if shared.isdisjoint((child.attrs.get("class") or "").split()):
            if any(cell.mem_id in holders for cell in run):
                break
            run = []
        else:
            run.append(child)
    else:
        if not any(cell.mem_id in holders for cell in run):
            return None
    if len(run) == len(holders):  # a document's sections, all found (most pages): no text
        return None
    # A cell of a kind the content is in, left out, held too little of it (a label).
    kinds = {child.attrs.get("class") for child in holders.values()}
    cells = [
        cell
        for cell in run
        if cell.mem_id in holders
        or (
            cell.attrs.get("class") not in kinds
            and cell.text(deep=True).strip()
            and _link_density(cell, links) < 0.5
        )
    ]
    return cells if len(cells) > len(holders) else None


def _of_tag_and_class(body: LexborNode, node: LexborNode) -> list[LexborNode]:
    """The elements of `node`'s tag and class attribute but `node` (none if it has no class)."""
    classes = node.attrs.get("class")
    if not classes:
        return []
    escaped = classes.replace("\\", "\\\\").replace('"', '\\"')
    return [
        other for other in body.css(f'{node.tag}[class="{escaped}"]') if other.mem_id != node.mem_id
    ]


def _post_chars(text: str) -> int:
    """The length of a post's text, a Han or kana character counted as three: it says
    about what a word of English does, and a short reply in Chinese ("同问，我也遇到了同样
    的问题", 13 characters) is a post as much as "Same here, I have that problem too"."""
    return len(text) + 2 * len(CJK_CHARACTER.findall(text))


def _shape(node: LexborNode) -> list[tuple[str | None, frozenset[str]]]:
    """The tags and class names of the three ancestors of `node`."""
    return [
        (ancestor.tag, frozenset((ancestor.attrs.get("class") or "").split()))
        for ancestor in _ancestor_nodes(node)[:3]
    ]


def _alike_shapes(
    shape: list[tuple[str | None, frozenset[str]]], other: list[tuple[str | None, frozenset[str]]]
) -> bool:
    """Ancestors of the same tags, each with a class name of the other's, or both none: a
    thread's rows alternate a class of theirs ("post bg1", "post bg2"; "odd", "even")."""
    return len(shape) == len(other) and all(
        tag == other_tag and (bool(names & other_names) or names == other_names)
        for (tag, names), (other_tag, other_names) in zip(shape, other, strict=True)
    )


def _in_page_order(body: LexborNode, roots: list[LexborNode]) -> list[LexborNode]:
    wanted = {root.mem_id for root in roots}
    return [node for node in body.traverse() if node.mem_id in wanted]


def _widened(
    top: LexborNode,
    weighed: dict[int, float],
    nodes: dict[int, LexborNode],
    scores: dict[int, float],
) -> LexborNode:
    """The top candidate, or the ancestor that holds more of the content (Readability.js's
    two rules): the one holding 3 of the other close candidates, or a parent scoring higher."""
    top_score = weighed[top.mem_id]
    close = [nodes[k] for k, v in weighed.items() if k != top.mem_id and v >= 0.75 * top_score]
    if len(close) >= 3:
        lines = [_ancestors(node) for node in close]
        for ancestor in _ancestor_nodes(top):
            if sum(ancestor.mem_id in line for line in lines) >= 3:
                return ancestor
    last = scores[top.mem_id]
    floor = last / 3
    for ancestor in _ancestor_nodes(top):
        score = scores.get(ancestor.mem_id)
        if score is None:
            continue
        if score < floor:
            break
        if score > last:
            return ancestor
        last = score
    return top


def _ancestor_nodes(node: LexborNode) -> list[LexborNode]:
    found = []
    parent = node.parent
    while parent is not None and parent.tag not in ("body", "html"):
        found.append(parent)
        parent = parent.parent
    return found


def _ancestors(node: LexborNode) -> set[int]:
    return {ancestor.mem_id for ancestor in _ancestor_nodes(node)}


def _a_paragraph(node: LexborNode) -> bool:
    """A <p>, or a <div> of inline content only, which Readability.js makes a <p>."""
    tag = node.tag
    return tag == "p" or (
        tag == "div" and not any(child.tag in _BLOCK_TAGS for child in node.iter())
    )


def _is_prose(node: LexborNode, links: dict[int, float]) -> bool:
    """A paragraph beside the content that reads as part of it (Readability's rule)."""
    text = node.text(deep=True).strip()
    density = _link_chars(node, links) / len(text) if text else 1.0
    if len(text) > 80:
        return density < 0.25
    return density == 0 and text.endswith(".") and len(text) > 0


def _own_text(node: LexborNode) -> tuple[int, int]:
    """Characters of text directly in `node` or in its inline children, and its <br>s."""
    total = breaks = 0
    for child in node.iter(include_text=True):
        tag = child.tag
        if tag == "-text":
            total += len((child.text_content or "").strip())
        elif tag == "br":
            breaks += 1
        elif tag not in _BLOCK_TAGS:
            total += len(child.text(deep=True).strip())
    return total, breaks


def _link_texts(body: LexborNode) -> dict[int, float]:
    """The length of each link's text, a link within the page counting 0.3 of it (as
    Readability.js weighs it: a forum post's subject links to the post), by the link's
    mem_id: read once, for every block that holds the link."""
    links = {}
    for a in body.css("a"):
        chars = len(a.text(deep=True))
        if chars:
            href = a.attrs.get("href")
            links[a.mem_id] = (
                0.3 * chars if href is not None and href[:1] == "#" and href[1:] else chars
            )
    return links


def _link_chars(node: LexborNode, links: dict[int, float]) -> float:
    return sum(links.get(a.mem_id, 0) for a in node.css("a"))


def _link_density(node: LexborNode, links: dict[int, float]) -> float:
    total = len(node.text(deep=True))
    return _link_chars(node, links) / total if total else 1.0


def _class_weight(node: LexborNode) -> float:
    weight = 0.0
    if node.tag in ("article", "main"):
        weight += 10
    attributes = node.attrs
    for name in ("class", "id"):
        value = attributes.get(name)
        if value:
            if _NEGATIVE.search(value):
                weight -= 25
            if _POSITIVE.search(value):
                weight += 25
    if attributes.get("itemprop") == "articleBody":
        weight += 50
    return weight


class _Block(NamedTuple):
    text: str
    markdown: str  # its lines prefixed for the list items and quotes it is in
    indent: str  # what its lines after the first start with: "> ", spaces...
    item: bool  # it begins a list item


class _Container:
    """A list item or a quote that Markdown blocks are in: what the first line of its
    first block starts with ("- ", "1. ", "> "), and every line after ("> ", or spaces
    as wide as the list marker: a list item's lines are indented to its content)."""

    __slots__ = ("indent", "marker")

    def __init__(self, marker: str, indent: str) -> None:
        self.marker = marker
        self.indent = indent

    def first(self) -> str:
        marker, self.marker = self.marker, self.indent
        return marker


class _Writer:
    """Blocks of text and Markdown, written while walking the kept elements."""

    def __init__(
        self,
        base: str | None,
        titles: frozenset[str] = frozenset(),
        encoding: str = "utf-8",
        in_cell: bool = False,
    ) -> None:
        self.base = base
        # A table cell's Markdown is inline: its lists, quotes and headings are text.
        self.in_cell = in_cell
        self.keep_links = False  # a list page's headlines, all links, are its content
        self._see_also = False  # in a section whose links are its content ("See also")
        self.titles = titles  # a heading that repeats the page's title is left out
        self.encoding = encoding  # the page's, which a link's query is encoded in
        self.blocks: list[_Block] = []
        self._text: list[str] = []
        self._md: list[str] = []
        self._link_chars = 0.0
        self._prefix = ""  # of a heading's Markdown: "## "
        # Per open list: the next number (None if unordered), and its bullet or delimiter.
        self._list: list[tuple[int | None, str]] = []
        # The last list closed: the blocks written then, its level, and its bullet.
        self._closed_list: tuple[int, int, str] | None = None
        self._containers: list[_Container] = []  # the list items and quotes open
        # The last span written (its mark, inner text, and what was written), which a
        # span right after it of the same kind joins.
        self._last_span: tuple[str, str, str] | None = None
        self._emphasis: dict[str, str] = {}  # this block's emphasis as written: its inner
        self._depth = 0

    def render(self, node: LexborNode) -> None:
        if self._depth >= _MAX_DEPTH:  # deeper than any real page: its text, flat
            self._inline_text(node.text(deep=True))
            return
        self._depth += 1
        for child in node.iter(include_text=True):
            tag = child.tag or ""
            if tag == "-text":
                self._inline_text(child.text_content or "")
            elif tag in _BLOCK_TAGS:
                self._block(child, tag)
            else:
                self._inline(child, tag)
        self._depth -= 1

    def write_article_body(self, body: str) -> None:
        """A JSON-LD articleBody: HTML, or text whose lines are paragraphs."""
        if "</" in body:
            html = LexborHTMLParser(body).body
            if html is not None:
                self.render(html)
        else:
            for line in body.splitlines():
                self._inline_text(line)
                self.end_block()
        self.end_block()

    def _inline_text(self, text: str) -> None:
        text = _WHITESPACE.sub(" ", text)
        if text:
            self._text.append(text)
            self._md.append(_md_escaped(text))

    def _destination(self, reference: str) -> str | None:
        """A link's URL as a Markdown link destination: absolute, as the crawl's links are
        (against the frozen base URL, without userinfo), and percent-encoded as a browser
        requests it (a space ended the link, and Markdown showed its text), its fragment
        kept; in <> if it holds a space or a parenthesis, which would end it. None for a
        relative reference of a page whose <base> is of another scheme (mailto:)."""
        reference, hash_sign, fragment = reference.partition("#")
        url = canonicalize(reference, self.base, self.encoding)
        if url is not None:
            url = without_userinfo(url)
        elif _SCHEME.match(reference):  # mailto:, ftp: and the like, as written
            url = reference
        elif self.base is None:
            return None
        else:
            url = urljoin(self.base, reference)
        if hash_sign:
            url += "#" + quote(fragment, safe=_FRAGMENT_KEPT)
        return f"<{url}>" if any(c in url for c in " ()") else url

    def _inline(self, node: LexborNode, tag: str) -> None:
        if tag == "br":
            self._text.append("\n")
            self._md.append("  \n")
        elif tag == "a":
            start_text, start_md = len(self._text), len(self._md)
            self._last_span = None  # a span in the link's text joins none outside it
            self.render(node)
            href = (node.attrs.get("href") or "").strip()
            inner = "".join(self._text[start_text:])
            if href.startswith("#") and not inner.strip(_PERMALINK_MARKS):
                # A heading's permalink ("¶", "§", "#", an icon): no part of the text.
                del self._text[start_text:], self._md[start_md:]
                return
            # An in-page link weighs less, and so does an attachment (a notice's 附件, a
            # report's PDF): a paragraph of attachments is the content's, where one beside
            # another link ("Download PDF", "Route map") is a page's machinery.
            if href[1:] and href[0] == "#":
                weight = 0.3
            elif _ATTACHMENT.search(href.partition("?")[0].partition("#")[0]):
                weight = 0.5
            else:
                weight = 1.0
            self._link_chars += weight * len(inner.strip())
            if href and not href.startswith(("javascript:", "#")) and inner.strip():
                destination = self._destination(href)
                if destination is None:
                    return
                label = "".join(self._md[start_md:]).strip()
                del self._md[start_md:]
                if self._md:
                    self._md[-1] = _before_link(self._md[-1])
                self._md.append(f"[{label}]({destination})")
                self._last_span = None
        elif tag == "img":
            alt = (node.attrs.get("alt") or "").strip()
            src = (node.attrs.get("src") or "").strip()
            if src and not src.startswith("data:") and (destination := self._destination(src)):
                self._md.append(f"![{_md_escaped(alt)}]({destination})")
        elif tag in _CODE_TAGS:
            # A code span takes no escapes: its text as it is, between backticks.
            code = _WHITESPACE.sub(" ", node.text(deep=True))
            if code.strip():
                self._text.append(code)
                self._span("`", code)
        elif tag in ("b", "strong", "em", "i"):
            start, before = len(self._md), self._last_span
            self._last_span = None  # a span in its text joins none outside it
            self.render(node)
            inner = "".join(self._md[start:])
            if inner.strip():
                del self._md[start:]
                self._last_span = before
                self._span("**" if tag in ("b", "strong") else "*", inner)
        else:
            self.render(node)

    def _span(self, mark: str, inner: str) -> None:
        """A code span ("`": `inner` is its text) or emphasis ("*", "**": its Markdown),
        spaces around it kept out. One that touches the span before it of the same kind
        joins it: side by side, their delimiters would make one run (`a``b`, *a**b*),
        and docutils writes "--" as two <code>s."""
        lead = inner[: len(inner) - len(inner.lstrip())]
        trail = inner[len(inner.rstrip()) :]
        inner = inner.strip()
        last = self._last_span
        if not lead and last is not None and last[0] == mark and self._md[-1:] == [last[2]]:
            self._md.pop()
            inner = last[1] + inner
        written = _code_span(inner) if mark == "`" else f"{mark}{inner}{mark}"
        if mark != "`":
            self._emphasis[written] = inner
        if lead:
            self._md.append(lead)
        self._md.append(written)
        self._last_span = None if trail else (mark, inner, written)
        if trail:
            self._md.append(trail)

    def _block(self, node: LexborNode, tag: str) -> None:
        self.end_block()
        if tag in _HEADINGS:
            self._prefix = "#" * _HEADINGS[tag] + " "
            self.render(node)
            self.end_block()
        elif tag == "pre":
            code = node.text(deep=True).strip("\n")
            if code.strip():
                fence = "`" * max(3, _longest_backticks(code) + 1)
                self._add(code, f"{fence}\n{code}\n{fence}")
        elif tag in ("ul", "ol"):
            # A list right after another of its kind, at its level, would be read as more
            # of it (CommonMark): it takes the other bullet, or the other delimiter.
            before = self._closed_list
            marks = "-*" if tag == "ul" else ".)"
            mark = marks[1] if before == (len(self.blocks), len(self._list), marks[0]) else marks[0]
            self._list.append((_list_start(node) if tag == "ol" else None, mark))
            self.render(node)
            self.end_block()
            self._list.pop()
            self._closed_list = (len(self.blocks), len(self._list), mark)
        elif tag in ("li", "blockquote"):
            if tag == "blockquote":
                marker = "> "
            elif self._list and (number := self._list[-1][0]) is not None:
                mark = self._list[-1][1]
                marker = f"{number}{mark} "
                self._list[-1] = (min(number + 1, _MAX_LIST_NUMBER), mark)
            else:
                marker = f"{self._list[-1][1] if self._list else '-'} "
            indent = marker if tag == "blockquote" else " " * len(marker)
            self._containers.append(_Container(marker, indent))
            self.render(node)
            self.end_block()
            self._containers.pop()
        elif tag == "table":
            self._table(node)
        elif tag == "hr":
            pass
        else:
            self.render(node)
            self.end_block()

    def _table(self, node: LexborNode) -> None:
        rows: list[list[tuple[str, str]]] = []
        for row in node.css("tr"):
            cells = []
            for cell in row.iter():
                if cell.tag in ("td", "th"):
                    sub = _Writer(self.base, encoding=self.encoding, in_cell=True)
                    sub.render(cell)
                    sub.end_block()
                    cells.append(
                        (
                            " ".join(block.text for block in sub.blocks),
                            " ".join(block.markdown for block in sub.blocks),
                        )
                    )
            if any(t for t, _ in cells):
                rows.append(cells)
        if _line_numbered(rows):
            # A code viewer's table: a gutter of line numbers, and the code, a row a line.
            code = "\n".join(" ".join(t for t, _ in cells[1:]) for cells in rows).strip("\n")
            fence = "`" * max(3, _longest_backticks(code) + 1)
            self._add(code, f"{fence}\n{code}\n{fence}")
            return
        if not rows:
            return
        if len(rows) == 1 or max(len(r) for r in rows) == 1:  # a layout table: its cells are blocks
            for cells in rows:
                for text, md in cells:
                    if text:
                        self._add(text, md)
            return
        width = max(len(r) for r in rows)
        lines = []
        for i, cells in enumerate(rows):
            mds = [md.replace("|", "\\|").replace("\n", " ") for _, md in cells]
            mds += [""] * (width - len(mds))
            lines.append("| " + " | ".join(mds) + " |")
            if i == 0:
                lines.append("|" + " --- |" * width)
        # A row a line: a cell's lines (between <br>s, or of its code) are joined.
        text = "\n".join("\t".join(" ".join(t.split("\n")) for t, _ in cells) for cells in rows)
        self._add(text, "\n".join(lines))

    def _unflanked_emphasis(self) -> None:
        """Emphasis whose stars a CommonMark reader would not take for such is written
        as its text: a star that touches punctuation inside and a letter outside (in
        `x*.y*`, or `文**“引”**文`) is no delimiter, and showed as a star; and stars that
        touch the stars of emphasis beside it (**a***b*) make one run with them."""
        md = self._md
        for i, piece in enumerate(md):
            inner = self._emphasis.get(piece)
            if inner is None:
                continue
            # The pieces around it: no piece is empty.
            before = md[i - 1][-1] if i else " "
            after = md[i + 1][0] if i + 1 < len(md) else " "
            if (
                "*" in (before, after)
                or (_punctuation(inner[0]) and not _space_or_punctuation(before))
                or (_punctuation(inner[-1]) and not _space_or_punctuation(after))
            ):
                md[i] = _before_link(inner) if after == "[" else inner

    def end_block(self) -> None:
        if not self._md:  # most calls: a block's end right after another's
            self._text, self._link_chars, self._prefix, self._last_span = [], 0.0, "", None
            return
        if self._emphasis:
            self._unflanked_emphasis()
            self._emphasis.clear()
        text = "".join(self._text).strip()
        md = "".join(self._md).strip()
        if "\n" in md:  # after a <br>: the source's indentation is no Markdown indentation
            md = "\n".join(line.lstrip() for line in md.split("\n"))
        if md[:1] in _MD_BLOCK_START_CHARS or "\n" in md:  # the rare one: no search
            md = _MD_BLOCK_START.sub(_escaped_block_start, md)
        if self._prefix.startswith("#"):
            md = _MD_CLOSING_HASHES.sub(r"\\\1", md)
        if text:
            # Lines between <br>s, the blank ones left out: a paragraph break is a line break.
            text, md = _without_platform_lines(text, md)
            text = "\n".join(line.strip() for line in text.split("\n") if line.strip())
            if self._kept(text):
                self._add(text, md if self.in_cell else self._prefix + md)
        elif md:  # an image alone: no text, but Markdown
            self._add("", md)
        self._text, self._md, self._link_chars, self._prefix = [], [], 0.0, ""
        self._last_span = None

    def _add(self, text: str, md: str) -> None:
        """A block, inside the list items and quotes open."""
        containers = [] if self.in_cell else self._containers
        item = any(container.marker != container.indent for container in containers)
        first = "".join(container.first() for container in containers)
        indent = "".join(container.indent for container in containers)
        self.blocks.append(_Block(text, first + md.replace("\n", "\n" + indent), indent, item))

    def _kept(self, text: str) -> bool:
        if len(text) < 40 and (
            text.casefold().rstrip(_LABEL_END).strip() in _LABELS or _CREDIT.match(text)
        ):
            return False  # a heading too: "Related", "Share this:", "相关阅读"
        if len(text) < _PLATFORM_LINE_CHARS and _PLATFORM_LINE.match(text):
            return False
        if text[:1] in "IO" and _NOTEBOOK_PROMPT.fullmatch(text):
            return False
        if _meta_line(text):
            return False
        if self._prefix.startswith("#"):
            # A forum's reply is titled "Re: " and the thread's title.
            heading = _REPLY.sub("", " ".join(text.split()).casefold())
            self._see_also = heading.rstrip(_LABEL_END) in _SEE_ALSO
            return heading not in self.titles
        return self.keep_links or self._see_also or self._link_chars <= 0.5 * len(text)

    def text(self) -> str:
        return "\n".join(block.text for block in self.blocks if block.text)

    def markdown(self) -> str:
        """The blocks, a blank line apart (a quote's ">" on it, within a quote); the items
        of one list on lines of their own."""
        parts: list[str] = []
        before: _Block | None = None
        for block in self.blocks:
            if before is not None:
                if block.item and before.item:
                    parts.append("\n")
                else:
                    shared = _common_start(before.indent, block.indent).rstrip()
                    parts.append(f"\n{shared}\n")
            parts.append(block.markdown)
            before = block
        return "".join(parts)


def _without_platform_lines(text: str, md: str) -> tuple[str, str]:
    """The lines between <br>s of a block (a novel's chapter) and their Markdown, without
    a platform's (see _PLATFORM_LINE) among them."""
    if "\n" not in text or text.isascii():  # most blocks: no search
        return text, md
    lines, md_lines = text.split("\n"), md.split("\n")
    if len(lines) != len(md_lines):
        return text, md
    dropped = {
        i
        for i, line in enumerate(lines)
        if len(line.strip()) < _PLATFORM_LINE_CHARS and _PLATFORM_LINE.match(line.strip())
    }
    if not dropped:
        return text, md
    kept = [i for i in range(len(lines)) if i not in dropped]
    # A dropped line's blank line (<br><br>) goes with it: one blank line between paragraphs.
    md_kept = [i for n, i in enumerate(kept) if n == 0 or md_lines[i] or md_lines[kept[n - 1]]]
    return "\n".join(lines[i] for i in kept), "\n".join(md_lines[i] for i in md_kept).strip()


def _meta_line(text: str) -> bool:
    """Whether `text` is a Chinese page's meta line (its date, source, author or views)
    or its site's footer."""
    if len(text) >= _FOOTER_CHARS or text.isascii():  # most blocks: no search
        return False
    return bool(_SITE_LICENCE.search(text)) or (
        len(text) < _META_LINE_CHARS and len(_META_LABEL.findall(text)) >= 2
    )


def _line_numbered(rows: list[list[tuple[str, str]]]) -> bool:
    """Whether a table's first column numbers the lines of code in the others, one
    after another (Pygments' and code viewers' tables)."""
    if any(len(cells) < 2 for cells in rows):
        return False
    numbers = [number for cells in rows for number in cells[0][0].split()]
    if not numbers or not all(number.isdigit() for number in numbers):
        return False
    if not any("```" in md for cells in rows for _, md in cells[1:]):
        return False
    first = int(numbers[0])
    return all(int(number) == first + i for i, number in enumerate(numbers))


def _list_start(node: LexborNode) -> int:
    """The number of an <ol>'s first item: its `start` (read as HTML reads an integer:
    "3rd" is 3), if a CommonMark list can start there (0 to 999999999); else 1."""
    match = _HTML_INTEGER.match(node.attrs.get("start") or "")
    return int(match[1]) if match and len(match[1]) <= 9 else 1


def _before_link(md: str) -> str:
    """`md`, which a link follows, with a "!" at its end escaped: "![" opens an image."""
    if not md.endswith("!"):
        return md
    head = md[:-1]
    escaped = (len(head) - len(head.rstrip("\\"))) % 2 == 1  # an odd run of backslashes
    return md if escaped else head + "\\!"


def _punctuation(char: str) -> bool:
    """CommonMark's Unicode punctuation: general category P or S."""
    return unicodedata.category(char)[0] in "PS"


def _space_or_punctuation(char: str) -> bool:
    return char.isspace() or _punctuation(char)


def _common_start(a: str, b: str) -> str:
    length = min(len(a), len(b))
    return a[: next((i for i in range(length) if a[i] != b[i]), length)]


def _md_escaped(text: str) -> str:
    """`text` as Markdown that reads back as `text`, within a line."""
    text = text.translate(_MD_SPECIAL)
    return _MD_ENTITY.sub("\\\\&", text) if "&" in text else text


def _escaped_block_start(match: re.Match[str]) -> str:
    start = match[0]
    return start + "\\" if match[1] else "\\" + start


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def _code_span(code: str) -> str:
    """`code` as a CommonMark code span: between backtick runs longer than any in it,
    spaced from them where it begins or ends with one."""
    ticks = "`" * (_longest_backticks(code) + 1)
    pad = " " if code[0] == "`" or code[-1] == "`" else ""
    return f"{ticks}{pad}{code}{pad}{ticks}"


# --- metadata -----------------------------------------------------------------

_OPENGRAPH = "meta[property][content]"


def page_metadata(tree: LexborHTMLParser) -> dict[str, Any]:
    """Author, dates, site name, and the page's JSON-LD, OpenGraph and microdata objects."""
    json_ld = []
    for script in tree.css('script[type="application/ld+json" i]'):
        try:
            json_ld.append(_json_ld(script.text(deep=True)))
        except ValueError:
            continue
    opengraph: dict[str, str] = {}
    meta: dict[str, str] = {}
    for node in tree.css("meta[content]"):
        attributes = node.attrs
        content = (attributes.get("content") or "").strip()
        prop = (attributes.get("property") or "").strip().lower()
        name = (attributes.get("name") or attributes.get("itemprop") or "").strip().lower()
        if prop.startswith(("og:", "article:")):
            opengraph.setdefault(prop, content)
        elif name:
            meta.setdefault(name, content)
    objects = _json_ld_objects(json_ld)
    microdata = _microdata(tree)
    article = next((o for o in [*objects, *microdata] if _is_article(o)), {})
    result: dict[str, Any] = {
        "author": _author(article) or meta.get("author") or opengraph.get("article:author"),
        "published": article.get("datePublished")
        or opengraph.get("article:published_time")
        or meta.get("datepublished")
        or _first_time(tree),
        "modified": article.get("dateModified")
        or opengraph.get("article:modified_time")
        or meta.get("datemodified"),
        "site_name": opengraph.get("og:site_name") or _name(article.get("publisher")),
    }
    if json_ld:
        result["json_ld"] = json_ld
    if opengraph:
        result["opengraph"] = opengraph
    if microdata:
        result["microdata"] = microdata
    return {key: value for key, value in result.items() if value}


def _json_ld(text: str) -> Any:
    """A JSON-LD block as JSON values every writer of records takes (orjson's): NaN and
    Infinity, which json.loads takes and JSON has not, are a ValueError (a browser's
    JSON.parse refuses the block too); an integer past 64 bits is a float, as orjson
    reads one back; a lone surrogate (an escaped emoji cut in half) is U+FFFD."""
    value = json.loads(text, parse_constant=_not_json, parse_int=_json_int)
    return _without_surrogates(value) if _SURROGATE_ESCAPE.search(text) else value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _json_int(digits: str) -> int | float:
    number = int(digits)
    return number if -(2**63) <= number < 2**64 else float(number)


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _json_ld_objects(values: list[Any]) -> list[dict[str, Any]]:
    """Every object of the JSON-LD blocks, @graph members included."""
    found: list[dict[str, Any]] = []
    pending = list(values)
    while pending:
        value = pending.pop(0)
        if isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, dict):
            found.append(value)
            if isinstance(value.get("@graph"), list):
                pending.extend(value["@graph"])
    return found


def _is_article(value: dict[str, Any]) -> bool:
    """A schema.org Article (NewsArticle, BlogPosting, ...) or WebPage, by JSON-LD's short
    type or microdata's type URL."""
    kinds = value.get("@type")
    names = [
        k.rsplit("/", 1)[-1]
        for k in (kinds if isinstance(kinds, list) else [kinds])
        if isinstance(k, str)
    ]
    return any("Article" in k or k in ("BlogPosting", "WebPage") for k in names)


def _name(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, dict):
        return _name(value.get("name"))
    return None


def _author(article: dict[str, Any]) -> str | None:
    author = article.get("author")
    authors = author if isinstance(author, list) else [author]
    names = [name for name in map(_name, authors) if name]
    return ", ".join(names) or None


def _first_time(tree: LexborHTMLParser) -> str | None:
    node = tree.css_first("time[datetime]")
    return (node.attrs.get("datetime") or "").strip() or None if node is not None else None


def _microdata(tree: LexborHTMLParser) -> list[dict[str, Any]]:
    """The page's top-level schema.org microdata items, as JSON objects."""
    items = []
    for node in tree.css("[itemscope]"):
        if not _inside_item(node):
            items.append(_item(node))
    return items


def _inside_item(node: LexborNode) -> bool:
    return _owner(node) is not None


def _item(node: LexborNode) -> dict[str, Any]:
    item: dict[str, Any] = {}
    kind = node.attrs.get("itemtype")
    if kind:
        item["@type"] = kind.strip()
    for prop in node.css("[itemprop]"):
        if _owner(prop) != node.mem_id:
            continue
        value: Any = _item(prop) if "itemscope" in prop.attrs else _property_value(prop)
        for name in (prop.attrs.get("itemprop") or "").split():
            item.setdefault(name, []).append(value)
    return {k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in item.items()}


def _owner(prop: LexborNode) -> int | None:
    parent = prop.parent
    while parent is not None and parent.is_element_node:
        if "itemscope" in parent.attrs:
            return parent.mem_id
        parent = parent.parent
    return None


def _property_value(node: LexborNode) -> str:
    attributes = node.attrs
    for name in ("content", "datetime", "href", "src"):
        value = attributes.get(name)
        if value is not None:
            return value.strip()
    return " ".join(node.text(deep=True).split())
