"""Headless Chromium driven over the DevTools protocol (aiohttp's WebSocket client; no browser
download, no driver): open a local file (scripts on or off), run JavaScript in it, click and type
as a person does, time how long it takes to show, take a screenshot, let it download into a folder.
Used by the tests and by bench/report_bench.py and scripts/screenshots.py."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


class Page:
    """One tab of a headless Chromium started for it; use as ``async with Page(...) as page``.
    ``javascript=False`` opens the file with the page's scripts disabled (DevTools' own
    ``evaluate`` still runs); ``size`` is the window's CSS pixels."""

    def __init__(self, path: Path, profile: Path, downloads: Path | None = None, *,
                 javascript: bool = True, size: tuple[int, int] = (1280, 900)) -> None:
        self.path = path
        self.profile = profile
        self.downloads = downloads
        self.javascript = javascript
        self.size = size
        self._ids = itertools.count(1)

    async def __aenter__(self) -> "Page":
        assert CHROMIUM, "CI must have Chromium: .ci/run installs Debian's chromium package"
        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             "--hide-scrollbars", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = await asyncio.get_running_loop().run_in_executor(None, self._endpoint)
        self.http = aiohttp.ClientSession()
        self.ws = await self.http.ws_connect(url, max_msg_size=0)
        if self.downloads is not None:
            await self.send("Browser.setDownloadBehavior", behavior="allow",
                            downloadPath=str(self.downloads), eventsEnabled=True)
        target = await self.send("Target.createTarget", url="about:blank")
        attached = await self.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        self.session = attached["sessionId"]
        width, height = self.size
        await self.send("Emulation.setDeviceMetricsOverride", self.session, width=width, height=height,
                        deviceScaleFactor=1, mobile=False)
        if not self.javascript:
            await self.send("Emulation.setScriptExecutionDisabled", self.session, value=True)
        await self.goto(self.path.as_uri())
        return self

    async def goto(self, url: str) -> None:
        """Navigate to ``url`` (a file, or a fragment of the page shown) and wait for it to load."""
        await self.send("Page.navigate", self.session, url=url)
        expected = json.dumps(url)
        for _ in range(1200):  # until the page (not the blank one before it) has loaded
            try:
                if await self.evaluate(f"location.href === {expected} && document.readyState === 'complete'"):
                    return
            except RuntimeError:  # asked while the page was being replaced
                pass
            await asyncio.sleep(0.05)
        raise RuntimeError(f"Chromium did not load {url}")

    def _endpoint(self) -> str:
        for line in self.process.stderr:
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                return found.group(1)
        raise RuntimeError("Chromium did not start its DevTools endpoint")

    async def __aexit__(self, *exc: Any) -> None:
        await self.ws.close()
        await self.http.close()
        self.process.terminate()
        self.process.wait(timeout=30)

    async def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        message_id = next(self._ids)
        message = {"id": message_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        await self.ws.send_str(json.dumps(message))
        while True:
            reply = json.loads((await self.ws.receive(timeout=120)).data)
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (awaited when it is a promise)."""
        result = await self.send("Runtime.evaluate", self.session, expression=expression,
                                 returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def shown_after(self) -> float:
        """Milliseconds from the start of the page's navigation to its first frame drawn after
        the load event (style and layout of the whole page included): how long it took to open.
        Needs the page's scripts on (the frame is awaited by a callback)."""
        return await self.evaluate(
            "new Promise(done => requestAnimationFrame(() => setTimeout(() => done(performance.now()))))")

    async def click(self, selector: str) -> None:
        """Click the first element matching ``selector`` with the mouse, as a person does (works
        with the page's scripts disabled): scrolled into view, pressed at its centre."""
        box = await self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)}); if (!el) return null;"
            " el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        if box is None:
            raise AssertionError(f"nothing matches {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", self.session, type=kind, x=box[0], y=box[1],
                            button="left", clickCount=1)
        await self.settle()

    async def settle(self) -> None:
        """Wait for the page to draw what the last input changed (a frame with scripts on; with
        them off, where no callback of ours can run, a short pause)."""
        if self.javascript:
            await self.evaluate("new Promise(done => requestAnimationFrame(() => setTimeout(done)))")
        else:
            await asyncio.sleep(0.3)

    async def type(self, selector: str, text: str) -> None:
        """Focus the field matching ``selector``, clear it and type ``text`` into it."""
        await self.evaluate(f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
                            " el.focus(); el.select && el.select(); })()")
        await self.send("Input.insertText", self.session, text=text)
        if not text:
            await self.send("Input.dispatchKeyEvent", self.session, type="keyDown", key="Backspace",
                            windowsVirtualKeyCode=8)
        await self.settle()

    async def visible(self, selector: str) -> list[str]:
        """The text of every element matching ``selector`` that is shown (not hidden by CSS or
        by an ancestor)."""
        return await self.evaluate(
            f"[...document.querySelectorAll({json.dumps(selector)})]"
            ".filter(el => el.checkVisibility()).map(el => el.textContent.trim())")

    async def screenshot(self, path: Path, full_page: bool = False) -> None:
        """A PNG of the window (``full_page``: of the whole page's height, up to 16,000 px)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = await self.evaluate("Math.min(16000, document.documentElement.scrollHeight)")
            params |= {"captureBeyondViewport": True,
                       "clip": {"x": 0, "y": 0, "width": self.size[0], "height": height, "scale": 1}}
        shot = await self.send("Page.captureScreenshot", self.session, **params)
        path.write_bytes(base64.b64decode(shot["data"]))
