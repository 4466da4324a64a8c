"""SOCKS5 proxies. Under socks5://, host names are resolved here, by the crawl's own
resolver, so the address guard and --resolve apply, and the proxy is handed the address
checked; under socks5h://, the proxy resolves them, and only it sees where they lead.
Either way, responses are read by the crawl's protocol (crawler.framing).

aiohttp-socks would resolve the name in the SOCKS library, out of the guard's sight: a
link to a name that resolves to 127.0.0.1 or 10.0.0.5 went through the proxy to it.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

from aiohttp import ClientConnectorError
from aiohttp.abc import AbstractResolver
from aiohttp.client_proto import ResponseHandler
from aiohttp_socks import ProxyConnector
from python_socks.async_.asyncio.v2 import Proxy

from crawler.framing import BrowserFramedResponseHandler
from crawler.netguard import BlockedAddress


class _StreamHandler(BrowserFramedResponseHandler):
    """The crawl's protocol on a stream the SOCKS library opened; it keeps the stream's
    writer, whose collection would close the transport (Python 3.11.5 and later)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter) -> None:
        super().__init__(loop)
        self._writer = writer


class SocksConnector(ProxyConnector):
    """aiohttp-socks' SOCKS5 connector. With a `resolver` (socks5://), it hands the proxy
    the address that resolver gives, not the name; TLS still names the host."""

    def __init__(self, *, resolver: AbstractResolver | None, **options: Any) -> None:
        super().__init__(rdns=resolver is None, **options)
        self._names = resolver

    async def _wrap_create_connection(
        self, *args: Any, req: Any, **kwargs: Any
    ) -> tuple[asyncio.Transport, ResponseHandler]:
        try:
            return await super()._wrap_create_connection(*args, req=req, **kwargs)
        except BlockedAddress as exc:  # as aiohttp hands back the guard's refusal
            raise ClientConnectorError(req.connection_key, exc) from exc

    async def _connect_via_proxy(
        self,
        host: str,
        port: int,
        ssl: ssl.SSLContext | None = None,
        timeout: float | None = None,
    ) -> tuple[asyncio.Transport, ResponseHandler]:
        destination = host
        if self._names is not None:
            answers = await self._names.resolve(host, port, socket.AF_UNSPEC)
            if not answers:
                raise OSError(f"{host} has no address")
            # IPv4 first, as the SOCKS library chose: a proxy may have no IPv6 route
            ipv4 = [answer for answer in answers if answer["family"] == socket.AF_INET]
            destination = (ipv4 or answers)[0]["host"]
        proxy = Proxy(
            proxy_type=self._proxy_type,
            host=self._proxy_host,
            port=self._proxy_port,
            username=self._proxy_username,
            password=self._proxy_password,
            rdns=self._rdns,
        )
        stream = await proxy.connect(dest_host=destination, dest_port=port, timeout=timeout)
        try:
            if ssl is not None:
                stream = await stream.start_tls(hostname=host, ssl_context=ssl)
        except BaseException:
            await stream.close()
            raise
        transport: Any = stream.writer.transport
        protocol = _StreamHandler(self._loop, stream.writer)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        return transport, protocol
