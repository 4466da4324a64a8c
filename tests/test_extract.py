"""--extract: main text, Markdown and metadata of pages served on 127.0.0.1, their
SimHash and near-duplicates, and pages that must not break it."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
import zipfile

import orjson
from markdown_it import MarkdownIt
from selectolax.lexbor import LexborHTMLParser

from crawler.extract import extract
from crawler.page import Page
from crawler.simhash import (
    SimhashIndex,
    distance,
    from_hex,
    near,
    simhash,
    tokens,
)
from tests.conftest import Site, by_url, crawl, read_records
from tests.extract_pages import PAGES
from tests.test_hostile_html import LoopWatch
from tests.test_state import Run, assert_each_page_once

ARTICLE = """<!doctype html><html lang="en"><head>
<title>Tea harvest starts early - The Daily</title>
<meta property="og:site_name" content="The Daily">
<meta property="og:title" content="Tea harvest starts early">
<meta property="article:modified_time" content="2024-05-02T08:00:00Z">
<script type="application/ld+json">
{"@context": "https://schema.org", "@type": "NewsArticle", "author": {"@type": "Person",
 "name": "Ann Lee"}, "datePublished": "2024-05-01T09:30:00Z", "headline": "Tea harvest"}
</script></head><body>
<header><a href="/">Home</a> <a href="/news">News</a> <a href="/sport">Sport</a></header>
<nav><ul><li><a href="/a">World</a></li><li><a href="/b">Business</a></li></ul></nav>
<div id="cookie-banner"><p>We use cookies to improve your experience. Accept all?</p></div>
<main><article><h1>Tea harvest starts early</h1>
<p>The spring tea harvest began early this year, farmers in the hills said on Monday,
after a warm and dry winter.</p>
<h2>Prices</h2>
<p>Prices rose by <b>ten percent</b>, according to <a href="../reports/tea?y=2024">the
report</a>, and buyers from abroad came early.</p>
<ol><li>Green tea, the most sold</li><li>Black tea, sold abroad</li></ol>
<table><tr><th>Tea</th><th>Price</th></tr><tr><td>Green</td><td>12</td></tr></table>
<pre>price = 12 * 1.1
print(price)</pre>
<div class="ad-slot"><p>Advertisement: buy the best kettles in town, now on sale.</p></div>
<p>Advertisement</p>
</article>
<section id="comments"><h3>2 comments</h3><p>Great read, thanks so much for writing this,
I learned a lot about tea today.</p></section></main>
<aside><p>Most read: something else entirely that is long enough to count, yes indeed,
with commas, many, of, them.</p></aside>
<footer><p>Copyright The Daily, 2024. All rights reserved, everywhere.</p></footer>
</body></html>"""

ARTICLE_TEXT = """The spring tea harvest began early this year, farmers in the hills said on Monday, after a warm and dry winter.
Prices
Prices rose by ten percent, according to the report, and buyers from abroad came early.
Green tea, the most sold
Black tea, sold abroad
Tea\tPrice
Green\t12
price = 12 * 1.1
print(price)"""  # noqa: E501

ARTICLE_MARKDOWN_AT = "{base}/reports/tea?y=2024"
ARTICLE_MARKDOWN = """The spring tea harvest began early this year, farmers in the hills said on Monday, after a warm and dry winter.

## Prices

Prices rose by **ten percent**, according to [the report]({link}), and buyers from abroad came early.

1. Green tea, the most sold
2. Black tea, sold abroad

| Tea | Price |
| --- | --- |
| Green | 12 |

```
price = 12 * 1.1
print(price)
```"""  # noqa: E501

CHINESE = """<!doctype html><html><head>{meta}<title>春茶开采 - 日报</title></head><body>
<div class="nav"><a href="/">首页</a> <a href="/news">新闻</a> <a href="/sport">体育</a></div>
<div id="content" class="article-content">
<h1>春茶开采</h1>
<p>今年春茶开采比往年提前了一周，山区的茶农周一表示，这是因为冬天温暖而干燥。</p>
<p>据报告，茶叶价格上涨了百分之十，外地的买家也来得更早，绿茶仍然是销量最大的品种。</p>
</div>
<div class="sidebar"><p>热门文章：另外一篇完全不同的文章，内容足够长，可以计入统计，是的。</p></div>
<div class="footer"><p>版权所有，日报，二零二四年。保留所有权利，在任何地方。</p></div>
</body></html>"""

CHINESE_TEXT = (
    "今年春茶开采比往年提前了一周，山区的茶农周一表示，这是因为冬天温暖而干燥。\n"
    "据报告，茶叶价格上涨了百分之十，外地的买家也来得更早，绿茶仍然是销量最大的品种。"
)


async def test_an_article_gives_its_main_text_markdown_and_metadata(site: Site, tmp_path):
    site.page("/news/tea", body=ARTICLE)

    [record] = await crawl(tmp_path, [site.url + "/news/tea"], extract=True, max_depth=0)

    assert record["main_text"] == ARTICLE_TEXT
    link = ARTICLE_MARKDOWN_AT.format(base=site.url)
    assert record["markdown"] == ARTICLE_MARKDOWN.format(link=link)
    metadata = record["metadata"]
    assert metadata["author"] == "Ann Lee"
    assert metadata["published"] == "2024-05-01T09:30:00Z"
    assert metadata["modified"] == "2024-05-02T08:00:00Z"
    assert metadata["site_name"] == "The Daily"
    assert metadata["json_ld"][0]["author"] == {"@type": "Person", "name": "Ann Lee"}
    assert metadata["opengraph"]["og:title"] == "Tea harvest starts early"
    assert len(record["simhash"]) == 16 and int(record["simhash"], 16) >= 0
    assert "near_duplicate_of" not in record


BLOG = """<html><head><title>Notes on caching | Blog</title>
<base href="https://cdn.example.org/docs/"></head><body>
<div id="menu"><a href="/">Home</a> <a href="/about">About</a></div>
<div class="post-body entry-content" itemscope itemtype="https://schema.org/BlogPosting">
<meta itemprop="datePublished" content="2023-02-03">
<span itemprop="author" itemscope itemtype="https://schema.org/Person">
<span itemprop="name">Bo Chen</span></span>
<h2>Why cache at all</h2>
A cache keeps answers close, so that the second request for the same thing is cheap.<br>
It costs memory, and it can serve stale answers.
<blockquote><p>There are only two hard things in computer science, cache invalidation and
naming things.</p></blockquote>
<ul><li>Time to live, the simplest rule<ul><li>per entry, or</li><li>for the whole cache</li>
</ul></li><li>Write-through, which keeps the cache in step</li></ul>
<p>Call <code>cache.get(key)</code> first, and see <a href="guide/ttl.html">the TTL guide</a>.</p>
<p><img src="img/lru.png" alt="An LRU list"></p>
</div>
<div class="share-buttons"><a href="#">Tweet</a> <a href="#">Share on Facebook</a></div>
</body></html>"""

BLOG_MARKDOWN = """## Why cache at all

A cache keeps answers close, so that the second request for the same thing is cheap.  
It costs memory, and it can serve stale answers.

> There are only two hard things in computer science, cache invalidation and naming things.

- Time to live, the simplest rule
  - per entry, or
  - for the whole cache
- Write-through, which keeps the cache in step

Call `cache.get(key)` first, and see [the TTL guide](https://cdn.example.org/docs/guide/ttl.html).

![An LRU list](https://cdn.example.org/docs/img/lru.png)"""  # noqa: W291 (a Markdown line break)


async def test_a_blog_post_without_paragraphs_gives_its_lists_quote_code_and_microdata(
    site: Site, tmp_path
):
    site.page("/posts/caching", body=BLOG)

    [record] = await crawl(tmp_path, [site.url + "/posts/caching"], extract=True, max_depth=0)

    assert record["markdown"] == BLOG_MARKDOWN
    assert record["main_text"] == (
        "Why cache at all\n"
        "A cache keeps answers close, so that the second request for the same thing is cheap.\n"
        "It costs memory, and it can serve stale answers.\n"
        "There are only two hard things in computer science, cache invalidation and naming "
        "things.\n"
        "Time to live, the simplest rule\nper entry, or\nfor the whole cache\n"
        "Write-through, which keeps the cache in step\n"
        "Call cache.get(key) first, and see the TTL guide."
    )
    assert record["metadata"]["author"] == "Bo Chen"
    assert record["metadata"]["published"] == "2023-02-03"
    [item] = record["metadata"]["microdata"]
    assert item["author"] == {"@type": "https://schema.org/Person", "name": "Bo Chen"}


async def test_gbk_pages_extract_as_their_utf8_twin_with_and_without_a_charset_header(
    site: Site, tmp_path
):
    site.page("/utf8", body=CHINESE.format(meta=""), content_type="text/html; charset=utf-8")
    gbk = CHINESE.format(meta='<meta charset="gbk">').encode("gbk")
    site.page("/gbk-header", body=gbk, content_type="text/html; charset=GBK")
    site.page("/gbk-meta", body=gbk, content_type="text/html")
    gb2312 = CHINESE.format(
        meta='<meta http-equiv="Content-Type" content="text/html; charset=gb2312">'
    )
    site.page("/gb2312", body=gb2312.encode("gb2312"), content_type="text/html")
    urls = [site.url + path for path in ("/utf8", "/gbk-header", "/gbk-meta", "/gb2312")]

    records = by_url(await crawl(tmp_path, urls, extract=True, max_depth=0))

    for url in urls:
        assert records[url]["main_text"] == CHINESE_TEXT, url
        assert records[url]["markdown"] == CHINESE_TEXT.replace("\n", "\n\n"), url
    assert len({records[url]["simhash"] for url in urls}) == 1
    # The same text under four URLs: each later one is a near-duplicate of the first.
    firsts = {records[url].get("near_duplicate_of") for url in urls}
    assert len(firsts - {None}) == 1


def _post(author: str, floor: str, text: str) -> str:
    """One post of a Discuz! thread, as the forum software writes it."""
    return (
        f'<table><tr><td class="pls"><div class="pi"><a href="/u">{author}</a></div>'
        f'<p>帖子 12</p></td><td class="plc"><div class="pi"><strong>{floor}</strong> '
        f'发表于 2024-3-5</div><div class="pct"><div class="pcb"><div class="t_fsz"><table>'
        f'<tr><td class="t_f">{text}</td></tr></table></div></div></div></td></tr></table>'
    )


THREAD_POSTS = [
    "最近一个月家里的路由器经常掉线，尤其是晚上八点以后，重启和恢复出厂设置都试过了，怎么办？",
    "晚上掉线多半是信道干扰，邻居家的无线网络太多了。建议登录管理页面，把信道改成一、六或者"
    "十一，再把五G频段单独开一个名字试试。另外检查一下固件是不是最新版本，老版本问题不少。",
    "按照楼上的方法把信道改成了十一，又升级了固件，今天晚上一直没有掉线，太感谢了！",
]
THREAD = (
    '<html><head><meta charset="gbk"><title>路由器经常掉线怎么办？ - 某某论坛</title></head>'
    '<body><div id="hd"><div class="nav"><a href="/">论坛</a> <a href="/g">群组</a></div></div>'
    '<div id="ct"><div id="postlist">'
    + "".join(map(_post, ["小明", "老司机", "小明"], ["楼主", "沙发", "板凳"], THREAD_POSTS))
    + '</div><div id="f_pst"><form><textarea></textarea><button>发表回复</button></form></div>'
    '</div><div id="ft"><p>Powered by Discuz! 京ICP备00000000号</p></div></body></html>'
)
EN_THREAD_POSTS = [
    "My router drops the connection every evening after eight, on the phone and the laptop. "
    "I rebooted it and reset it, and the ISP says the line is fine. What could it be?",
    "Evening drops are usually interference from the neighbours' networks. Set the 2.4 GHz "
    "channel to 1, 6 or 11, give the 5 GHz band a name of its own, and update the firmware, "
    "since older firmware had plenty of stability bugs.",
    "Changed the channel to 11 and updated the firmware, and it has not dropped once tonight.",
]
EN_THREAD = (
    "<html><head><title>Router drops at night - Example Forums</title></head><body>"
    '<nav><a href="/">Forums</a></nav><main><h1>Router drops at night</h1>'
    + "".join(
        f'<article class="post"><div class="author">{who} <span>Posts: 12</span></div>'
        f'<div class="post-body"><p>{text}</p></div></article>'
        for who, text in zip(["mike", "netguru", "mike"], EN_THREAD_POSTS, strict=True)
    )
    + "<form><textarea></textarea><button>Post reply</button></form></main>"
    "<footer>Example Forums, 2024</footer></body></html>"
)


async def test_a_forum_threads_main_text_is_every_post_in_order_without_the_posters(
    site: Site, tmp_path
):
    """The longest post scores best, but a thread's content is the question and its
    answers: the posts alike to it (its tag and class, under ancestors alike) come with
    it, in page order; the posters' names, the floors and the reply form do not."""
    site.page("/thread", body=THREAD.encode("gbk"), content_type="text/html")
    site.page("/en-thread", body=EN_THREAD)

    records = by_url(
        await crawl(tmp_path, [site.url + "/thread", site.url + "/en-thread"], extract=True)
    )

    assert records[site.url + "/thread"]["main_text"] == "\n".join(THREAD_POSTS)
    assert records[site.url + "/en-thread"]["main_text"] == "\n".join(EN_THREAD_POSTS)


async def test_markdown_links_are_urls_a_markdown_reader_takes_whole(site: Site, tmp_path):
    """A space in a link's destination ends it, and Markdown shows the brackets as text:
    destinations are the URLs a browser requests (spaces escaped, the query of a GBK page
    in GBK, as in the record's links), in <> when a parenthesis would end them early."""
    prose = "这是一段足够长的正文，用来确认正文被找到，并且其中的链接写成 Markdown 的链接。"
    links = '<a href="/搜索?q=中文 测试">搜索</a>' + '<a href="/My Report (1).pdf#第 2 页">报告</a>'
    page = f'<html><head><meta charset="gbk"></head><body><article><p>{prose}{links}</p>'
    site.page("/", body=(page + "</article></body></html>").encode("gbk"), content_type="text/html")

    [record] = await crawl(tmp_path, [site.url + "/"], extract=True, max_depth=0)

    assert record["markdown"] == (
        prose
        + f"[搜索]({site.url}/%E6%90%9C%E7%B4%A2?q=%D6%D0%CE%C4%20%B2%E2%CA%D4)"
        + f"[报告](<{site.url}/My%20Report%20(1).pdf#%E7%AC%AC%202%20%E9%A1%B5>)"
    )
    assert f"{site.url}/%E6%90%9C%E7%B4%A2?q=%D6%D0%CE%C4%20%B2%E2%CA%D4" in record["links"]


async def test_a_headline_is_left_out_whatever_joins_a_chinese_titles_parts(site: Site, tmp_path):
    """Chinese sites join a title's parts without spaces: "标题_频道_网站", "标题-网站",
    "标题｜网站", "【标题】网站". The headline is left out of the main text as it is from
    "Headline - Site"."""
    prose = "<p>国家统计局今天发布数据显示，前三季度国内生产总值同比增长，经济总体回升向好。</p>"
    titles = ["经济回升向好_新闻中心_某某网", "经济回升向好-某某网", "经济回升向好｜某某网"]
    titles += ["【经济回升向好】某某网", "经济回升向好 - 某某网"]
    for i, title in enumerate(titles):
        page = f"<title>{title}</title><article><h1>经济回升向好</h1>{prose}</article>"
        site.page(f"/{i}", body=page)

    records = await crawl(tmp_path, [f"{site.url}/{i}" for i in range(len(titles))], extract=True)

    assert [r["main_text"] for r in records] == [prose[3:-4]] * len(titles)


async def test_a_chinese_pages_machinery_labels_are_left_out_as_english_ones_are(
    site: Site, tmp_path
):
    """ "Advertisement", "Share:" and "Related" alone in a block are never content; nor
    are 广告, 分享到：, 相关阅读, 展开全文 (expand the full text) or Sohu's 返回搜狐，查看更多."""
    prose = [
        "国家统计局今天发布数据显示，前三季度国内生产总值同比增长，经济运行总体回升向好。",
        "分行业看，制造业增加值增长较快，其中高技术制造业增长明显，新能源汽车产量增长较快。",
    ]
    labels = ["广告", "展开全文", "分享到：", "相关阅读", '<a href="/">返回搜狐，查看更多</a>']
    blocks = [prose[0], *labels, prose[1]]
    site.page("/", body="<article>" + "".join(f"<p>{b}</p>" for b in blocks) + "</article>")

    [record] = await crawl(tmp_path, [site.url + "/"], extract=True, max_depth=0)

    assert record["main_text"] == "\n".join(prose)


async def test_a_heading_that_is_a_label_is_left_out(site: Site, tmp_path):
    """A label of the page's machinery is no content as a heading either: an article's
    "Related" over its related stories (their links left out), "Share this:",
    "Mehr zum Thema" and 相关阅读 stayed, in headings, where the paragraphs had them out."""
    body = (
        f"<p>{PARAGRAPHS[0]}</p><h3>Related</h3><ul><li><a href='/a'>Another story about "
        f"bridges</a></li></ul><p>{PARAGRAPHS[1]}</p><h4>Share this:</h4><h2>Mehr zum Thema"
        f"</h2><p>{PARAGRAPHS[2]}</p><h3>相关阅读</h3>"
    )
    site.page("/", body=_article(body))

    [record] = await crawl(tmp_path, [site.url + "/"], extract=True, max_depth=0)

    assert record["main_text"] == "\n".join(PARAGRAPHS[:3])


async def test_a_wikis_edit_links_are_no_part_of_its_headings(site: Site, tmp_path):
    """MediaWiki follows each heading with "[edit]" (span.mw-editsection): it was in
    every heading of a wiki's main text and Markdown ("Life cycle[edit]")."""
    edit = (
        '<span class="mw-editsection"><span class="mw-editsection-bracket">[</span>'
        '<a href="/w/index.php?title=Moth&action=edit&section={}">edit</a>'
        '<span class="mw-editsection-bracket">]</span></span>'
    )
    body = (
        f"<p>{PARAGRAPHS[0]}</p>"
        f'<h2><span class="mw-headline" id="Life">Life cycle</span>{edit.format(1)}</h2>'
        f"<p>{PARAGRAPHS[1]}</p>"
    )

    main_text = await extracted(site, tmp_path, _article(body))

    assert main_text == "\n".join([PARAGRAPHS[0], "Life cycle", PARAGRAPHS[1]])


async def test_a_chinese_articles_editor_line_is_left_out(site: Site, tmp_path):
    """Chinese news portals end an article with who edited it ("（责任编辑：李明）" at
    Sina, "(责编：赵敏)" at People's Daily) and where it came from ("本文来源：都市晨报
    责任编辑：王芳_NN1234" at NetEase): they were the main text's last lines. A paragraph
    that begins with a source is kept."""
    prose = [
        "国家统计局今天发布数据显示，前三季度国内生产总值同比增长，经济运行总体回升向好。",
        "分行业看，制造业增加值增长较快，其中高技术制造业增长明显，新能源汽车产量增长较快。",
        "来源：据国家统计局初步核算，前三季度国内生产总值超过九十万亿元，按不变价格计算同比增长。",
    ]
    credits = [
        "（责任编辑：李明）",
        "责任编辑：王芳_NN1234",
        "編輯：陳小明",
        "(责编：赵敏、李强)",
        "本文来源：都市晨报 责任编辑：王芳_NN1234",
    ]
    blocks = [*prose, *credits]
    site.page("/", body="<article>" + "".join(f"<p>{b}</p>" for b in blocks) + "</article>")

    [record] = await crawl(tmp_path, [site.url + "/"], extract=True, max_depth=0)

    assert record["main_text"] == "\n".join(prose)


async def test_a_headings_permalink_is_no_part_of_it(site: Site, tmp_path):
    """Documentation generators end each heading with a link to itself: Sphinx's and
    MkDocs' "¶", rustdoc's "§" before it, Docusaurus' zero-width space. They were in the
    headings' text and Markdown ("## Basic settings¶"), and a headline that repeats the
    page's title, "¶" after it, was no longer known as one."""
    page = (
        "<html><head><title>Configuring the queue &#8212; tasklane 2.4 documentation</title>"
        '</head><body><div class="body" role="main"><section><h1>Configuring the queue'
        '<a class="headerlink" href="#configuring-the-queue" title="Link to this heading">¶</a>'
        f"</h1><p>{PARAGRAPHS[0]}</p>"
        '<h2 id="b">Basic settings<a class="headerlink" href="#b">&para;</a></h2>'
        f"<p>{PARAGRAPHS[1]}</p>"
        '<h2 id="e"><a class="doc-anchor" href="#e">§</a>Examples</h2>'
        f"<p>{PARAGRAPHS[2]}</p>"
        '<h2 id="s">Start it<a href="#s" class="hash-link" aria-label="Direct link">&#8203;</a>'
        f"</h2><p>{PARAGRAPHS[3]}</p></section></div></body></html>"
    )
    site.page("/config.html", body=page)

    [record] = await crawl(tmp_path, [site.url + "/config.html"], extract=True, max_depth=0)

    headings = ["Basic settings", "Examples", "Start it"]
    expected = [PARAGRAPHS[0]] + [
        x for pair in zip(headings, PARAGRAPHS[1:4], strict=True) for x in pair
    ]
    assert record["main_text"] == "\n".join(expected)
    assert "## Basic settings\n\n" in record["markdown"]
    assert "## Examples\n\n" in record["markdown"]
    assert "## Start it\n\n" in record["markdown"]


async def test_a_headline_that_is_the_title_without_the_sites_name_is_left_out(
    site: Site, tmp_path
):
    """Sphinx titles a page "json — JSON encoder and decoder — Python 3.11.4
    documentation", its headline the first two parts: it was not known as the headline,
    and stayed the first line of the main text of every page of the Python docs."""
    page = (
        "<html><head><title>json — JSON encoder and decoder — Python 3.11.4 documentation"
        '</title></head><body><div class="body" role="main"><section><h1><code>json</code>'
        f" — JSON encoder and decoder</h1><p>{PARAGRAPHS[0]}</p><h2>Basic usage</h2>"
        f"<p>{PARAGRAPHS[1]}</p></section></div></body></html>"
    )
    main_text = await extracted(site, tmp_path, page, "/json.html")

    assert main_text == "\n".join([PARAGRAPHS[0], "Basic usage", PARAGRAPHS[1]])


async def test_every_section_of_a_document_is_its_content(site: Site, tmp_path):
    """Sphinx writes a document as <section>s, with ids and no class. The top section
    was the content, and a section beside it that scored less than a third of it was
    left out: the Python docs' "What's New in Python 3.8" lost half its text, and the
    C API's "Call Protocol" its "tp_call Protocol" section."""
    short = ["Instances of classes that set tp_call are callable.", "Use PyObject_Call."]
    long = [f"{p} Also, and, of, course, more." for p in PARAGRAPHS[:6]]
    page = (
        "<html><head><title>Call Protocol — Python 3.11 documentation</title></head><body>"
        '<div class="body" role="main"><section id="call-protocol"><h1>Call Protocol</h1>'
        f'<p>{PARAGRAPHS[6]}</p><section id="tp-call"><h2>The tp_call Protocol</h2>'
        + "".join(f"<p>{p}</p>" for p in short)
        + '</section><section id="vectorcall"><h2>The Vectorcall Protocol</h2>'
        + "".join(f"<p>{p}</p>" for p in long)
        + "</section></section></div></body></html>"
    )
    site.page("/call.html", body=page)

    [record] = await crawl(tmp_path, [site.url + "/call.html"], extract=True, max_depth=0)

    expected = [PARAGRAPHS[6], "The tp_call Protocol", *short, "The Vectorcall Protocol", *long]
    assert record["main_text"] == "\n".join(expected)


CONSENT = (
    "We and our partners use cookies and similar technologies to store and access "
    "information on your device, to personalise content and ads, to measure their "
    "performance, and to improve our products. You can withdraw your consent at any time."
)


async def test_a_short_pages_text_is_not_its_cookie_banner(site: Site, tmp_path):
    """Consent managers name their banners after themselves (Didomi's #didomi-host,
    Cookiebot's #CybotCookiebotDialog, OneTrust's #onetrust-consent-sdk): a banner's
    long sentence full of commas outscored a short page's text, and was its main text."""
    text = "All branches are closed on Monday for the holiday. Book drops stay open."
    page = (
        "<html><head><title>Closed on Monday</title></head><body>"
        f'<div id="didomi-host"><div class="didomi-popup-view"><p>{CONSENT}</p></div></div>'
        '<div class="wrapper"><div class="top"><a href="/">Library</a> <a href="/hours">Hours'
        f'</a></div><div class="text"><h1>Closed on Monday</h1><p>{text}</p></div></div>'
        '<div id="CybotCookiebotDialog"><div id="CybotCookiebotDialogBodyContentText">'
        f'{CONSENT}</div></div><div id="onetrust-consent-sdk"><div id="onetrust-policy">'
        f"<p>{CONSENT}</p></div></div></body></html>"
    )
    main_text = await extracted(site, tmp_path, page, "/closed")

    assert main_text == text


HUGE = "<html><body>" + ("<p>" + "word " * 200 + "</p>\n") * 5000 + "</body></html>"
NESTED = "<html><body>" + "<div>" * 20000 + "deep text, deep down" + "</div>" * 20000


async def test_pages_that_must_not_break_it_give_records(site: Site, tmp_path):
    bodies = {
        "/empty": b"",
        "/frames": b'<html><frameset cols="50%,50%"><frame src="/a"><frame src="/b"></frameset>',
        "/huge": HUGE.encode(),
        "/binary": random.Random(1).randbytes(200_000),
        "/nested": NESTED.encode(),
        "/no-body": b"<title>only a title</title>",
        "/comments-only": b"<html><body><div id=comments><p>a comment</p></div></body></html>",
    }
    for path, body in bodies.items():
        site.page(path, body=body, content_type="text/html")
    urls = [site.url + path for path in bodies]

    records = by_url(await crawl(tmp_path, urls, extract=True, max_depth=0, max_bytes=2**24))

    for url in urls:
        # The deep page is parsed as bounded markup (htmlguard), and says so.
        expected_error = "html_too_complex" if url.endswith("/nested") else None
        assert records[url].get("error") == expected_error, url
        assert isinstance(records[url]["main_text"], str), url
    assert records[site.url + "/empty"]["main_text"] == ""
    assert "simhash" not in records[site.url + "/empty"]
    assert records[site.url + "/huge"]["main_text"].count("\n") == 4999
    assert records[site.url + "/nested"]["main_text"] == "deep text, deep down"


def _article(body: str, extra: str = "") -> str:
    return (
        f"<html><head><title>t</title></head><body><article>{body}{extra}</article></body></html>"
    )


PARAGRAPHS = [
    "The city council voted on Tuesday to build a new bridge over the river, after two years "
    "of debate about its cost and about the traffic it would bring to the old town.",
    "Work should start next spring, and the bridge should open to cyclists and walkers first, "
    "the mayor said, before buses and cars are allowed on it a year later.",
    "Residents of the east bank, who now drive twenty minutes around the bay to reach the "
    "station, welcomed the vote, while shop owners in the old town fear the noise of works.",
    "The council will publish the plans next month, and people will have six weeks to comment "
    "on them before the final design is chosen by a panel of engineers and residents.",
    "Engineers expect the steel frame to be assembled in a shipyard downstream, floated up on "
    "barges during high tide, and lifted onto concrete piers sunk deep into the riverbed.",
    "Opposition members argued that repairing the ferry, which carried eleven thousand "
    "passengers daily before its engine failed, would cost far less and disturb nobody.",
    "Environmental groups asked for studies of salmon migration, noting that earlier projects "
    "upstream had blocked spawning routes for several seasons until ladders were installed.",
    "Funding comes partly from a regional transport grant, partly from bonds, and partly from "
    "tolls charged to heavy lorries, which will be barred entirely during weekend markets.",
]


async def test_planted_near_duplicates_point_at_the_first_page(site: Site, tmp_path):
    body = "<p>Updated 3 March 2021, 10:31 GMT</p>" + "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    dated = body.replace("3 March 2021, 10:31", "4 March 2021, 18:02")
    changed = body.replace("two years", "three years").replace("six weeks", "eight weeks")
    template = "".join(f"<li><a href='/x{i}'>Section {i} of the site</a></li>" for i in range(60))
    other = "".join(f"<p>{p[::-1]}</p>" for p in PARAGRAPHS)  # distinct words, same length
    pages = {
        "/first": _article(body),
        "/dated": _article(dated),
        "/with-ad": _article(body, '<div class="advertisement"><p>Buy kettles now!</p></div>'),
        "/with-comments": _article(body, '<section class="comments"><p>So true.</p></section>'),
        "/few-words": _article(changed),
        "/distinct": f"<html><body><ul>{template}</ul><article>{other}</article></body></html>",
    }
    for path, page in pages.items():
        site.page(path, body=page)
    urls = [site.url + path for path in pages]

    records = by_url(await crawl(tmp_path, urls, extract=True, max_depth=0, concurrency=1))

    first = site.url + "/first"
    assert "near_duplicate_of" not in records[first]
    for path in ("/dated", "/with-ad", "/with-comments", "/few-words"):
        assert records[site.url + path]["near_duplicate_of"] == first, path
    assert "near_duplicate_of" not in records[site.url + "/distinct"]


CHINESE_SENTENCES = [
    "今年春茶开采比往年提前了一周，山区的茶农周一表示，这是因为冬天温暖而干燥。",
    "清明前后，村里家家户户都在忙着采茶、炒茶，空气里到处是茶叶的香味。",
    "合作社的负责人说，今年的茶叶品质很好，收购价格比去年略有上涨。",
    "为了让茶叶卖得更远，村里去年建起了电商服务站，年轻人回乡做起了直播。",
    "一位返乡青年告诉记者，他每天晚上直播两个小时，订单来自全国各地。",
    "县农业部门派出技术人员，到茶园指导病虫害防治和科学施肥。",
    "专家提醒，采茶季节雨水较多，茶农要注意茶园排水，防止茶树根部受损。",
    "据统计，全县茶园面积已经超过十万亩，茶产业成为群众增收的重要来源。",
    "下一步，当地计划打造茶文化旅游线路，吸引更多游客到山里体验采茶。",
]
OTHER_CHINESE_SENTENCES = [
    "市气象台昨天发布暴雨蓝色预警，预计未来三天全市将有一次明显降雨过程。",
    "受降雨影响，部分路段可能出现积水，交警部门提醒市民出行注意安全。",
    "各区已组织人员对地下通道、低洼路段进行排查，并备好抽水设备。",
    "教育部门通知，如遇红色预警，中小学和幼儿园将停课一天。",
    "水务部门表示，全市水库蓄水情况良好，可以满足汛期调度需要。",
    "气象专家分析，今年入汛时间偏早，降雨总量可能比常年偏多。",
    "市民如发现道路塌陷、树木倒伏等险情，可拨打城市服务热线反映。",
    "目前，各相关部门已进入应急值守状态，确保城市安全度汛。",
]
OTHER_PARAGRAPHS = [
    "The library will close its main reading room for three months this summer while "
    "workers replace the roof, which has leaked onto the stacks during heavy storms.",
    "Books from the reading room will move to the east wing, and staff will fetch any "
    "title on request within a day, the head librarian said at a meeting on Thursday.",
    "The children's section and the computer lab stay open as usual, and the evening "
    "lectures move to the town hall until the work is finished in late September.",
    "The repairs are paid for by a bequest from a former teacher, who left the library "
    "most of her savings and asked that it be spent on the building, not on furniture.",
    "Volunteers will help carry the most fragile maps and manuscripts, which need to be "
    "kept at a steady temperature and cannot be packed in ordinary cardboard boxes.",
    "The library expects more visitors than ever next year, when the new school opens "
    "across the street and its pupils are given free cards and weekly class visits.",
]
TEMPLATE = """<html><head><meta charset="utf-8"><title>{title}</title></head><body>
<div class="nav"><a href="/">首页 Home</a> | <a href="/news/">新闻 News</a>
| <a href="/about/">关于我们 About us</a> | <a href="/contact/">联系我们 Contact</a>
| <a href="/jobs/">招聘 Jobs</a></div>
<article><h1>{title}</h1>{article}</article>
<div class="footer"><p>版权所有 © 2024 某某日报社 All rights reserved. 地址：某某市人民路1号。</p>
<p>违法和不良信息举报电话：0000-12345678。Contact the newsroom at any hour.</p></div>
</body></html>"""


async def test_pages_that_differ_in_one_sentence_are_near_and_two_articles_are_not(
    site: Site, tmp_path
):
    """In Chinese and in English, an article with a sentence added, or one put in the
    place of another, is a near-duplicate of the first page that had it (a whole-text
    SimHash found a quarter of such Chinese pairs: a sentence brings new character pairs
    mostly); another article on the same template, nav and footer, is none."""
    new_zh = "记者在采访中了解到，不少茶农今年还尝试种植了新的茶树品种。"
    new_en = "A spokesman for the council said the final cost would be known in May."
    articles = {
        "zh": CHINESE_SENTENCES,
        "zh-added": [*CHINESE_SENTENCES[:4], new_zh, *CHINESE_SENTENCES[4:]],
        "zh-replaced": [*CHINESE_SENTENCES[:6], new_zh, *CHINESE_SENTENCES[7:]],
        "zh-other": OTHER_CHINESE_SENTENCES,
        "en": PARAGRAPHS,
        "en-added": [*PARAGRAPHS[:3], new_en, *PARAGRAPHS[3:]],
        "en-replaced": [*PARAGRAPHS[:5], new_en, *PARAGRAPHS[6:]],
        "en-other": OTHER_PARAGRAPHS,
    }
    for name, sentences in articles.items():
        paragraphs = "".join(f"<p>{''.join(sentences[i : i + 2])}</p>" for i in range(0, 9, 2))
        if name.startswith("en"):
            paragraphs = "".join(f"<p>{p}</p>" for p in sentences)
        site.page(f"/{name}", body=TEMPLATE.format(title=name, article=paragraphs))
    urls = [f"{site.url}/{name}" for name in articles]

    records = by_url(await crawl(tmp_path, urls, extract=True, max_depth=0, concurrency=1))

    for language in ("zh", "en"):
        first = f"{site.url}/{language}"
        assert "near_duplicate_of" not in records[first]
        for kind in ("added", "replaced"):
            assert records[f"{first}-{kind}"].get("near_duplicate_of") == first, kind
        assert "near_duplicate_of" not in records[f"{first}-other"]


OLD_SITE = """<html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312">
<title>{title}--某某县人民政府网</title></head><body><table width="778" align="center">
<tr><td><a href="/">首 页</a> | <a href="/xwzx/">新闻中心</a> | <a href="/zwgk/">政务公开</a>
</td></tr>
</table><table width="778" align="center"><tr><td width="190" valign="top">
<a href="/gzdt/">工作动态</a><br><a href="/xzdt/">乡镇动态</a></td><td valign="top"><table>
<tr><td align="center"><b>{title}</b></td></tr>
<tr><td align="center">发布时间：2023-10-26&nbsp;&nbsp;来源：县林业局&nbsp;&nbsp;点击数：1024
</td></tr>
<tr><td class="f14">{article}</td></tr></table></td></tr></table>
<table width="778" align="center"><tr><td align="center">主办：某某县人民政府办公室<br>
地址：某某县人民路1号　电话：0000-1234567<br>备案号：某ICP备05001234号</td></tr></table>
</body></html>"""


async def test_short_articles_on_one_old_chinese_template_are_not_near_duplicates(
    site: Site, tmp_path
):
    """An old Chinese site's pages are tables of one template: a line of date, source and
    views, and a footer with the site's ICP licence. On a page whose article is short (a
    notice of a line), that line was the best-scored block, so every such page had it for
    main text and was a near-duplicate of the first. It is never content, nor the footer."""
    articles = [
        "国庆节放假七天，十月八日上班。",
        "本周六上午停水，请提前储水。",
        "图书馆周日闭馆。",
    ]
    for i, article in enumerate(articles):
        page = OLD_SITE.format(title=f"工作动态{i}", article=f"<p>{article}</p>")
        site.page(f"/{i}.html", body=page.encode("gbk"), content_type="text/html")
    urls = [f"{site.url}/{i}.html" for i in range(len(articles))]

    records = by_url(await crawl(tmp_path, urls, extract=True, max_depth=0, concurrency=1))

    for url, article in zip(urls, articles, strict=True):
        assert article in records[url]["main_text"]
        assert "发布时间" not in records[url]["main_text"]
        assert "ICP" not in records[url]["main_text"]
        assert "near_duplicate_of" not in records[url]


async def test_an_articles_short_lead_in_its_header_comes_with_it(site: Site, tmp_path):
    """A lead shorter than a paragraph, in the article's <header> ("article-excerpt", as
    Ghost writes it) or under a magazine's headline ("dek"), was left out: the header went
    as a site's does, and "dek" named no lead. The site's header still goes."""
    lead = "Three years, forty square metres, and more cats than I planned for."
    ghost = (
        '<html><body><header class="site-header"><p class="site-description">Notes from a'
        ' small shop</p></header><article><header class="article-header"><h1>Lessons</h1>'
        f'<p class="article-excerpt">{lead}</p><div class="byline">June Park</div></header>'
        '<section class="gh-content">'
        + "".join(f"<p>{p}</p>" for p in PARAGRAPHS[:2])
        + "</section></article></body></html>"
    )
    magazine = ghost.replace('<header class="article-header">', '<div class="story-header">')
    magazine = magazine.replace("</div></header>", "</div></div>").replace("article-excerpt", "dek")

    for path, page in (("/ghost", ghost), ("/magazine", magazine)):
        assert await extracted(site, tmp_path, page, path) == "\n".join([lead, *PARAGRAPHS[:2]])


async def test_the_near_duplicate_index_survives_a_resume(site: Site, tmp_path):
    body = "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    site.page("/a", body=_article(body))
    site.page("/b", body=_article(body.replace("next spring", "next summer")))
    state = str(tmp_path / "state")
    seeds = [site.url + "/a", site.url + "/b"]

    first = await crawl(tmp_path, seeds, extract=True, state=state, max_pages=1, concurrency=1)
    both = await crawl(tmp_path, seeds, extract=True, state=state, concurrency=1)

    assert [r["url"] for r in first] == [site.url + "/a"]
    assert [r["url"] for r in both] == seeds
    assert both[1]["near_duplicate_of"] == site.url + "/a"
    assert site.count("/a") == 1


def fingerprints_near_and_far(rng: random.Random, count: int) -> list[int]:
    """Fingerprints as pages make them: some with groups of no sentence (bytes of 0),
    and a third near an earlier one: a few bits flipped, or a few groups changed."""
    made: list[int] = []
    for i in range(count):
        fingerprint = rng.getrandbits(64)
        for byte in rng.sample(range(8), rng.choice((0, 0, 2, 5, 7))):
            fingerprint &= ~(0xFF << (8 * byte))
        if i % 3 == 0 and made:
            fingerprint = rng.choice(made)
            for bit in rng.sample(range(64), rng.randint(0, 5)):
                fingerprint ^= 1 << bit
            for byte in rng.sample(range(8), rng.randint(0, 3)):
                fingerprint ^= rng.getrandbits(8) << (8 * byte)
        made.append(fingerprint)
    return made


def test_the_index_finds_exactly_what_a_scan_finds():
    index = SimhashIndex()
    stored = []
    for i, fingerprint in enumerate(fingerprints_near_and_far(random.Random(5), 3000)):
        url = f"u{i}"
        expected = next((u for f, u in stored if near(f, fingerprint)), None)
        assert index.first_near(fingerprint) == expected
        if index.add(fingerprint, url):
            stored.append((fingerprint, url))
    assert len(index) == len(stored)


def test_chinese_is_shingled_on_characters():
    assert tokens("春茶开采 Tea 2024") == ["春茶", "茶开", "开采", "tea", "2024"]
    text = "".join(CHINESE_SENTENCES)
    other = "".join(s[::-1] for s in CHINESE_SENTENCES)  # the same characters, other pairs
    a, b, c = simhash(text), simhash(text.replace("一周", "两周")), simhash(other)
    assert a is not None and b is not None and c is not None
    assert near(a, b) and not near(a, c)
    assert distance(a, c) > 10
    assert from_hex(f"{a:016x}") == a


def test_extraction_off_imports_nothing_of_it(tmp_path):
    code = (
        "import sys, asyncio\n"
        "from crawler.__main__ import main\n"
        "code = main(['--quiet', '--retries', '0', '-o', sys.argv[2], sys.argv[1]])\n"
        "assert 'crawler.extract' not in sys.modules and 'crawler.simhash' not in sys.modules\n"
        "sys.exit(code)\n"
    )
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    done = subprocess.run(
        [sys.executable, "-c", code, str(seeds), str(tmp_path / "out.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "AssertionError" not in done.stderr, done.stderr


def test_a_page_fetched_again_is_not_its_own_near_duplicate():
    # After a crash, a page's fingerprint may be in the index from its first fetch.
    index = SimhashIndex()
    index.add(0x0123_4567_89AB_CDEF, "http://a.test/")
    again = Page("http://a.test/", 0, None, fields={"simhash": "0123456789abcdef"})
    other = Page("http://b.test/", 0, None, fields={"simhash": "0123456789abcdee"})

    index.mark(again)
    index.mark(other)

    assert "near_duplicate_of" not in again.fields
    assert other.fields["near_duplicate_of"] == "http://a.test/"


async def test_the_wacz_pages_hold_the_main_text_for_full_text_search(site: Site, tmp_path):
    site.page("/news/tea", body=ARTICLE)
    warc, wacz = tmp_path / "warc", tmp_path / "crawl.wacz"

    [record] = await crawl(
        tmp_path,
        [site.url + "/news/tea"],
        extract=True,
        max_depth=0,
        warc=str(warc),
        wacz=str(wacz),
    )

    with zipfile.ZipFile(wacz) as package:
        header, *lines = package.read("pages/pages.jsonl").decode().splitlines()
    assert json.loads(header)["hasText"] is True
    [entry] = map(json.loads, lines)
    assert entry["url"] == record["url"] and entry["text"] == ARTICLE_TEXT


GROUPS, GROUP_PAGES = 3, 40


def build_article_site(site: Site) -> list[str]:
    """GROUPS distinct articles, each on GROUP_PAGES pages that differ by their date line;
    page n links to pages 4n+1 .. 4n+4."""
    rng = random.Random(24)
    syllables = [a + b for a in "bdfgklmnprstvz" for b in "aeiou"]
    vocabulary = ["".join(rng.sample(syllables, 3)) for _ in range(3000)]
    articles = [
        "".join(
            "<p>" + " ".join(rng.choice(vocabulary) for _ in range(40)) + ", the end.</p>"
            for _ in range(8)
        )
        for _ in range(GROUPS)
    ]
    pages = GROUPS * GROUP_PAGES
    for n in range(pages):
        links = "".join(
            f'<a href="/p/{m}">{m}</a> ' for m in range(4 * n + 1, 4 * n + 5) if m < pages
        )
        body = f"<p>Updated {n % 28 + 1} March 2021, 10:{n % 60:02d} GMT</p>{articles[n % GROUPS]}"
        site.page(
            f"/p/{n}", body=f"<html><body><nav>{links}</nav><article>{body}</article></body></html>"
        )
    return [f"{site.url}/p/{n}" for n in range(pages)]


async def test_kill_9_and_resumes_leave_each_near_duplicate_naming_an_earlier_record(
    site: Site, tmp_path
):
    urls = build_article_site(site)
    run = Run(site, tmp_path, "--extract")
    codes = [await run.interrupted_after(hits, signal.SIGKILL) for hits in (10, 35, 70)]
    code, err = await run.until_done()

    assert code == 0, err
    assert codes.count(-signal.SIGKILL) >= 2
    records = read_records(run.output)
    assert_each_page_once(records, urls)
    position = {r["url"]: i for i, r in enumerate(records)}  # the order of the commits
    for group in range(GROUPS):
        members = [r for r in records if int(r["url"].rsplit("/", 1)[1]) % GROUPS == group]
        firsts = [r["url"] for r in members if "near_duplicate_of" not in r]
        assert firsts == [members[0]["url"]]
        for record in members[1:]:  # each names an earlier page of its own group
            earlier = record["near_duplicate_of"]
            assert earlier in {m["url"] for m in members}
            assert position[earlier] < position[record["url"]]


MARKUP_LOOKALIKES = """<html><head><title>Lookalikes</title></head><body><article>
<h2>Stars *a*, _under_, [x](y) and #</h2>
<p>Text with *asterisks*, _underscores_, [brackets](x), `ticks`, &lt;b&gt;not bold&lt;/b&gt;,
&lt;https://example.com&gt;, &amp;copy; and &amp;#42; as written, AT&amp;T, a \\ backslash.</p>
<p>+ not a list</p><p>- not a list</p><p>1) not a list</p><p>2. not a list</p>
<p>&gt; not a quote</p><p># not a heading</p><p>~~~ not a fence</p>
<p>A line<br>- and a minus<br>===<br>---</p>
<p>Call <code>my_var * 2</code>, <code>a `tick` b</code>, <code>``</code> and <kbd>[Ctrl]</kbd>.</p>
<pre>```
~~~ both fences
</pre>
<ul><li>a real item</li><li>- starting with a minus</li><li>3. or a number</li></ul>
</article></body></html>"""


def commonmark_blocks(markdown: str) -> list[tuple[str, str]]:
    """The blocks a CommonMark reader (markdown-it-py, with GFM tables) finds: each
    one's tag and text, a line break as a newline."""
    blocks = []
    tags: list[str] = []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.nesting == 1:
            tags.append(token.tag)
        elif token.nesting == -1:
            tags.pop()
        elif token.type in ("fence", "code_block"):
            blocks.append(("/".join([*tags, "pre"]), token.content.rstrip("\n")))
        elif token.type == "inline":
            text = "".join(
                "\n" if child.type in ("softbreak", "hardbreak") else child.content
                for child in token.children or []
            )
            blocks.append(("/".join(tags), text))
    return blocks


INTRO = "<p>An introduction long enough to be the start of the main content here.</p>"


async def read_back(site: Site, tmp_path, body: str) -> tuple[str, list[tuple[str, str]], str]:
    """A page of `body` after an introduction, crawled with --extract: its Markdown, the
    blocks a CommonMark reader finds in it, and its main text."""
    site.page("/", body=_article(INTRO + body))
    [record] = await crawl(tmp_path, [site.url + "/"], extract=True, max_depth=0)
    return record["markdown"], commonmark_blocks(record["markdown"]), record["main_text"]


async def extracted(site: Site, tmp_path, page: str, path: str = "/") -> str:
    """The main text --extract finds in `page`, served at `path` and crawled."""
    site.page(path, body=page)
    [record] = await crawl(tmp_path, [site.url + path], extract=True, max_depth=0)
    return record["main_text"]


async def markdown_reading_back_whole(site: Site, tmp_path, body: str) -> str:
    """The Markdown of a page of `body`, checked to read back as the main text, block
    for block."""
    markdown, blocks, main_text = await read_back(site, tmp_path, body)
    assert [text for _, text in blocks] == main_text.split("\n")
    return markdown


async def test_markdown_reads_back_as_the_main_text_whatever_the_text_looks_like(
    site: Site, tmp_path
):
    """Text that looks like Markdown (a "- " or "1." opening a paragraph, stars, "<b>"
    written out) is escaped, and code is in spans that take no escapes: a CommonMark
    reader finds the blocks of the page, each with the main text's words."""
    site.page("/", body=MARKUP_LOOKALIKES)

    [record] = await crawl(tmp_path, [site.url + "/"], extract=True, max_depth=0)

    blocks = commonmark_blocks(record["markdown"])
    assert blocks == [
        ("h2", "Stars *a*, _under_, [x](y) and #"),
        *[("p", line) for line in record["main_text"].split("\n")[1:9]],
        ("p", "A line\n- and a minus\n===\n---"),
        ("p", "Call my_var * 2, a `tick` b, `` and [Ctrl]."),
        ("pre", "```\n~~~ both fences"),
        ("ul/li/p", "a real item"),
        ("ul/li/p", "- starting with a minus"),
        ("ul/li/p", "3. or a number"),
    ]
    paragraph = blocks[1][1]
    assert paragraph.startswith("Text with *asterisks*, _underscores_, [brackets](x), `ticks`")
    assert "<b>not bold</b>, <https://example.com>, &copy; and &#42; as written, AT&T" in paragraph


async def test_a_large_pages_extraction_does_not_hold_the_loop(site: Site, tmp_path, monkeypatch):
    """Extraction takes some 0.3 s of CPU a MB: a large page's is done in a thread, so
    that the other pages go on meanwhile; on the loop, a 9 MB page held them for 3 s."""
    paragraph = "<p>Paragraph {} of a long page, with words enough to be a sentence.</p>"
    big = "<html><body><article>" + "".join(map(paragraph.format, range(30_000)))
    site.page("/", "Home", ["/big", "/small"])
    site.page("/big", body=big + "</article></body></html>")
    site.page("/small", body=_article("<p>A small page of its own, with a few words.</p>"))

    with LoopWatch(monkeypatch) as watch:
        records = by_url(await crawl(tmp_path, [site.url + "/"], extract=True))

    assert watch.max_hold_s < 0.25
    main_text = records[site.url + "/big"]["main_text"].split("\n")
    assert main_text == [paragraph.format(i)[3:-4] for i in range(30_000)]
    assert records[site.url + "/small"]["main_text"]


async def test_json_ld_beyond_json_gives_records_strict_readers_and_a_recrawl_take(
    site: Site, tmp_path
):
    """json.loads takes NaN and Infinity, integers of any size and lone surrogates, and
    the record then held NaN: jq and JSON.parse refused the line, and --since refused the
    crawl's own output as not JSON. A block with NaN is no JSON (the browser's JSON.parse
    refuses it): it is left out; a huge integer is a float, a lone surrogate U+FFFD."""
    nan_block = '{"@type": "Rating", "ratingValue": NaN}'
    odd_block = (
        '{"@type": "NewsArticle", "author": {"name": "Ann \\ud83d"}, '
        '"wordCount": 123456789012345678901234567890, "emoji": "\\ud83d\\ude00"}'
    )
    head = "".join(
        f'<script type="application/ld+json">{block}</script>' for block in (nan_block, odd_block)
    )
    page = _article("<p>A page whose structured data is not quite JSON, read anyway.</p>")
    site.page("/", body=page.replace("<title>t</title>", f"<title>t</title>{head}"))

    await crawl(tmp_path, [site.url + "/"], extract=True, max_depth=0)
    first = tmp_path / "first.jsonl"
    (tmp_path / "pages.jsonl").rename(first)

    [record] = [orjson.loads(line) for line in first.read_bytes().splitlines()]
    assert record["metadata"]["json_ld"] == [
        {
            "@type": "NewsArticle",
            "author": {"name": "Ann \ufffd"},
            "wordCount": 1.2345678901234568e29,
            "emoji": "\U0001f600",
        }
    ]
    assert record["metadata"]["author"] == "Ann \ufffd"
    [again] = await crawl(tmp_path, [site.url + "/"], extract=True, max_depth=0, since=str(first))
    assert again["changed"] is False


async def test_markdown_keeps_lists_and_quotes_whatever_their_items_hold(site: Site, tmp_path):
    """Items that hold paragraphs (as Sphinx and many CMSs write them), a code block or a
    list of their own, past nine items, and quotes of several paragraphs: a CommonMark
    reader finds each block in its item or quote. The items were paragraphs, a tenth
    item's sublist left its list, and a quote's paragraphs were quotes apart."""
    items = "".join(f"<li>Item {n}<ul><li>under {n}</li></ul></li>" for n in range(1, 11))
    body = (
        "<ul><li><p>A paragraph item</p></li><li><p>Another</p><p>and its second</p></li></ul>"
        "<ol><li>Install it:<pre>pip install it\n\nit --init</pre></li><li>Run it</li></ol>"
        f"<ol>{items}</ol>"
        "<blockquote><p>Quoted first.</p><p>Quoted second.</p></blockquote>"
    )

    _, blocks, _ = await read_back(site, tmp_path, body)

    assert blocks == [
        ("p", "An introduction long enough to be the start of the main content here."),
        ("ul/li/p", "A paragraph item"),
        ("ul/li/p", "Another"),
        ("ul/li/p", "and its second"),
        ("ol/li/p", "Install it:"),
        ("ol/li/pre", "pip install it\n\nit --init"),
        ("ol/li/p", "Run it"),
        *[
            block
            for n in range(1, 11)
            for block in [("ol/li/p", f"Item {n}"), ("ol/li/ul/li/p", f"under {n}")]
        ],
        ("blockquote/p", "Quoted first."),
        ("blockquote/p", "Quoted second."),
    ]


async def test_code_and_emphasis_side_by_side_read_back_as_written(site: Site, tmp_path):
    """Two <code>s side by side (docutils writes "--" so) or two <em>s made `a``b` and
    *a**b*, one run of backticks or stars that a CommonMark reader did not close: they
    are one span now, as they read."""
    body = (
        "<p>A comment starts with <code>'&lt;!-</code><code>-'</code>, a type reads "
        '<em>tuple</em><em>[</em><a href="/type"><em>type</em></a><em>]</em>, and '
        '<code>x</code><a href="/y"><code>y</code></a> are two.</p>'
    )

    markdown = await markdown_reading_back_whole(site, tmp_path, body)

    assert "`'<!--'`" in markdown
    assert f"*tuple\\[*[*type*]({site.url}/type)*\\]*" in markdown


async def test_a_table_cells_lists_and_quotes_are_its_text(site: Site, tmp_path):
    """A GFM table cell holds inline Markdown only: a list, a quote or a heading in a
    cell is written as its text. Its "- " and "> " marks showed as text in the cell."""
    cell = "One of:<ul><li><code>'nt'</code>: Windows</li><li>posix</li></ul>"
    cell += "<blockquote>or</blockquote>"
    body = (
        f"<table><tr><th>Attribute</th><th>Meaning</th></tr><tr><td>name</td><td>{cell}</td></tr>"
        "<tr><td><h3>lock</h3></td><td>The lock</td></tr></table>"
    )

    _, blocks, _ = await read_back(site, tmp_path, body)

    assert [text for _, text in blocks] == [
        "An introduction long enough to be the start of the main content here.",
        "Attribute",
        "Meaning",
        "name",
        "One of: 'nt': Windows posix or",
        "lock",
        "The lock",
    ]


async def test_a_table_row_is_one_line_of_main_text_whatever_its_cells_hold(site: Site, tmp_path):
    """A table row is a line of the main text, its cells tab-separated: a cell's lines
    between <br>s (a Chinese notice's address cell) or of its code broke the row in two,
    its last cells on a line of their own."""
    body = (
        "<table><tr><th>单位</th><th>地址</th><th>电话</th></tr>"
        "<tr><td>县人民医院</td><td>人民路1号<br>门诊楼二层</td><td>1234567</td></tr>"
        "<tr><td>example</td><td><pre>x = 1\ny = 2</pre></td><td>code</td></tr></table>"
    )

    _, _, main_text = await read_back(site, tmp_path, body)

    assert main_text.split("\n")[1:] == [
        "单位\t地址\t电话",
        "县人民医院\t人民路1号 门诊楼二层\t1234567",
        "example\tx = 1 y = 2\tcode",
    ]


async def test_markdown_lists_keep_their_numbers_and_stay_apart(site: Site, tmp_path):
    """A list the page numbers from 7 (a recipe's steps after a photo: <ol start>) was
    numbered from 1 in the Markdown; and two lists side by side were one to a CommonMark
    reader, which reads a list right after another of its kind as more of it. A reader
    finds each list, starting where the page does."""
    body = (
        '<ol start="7"><li>Fold in the flour.</li><li>Bake.</li></ol><ol start="0"><li>Zero'
        "</li></ol><ul><li>One list</li></ul><ul><li>Another</li></ul><ul><li>A third</li></ul>"
    )

    markdown = await markdown_reading_back_whole(site, tmp_path, body)

    assert "7. Fold in the flour.\n8. Bake." in markdown
    lists = [
        (token.type, token.attrGet("start"))
        for token in MarkdownIt("commonmark").parse(markdown)
        if token.type.endswith("list_open")
    ]
    assert lists == [
        ("ordered_list_open", 7),
        ("ordered_list_open", 0),
        *[("bullet_list_open", None)] * 3,
    ]


async def test_emphasis_markdown_cannot_hold_is_its_text(site: Site, tmp_path):
    """A star that touches punctuation inside the emphasis and a letter outside it is no
    delimiter to a CommonMark reader (`文**“引”**文`, `x*(y)*z`): such emphasis is
    written as its text, where the stars showed in it. And a "!" before a link is
    escaped: "![" opens an image."""
    body = (
        "<p>他说<strong>“改革”</strong>是关键，f<em>(x)</em>g 与 <b>正常</b>加粗，"
        'and <em>“quoted”</em> stays, Wow!<a href="/next">next</a>, '
        'x<em>(so!</em><a href="/more">more</a>)</p>'
    )

    markdown = await markdown_reading_back_whole(site, tmp_path, body)

    assert "他说“改革”是关键，f(x)g 与 **正常**加粗，" in markdown
    assert "and *“quoted”* stays, Wow\\![next](" in markdown
    assert "x(so\\![more](" in markdown


async def test_a_short_chinese_reply_is_a_post_of_the_thread(site: Site, tmp_path):
    """A reply of 13 Chinese characters says what 35 English letters do: it is a post
    (it was left out, shorter than the 25 characters a post needed)."""
    posts = [*THREAD_POSTS[:2], "同问，我也遇到了同样的问题", THREAD_POSTS[2]]
    names = ["小明", "老司机", "小红", "小明"]
    floors = ["楼主", "沙发", "板凳", "地板"]
    thread = THREAD.split('<div id="postlist">')[0] + '<div id="postlist">'
    thread += "".join(map(_post, names, floors, posts)) + "</div></div></body></html>"
    site.page("/thread", body=thread.encode("gbk"), content_type="text/html")

    [record] = await crawl(tmp_path, [site.url + "/thread"], extract=True, max_depth=0)

    assert record["main_text"] == "\n".join(posts)


async def test_a_questions_main_text_is_the_question_and_every_answer(site: Site, tmp_path):
    """Stack Exchange marks a question's and each answer's body up as a schema.org post's
    `text`, the same class under wrappers of their own ("question", "answer"): only the
    longest post was found. Every post is, in page order; the comments under them are not."""
    question = "I copy a list of lists and change one item of the copy, but the original too."
    answers = [
        "Slicing makes a shallow copy: the new outer list holds the same inner lists, so a"
        " change to one of them shows in both. Use copy.deepcopy, or copy each inner list.",
        "If the inner items are numbers only, a list comprehension is faster than deepcopy.",
    ]

    def post(wrapper: str, cell: str, text: str) -> str:
        return (
            f'<div class="{wrapper}"><div class="post-layout"><div class="votecell">12</div>'
            f'<div class="{cell}"><div class="s-prose js-post-body" itemprop="text"><p>{text}'
            '</p></div><div class="comments"><ul><li class="comment">See also the docs on the'
            " copy module, they explain it well.</li></ul></div></div></div></div>"
        )

    page = (
        '<html><body><div id="mainbar">'
        + post("question", "postcell", question)
        + '<div id="answers"><h2>2 Answers</h2>'
        + "".join(post("answer", "answercell", text) for text in answers)
        + "</div></div></body></html>"
    )

    assert await extracted(site, tmp_path, page) == "\n".join([question, *answers])


async def test_a_page_of_many_small_parts_in_its_main_gives_them_all(site: Site, tmp_path):
    """A Javadoc class page is its description, summaries and details in sections of their
    own, none much longer than the others: the best-scored one alone was found, a quarter
    of the page. Where it holds less than half, the page's <main> that holds the rest is
    the content; an article body the page names as such is not widened."""
    parts = [
        "A token bucket that refills at a fixed rate, one token a tick, up to its capacity.",
        "Creates a full bucket of the given capacity, refilled every given duration.",
        "Takes one token if there is one, and returns whether it took one.",
        "Takes one token if there is one. Never blocks, never throws an exception.",
    ]
    sections = "".join(
        f'<li><section><h2>Part {i}</h2><ul><li><div class="block{i}"><p>{text}</p>'
        "</div></li></ul></section></li>"
        for i, text in enumerate(parts)
    )
    page = f'<html><body><nav>Overview Package Class</nav><main><ul class="x">{sections}</ul>'
    page += "</main><footer>Copyright</footer></body></html>"

    main_text = await extracted(site, tmp_path, page)

    assert main_text == "\n".join(f"Part {i}\n{text}" for i, text in enumerate(parts))

    named = page.replace('class="block0"', 'class="article-body"')
    assert await extracted(site, tmp_path, named, "/named") == f"Part 0\n{parts[0]}"


def _markup_lookalike_page(rng: random.Random) -> str:
    """A page of paragraphs, items, quotes and headings of text full of what Markdown
    reads as markup, in code, emphasis and links side by side."""
    pieces = [*"ab xy 019*_`[]()<>&#+-=~!|\\:;.,'\"{}", "&amp;", "&lt;", "  ", "1. ", "- ", "# "]

    def inline() -> str:
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))).replace("<", "&lt;")
        tag = rng.choice(["code", "em", "b", "a", None, None])
        return (
            f'<a href="/l">{text}</a>' if tag == "a" else f"<{tag}>{text}</{tag}>" if tag else text
        )

    blocks = []
    for _ in range(rng.randint(1, 4)):
        inner = "".join(inline() for _ in range(rng.randint(1, 5)))
        shape = rng.choice(["<p>{}</p>", "<ul><li>{}</li></ul>", "<blockquote>{}</blockquote>"])
        blocks.append(rng.choice([shape, "<h2>{}</h2>", "<ol><li>{}</li></ol>"]).format(inner))
    return _article(INTRO + "".join(blocks))


def test_random_markdown_lookalikes_read_back_as_the_main_text():
    """Whatever the text looks like and however its spans touch, a CommonMark reader
    finds the main text's characters in the Markdown, in order (704 of 3,000 such
    pages came back with stray stars, backticks or a "!" that made an image)."""
    rng = random.Random(24)
    for _ in range(300):
        page = _markup_lookalike_page(rng)
        found = extract(LexborHTMLParser(page), "http://127.0.0.1/")
        read = "".join(text for _, text in commonmark_blocks(found.markdown))
        assert "".join(read.split()) == "".join(found.main_text.split()), page


async def test_code_keeps_its_comments_whatever_the_highlighter_calls_them(site: Site, tmp_path):
    """Highlighters mark a comment in code with a class (Prism's "token comment",
    rustdoc's "comment", highlight.js's "hljs-comment"): it is part of the code, not a
    page's comment thread, and was cut out of the code block."""
    body = (
        '<pre><code><span class="token comment"># the defaults</span>\n'
        'retries = 3  <span class="hljs-comment"># per host</span></code></pre>'
        '<p>and <code>Vec&lt;T&gt; { <span class="comment">/* private fields */</span> }'
        "</code>.</p>"
    )

    _, _, main_text = await read_back(site, tmp_path, body)

    assert "# the defaults\nretries = 3  # per host" in main_text
    assert "Vec<T> { /* private fields */ }" in main_text


async def test_a_single_page_apps_text_is_found_where_it_ships_it(site: Site, tmp_path):
    """A single-page app's body is an empty <div id="root"> until a script runs, which a
    crawler never does. Its text is in <noscript>, for such browsers, or in the
    articleBody of its JSON-LD: both gave an empty main text."""
    paragraphs = PARAGRAPHS[:2]
    noscript = (
        '<html><head><title>Bridge</title></head><body><div id="root"></div><noscript>'
        f"<h1>Bridge</h1><p>{paragraphs[0]}</p><p>{paragraphs[1]}</p></noscript>"
        "<script>start()</script></body></html>"
    )
    json_ld = json.dumps({"@type": "NewsArticle", "articleBody": "\n\n".join(paragraphs)})
    app = (
        f'<html><head><script type="application/ld+json">{json_ld}</script></head>'
        '<body><div id="app"><noscript>Please enable JavaScript.</noscript></div></body></html>'
    )
    teaser = app.replace('<div id="app">', f'<div id="app"><p>{paragraphs[0][:120]}</p>')
    site.page("/noscript", body=noscript)
    site.page("/app", body=app)
    site.page("/teaser", body=teaser)

    records = by_url(
        await crawl(
            tmp_path, [site.url + p for p in ("/noscript", "/app", "/teaser")], extract=True
        )
    )

    for path in ("/noscript", "/app", "/teaser"):
        assert records[site.url + path]["main_text"] == "\n".join(paragraphs), path
        assert records[site.url + path]["markdown"] == "\n\n".join(paragraphs), path


def _phpbb_post(number: int, author: str, text: str) -> str:
    """One post of a phpBB thread, as prosilver writes it: rows alternate bg1 and bg2."""
    subject = "Router drops every evening" if number == 1 else "Re: Router drops every evening"
    return (
        f'<div id="p{number}" class="post has-profile bg{2 - number % 2}"><div class="inner">'
        f'<dl class="postprofile"><dt><a href="/u/{author}">{author}</a></dt><dd>Posts: 12</dd>'
        f'</dl><div class="postbody"><div id="post_content{number}"><h3><a href="#p{number}">'
        f'{subject}</a></h3><p class="author">Post by <strong>{author}</strong> &raquo; Mon '
        f'Jan 13, 2025 8:0{number} pm</p><div class="content">{text}</div>'
        f'<div class="signature">Sent from my kitchen table, {author}</div></div></div></div></div>'
    )


async def test_a_class_that_starts_with_author_is_content(site: Site, tmp_path):
    """A post's "author" line is no part of it, but Open Journal Systems' submissions
    page is its "author_guidelines": a journal's page lost its main text."""
    page = _article(
        f"<p>{PARAGRAPHS[0]}</p>",
        f'<div class="author_guidelines"><h2>Guidelines</h2><p>{PARAGRAPHS[1]}</p></div>',
    )
    main_text = await extracted(site, tmp_path, page, "/submissions")

    assert main_text == "\n".join([PARAGRAPHS[0], "Guidelines", PARAGRAPHS[1]])


async def test_a_phpbb_threads_main_text_is_every_post_without_its_machinery(site: Site, tmp_path):
    """phpBB's posts alternate their row's class (bg1, bg2): only the posts of the top
    post's class were found, a thread's every other post. And each post's "Re:" subject,
    "Post by ... on ..." line and signature are no part of what was said."""
    posts = [*EN_THREAD_POSTS, "Thanks, channel 11 did it."]
    thread = (
        "<html><head><title>Router drops every evening - Home Network Forum</title></head><body>"
        '<div class="navbar"><a href="/">Board index</a> <a href="/f/3">Routers</a></div>'
        '<div id="page-body">'
        + "".join(_phpbb_post(n, a, t) for n, a, t in zip((1, 2, 3, 4), "abab", posts, strict=True))
        + "</div></body></html>"
    )
    main_text = await extracted(site, tmp_path, thread, "/viewtopic.php")

    assert main_text == "\n".join(posts)


async def test_a_recipes_ingredients_come_with_its_steps(site: Site, tmp_path):
    """A recipe is two lists: its steps, long enough to score, and its ingredients,
    items too short to. The steps were the main content, and the ingredients lost; a
    list is a part of the content, and the element holding it is taken when it scores
    half as well."""
    ingredients = ["1 cup red lentils", "1 onion, chopped", "2 cloves garlic", "1 tin tomatoes"]
    steps = [
        "Soften the onion and garlic in oil over a low heat, about ten minutes.",
        "Add the lentils, tomatoes and two cups of water, and simmer for twenty minutes.",
        "Season with salt, pepper and a squeeze of lemon, and serve with rice.",
    ]
    page = (
        "<html><head><title>Lentil stew - Kitchen</title></head><body>"
        '<div class="menu-bar"><a href="/">Kitchen</a> <a href="/soups">Soups</a></div>'
        '<div class="recipe"><h3>Ingredients</h3><ul>'
        + "".join(f"<li>{item}</li>" for item in ingredients)
        + "</ul><h3>Method</h3><ol>"
        + "".join(f"<li>{step}</li>" for step in steps)
        + '</ol></div><div class="popular"><a href="/a">Crispy potatoes</a></div></body></html>'
    )
    main_text = await extracted(site, tmp_path, page, "/stew")

    assert main_text == "\n".join(["Ingredients", *ingredients, "Method", *steps])


async def test_text_in_lines_between_brs_is_the_content_not_the_page_around_it(
    site: Site, tmp_path
):
    """A novel site's chapter is one <div> of lines between <br>s, no <p>: its lines
    scored for the <body>, which was taken whole, with the breadcrumb and the site's
    notice around the chapter; and a blank line between each two of the chapter's."""
    lines = [
        "雨下了整整一夜，客栈里的灯却一直没有熄，掌柜的坐在柜台后面打着算盘。",
        "三更时分，门外忽然传来一阵急促的敲门声，掌柜的放下算盘，提着灯笼走到门口。",
        "一个披着蓑衣的人站在雨里，斗笠压得很低，看不清脸，腰间挂着一柄长剑。",
    ]
    page = (
        "<html><head><title>第十二章 雨夜来客_山河旧梦</title></head><body>"
        '<div class="con_top"><a href="/">小说网</a> &gt; <a href="/book/">山河旧梦</a> &gt; '
        "第十二章 雨夜来客，本章字数：三千二百</div>"
        '<div id="content">' + "<br><br>".join("&nbsp;&nbsp;" + line for line in lines) + "</div>"
        '<div class="tip">提示：本站小说均来自网友上传，如有侵权请联系我们删除，'
        "请记住本站域名。</div>"
        "</body></html>"
    )
    main_text = await extracted(site, tmp_path, page, "/chapter")

    assert main_text == "\n".join(lines)


async def test_code_in_a_line_numbered_table_is_the_code_without_its_numbers(site: Site, tmp_path):
    """Pygments' tables (linenos="table", as Sphinx, Jekyll and Hexo sites use them) and
    code viewers, a row a line, put the line numbers in a column of their own: they were
    the first lines of the main text, or a number before each line of code."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    code = 'def greet(name):\n    """Say hello."""\n\n    return f"Hello, {name}"'
    pygments_table = highlight(code, PythonLexer(), HtmlFormatter(linenos="table"))
    viewer = '<table class="code">' + "".join(
        f'<tr><td class="num">{n}</td><td><pre>{line}</pre></td></tr>'
        for n, line in enumerate(code.replace("<", "&lt;").split("\n"), start=1)
    )
    viewer += "</table>"

    for body in (pygments_table, viewer):
        site.page("/", body=_article(f"<p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p>{body}"))
        [record] = await crawl(tmp_path, [site.url + "/"], extract=True, max_depth=0)

        assert record["main_text"] == "\n".join([*PARAGRAPHS[:2], code])
        assert record["markdown"].endswith(f"\n\n```\n{code}\n```")


def _discourse_post(number: int, author: str, text: str) -> str:
    """One post of a Discourse topic as its crawler view writes it: the replies are the
    schema.org comments of the topic's DiscussionForumPosting."""
    reply = (
        ' itemprop="comment" itemscope itemtype="http://schema.org/Comment"' if number > 1 else ""
    )
    return (
        f'<div id="post_{number}"{reply} class="topic-body crawler-post">'
        '<div class="crawler-post-meta"><span class="creator" itemprop="author">'
        f'<a href="/u/{author}"><span itemprop="name">{author}</span></a></span>'
        '<span class="crawler-post-infos"><time class="post-time">February 2, 2025, '
        f'9:1{number}am</time><span itemprop="position">{number}</span></span></div>'
        f'<div class="post" itemprop="text"><p>{text}</p></div></div>'
    )


async def test_a_discourse_topics_main_text_is_every_post_without_its_dates(site: Site, tmp_path):
    """Discourse marks a topic's replies up as schema.org comments, which were cut as a
    reader's comments under an article: the main text was the first post only, after
    its date and number ("February 2, 2025, 9:11am1")."""
    posts = [*EN_THREAD_POSTS, "Thanks, channel 11 did it."]
    page = (
        "<html><head><title>Router drops every evening - Support - Community</title></head>"
        '<body><header><a href="/">Community</a></header><div id="main-outlet" class="wrap">'
        '<div itemscope itemtype="http://schema.org/DiscussionForumPosting">'
        + "".join(
            _discourse_post(n, a, t) for n, a, t in zip((1, 2, 3, 4), "abab", posts, strict=True)
        )
        + "</div></div></body></html>"
    )
    article = _article(
        "".join(f"<p>{p}</p>" for p in PARAGRAPHS[:2]),
        '<div itemprop="comment"><p>A reader\'s comment under the article, long enough.</p></div>',
    )
    site.page("/t/router/12", body=page)
    site.page("/article", body=article)

    records = by_url(
        await crawl(tmp_path, [site.url + "/t/router/12", site.url + "/article"], extract=True)
    )

    assert records[site.url + "/t/router/12"]["main_text"] == "\n".join(posts)
    assert records[site.url + "/article"]["main_text"] == "\n".join(PARAGRAPHS[:2])


async def test_a_paragraph_in_a_div_beside_the_content_comes_with_it(site: Site, tmp_path):
    """A paragraph of prose in a <div> of its own beside the content (a snippet's
    description over its code, a summary over a table) is a paragraph, as a <p> there
    is: it was left out."""
    description = "A small decorator that retries a function, waiting longer each time."
    code = "\n".join(f"retry_{n} = make_retry(times={n}, delay_s=0.{n})" for n in range(1, 9))
    page = (
        "<html><head><title>retry.py - snippets</title></head><body>"
        '<div class="top"><a href="/">Snippets</a> <a href="/explore">Explore</a></div>'
        f'<div class="layout"><div class="description">{description}</div>'
        f'<div class="file"><pre>{code}</pre></div></div></body></html>'
    )
    main_text = await extracted(site, tmp_path, page, "/retry.py")

    assert main_text == f"{description}\n{code}"


async def test_markdown_links_resolve_against_the_base_the_crawl_follows_them_from(
    site: Site, tmp_path
):
    """Markdown's links are the record's links: resolved against the frozen base URL, as
    a browser resolves them (a javascript: <base> is none, backslashes are slashes, a
    tab inside is dropped), without the userinfo the crawl never keeps; a page whose
    <base> is mailto: has no relative link a reader can follow, and Markdown gives
    the text alone."""
    prose = "An article long enough to be the main content, whose links are written here: "
    links = '<a href="a.html">one</a>, <a href="/b.html">two</a> and '
    links += '<a href="mailto:x@y.z">mail</a>.'
    bases = {
        "/js/": "javascript:void(0)",
        "/slash/": "\\docs\\v2\\",
        "/tab/": "/do\tcs/",
        "/userinfo/": f"http://user:secret@{site.url.removeprefix('http://')}/private/",
        "/mailto/": "mailto:editor@example.com",
    }
    for path, base in bases.items():
        site.page(path, body=f'<base href="{base}">' + _article(f"<p>{prose}{links}</p>"))

    records = await crawl(tmp_path, [site.url + p for p in bases], extract=True, max_depth=0)

    markdown = {r["url"].removeprefix(site.url): r["markdown"] for r in records}
    followed = {r["url"].removeprefix(site.url): r["links"] for r in records}
    for path in ("/js/", "/slash/", "/tab/", "/userinfo/"):
        destinations = re.findall(r"\]\(([^)]*)\)", markdown[path])
        assert destinations[:2] == [u for u in followed[path] if "html" in u], path
        assert destinations[2] == "mailto:x@y.z"
        assert "secret" not in markdown[path]
    assert followed["/slash/"][0] == site.url + "/docs/v2/a.html"
    assert "[" not in markdown["/mailto/"].replace("[mail](mailto:x@y.z)", "")
    assert "one, two and [mail](mailto:x@y.z)." in markdown["/mailto/"]


async def test_a_notices_attachments_are_its_content(site: Site, tmp_path):
    """A Chinese notice ends with its attachments, each a paragraph that is a link to a
    file: being all link, they were left out as a list of stories is. A link to a
    document weighs half, so a paragraph of them stays, and one beside another link
    (a page's "Download PDF" and "Route map") still goes."""
    notice = "".join(
        f"<p>{line}</p>"
        for line in (
            "各学院：",
            "为深入推进创新创业教育改革，现将2024年项目申报工作有关事项通知如下，请各学院认真组织。",
            "学生于3月25日前登录管理系统在线填报，各学院于4月10日前完成初审并提交推荐汇总表。",
            "附件：",
            '<a href="/files/a.docx">1.项目申报书.docx</a>',
            '<a href="/files/b.XLSX?v=2">2.推荐项目汇总表.xlsx</a>',
            '<a href="/files/t.pdf">Download PDF timetable</a> <a href="/map">Route map</a>',
        )
    )

    main_text = await extracted(site, tmp_path, _article(notice))

    assert main_text.split("\n")[-2:] == ["1.项目申报书.docx", "2.推荐项目汇总表.xlsx"]


async def test_a_wechat_articles_calls_to_follow_and_credits_are_left_out(site: Site, tmp_path):
    body = "".join(
        f"<p><span>{line}</span></p>"
        for line in (
            "▼ 点击上方蓝字关注我们 ▼",
            "去年春天，我在阳台上种下了第一盆小葱，没想到一年下来，阳台上已经有了十几种蔬菜。",
            "新手最好从小葱、生菜、小白菜这些生长快、不挑环境的蔬菜开始，一个月左右就能吃上。",
            "- END -",
            "文字 | 林小园　图片 | 林小园",
            "编辑丨阿青",
            "长按识别二维码 关注周末生活家",
            "Please enable JavaScript for the best experience on our site.",
        )
    )

    main_text = await extracted(site, tmp_path, _article(body))

    assert main_text.split("\n") == [
        "去年春天，我在阳台上种下了第一盆小葱，没想到一年下来，阳台上已经有了十几种蔬菜。",
        "新手最好从小葱、生菜、小白菜这些生长快、不挑环境的蔬菜开始，一个月左右就能吃上。",
    ]


async def test_a_notebooks_code_cells_are_content_with_its_text_cells(site: Site, tmp_path):
    """An nbconvert page's text cells are of one class, its code cells of another
    ("cell text_cell", "cell code_cell"), each scored below the text's: they, their output
    too, are content, and the prompts beside them ("In [1]:") are not; an HTML comment
    between the cells (which raised TypeError) is no cell."""
    page = PAGES / "dev" / "notebook-nbconvert-classic"
    html = page.with_suffix(".html").read_text(encoding="utf-8")
    site.page("/nb.html", body=html.replace('<div class="cell ', '<!-- cell --><div class="cell '))

    records = await crawl(tmp_path, [f"{site.url}/nb.html"], extract=True)

    assert records[0]["main_text"] == page.with_suffix(".txt").read_text(encoding="utf-8").strip()


async def test_a_novel_sites_remember_our_domain_lines_among_a_chapters_are_left_out(
    site: Site, tmp_path
):
    """A novel site's chapter is lines between <br>s, among which the site puts its own
    ("天才一秒记住本站地址", "请记住本书首发域名", "手机用户请浏览...", "本章未完..."): they were
    the chapter's lines; the chapter's own stay, in its Markdown too."""
    lines = [
        "天才一秒记住本站地址：[顶点小说] https://www.ddxs.example 最快更新！无广告！",
        "天亮的时候，雾还没有散，渡口上只停着一条船，船夫蹲在船头抽旱烟。",
        "林远把包袱往肩上提了提，问：“老人家，过河多少钱？”",
        "请记住本书首发域名：www.biquge.example。笔趣阁手机版阅读网址：m.biquge.example",
        "船离了岸，林远回头望去，山路已经隐在雾里，什么也看不见了。",
        "本章未完，请点击下一页继续阅读",
        "手机用户请浏览m.ddxs.example阅读，更优质的阅读体验。",
    ]
    site.page("/12.html", body=f'<div id="content">{"<br><br>".join(lines)}</div>')

    records = await crawl(tmp_path, [f"{site.url}/12.html"], extract=True)

    chapter = [lines[1], lines[2], lines[4]]
    assert records[0]["main_text"].split("\n") == chapter
    assert records[0]["markdown"].split("  \n\n") == chapter


async def test_a_list_pages_main_text_is_its_list_of_headlines(site: Site, tmp_path):
    """A news site's list page ("滚动新闻") has no paragraph: its content is the list of
    headlines, each a link, which was left out as links are; its main text was the site's
    top bar and sidebar labels. Its menu and its sidebar's short list are not headlines."""
    headlines = [
        "多地启动防汛四级应急响应 做好强降雨防范",
        "高考临近 各地加强考点周边环境整治",
        "铁路部门端午假期预计发送旅客超六千万人次",
        "夏粮收购陆续展开 小麦收购价格总体平稳",
        "全国首条跨海高铁桥梁主体工程完工",
        "新一批国家级非物质文化遗产代表性项目名录公示",
    ]
    items = "".join(
        f'<li><span class="time">06-03 10:{i}0</span> <a href="/n/{i}.html">{h}</a></li>'
        for i, h in enumerate(headlines)
    )
    menu = "".join(f'<li><a href="/{c}/">{c}</a></li>' for c in ("首页", "国内", "国际", "财经"))
    page = (
        f'<html><body><div class="top"><a href="/">某某网首页</a> 2024年6月3日</div><ul>{menu}</ul>'
        f'<div class="left"><div class="crumb">当前位置：首页 &gt; 国内</div>'
        f'<ul class="news">{items}</ul></div><div class="right"><h3>热点排行</h3>'
        '<ol><li><a href="#">端午出行指南</a></li></ol></div></body></html>'
    )

    main_text = await extracted(site, tmp_path, page)

    assert main_text.split("\n") == [f"06-03 10:{i}0 {h}" for i, h in enumerate(headlines)]


async def test_markdown_of_tables_nested_lists_code_and_chinese_punctuation_reads_back(
    site: Site, tmp_path
):
    """What a CommonMark reader (markdown-it-py, GFM tables) finds in the Markdown is the
    main text, block for block: Chinese punctuation and look-alikes of markup, code
    holding backticks, lists three deep, and a table whose cells hold pipes, backticks
    and brackets."""
    body = (
        "<p>中文标点：“引号”、《书名》【方括号】（圆括号）——破折号……！？* 星号 # 井号 1. 数字。</p>"
        "<p>Use <code>a`b</code>, <code>``x``</code> and <code>`</code> here.</p>"
        "<pre><code>line with ``` three\n  indented `tick`\n</code></pre>"
        "<ul><li>第一项<ul><li>嵌套一<ol><li>更深 1</li><li>更深 2</li></ol></li>"
        "<li>嵌套二：<code>x*y</code></li></ul></li><li>Second <em>item</em> | pipe</li></ul>"
        "<table><tr><th>名称</th><th>说明 | 竖线</th></tr>"
        "<tr><td>a`b`c</td><td>“中文”，标点；*星*</td></tr>"
        "<tr><td>[x](y)</td><td>&lt;b&gt;</td></tr></table>"
        "<p>1) 不是列表 + 也不是 &gt; 引用</p>"
    )

    markdown, blocks, main_text = await read_back(site, tmp_path, body)

    lines = main_text.split("\n")
    assert blocks == [
        ("p", lines[0]),
        ("p", lines[1]),
        ("p", "Use a`b, ``x`` and ` here."),
        ("pre", "line with ``` three\n  indented `tick`"),
        ("ul/li/p", "第一项"),
        ("ul/li/ul/li/p", "嵌套一"),
        ("ul/li/ul/li/ol/li/p", "更深 1"),
        ("ul/li/ul/li/ol/li/p", "更深 2"),
        ("ul/li/ul/li/p", "嵌套二：x*y"),
        ("ul/li/p", "Second item | pipe"),
        *[("table/thead/tr/th", cell) for cell in lines[11].split("\t")],
        *[("table/tbody/tr/td", cell) for line in lines[12:14] for cell in line.split("\t")],
        ("p", "1) 不是列表 + 也不是 > 引用"),
    ]
    assert blocks[1][1].startswith("中文标点：“引号”")
    assert blocks[1][1].endswith("* 星号 # 井号 1. 数字。")
    assert "\\*" in markdown and "\\|" in markdown
