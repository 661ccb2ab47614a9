"""The one place every stage talks to models through: provider choice per role, retries with
back-off, bounded concurrency and rate, token and cost accounting, a run budget, and the cache."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import time
from typing import Any, Awaitable, Callable, TypeVar

from pydantic import BaseModel

from intellagent.events import ModelCall
from intellagent.hashing import content_hash
from intellagent.llm.errors import (REFUSALS, ModelRefused, OutputInvalid, ProviderError,
                                    RepeatedRefusal, RequestRejected, RequestTimeout)
from intellagent.llm.limits import RateLimiter
from intellagent.llm.prices import PriceTable
from intellagent.llm.sizing import output_cap
from intellagent.llm.types import ChatReply, ChatRequest, Outcome, Status, Usage, schema_of
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.redaction import Redactor
from intellagent.registry import Registry
from intellagent.store import Store

M = TypeVar("M", bound=BaseModel)
SAME_ANSWERS = 3  # identical 500 answers after which a failed call's error says the server rejects it


class LLM:
    """Shared by all stages of a run. Calls never raise for a model fault: they return an
    :class:`Outcome` whose status says whether there is a value."""

    def __init__(self, settings: LLMSettings | None = None, *, store: Store | None = None,
                 registry: Registry | None = None, run_id: str | None = None, seed: int = 0,
                 cache: bool | None = None, providers: dict[str, Any] | None = None) -> None:
        self.settings = settings or LLMSettings()
        self.store = store or Store.in_memory()
        self.registry = registry
        self.run_id = run_id
        self.seed = seed
        self.cache_enabled = self.settings.cache if cache is None else cache
        self.prices = PriceTable(self.settings.prices)
        self.limiter = RateLimiter(self.settings.requests_per_minute, self.settings.tokens_per_minute)
        self._semaphore = asyncio.Semaphore(self.settings.max_concurrency)
        self._providers: dict[str, Any] = dict(providers or {})
        self._by_role: dict[str, Any] = {}
        self._endpoints: dict[str, tuple[Any, dict[str, Any] | None]] = {}  # role → (settings, endpoint)
        self._inflight: dict[str, asyncio.Future] = {}  # identical requests share one call
        self._jitter = random.Random()  # timing only; never shapes a result
        self.spent_usd = 0.0
        self.spent_tokens = 0
        self.skipped_for_budget = 0
        self.refused_worst: tuple[float, int] | None = None  # the first attempt the budget could not pay
        self._reserved_usd = 0.0  # the worst case of the requests in flight, held against the budget
        self._reserved_tokens = 0
        self._holds = 0  # attempts in flight holding their worst case
        self._ledger: tuple[Store, str] | None = None  # a budget shared by processes (share_budget)
        self._ledger_refusal: tuple[float, int] | None = None  # the shared budget's first refusal
        self._ledger_checked = -1e9
        self._budget_waiters: list[asyncio.Future] = []  # attempts waiting for a hold to end
        self.redact = Redactor.from_env(self._key_variables())
        self._failed: dict[str, int] | None = None  # earlier failed attempts per request (store)
        self._refused: ModelRefused | None = None  # an endpoint refused us: no call can succeed
        self._structured_roles: set[str] = set()  # roles that asked for structured output
        self._answered: set[int] = set()  # providers that have answered once (by id)
        self._gates: dict[int, asyncio.Future] = {}  # a provider's first call, which others wait for
        self.watchers: list[Callable[[ModelCall], None]] = []  # told of every call as it ends

    def _tell(self, record: dict[str, Any], **done: Any) -> None:
        """Tell the watchers (progress, the observer hooks) that a call ended."""
        if not self.watchers:
            return
        seconds = done.pop("latency_ms", 0.0) / 1000
        event = ModelCall(stage=record.get("stage"), role=record["role"], model=record["model"],
                          kind=record["kind"], item=record.get("item_key"),
                          provider=record.get("provider"), started=time.time() - seconds,
                          seconds=seconds, **done)
        for watch in self.watchers:
            watch(event)

    def _key_variables(self) -> set[str]:
        """The environment variables that hold this run's model keys."""
        names = set()
        for model in (self.settings.default, *self.settings.roles.values()):
            if model.api_key_env:
                names.add(model.api_key_env)
            elif not model.model.startswith("mock/"):
                names.add("OPENAI_API_KEY")
        return names

    # -- providers ---------------------------------------------------------------------------

    def settings_for(self, role: str) -> ModelSettings:
        return self.settings.for_role(role)

    def timeout_for(self, role: str) -> tuple[float, str]:
        """Seconds per request for ``role`` and the setting they come from: the role's own
        model settings' ``timeout``, else ``llm.timeout``."""
        own = self.settings.roles.get(role)
        if own is not None and own.timeout is not None:
            return own.timeout, f"llm.roles.{role}.timeout"
        if own is None and self.settings.default.timeout is not None:
            return self.settings.default.timeout, "llm.default.timeout"
        return self.settings.timeout, "llm.timeout"

    def structured_modes(self, roles: list[str] | None = None) -> dict[str, str]:
        """The structured-output mode each role's provider used (an ``auto`` probe's pick), for
        the roles that asked for structured output in this process."""
        modes = {}
        for role in roles if roles is not None else list(self._by_role):
            provider = self._by_role.get(role) if role in self._structured_roles else None
            mode = getattr(provider, "mode", None) if provider is not None else None
            if isinstance(mode, str):
                modes[role] = mode
        return modes

    def notices(self, roles: list[str]) -> list[str]:
        """What the providers of ``roles`` say a reader of the run must know (each once), from
        their factory's ``notice(settings, played, others)``: ``played``, the roles of ``roles``
        on that model; ``others``, the rest (a notice true of the whole run may not be true of a
        part). No provider is made for it."""
        if self.registry is None:
            from intellagent.registry import load_registry
            self.registry = load_registry()
        models: dict[tuple[str, str], tuple[Any, Any, list[str]]] = {}  # (provider, model) → factory, settings, roles
        for role in roles:
            settings = self.settings_for(role)
            name = settings.provider_name
            try:
                factory = self.registry.resolve("llm-provider", name).value
            except Exception:  # an unknown provider is refused elsewhere, with its own message
                continue
            models.setdefault((name, settings.model), (factory, settings, []))[2].append(role)
        found: list[str] = []
        for factory, settings, played in models.values():
            notice = getattr(factory, "notice", None)
            text = notice(settings, played, [r for r in roles if r not in played]) if callable(notice) else None
            if text and text not in found:
                found.append(text)
        return found

    def provider_for(self, role: str) -> Any:
        """The provider serving ``role`` (made once per distinct model settings)."""
        provider = self._by_role.get(role)
        if provider is None:
            provider = self._by_role[role] = self._make_provider(role)
        return provider

    def _make_provider(self, role: str) -> Any:
        settings = self.settings_for(role)
        if settings.model in self._providers:
            return self._providers[settings.model]
        # the provider's own HTTP requests are cut at the role's limit, the same one we apply
        settings = settings.model_copy(update={"timeout": self.timeout_for(role)[0]})
        name = settings.provider_name
        key = json.dumps([name, settings.model_dump()], sort_keys=True, default=str)
        if key not in self._providers:
            if self.registry is None:
                from intellagent.registry import load_registry
                self.registry = load_registry()
            factory = self.registry.resolve("llm-provider", name).value
            self._providers[key] = factory(settings, seed=self.seed)
        return self._providers[key]

    async def aclose(self) -> None:
        self.store.flush()
        for provider in self._providers.values():
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()

    # -- budget ------------------------------------------------------------------------------

    def unpriced(self, roles: list[str]) -> dict[str, list[str]]:
        """The models of ``roles`` with no known price, each with the roles using it."""
        out: dict[str, list[str]] = {}
        for role in roles:
            model = self.settings_for(role).model
            if self.prices.price(model) is None:
                out.setdefault(model, []).append(role)
        return out

    def _worst(self, request: ChatRequest, prompt: int, requests: int) -> tuple[float, int]:
        """What an attempt of ``request`` can cost at most, in dollars and tokens: its prompt
        (``prompt``, at four characters a token, counted generously at three, plus each
        message's framing) and its output cap, for each request an attempt may make (a
        structured call's re-asks resend the prompt with the answer and its errors)."""
        prompt = prompt * 4 // 3 + 8 * len(request.messages) + 16
        cap = request.max_tokens or output_cap(request.response_schema)
        tokens = sum(prompt + i * (cap + 200) + cap for i in range(requests))
        price = self.prices.price(request.model)
        dollars = 0.0 if price is None else sum(price.worst(prompt + i * (cap + 200), cap) for i in range(requests))
        return dollars, tokens

    def _reserve(self, dollars: float, tokens: int) -> bool:
        """Hold an attempt's worst case against the budget; False when it would not fit."""
        s = self.settings
        if s.budget_usd is not None and self.spent_usd + self._reserved_usd + dollars > s.budget_usd:
            return False
        if s.budget_tokens is not None and self.spent_tokens + self._reserved_tokens + tokens > s.budget_tokens:
            return False
        self._reserved_usd += dollars
        self._reserved_tokens += tokens
        self._holds += 1
        return True

    def share_budget(self, store: Store, run_id: str) -> None:
        """Hold the budget across every process of the run (a sharing executor's workers): each
        attempt's worst case is also held in the store's ledger, where every call leaves what it
        spent, so the processes together stay within it."""
        if self.settings.budget_usd is not None or self.settings.budget_tokens is not None:
            self._ledger = (store, run_id)

    async def _hold(self, dollars: float, tokens: int, holds: list[int]) -> bool:
        """Hold an attempt's worst case against the budget, waiting while calls in flight hold
        part of it (each gives back what it did not spend when it ends); False when it does not
        fit with none in flight (the budget cannot pay for it), or once any call of the run has
        been refused: no call is launched after that. A shared budget's hold is added to
        ``holds``, for the attempt to settle when it ends."""
        while not self.budget_refused_here and not self._reserve(dollars, tokens):
            if not self._holds:
                return False
            waiter = asyncio.get_running_loop().create_future()
            self._budget_waiters.append(waiter)
            await waiter
        if self.budget_refused_here:
            return False
        if self._ledger is None:
            return True
        store, run_id = self._ledger
        s = self.settings
        pause = 0.05
        try:
            while True:  # the other processes' calls end on their own loops: ask again, less often
                hold, others = store.hold_budget(run_id, dollars, tokens, s.budget_usd, s.budget_tokens,
                                                 ttl=s.deadline + 60)
                if hold is not None:
                    holds.append(hold)
                    return True
                if not others:
                    self._release(dollars, tokens)
                    return False
                await asyncio.sleep(pause)
                pause = min(1.0, pause * 2)
        except BaseException:  # cancelled, or the store failed: the local hold must not leak
            self._release(dollars, tokens)
            raise

    @property
    def budget_refused_here(self) -> bool:
        """This process refused a call for the budget, or learned that another one of the run did."""
        return self.refused_worst is not None

    def _refused_by_budget(self, worst: tuple[float, int]) -> None:
        """A call the budget could not pay: no call is launched after it, in any process of
        the run (a shared budget's ledger keeps the refusal for the others to see)."""
        if self.refused_worst is None:
            self.refused_worst = worst
            if self._ledger is not None:
                self._ledger[0].refuse_budget(self._ledger[1], *worst)

    def _shared_refusal(self, fresh: bool = False) -> tuple[float, int] | None:
        """The first refusal of the run's shared budget, in whichever process (asked of the
        store at most once a second until there is one; ``fresh``: now)."""
        if self._ledger is None:
            return None
        if self._ledger_refusal is None and (fresh or time.monotonic() >= self._ledger_checked + 1.0):
            self._ledger_checked = time.monotonic()
            self._ledger_refusal = self._ledger[0].budget_refusal(self._ledger[1])
        return self._ledger_refusal

    def _account(self, model: str, usage: Usage | None, holds: list[int]) -> float:
        """An attempt's tokens and dollars, spent (and returned); on a shared budget, its hold
        (``holds``) is left in the ledger with what it spent instead of its worst case."""
        usage = usage or Usage()
        cost = self.prices.cost(model, usage)
        self.spent_usd += cost
        self.spent_tokens += usage.total
        if holds and self._ledger is not None:
            self._ledger[0].settle_budget(self._ledger[1], holds, cost, usage.total)
            holds.clear()
        return cost

    def _release(self, dollars: float, tokens: int) -> None:
        self._reserved_usd -= dollars
        self._reserved_tokens -= tokens
        self._holds -= 1
        waiters, self._budget_waiters = self._budget_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def budget_exhausted(self) -> bool:
        """A call was refused because the budget could not pay for its worst case (or it is
        spent): no further call is launched. A dollar budget is spent only past it: a budget of
        $0 lets free calls (mock and local models) go and refuses the first one with a price."""
        s = self.settings
        return (self.skipped_for_budget > 0
                or (s.budget_usd is not None and self.spent_usd > s.budget_usd)
                or (s.budget_tokens is not None and self.spent_tokens >= s.budget_tokens)
                or self._shared_refusal() is not None)

    def budget_stopped(self) -> bool:
        """Whether the budget stopped the run: ``budget_exhausted``, with another process's
        refusal asked of the store now (for the run's status, once it ends)."""
        return self.budget_exhausted or self._shared_refusal(fresh=True) is not None

    def budget_left(self, spent: tuple[float, int] | None = None) -> str:
        """What the budget left unspent, in its own unit(s) (a shared budget: after every
        process's calls), given what it has ``spent`` when the caller has it already."""
        s, parts = self.settings, []
        usd, tokens = spent if spent is not None else self._spent()
        if s.budget_usd is not None:
            parts.append(f"${max(0.0, s.budget_usd - usd):.4f} of ${s.budget_usd:.4f}")
        if s.budget_tokens is not None:
            parts.append(f"{max(0, s.budget_tokens - tokens)} of {s.budget_tokens} tokens")
        return " and ".join(parts)

    def budget_refused(self) -> str:
        """The worst case of the first attempt the budget could not pay, in the budget's own
        unit(s) (empty when none was refused): the least a budget must leave to make it."""
        refused = self._shared_refusal(fresh=True) if self._ledger is not None else self.refused_worst
        if refused is None:
            return ""
        dollars, tokens = refused
        s, parts = self.settings, []
        if s.budget_usd is not None:
            parts.append(f"${dollars:.4f}")
        if s.budget_tokens is not None:
            parts.append(f"{tokens} tokens")
        return " and ".join(parts)

    def _spent(self) -> tuple[float, int]:
        """What the budget has paid: this process's calls, or every process's on a shared one."""
        if self._ledger is not None:
            return self._ledger[0].budget_spent(self._ledger[1])
        return self.spent_usd, self.spent_tokens

    def budget_message(self) -> str:
        needed = self.budget_refused()
        usd, tokens = spent = self._spent()  # a shared budget's: one query of the store
        return (f"budget reached: spent ${usd:.4f} and {tokens} tokens, "
                f"{self.budget_left(spent)} left unspent (less than the next call's worst case"
                f"{', ' + needed if needed else ''}: its prompt and output cap, re-asks included); "
                f"{self.skipped_for_budget} call(s) not made. Raise the budget and run again to "
                "resume: finished work is kept.")

    # -- calls -------------------------------------------------------------------------------

    def _request(self, role: str, messages: list[dict[str, Any]], sample: str | None = None,
                 **extra: Any) -> ChatRequest:
        settings = self.settings_for(role)
        known = self._endpoints.get(role)
        if known is None or known[0] is not settings:
            endpoint = {k: v for k, v in settings.fingerprint().items()
                        if k not in ("model", "temperature", "max_tokens") and v not in (None, {})}
            known = self._endpoints[role] = (settings, endpoint or None)
        # another draw of the same question gets a seed of its own (a model that honours seeds
        # samples it afresh) and a cache entry of its own (a trial is never a replay of another)
        seed = self.seed if sample is None else _sample_seed(self.seed, sample)
        # built without validation: every field comes from validated settings or from the step
        # (a conversation of plain dicts), and validating a long conversation copies it value by
        # value on every call; the list is copied, so a step appending to its own is not seen
        return ChatRequest.model_construct(
            model=settings.model, messages=list(messages), temperature=settings.temperature,
            max_tokens=settings.max_tokens, seed=seed, endpoint=known[1], sample=sample, **extra)

    async def chat(self, messages: list[dict[str, Any]], *, role: str = "default",
                   stage: str | None = None, tools: list[dict[str, Any]] | None = None,
                   tool_choice: Any = None, item: str | None = None,
                   sample: str | None = None) -> Outcome[ChatReply]:
        """A chat completion, with tool calling when ``tools`` are given. ``item`` is the step
        item the call is made for (its cost counts for every run that uses the item); ``sample``
        names the draw when the same question is asked more than once (see ``ChatRequest``)."""
        request = self._request(role, messages, sample, tools=tools or None, tool_choice=tool_choice)

        async def invoke(provider: Any, sent: ChatRequest) -> tuple[ChatReply, Usage]:
            reply = await provider.chat(sent)
            return reply, reply.usage

        return await self._call("chat", role, stage, request, invoke, item,
                                decode=ChatReply.model_validate_json, encode=lambda r: r.model_dump_json())

    async def structured(self, messages: list[dict[str, Any]], response_model: type[M], *,
                         role: str = "default", stage: str | None = None,
                         item: str | None = None, sample: str | None = None) -> Outcome[M]:
        """An instance of ``response_model``; output that does not fit is re-asked with the
        validation error (``validation_retries`` times) before the call ends ``invalid-output``."""
        request = self._request(role, messages, sample, response_schema=schema_of(response_model))
        self._structured_roles.add(role)

        async def invoke(provider: Any, sent: ChatRequest) -> tuple[M, Usage]:
            return await provider.structured(sent, response_model, self.settings.validation_retries)

        return await self._call("structured", role, stage, request, invoke, item,
                                decode=response_model.model_validate_json,
                                encode=lambda v: v.model_dump_json(by_alias=True))

    async def _call(self, kind: str, role: str, stage: str | None, request: ChatRequest,
                    invoke: Callable[[Any, ChatRequest], Awaitable[tuple[Any, Usage]]], item: str | None,
                    decode: Callable[[str], Any], encode: Callable[[Any], str]) -> Outcome:
        if self._refused is not None:  # an endpoint refused the key or the model: stop asking
            raise self._refused
        text = request.canonical()
        key = request.key(text)
        record = dict(run_id=self.run_id, stage=stage, role=role, model=request.model, kind=kind,
                      request_hash=key, item_key=item)
        if self.budget_exhausted:
            return self._budget_stop(key)
        provider = self.provider_for(role)  # a configuration error raises: the run cannot start
        record["provider"] = getattr(provider, "name", None) or type(provider).__name__
        cacheable = self.cache_enabled and getattr(provider, "cacheable", False)

        # the rate limiter's token estimate: the whole request as text (tools and schema are
        # prompt tokens too), about four characters a token, plus the answer's allowance
        prompt = len(text) // 4
        estimate = prompt + (request.max_tokens or 256)
        if cacheable:
            hit = self.store.cached(key, legacy=request.legacy_key)  # (older stores' keys too)
            shared_future = self._inflight.get(key) if hit is None else None
            if shared_future is not None:  # the same request is being answered now: share it
                shared = await asyncio.shield(shared_future)
                if not shared.ok:  # its failure is ours too: never send it again (nor pay for it)
                    return shared.model_copy(update={"cached": False, "attempts": 0, "usage": Usage(),
                                                     "cost_usd": 0.0})
                hit = self.store.cached(key)
            if hit is not None:
                usage = Usage(prompt_tokens=hit.prompt_tokens, completion_tokens=hit.completion_tokens)
                self.store.record_call(**record, cached=True, attempts=0, outcome="ok",
                                       prompt_tokens=usage.prompt_tokens,
                                       completion_tokens=usage.completion_tokens)
                self._tell(record, cached=True, attempts=0, outcome="ok", cost_usd=0.0,
                           prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)
                return Outcome(status=Status.ok, value=decode(hit.response), usage=usage,
                               cached=True, request_hash=key)
            future: asyncio.Future = asyncio.get_running_loop().create_future()
            self._inflight[key] = future
            try:
                outcome = await self._ask(record, request, role, provider, invoke, encode, key,
                                          kind, cacheable, estimate, prompt)
                future.set_result(outcome)
                return outcome
            except BaseException as exc:
                future.set_exception(exc)
                future.exception()  # retrieved: waiters see it through their own await
                raise
            finally:
                if self._inflight.get(key) is future:
                    del self._inflight[key]
        return await self._ask(record, request, role, provider, invoke, encode, key, kind,
                               cacheable, estimate, prompt)

    async def _ask(self, record: dict[str, Any], request: ChatRequest, role: str,
                   provider: Any, invoke: Callable[[Any, ChatRequest], Awaitable[tuple[Any, Usage]]],
                   encode: Callable[[Any], str], key: str, kind: str, cacheable: bool,
                   estimate: int, prompt: int) -> Outcome:
        """Ask the provider (the first call to it alone, see ``_first_call``)."""
        started = time.perf_counter()
        gate = None if id(provider) in self._answered else await self._first_call(provider)
        try:
            return await self._attempts(record, request, role, provider, invoke, encode, key, kind,
                                        cacheable, estimate, prompt, gate, started)
        finally:
            self._opened(provider, gate)

    async def _first_call(self, provider: Any) -> asyncio.Future | None:
        """Calls to an endpoint that has not answered yet wait for its first call's first
        attempt (whose gate this returns): an endpoint that refuses the key or the model is then
        asked once, not once per call in flight, and the run stops there."""
        pid = id(provider)
        if pid in self._answered:
            return None
        gate = self._gates.get(pid)
        if gate is None:
            gate = self._gates[pid] = asyncio.get_running_loop().create_future()
            return gate
        await asyncio.shield(gate)
        if self._refused is not None:
            raise self._refused
        return None

    def _opened(self, provider: Any, gate: asyncio.Future | None) -> None:
        """The first attempt of ``provider``'s first call is over: the calls waiting go on."""
        if gate is not None and not gate.done():
            self._answered.add(id(provider))
            self._gates.pop(id(provider), None)
            gate.set_result(None)

    async def _attempts(self, record: dict[str, Any], request: ChatRequest, role: str,
                        provider: Any, invoke: Callable[[Any, ChatRequest], Awaitable[tuple[Any, Usage]]],
                        encode: Callable[[Any], str], key: str, kind: str, cacheable: bool,
                        estimate: int, prompt: int, gate: asyncio.Future | None,
                        started: float) -> Outcome:
        """Ask the provider, with retries within the call's deadline; record the call with every
        attempt's tokens; cache the answer under the request's own key.

        A request that failed before (in an earlier run: output that did not fit, a timeout) and
        a retry after a timeout are sent with a seed derived from the number of failed attempts,
        so a deterministic server does not give the same answer again."""
        timeout, limit = self.timeout_for(role)
        deadline = self.settings.deadline
        # one attempt of a structured call may hold the validation re-asks, each a request
        requests = 1 + (self.settings.validation_retries if kind == "structured" else 0)
        # waiting for the endpoint's first answer, a concurrency slot and the rate limiter, not
        # for the model
        queued = time.perf_counter() - started
        attempts = 0
        usage = Usage()
        error: ProviderError | None = None
        stopped = ""  # why retrying stopped early, for the error
        repeats = RepeatedRefusal()
        budget_stop = False
        tries = self._failures_before(key)
        sent = _reseeded(request, tries)
        budgeted = self.settings.budget_usd is not None or self.settings.budget_tokens is not None
        worst = self._worst(request, prompt, requests) if budgeted else (0.0, 0)
        holds: list[int] = []  # the attempt's hold on a budget shared by processes
        paid = 0.0  # the attempts' dollars
        while True:
            attempts += 1
            guard = timeout * requests
            spent: Usage | None = None  # what the attempt spent, once it was sent
            try:
                waiting = time.perf_counter()
                async with self._semaphore:
                    await self.limiter.acquire(estimate)
                    # the attempt's worst case is held against the budget just before it is sent,
                    # so the calls in flight when the budget runs out cannot overshoot it
                    if budgeted and not await self._hold(*worst, holds):
                        self._refused_by_budget(worst)
                        if attempts == 1:
                            return self._budget_stop(key)
                        attempts -= 1  # not made: the budget cannot pay for its worst case
                        stopped = "; the budget could not pay for another attempt"
                        budget_stop = True
                        break
                    queued += time.perf_counter() - waiting
                    try:
                        guard = min(guard, deadline - (time.perf_counter() - started - queued))
                        async with asyncio.timeout(guard):  # in this task: wait_for makes a task per call
                            value, got = await invoke(provider, sent)
                        spent = got
                    except BaseException as exc:
                        spent = _failed_usage(exc, prompt)
                        raise
                    finally:  # what the attempt spent is counted before its hold is given back
                        try:
                            paid += self._account(request.model, spent, holds)
                        finally:
                            if budgeted:
                                self._release(*worst)
                self._opened(provider, gate)
                usage += got
                error = None
                break
            except asyncio.TimeoutError:
                error = RequestTimeout(
                    f"no answer within {timeout:g} s ({limit})" if guard >= timeout * requests else
                    f"the call's deadline of {deadline:g} s (llm.deadline) passed with a request in flight")
            except RequestTimeout:  # the provider's own HTTP timeout: the same limit
                error = RequestTimeout(f"no answer within {timeout:g} s ({limit})")
            except ProviderError as exc:
                error = exc
            except Exception as exc:  # a provider bug must not kill the run either
                error = ProviderError(f"{type(exc).__name__}: {exc}")
            if spent is not None:  # what the failed attempt cost (_failed_usage), as counted against the budget
                usage += spent
            if isinstance(error, RequestRejected) and error.status in REFUSALS:
                refused = self._refusal(role, request.model, provider, error)
                self.store.record_call(**record, attempts=attempts, outcome=Status.infra_error.value,
                                       error=refused.message, queue_ms=queued * 1000,
                                       latency_ms=(time.perf_counter() - started - queued) * 1000,
                                       prompt_tokens=usage.prompt_tokens,
                                       completion_tokens=usage.completion_tokens,
                                       cached_tokens=usage.cached_tokens, cost_usd=paid)
                self._opened(provider, gate)  # the calls waiting see the refusal
                raise refused
            self._opened(provider, gate)
            repeats.count(error)
            if not error.transient or attempts > self.settings.max_retries:
                break
            pause = self._backoff(attempts, getattr(error, "retry_after", None))
            if time.perf_counter() - started - queued + pause >= deadline:
                if "(llm.deadline)" not in str(error):  # (a request cut by it says so already)
                    stopped = f"; stopped at the call's deadline of {deadline:g} s (llm.deadline)"
                break
            if isinstance(error, RequestTimeout):  # not the same request again
                tries += 1
                sent = _reseeded(request, tries)
            await asyncio.sleep(pause)

        latency_ms = (time.perf_counter() - started - queued) * 1000  # requests, retries and back-off
        record["queue_ms"] = queued * 1000
        cost = paid  # failed attempts were paid for too
        if error is not None:
            status = Status.budget_exhausted if budget_stop else \
                Status.invalid_output if isinstance(error, OutputInvalid) else Status.infra_error
            if repeats.same >= SAME_ANSWERS:
                stopped += (f"; the server answered this request the same way {repeats.same} times, "
                            "so it may reject it")
            reason = self.redact(f"{error.kind}: {error}" + (f" (after {attempts} attempts)" if attempts > 1
                                                              else "") + stopped)
            self._failed[key] = self._failed.get(key, 0) + attempts  # type: ignore[index]
            self.store.record_call(**record, attempts=attempts, outcome=status.value, error=reason,
                                   latency_ms=latency_ms, prompt_tokens=usage.prompt_tokens,
                                   completion_tokens=usage.completion_tokens,
                                   cached_tokens=usage.cached_tokens, cost_usd=cost)
            self._tell(record, cached=False, attempts=attempts, outcome=status.value, error=reason,
                       latency_ms=latency_ms, prompt_tokens=usage.prompt_tokens,
                       completion_tokens=usage.completion_tokens, cost_usd=cost)
            return Outcome(status=status, error=reason, attempts=attempts, usage=usage, cost_usd=cost,
                           request_hash=key)

        self.store.record_answer(
            {**record, "attempts": attempts, "outcome": "ok", "latency_ms": latency_ms,
             "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
             "cached_tokens": usage.cached_tokens, "cost_usd": cost},
            cache={"request_hash": key, "model": request.model, "kind": kind,
                   "response": encode(value), "prompt_tokens": usage.prompt_tokens,
                   "completion_tokens": usage.completion_tokens} if cacheable else None)
        self._tell(record, cached=False, attempts=attempts, outcome="ok", latency_ms=latency_ms,
                   prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                   cost_usd=cost)
        return Outcome(status=Status.ok, value=value, usage=usage, cost_usd=cost, attempts=attempts,
                       request_hash=key)

    def _failures_before(self, key: str) -> int:
        """Failed attempts of request ``key`` the store knows of (read once per run)."""
        if self._failed is None:
            self._failed = self.store.failed_attempts()
        return self._failed.get(key, 0)

    def _refusal(self, role: str, model: str, provider: Any, error: RequestRejected) -> ModelRefused:
        """The error that stops the run: the endpoint refuses the key or does not know the model,
        so no call to it can succeed; every later call raises it at once."""
        endpoint = getattr(provider, "base_url", None) or self.settings_for(role).base_url \
            or "the OpenAI API"
        what = REFUSALS[error.status]  # type: ignore[index]
        hint = "check the key's variable" if error.status in (401, 403) else \
            "check the model's name and base_url"
        self._refused = ModelRefused(self.redact(f"the endpoint {what} ({error}); {hint}") or "",
                                     item=f"role '{role}' (model '{model}' at {endpoint})")
        return self._refused


    def _budget_stop(self, key: str) -> Outcome:
        """The outcome of a call not made because the budget is spent."""
        self.skipped_for_budget += 1
        return Outcome(status=Status.budget_exhausted, error=self.budget_message(), request_hash=key)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential back-off with full jitter, never shorter than the server's Retry-After."""
        ceiling = min(self.settings.backoff_max, self.settings.backoff_base * 2 ** (attempt - 1))
        delay = self._jitter.uniform(ceiling / 2, ceiling)
        return max(delay, retry_after or 0.0)


@functools.lru_cache(maxsize=4096)
def _sample_seed(seed: int, sample: str) -> int:
    """The seed of draw ``sample`` (every call of a dialog's trial asks it again)."""
    return int(content_hash(seed, sample)[:8], 16)


def _failed_usage(exc: BaseException, prompt: int) -> Usage:
    """What an attempt that raised ``exc`` spent: the tokens the server counted (a provider
    error may carry them), and the prompt of one that timed out (the server read it)."""
    if isinstance(exc, (asyncio.TimeoutError, RequestTimeout)):
        return Usage(prompt_tokens=prompt)
    usage = exc.usage if isinstance(exc, ProviderError) else None
    return usage if usage is not None else Usage()


def _reseeded(request: ChatRequest, tries: int) -> ChatRequest:
    """``request`` as sent after ``tries`` failed attempts: the same but for a seed of its own
    (its key, under which the answer is cached, stays the request's)."""
    if not tries:
        return request
    seed = int(content_hash(request.seed, "retry", tries)[:8], 16)
    return request.model_copy(update={"seed": seed})

