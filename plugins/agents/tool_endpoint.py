"""The event's tools over MCP, for agents that run their own tool loop.

One streamable-HTTP MCP endpoint per run, on 127.0.0.1 and a free port, with one unguessable path
per conversation (``/d/<random token>/mcp``). A call there goes through the conversation's
:class:`~intellagent.session.ToolBox`: arguments checked against the tool's schema, run on that
conversation's database under the tool's timeout, recorded; a tool's refusal or crash comes back
as ``is_error``. Calls are taken only while IntellAgent waits for the agent's answer (so every
write shows in a turn of the transcript), never after a terminal tool; once the conversation
ends its path answers 404. A pre-flight conversation gets a throwaway copy of the seed database.

The ``mcp`` package (and uvicorn, starlette, which it brings) is imported when a server starts:
``pip install 'intellagent[mcp]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from intellagent.offload import Offload
from intellagent.session import ToolBox, ToolTimeout

MCP_MISSING = "needs the mcp package: pip install 'intellagent[mcp]'"


def mcp_missing() -> str | None:
    """Why the MCP endpoint cannot be served here, or None."""
    try:
        import mcp.server  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        return MCP_MISSING
    return None


@dataclass
class DialogTools:
    """One conversation's place on the endpoint."""

    url: str
    token: str
    toolbox: ToolBox
    in_turn: bool = False
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """While the agent takes its turn: its tool calls are taken."""
        self.in_turn = True
        try:
            yield
        finally:
            self.in_turn = False


class ToolServer:
    """One run's MCP endpoint (see the module docstring): :meth:`start` before the first
    conversation, :meth:`open` and :meth:`close_dialog` around each, :meth:`close` at the end."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.dialogs: dict[str, DialogTools] = {}
        self.base = ""
        self._server: Any = None
        self._task: asyncio.Task | None = None

    def open(self, toolbox: ToolBox) -> DialogTools:
        """A new conversation's URL, serving ``toolbox``."""
        token = secrets.token_urlsafe(24)
        dialog = DialogTools(url=f"{self.base}/d/{token}/mcp", token=token, toolbox=toolbox)
        self.dialogs[token] = dialog
        return dialog

    def close_dialog(self, dialog: DialogTools) -> None:
        self.dialogs.pop(dialog.token, None)

    @contextlib.asynccontextmanager
    async def throwaway(self) -> AsyncIterator[DialogTools]:
        """A conversation on a copy of the seed database, dropped afterwards (a pre-flight's)."""
        db = await asyncio.to_thread(self.env.seed_database) if self.env.db_schema is not None else None
        offload = Offload(2)
        dialog = self.open(ToolBox(self.env, db, offload=offload))
        try:
            yield dialog
        finally:
            self.close_dialog(dialog)
            offload.close()
            if db is not None:
                db.close()

    async def start(self) -> None:
        import uvicorn
        from mcp.server import Server
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        server = Server("intellagent-tools", version=_version(),
                        on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        server.middleware = []  # no tracing spans from here
        manager = StreamableHTTPSessionManager(
            app=server, stateless=True, security_settings=TransportSecuritySettings(
                enable_dns_rebinding_protection=True, allowed_hosts=["127.0.0.1:*"],
                allowed_origins=["http://127.0.0.1:*"]))
        mcp_app = StreamableHTTPASGIApp(manager)
        dialogs = self.dialogs

        class Gate:  # a conversation that is over (or never was) is refused before MCP sees it
            async def __call__(self, scope, receive, send):
                if scope["path_params"]["token"] not in dialogs:
                    response = JSONResponse({"error": "no such conversation, or it has ended"}, 404)
                    await response(scope, receive, send)
                    return
                await mcp_app(scope, receive, send)

        @contextlib.asynccontextmanager
        async def lifespan(app):
            async with manager.run():
                yield

        app = Starlette(routes=[Route("/d/{token}/mcp", endpoint=Gate(), methods=["GET", "POST", "DELETE"])],
                        lifespan=lifespan)

        class QuietServer(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):  # the run's own Ctrl-C handling stays in charge
                yield

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self._server = QuietServer(uvicorn.Config(app, log_level="error", access_log=False,
                                                  timeout_graceful_shutdown=1, lifespan="on"))
        self._task = asyncio.ensure_future(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                sock.close()
                raise RuntimeError(f"the MCP tool endpoint did not start: {self._task.exception()}")
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        self.dialogs.clear()
        if self._task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), 5)
        except TimeoutError:
            self._server.force_exit = True
            await asyncio.wait_for(self._task, 5)
        finally:
            self._task = None

    # -- MCP handlers ----------------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        from mcp import types

        return types.ListToolsResult(tools=[
            types.Tool(name=t.spec.name, description=t.spec.description, input_schema=t.spec.parameters)
            for t in self.env.tools.values()])

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        from mcp import types

        def refused(text: str) -> Any:
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

        dialog = self.dialogs.get(ctx.request.path_params.get("token", ""))
        if dialog is None:
            return refused("Error: no such conversation, or it has ended")
        box = dialog.toolbox
        if box.terminal_called or box.hung:
            return refused("Error: the conversation has ended")
        if not dialog.in_turn:
            return refused("Error: tools run only while IntellAgent waits for the agent's answer")
        try:
            record = await box.acall(params.name, params.arguments or {}, f"mcp_{next(dialog.ids)}")
        except ToolTimeout as exc:
            return refused(f"Error: {exc}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=record.output)],
                                    is_error=record.error)


def _version() -> str:
    from intellagent import __version__

    return __version__


class ServesTools:
    """attach/detach for an agent plugin whose prepared ``setup.shared`` has a ``tools``
    :class:`ToolServer`: each conversation gets its own URL on it, for as long as it lasts."""

    tools_dialog: DialogTools | None = None

    def attach(self, toolbox: ToolBox) -> None:
        server = getattr(self.setup.shared, "tools", None)
        self.tools_dialog = server.open(toolbox) if server is not None else None

    def detach(self) -> None:
        server = getattr(self.setup.shared, "tools", None)
        if server is not None and self.tools_dialog is not None:
            server.close_dialog(self.tools_dialog)

    def tools_turn(self) -> contextlib.AbstractContextManager[None]:
        """Around one turn: its tool calls are taken."""
        return self.tools_dialog.turn() if self.tools_dialog is not None else contextlib.nullcontext()
