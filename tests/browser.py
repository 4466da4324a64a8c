"""Debian's chromium, headless, driven through the DevTools protocol (aiohttp's
websocket client): the dashboard's, the report's and the WACZ replay's tests."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from tests.archive_tools import chromium

FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "--window-size=1280,2000",
)


class Tab:
    """One page: evaluate JavaScript in it, screenshot it, and collect its errors."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._loaded = asyncio.Event()
        self.errors: list[str] = []  # console errors, uncaught exceptions, failed loads
        self.requested: list[str] = []  # every URL the page asked for
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data:
                future = self._replies.pop(data["id"])
                if "error" in data:
                    future.set_exception(RuntimeError(data["error"]["message"]))
                else:
                    future.set_result(data["result"])
                continue
            method, params = data.get("method"), data.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] == "error":
                self.errors.append(" ".join(str(a.get("value", a)) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                self.errors.append(params["exceptionDetails"]["text"])
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                self.errors.append(params["entry"]["text"])
            elif method == "Network.requestWillBeSent":
                self.requested.append(params["request"]["url"])
            elif method == "Page.loadEventFired":
                self._loaded.set()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        message_id = next(self._ids)
        future = self._replies[message_id] = asyncio.get_running_loop().create_future()
        await self._ws.send_str(json.dumps({"id": message_id, "method": method, "params": params}))
        return await asyncio.wait_for(future, 30)

    async def open(self, url: str) -> None:
        for domain in ("Page", "Runtime", "Log", "Network"):
            await self.send(f"{domain}.enable")
        self._loaded.clear()
        await self.send("Page.navigate", url=url)
        await asyncio.wait_for(self._loaded.wait(), 30)

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        reply = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in reply:
            raise AssertionError(reply["exceptionDetails"]["text"])
        return reply["result"].get("value")

    async def until(self, condition: str, timeout_s: float = 20) -> Any:
        """Wait, in the page, until the expression `condition` is truthy; its value."""
        return await self.evaluate(
            f"""new Promise((resolve, reject) => {{
                const deadline = Date.now() + {timeout_s * 1000};
                const check = () => {{
                    const value = ({condition});
                    if (value) resolve(value);
                    else if (Date.now() > deadline) reject(new Error({json.dumps(condition)}));
                    else setTimeout(check, 50);
                }};
                check();
            }})"""
        )

    async def figures(self) -> dict[str, str]:
        """The text of every element with a data-figure attribute, by that attribute."""
        figures: dict[str, str] = await self.evaluate(
            "Object.fromEntries([...document.querySelectorAll('[data-figure]')]"
            ".map(e => [e.dataset.figure, e.textContent]))"
        )
        return figures

    async def drawn_charts(self, boxes: str) -> dict[str, bool]:
        """For each element matching the selector `boxes`, by id: does it hold an SVG
        chart with a size, and bars or a line in it?"""
        drawn: dict[str, bool] = await self.evaluate(
            f"Object.fromEntries([...document.querySelectorAll({json.dumps(boxes)})].map(box => {{"
            "  const svg = box.querySelector('svg'), size = svg && svg.getBoundingClientRect();"
            "  const marks = svg ? svg.querySelectorAll('rect.bar, path.line').length : 0;"
            "  return [box.id, !!svg && size.width > 0 && size.height > 0 && marks > 0];"
            "}))"
        )
        return drawn

    async def width_in(self, viewport_px: int) -> int:
        """The page's width (the document's scrollWidth) in a viewport `viewport_px`
        wide, as a phone's: more than that is a page the reader scrolls sideways."""
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=viewport_px,
            height=740,
            deviceScaleFactor=1,
            mobile=True,
        )
        width: int = await self.evaluate(
            "new Promise(r => requestAnimationFrame(() => r(document.documentElement.scrollWidth)))"
        )
        return width

    async def screenshot(self, path: Path) -> bytes:
        reply = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        png = base64.b64decode(reply["data"])
        path.write_bytes(png)
        return png

    async def close(self) -> None:
        self._reader.cancel()
        await self._ws.close()


class Chromium:
    """A headless chromium of the test's own (its own profile directory), stopped after."""

    def __init__(self, profile: Path) -> None:
        self._profile = profile
        self._process: asyncio.subprocess.Process | None = None
        self._session: aiohttp.ClientSession | None = None
        self._endpoint = ""

    async def __aenter__(self) -> Chromium:
        self._process = await asyncio.create_subprocess_exec(
            chromium(),
            *FLAGS,
            f"--user-data-dir={self._profile}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert self._process.stderr is not None
        while True:
            line = (await asyncio.wait_for(self._process.stderr.readline(), 30)).decode()
            if not line:
                raise RuntimeError("chromium exited before it listened")
            found = re.search(r"DevTools listening on ws://([^/]+)/", line)
            if found:
                self._endpoint = f"http://{found[1]}"
                break
        self._drain = asyncio.create_task(self._process.stderr.read())
        self._session = aiohttp.ClientSession()
        return self

    async def new_tab(self) -> Tab:
        assert self._session is not None
        async with self._session.put(f"{self._endpoint}/json/new?about:blank") as response:
            target = await response.json()
        ws = await self._session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        return Tab(ws)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await self._process.wait()
            self._drain.cancel()
