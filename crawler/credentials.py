"""A seed's credentials (http://user:password@host/): where they go, and where they don't.

Browsers take a URL's userinfo out of the request and send it as an Authorization
header, and curl and wget send it as Basic credentials to the URL's host. The crawl
does the same for its seeds: the user:password of a seed goes, as `Authorization:
Basic`, to the seed's origin (scheme, host and port) and to no other, so a link or a
redirect to another host, or to the same host over the other scheme, never carries it.

Every URL the crawl keeps is the URL without its userinfo: records, links, the visited
set, the state, WARC-Target-URI and the CDXJ index, the report and the dashboard. A link
with a user:password of its own is the same page as without (crawler.urls.canonical_links),
and its credentials are not sent: only the user's seeds speak for the user.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from urllib.parse import unquote

from crawler.config import ConfigError
from crawler.urls import origin_of, without_userinfo


def seed_credentials(seeds: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """`seeds` (canonical URLs) without their userinfo, and the Authorization header to
    send to each origin that a seed gave credentials for."""
    urls: list[str] = []
    authorizations: dict[str, str] = {}
    for seed in seeds:
        url = without_userinfo(seed)
        urls.append(url)
        if url == seed:
            continue
        start = seed.find("//") + 2
        userinfo = seed[start : seed.rindex("@", start, seed.find("/", start))]
        user, _, password = userinfo.partition(":")
        # Percent-decoded, then UTF-8, as browsers send a URL's user name and password.
        credentials = f"{unquote(user)}:{unquote(password)}".encode()
        authorization = "Basic " + base64.b64encode(credentials).decode("ascii")
        origin = origin_of(url)
        if authorizations.setdefault(origin, authorization) != authorization:
            raise ConfigError(f"two seeds give {origin} different user names or passwords")
    return urls, authorizations
