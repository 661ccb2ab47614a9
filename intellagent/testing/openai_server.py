"""A small OpenAI-compatible chat-completions server for tests and benchmarks, on 127.0.0.1.

It answers ``POST /v1/chat/completions`` with plain replies, tool calls (including the forced
tool call instructor uses for structured output) and JSON-schema responses, all fabricated
deterministically from the request. It can add latency and inject faults: ``429`` (with
``Retry-After``), ``500``, ``503``, ``reset`` (connection dropped), ``timeout`` (no answer),
``malformed`` (body that is not JSON), ``invalid`` (JSON that fails the response model), and the
refusals ``400``, ``401`` and ``403`` (the key refused), ``404`` (an unknown model). With
``echo_key`` every error body quotes the request's Authorization value, as careless servers do.
With ``prompt_cache`` (``--prompt-cache``) an answer reports the prompt tokens a provider's cache
would hold (``usage.prompt_tokens_details.cached_tokens``). With ``context_length`` a request whose
prompt is over that many tokens is answered as OpenAI answers it: HTTP 400, code
``context_length_exceeded``.
A request's ``max_tokens`` is honoured: a longer answer is cut there, with finish reason
``length``. Its usage counts about four characters a token, the prompt as a provider bills it:
the messages, the tools and the response format.

    with OpenAIServer(latency=0.2, fault_rate=0.2) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x")
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sys
import threading
import time
from collections import Counter, deque
from typing import Any, Callable, Iterable

from intellagent.llm.fabricate import WORDS, fabricate

FAULTS = ("429", "500", "503", "reset", "timeout", "malformed", "invalid", "400", "401", "403", "404")
REFUSALS = {"400": "the request is not valid", "401": "Incorrect API key provided",
            "403": "this key may not use this model", "404": "The model does not exist"}

#: Behaviours of real servers the test server can imitate:
#: - ``ignore-tool-choice``: a named tool choice is ignored; the answer is plain text (llama.cpp's
#:   ``llama-server``), so structured output through tools fails while ``json_schema`` works;
#: - ``json-schema-500``: a ``json_schema`` response format is answered with HTTP 500
#:   (``llama_cpp.server``), while a named tool call works;
#: - ``reject-null-content``: a message whose ``content`` is null is answered with HTTP 500
#:   (``llama_cpp.server``);
#: - ``tools-as-text``: offered tools with automatic choice, the model writes its tool call as
#:   JSON text in the content instead of a tool call (a chat template without tool support).
HOLD_POLL = 0.05
HOLD_LIMIT = 120.0  # seconds a held request waits at most: a test whose condition never comes fails, not hangs
QUIRKS = ("ignore-tool-choice", "json-schema-500", "reject-null-content", "tools-as-text")

Responder = Callable[[dict[str, Any]], dict[str, Any] | None]


class OpenAIServer:
    """Run with ``with OpenAIServer(...) as server`` or ``start()``/``stop()``."""

    def __init__(self, *, latency: float = 0.0, fault_rate: float = 0.0,
                 fault_kinds: Iterable[str] = FAULTS, faults: Iterable[str] = (),
                 retry_after: float = 0.05, timeout_hang: float = 30.0, seed: int = 0,
                 responder: Responder | None = None, list_items: int | None = None,
                 quirks: Iterable[str] = (), keep_requests: bool = True, port: int = 0,
                 echo_key: bool = False, prompt_cache: bool = False,
                 context_length: int | None = None) -> None:
        self.latency = latency
        self.context_length = context_length
        # a test's condition to answer on: while ``hold()`` is true every request waits (at most
        # HOLD_LIMIT seconds), e.g. until a second process of a run has taken work of its own
        self.hold: Callable[[], bool] | None = None
        self.quirks = set(quirks)
        unknown = self.quirks - set(QUIRKS)
        if unknown:
            raise ValueError(f"unknown quirk {sorted(unknown)[0]!r}; known: {', '.join(QUIRKS)}")
        self.fault_rate = fault_rate
        self.fault_kinds = list(fault_kinds)
        self.scheduled: deque[str] = deque(faults)  # faults for the next requests, in order
        self.retry_after = retry_after
        self.timeout_hang = timeout_hang
        self.responder = responder
        self.list_items = list_items
        self.echo_key = echo_key
        # a provider's automatic prompt cache: the longest run of whole messages a request starts
        # with that an earlier request to the same model with the same tools and response format
        # also started with is reported as cached prompt tokens
        self.prompt_cache: set[str] | None = set() if prompt_cache else None
        # every request and its body as it came, for tests to look at; a server that serves a
        # long benchmark keeps none (about 35 KB a request: 2 GB after 60,000) and counts them
        self.keep_requests = keep_requests
        self.requests: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []
        self.served = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.faults_sent: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._seed = seed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._boot_error: OSError | None = None
        self.port = port  # 0: a free one, chosen when it starts

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def schedule(self, *faults: str) -> None:
        for fault in faults:
            if fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        self.scheduled.extend(faults)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "OpenAIServer":
        self._thread = threading.Thread(target=self._run, name="openai-test-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("test server did not start")
        if self._boot_error is not None:  # cannot listen (a port in use)
            self._loop = None
            raise self._boot_error
        return self

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)

        async def boot() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, backlog=512)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        try:
            self._loop.run_until_complete(boot())
        except OSError as exc:
            self._boot_error = exc
            self._loop.close()
            self._ready.set()
            return
        self._loop.run_forever()
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- HTTP --------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in
                           (line.split(":", 1) for line in lines[1:] if ":" in line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                keep_alive = headers.get("connection", "").lower() != "close"
                if not await self._respond(method, path, body, writer, headers.get("authorization", "")):
                    return
                if not keep_alive:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def _respond(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter,
                       authorization: str = "") -> bool:
        if method != "POST" or path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(writer, 404, {"error": {"message": f"no route {method} {path}"}}, auth=authorization)
            return True
        try:
            request = json.loads(body or b"{}")
        except json.JSONDecodeError:
            self._send(writer, 400, {"error": {"message": "body is not JSON"}}, auth=authorization)
            return True
        self.served += 1
        if self.keep_requests:
            self.requests.append(request)
            self.bodies.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
            waited = 0.0
            while self.hold is not None and waited < HOLD_LIMIT and self.hold():
                await asyncio.sleep(HOLD_POLL)
                waited += HOLD_POLL
        finally:
            self.in_flight -= 1
        fault = self._next_fault()
        if fault:
            self.faults_sent[fault] += 1
        if fault == "reset":
            writer.transport.abort()
            return False
        if fault == "timeout":
            await asyncio.sleep(self.timeout_hang)
            writer.transport.abort()
            return False
        if fault == "429":
            self._send(writer, 429, {"error": {"message": "rate limited", "type": "rate_limit"}},
                       {"Retry-After": f"{self.retry_after:g}"}, auth=authorization)
            return True
        if fault in ("500", "503"):
            self._send(writer, int(fault), {"error": {"message": "server trouble"}}, auth=authorization)
            return True
        if fault in REFUSALS:
            self._send(writer, int(fault), {"error": {"message": REFUSALS[fault], "code": fault}},
                       auth=authorization)
            return True
        if fault == "malformed":
            self._send_raw(writer, 200, b'{"id": "chatcmpl-x", "choices": [{"mess')
            return True
        if self.context_length is not None and self.prompt_tokens(request) > self.context_length:
            self._send(writer, 400, {"error": {
                "message": f"This model's maximum context length is {self.context_length} tokens. However, "
                           f"your messages resulted in {self.prompt_tokens(request)} tokens. Please reduce "
                           "the length of the messages.", "type": "invalid_request_error",
                "param": "messages", "code": "context_length_exceeded"}}, auth=authorization)
            return True
        refusal = self._quirk_refusal(request)
        if refusal:
            self._send(writer, 500, {"error": {"message": refusal}}, auth=authorization)
            return True
        self._send(writer, 200, self._completion(request, invalid=fault == "invalid"), auth=authorization)
        return True

    def _quirk_refusal(self, request: dict[str, Any]) -> str | None:
        if "reject-null-content" in self.quirks and any(
                m.get("content") is None for m in request.get("messages", [])):
            return "Input should be a valid string: messages.content"
        if "json-schema-500" in self.quirks and \
                (request.get("response_format") or {}).get("type") == "json_schema":
            return "json_schema response format is not supported"
        return None

    def _next_fault(self) -> str | None:
        if self.scheduled:
            return self.scheduled.popleft()
        if self.fault_rate and self._rng.random() < self.fault_rate:
            return self._rng.choice(self.fault_kinds)
        return None

    def _send(self, writer: asyncio.StreamWriter, status: int, payload: dict[str, Any],
              headers: dict[str, str] | None = None, auth: str = "") -> None:
        if status >= 400 and self.echo_key and isinstance(payload.get("error"), dict):
            key = auth.removeprefix("Bearer ").strip()
            payload["error"]["message"] += f" (you sent: {key}; header Authorization: {auth})"
        self._send_raw(writer, status, json.dumps(payload).encode(), headers)

    @staticmethod
    def _send_raw(writer: asyncio.StreamWriter, status: int, data: bytes,
                  headers: dict[str, str] | None = None) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n{extra}\r\n".encode() + data)

    # -- completions -------------------------------------------------------------------------

    def _completion(self, request: dict[str, Any], *, invalid: bool) -> dict[str, Any]:
        digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
        rng = random.Random(f"{self._seed}:{digest}")
        message = self.responder(request) if self.responder else None
        if message is None:
            message = self._fabricated(request, rng, invalid, self.list_items, self.quirks)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        cap = request.get("max_tokens")
        content = message.get("content")
        if isinstance(cap, int) and isinstance(content, str) and len(content) > 4 * cap:
            message = {**message, "content": message["content"][:4 * cap]}  # about four characters a token
            finish = "length"
        text = json.dumps(message)
        return {
            "id": f"chatcmpl-{digest[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": request.get("model", "test"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": self.prompt_tokens(request),
                      "completion_tokens": max(1, len(text) // 4),
                      "total_tokens": 0,
                      **({"prompt_tokens_details": {"cached_tokens": self._cached(request)}}
                         if self.prompt_cache is not None else {})},
        }

    @classmethod
    def prompt_tokens(cls, request: dict[str, Any]) -> int:
        """The prompt tokens this server reports for ``request`` (about four characters a token)."""
        return max(1, (len(json.dumps(request.get("messages", []))) + cls._head_length(request)) // 4)

    @staticmethod
    def _head_length(request: dict[str, Any]) -> int:
        """Characters of what a provider bills as prompt besides the messages: the tools and the
        response format (an agent's tool schemas are most of its prompt)."""
        return sum(len(json.dumps(request[k])) for k in ("tools", "response_format") if request.get(k))

    def _cached(self, request: dict[str, Any]) -> int:
        """Tokens of the longest message prefix of ``request`` an earlier request began with. A
        provider's prompt starts with the tools (each as its text: their order and their
        parameters' order count) and the response format: a request whose model, tools or format
        differ shares no prefix with it."""
        assert self.prompt_cache is not None
        messages = request.get("messages", [])
        head = json.dumps([request.get("model"), request.get("tools"), request.get("response_format")])
        cached = 0
        for n in range(1, len(messages) + 1):
            prefix = head + json.dumps(messages[:n], sort_keys=True)
            if prefix in self.prompt_cache and n < len(messages):
                cached = (len(json.dumps(messages[:n])) + self._head_length(request)) // 4
            self.prompt_cache.add(prefix)
        return cached

    @staticmethod
    def _fabricated(request: dict[str, Any], rng: random.Random, invalid: bool,
                    list_items: int | None = None, quirks: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
        tools = request.get("tools") or []
        choice = request.get("tool_choice")
        forced = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        if "ignore-tool-choice" in quirks:
            forced = None
        response_format = request.get("response_format") or {}
        last_role = (request.get("messages") or [{}])[-1].get("role")
        if forced or (tools and last_role != "tool" and not isinstance(choice, dict) and rng.random() < 0.5):
            tool = next((t["function"] for t in tools if t["function"]["name"] == forced),
                        rng.choice(tools)["function"] if tools else {"name": forced})
            args = {"unexpected": "shape"} if invalid else fabricate(
                tool.get("parameters", {"type": "object"}), rng, list_items=list_items)
            if "tools-as-text" in quirks and not forced:
                text = "```json\n" + json.dumps({"name": tool["name"], "arguments": args}) + "\n```"
                return {"role": "assistant", "content": text}
            return {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{rng.getrandbits(32):08x}", "type": "function",
                "function": {"name": tool["name"], "arguments": json.dumps(args)}}]}
        schema = None
        if response_format.get("type") == "json_schema":
            schema = response_format["json_schema"].get("schema", {})
        elif response_format.get("type") == "json_object":  # instructor's JSON mode: the schema is in the prompt
            schema = _schema_in_prompt(request.get("messages") or [])
        if schema is not None:
            content = "{}" if invalid else json.dumps(fabricate(schema, rng, list_items=list_items))
            return {"role": "assistant", "content": content}
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12)))
        return {"role": "assistant", "content": f"Test server reply: {words}."}


def _schema_in_prompt(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON Schema a JSON-mode prompt asks for (the first JSON object after 'json_schema')."""
    for m in messages:
        text = m.get("content") if isinstance(m.get("content"), str) else ""
        at = text.find("json_schema")
        start = text.find("{", at) if at >= 0 else -1
        if start >= 0:
            try:
                return json.JSONDecoder().raw_decode(text[start:])[0]
            except json.JSONDecodeError:
                continue
    return {"type": "object"}


def main(argv: list[str] | None = None) -> None:
    """Serve until killed: ``python -m intellagent.testing.openai_server --latency 0.2``. Prints
    the base URL on its first line."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="Local OpenAI-compatible test server.")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--retry-after", type=float, default=0.05)
    parser.add_argument("--timeout-hang", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quirk", action="append", default=[], choices=QUIRKS,
                        help="Imitate a real server's behaviour (repeatable).")
    parser.add_argument("--list-items", type=int, default=None,
                        help="Fabricate arrays of this length where the schema allows.")
    parser.add_argument("--prompt-cache", action="store_true",
                        help="Report cached prompt tokens (usage.prompt_tokens_details.cached_tokens) "
                             "for the messages a request shares with an earlier one, as a "
                             "provider's prompt cache does.")
    parser.add_argument("--context-length", type=int, default=None,
                        help="Answer a request whose prompt is over this many tokens with OpenAI's "
                             "400 context_length_exceeded.")
    parser.add_argument("--port", type=int, default=0,
                        help="Listen on this port (default: a free one). The base URL is part of "
                             "a model's identity, so a fixed port gives the same requests again.")
    args = parser.parse_args(argv)
    server = OpenAIServer(latency=args.latency, fault_rate=args.fault_rate,
                          retry_after=args.retry_after, timeout_hang=args.timeout_hang,
                          seed=args.seed, list_items=args.list_items, quirks=args.quirk,
                          keep_requests=False, port=args.port, prompt_cache=args.prompt_cache,
                          context_length=args.context_length)
    # the handler before the URL: a caller may stop the server as soon as it has read the URL
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        server.start()
    except OSError as exc:
        print(f"openai_server: {exc.strerror or exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(server.base_url, flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    print(json.dumps({"requests": server.served, "faults": dict(server.faults_sent),
                      "max_in_flight": server.max_in_flight}), flush=True)
    server.stop()


if __name__ == "__main__":
    main()
