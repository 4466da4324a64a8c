"""The kinds of error a record's `error` field can hold: part of the output format.

Each is a `str` (an `ErrorKind` compares equal to its value, and is written as
it), so `page.error == "timeout"` and `page.error == ErrorKind.TIMEOUT` agree.
The values never change; a new kind is a change to the output format, and the
README's table of record fields lists them all.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    """Why a URL has no usable response, or what went wrong with it after."""

    # The fetch: no response, or none that could be read.
    TIMEOUT = "timeout"  # --timeout passed, or the connection stalled
    CONNECTION_ERROR = "connection_error"  # refused, reset, DNS failed
    INVALID_RESPONSE = "invalid_response"  # not HTTP as the client reads it
    DECODING_ERROR = "decoding_error"  # a Content-Encoding (or a gzipped sitemap) that fails
    SSL_ERROR = "ssl_error"  # TLS handshake or certificate
    PROXY_ERROR = "proxy_error"  # the --proxy failed or refused
    BLOCKED_ADDRESS = "blocked_address"  # the host resolves to an address the guard refuses
    # Redirects.
    TOO_MANY_REDIRECTS = "too_many_redirects"  # past --max-redirects
    INVALID_REDIRECT = "invalid_redirect"  # a Location that is no http(s) URL
    # robots.txt.
    ROBOTS_DISALLOWED = "robots_disallowed"
    ROBOTS_UNREACHABLE = "robots_unreachable"  # RFC 9309: assume a full disallow
    # Retries.
    RETRY_AFTER_TOO_LONG = "retry_after_too_long"  # past --max-retry-after
    # Sitemaps (--sitemaps).
    SITEMAP_INVALID = "sitemap_invalid"
    SITEMAP_TOO_LARGE = "sitemap_too_large"
    # The page's HTML: read, but only with its markup bounded (crawler/htmlguard.py).
    HTML_TOO_COMPLEX = "html_too_complex"
    # The crawler's own side: the page was fetched, what came after failed.
    HOOK_FAILED = "hook_failed"  # a hook raised, or returned what a record cannot hold
    INTERNAL_ERROR = "internal_error"  # a bug in the crawler (logged with its traceback)


# The errors a page may have though its response came whole: it was fetched, and what
# came after (its HTML's bounds, a hook, a bug of ours) failed. With any other, there is
# no response, or its body is not the server's whole answer.
AFTER_THE_FETCH = frozenset(
    [ErrorKind.HTML_TOO_COMPLEX, ErrorKind.HOOK_FAILED, ErrorKind.INTERNAL_ERROR]
)
