"""No connection to a non-public address the user did not name (server-side request forgery).

Every address here is in 127.0.0.0/8: the seed is served on 127.0.0.1, and the
"other" host, which stands for an intranet or cloud-metadata server, listens on
127.0.0.2 and counts the TCP connections it accepts. Classification of other
addresses is tested on literals, without connecting anywhere.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from crawler.netguard import (
    AddressGuard,
    BlockedAddress,
    GuardedResolver,
    non_public_kind,
    parse_resolve,
)
from tests.conftest import Site, by_url, crawl, html
from tests.test_cli import assert_one_line_error, run_cli_async, run_main


class Listener:
    """A TCP server on 127.0.0.2 that counts the connections it accepts, and serves a page."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> Listener:
        self._server = await asyncio.start_server(self._serve, "127.0.0.2", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        body = html("inside", body="secret").encode()
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def url(self, host: str = "127.0.0.2") -> str:
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
async def inside() -> AsyncIterator[Listener]:
    listener = await Listener().start()
    yield listener
    await listener.stop()


# -- the guard in a crawl ---------------------------------------------------------------


async def test_a_link_to_an_address_no_seed_names_is_blocked_without_a_connection(
    site: Site, inside: Listener, tmp_path
):
    site.page("/", "index", [f"{inside.url()}/admin"])

    records = by_url(await crawl(tmp_path, [site.url + "/"], any_host=True))

    assert records[f"{inside.url()}/admin"]["error"] == "blocked_address"
    assert records[f"{inside.url()}/admin"]["status"] is None
    assert inside.connections == 0


async def test_a_redirect_to_such_an_address_is_blocked(site: Site, inside: Listener, tmp_path):
    site.page("/", "index", ["/go"])
    site.redirect("/go", f"{inside.url()}/latest/meta-data/")

    records = by_url(await crawl(tmp_path, [site.url + "/"], any_host=True))

    assert records[f"{site.url}/go"]["error"] == "blocked_address"
    assert inside.connections == 0


async def test_a_redirect_to_such_an_address_is_blocked_with_robots_txt_on(
    site: Site, inside: Listener, tmp_path
):
    site.page("/", "index", ["/go"])
    site.redirect("/go", f"{inside.url()}/latest/meta-data/")

    records = by_url(await crawl(tmp_path, [site.url + "/"], any_host=True, ignore_robots=False))

    assert records[f"{site.url}/go"]["error"] == "blocked_address"
    assert inside.connections == 0


async def test_a_host_name_that_resolves_to_such_an_address_is_blocked(
    site: Site, inside: Listener, tmp_path
):
    site.page("/", "index", [f"{inside.url('metadata.test')}/"])

    records = by_url(
        await crawl(tmp_path, [site.url + "/"], any_host=True, resolve=("metadata.test:127.0.0.2",))
    )

    assert records[f"{inside.url('metadata.test')}/"]["error"] == "blocked_address"
    assert inside.connections == 0


async def test_robots_txt_of_a_blocked_host_is_not_fetched_either(
    site: Site, inside: Listener, tmp_path
):
    site.page("/", "index", [f"{inside.url()}/a", f"{inside.url()}/b"])

    records = by_url(
        await crawl(tmp_path, [site.url + "/"], any_host=True, ignore_robots=False, retries=2)
    )

    assert records[f"{inside.url()}/a"]["error"] == "blocked_address"
    assert records[f"{inside.url()}/b"]["error"] == "blocked_address"
    assert inside.connections == 0


async def test_allow_private_addresses_lifts_the_guard(site: Site, inside: Listener, tmp_path):
    site.page("/", "index", [f"{inside.url()}/", f"{inside.url('metadata.test')}/"])

    records = by_url(
        await crawl(
            tmp_path,
            [site.url + "/"],
            any_host=True,
            allow_private_addresses=True,
            resolve=("metadata.test:127.0.0.2",),
        )
    )

    assert records[f"{inside.url()}/"]["title"] == "inside"
    assert records[f"{inside.url('metadata.test')}/"]["title"] == "inside"
    assert inside.connections >= 1


async def test_a_seed_named_by_host_name_is_crawled_but_no_other_name_leads_to_its_address(
    site: Site, tmp_path
):
    seed = f"http://seed.test:{site.port}"
    alias = f"http://alias.test:{site.port}"  # the same address, under a name no seed has
    site.page("/", "index", ["/a", f"{alias}/b"])
    site.page("/a", "a")
    site.page("/b", "b")

    records = by_url(
        await crawl(
            tmp_path,
            [seed + "/"],
            any_host=True,
            resolve=("seed.test:127.0.0.1", f"alias.test:{site.port}:127.0.0.1"),
        )
    )

    assert records[f"{seed}/a"]["title"] == "a"
    assert records[f"{alias}/b"]["error"] == "blocked_address"
    assert site.count("/b") == 0


async def test_blocked_urls_are_counted_in_the_summary_and_the_flag_is_named_once(
    site: Site, inside: Listener, tmp_path
):
    site.page("/", "index", [f"{inside.url()}/{n}" for n in range(3)])
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(site.url + "/\n")
    stats = tmp_path / "stats.json"

    code, _, err = await run_cli_async(
        str(seeds), "-o", str(tmp_path / "out.jsonl"), "--any-host", "--stats", str(stats)
    )

    assert code == 0
    assert json.loads(stats.read_text())["errors"] == {"blocked_address": 3}
    assert "blocked_address 3" in err
    assert err.count("--allow-private-addresses") == 1
    assert inside.connections == 0


def test_a_bad_resolve_entry_is_one_line(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    assert_one_line_error(run_main(str(seeds), "--resolve", "host.test:nowhere"), "--resolve")
    assert_one_line_error(
        run_main(str(seeds), "--resolve", "a%b.test:127.0.0.1"), "'a%b.test' is not a host name"
    )


# -- the rule, without connecting -------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "shared (CGNAT)"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "private"),  # documentation
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fd00::1", "private"),
        ("fe80::1", "link-local"),
        ("ff02::1", "multicast"),
        ("::ffff:10.0.0.1", "private"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link-local"),
        ("::127.0.0.1", "loopback"),  # IPv4-compatible
        ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 of 169.254.169.254
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("64:ff9b:1::1", "private"),  # local-use NAT64
        ("2001:db8::1", "private"),  # documentation
    ],
)
def test_non_public_addresses_are_named_by_kind(address: str, kind: str) -> None:
    assert non_public_kind(address) == kind


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"],
)
def test_public_addresses_pass(address: str) -> None:
    assert non_public_kind(address) is None


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("example.test:127.0.0.2", ("example.test", None, "127.0.0.2")),
        ("Example.TEST:8080:127.0.0.2", ("example.test", 8080, "127.0.0.2")),
        ("v6.test:443:[::1]", ("v6.test", 443, "::1")),
        ("v6.test:::1", ("v6.test", None, "::1")),
        # as the crawl's URLs name the host: an entry in Unicode never matched one
        ("中文.中国:127.0.0.2", ("xn--fiq228c.xn--fiqs8s", None, "127.0.0.2")),
        ("ＷＷＷ．例子．com.:80:127.0.0.2", ("www.xn--fsqu00a.com", 80, "127.0.0.2")),
    ],
)
def test_resolve_entries_are_host_port_address(entry: str, parsed: tuple) -> None:
    assert parse_resolve(entry) == parsed


async def test_a_resolve_entry_for_a_chinese_host_name_is_where_its_urls_go(site: Site, tmp_path):
    # --resolve 中文.中国:ADDR was kept in Unicode and never matched the crawl's Punycode
    # host: the link failed with connection_error (DNS), as if the flag were not there.
    site.page("/", "index", [f"http://中文.中国:{site.port}/页"])
    site.page("/页", "a Chinese host's page")

    records = by_url(
        await crawl(
            tmp_path,
            [site.url + "/"],
            allow_host=("中文.中国",),
            resolve=("中文.中国:127.0.0.1",),
            allow_private_addresses=True,  # the guard's say is not what this test is about
        )
    )

    assert records[f"http://xn--fiq228c.xn--fiqs8s:{site.port}/%E9%A1%B5"]["title"] == (
        "a Chinese host's page"
    )


class Answers(AbstractResolver):
    """A resolver that gives each answer in turn, as a rebinding DNS server does."""

    def __init__(self, *addresses: str) -> None:
        self._addresses = list(addresses)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        address = self._addresses.pop(0)
        result: ResolveResult = {
            "hostname": host,
            "host": address,
            "port": port,
            "family": socket.AF_INET,
            "proto": 0,
            "flags": 0,
        }
        return [result]

    async def close(self) -> None:
        pass


async def test_dns_rebinding_to_a_private_address_is_blocked_at_the_second_lookup() -> None:
    resolver = GuardedResolver(Answers("93.184.216.34", "127.0.0.2"), AddressGuard([]))

    assert [r["host"] for r in await resolver.resolve("rebind.test", 80)] == ["93.184.216.34"]
    with pytest.raises(BlockedAddress):
        await resolver.resolve("rebind.test", 80)


async def test_a_seed_name_is_pinned_to_its_first_addresses() -> None:
    guard = AddressGuard(["http://intranet.test/"])
    resolver = GuardedResolver(Answers("127.0.0.1", "127.0.0.1", "127.0.0.3"), guard)

    await resolver.resolve("intranet.test", 80)
    assert [r["host"] for r in await resolver.resolve("intranet.test", 443)] == ["127.0.0.1"]
    with pytest.raises(BlockedAddress):  # it moved to an address no seed had
        await resolver.resolve("intranet.test", 80)
    guard.check_socket("127.0.0.1")  # the seed's address itself stays allowed
    with pytest.raises(BlockedAddress):
        guard.check_socket("127.0.0.3")


async def test_an_address_refused_before_a_seed_name_pins_it_is_allowed_after() -> None:
    guard = AddressGuard(["http://intranet.test/"])
    for _ in range(2):  # the second answer is the remembered one
        with pytest.raises(BlockedAddress):
            guard.check_socket("10.0.0.5")
        guard.check_socket("93.184.216.34")

    await GuardedResolver(Answers("10.0.0.5"), guard).resolve("intranet.test", 80)

    guard.check_socket("10.0.0.5")
    guard.check_socket("93.184.216.34")
