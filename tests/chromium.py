"""Headless Chromium driven over the DevTools protocol (aiohttp's WebSocket client; no browser
download, no driver): open a local file, run JavaScript in it, let it download into a folder."""

from __future__ import annotations

import asyncio
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
    """One tab of a headless Chromium started for it; use as ``async with Page(...) as page``."""

    def __init__(self, path: Path, profile: Path, downloads: Path | None = None) -> None:
        self.path = path
        self.profile = profile
        self.downloads = downloads
        self._ids = itertools.count(1)

    async def __aenter__(self) -> "Page":
        assert CHROMIUM, "CI must have Chromium: .ci/run installs Debian's chromium package"
        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = await asyncio.get_running_loop().run_in_executor(None, self._endpoint)
        self.http = aiohttp.ClientSession()
        self.ws = await self.http.ws_connect(url, max_msg_size=0)
        if self.downloads is not None:
            await self.send("Browser.setDownloadBehavior", behavior="allow",
                            downloadPath=str(self.downloads), eventsEnabled=True)
        target = await self.send("Target.createTarget", url=self.path.as_uri())
        attached = await self.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        self.session = attached["sessionId"]
        url = json.dumps(self.path.as_uri())
        for _ in range(400):  # until the page (not the blank one before it) has loaded
            try:
                if await self.evaluate(f"location.href === {url} && document.readyState === 'complete'"):
                    return self
            except RuntimeError:  # asked while the page was being replaced
                pass
            await asyncio.sleep(0.05)
        raise RuntimeError(f"Chromium did not load {self.path}")

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
            reply = json.loads((await self.ws.receive(timeout=60)).data)
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
