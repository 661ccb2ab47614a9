"""A mock/function model that records every response model it is asked for and the call site
that asked (for tests/test_response_schemas.py). Runs name it as ``tests.schema_recorder:NAME``,
the name the test imports it by, so both see one ``SEEN``."""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

from intellagent.llm.fabricate import fabricate

REPO = Path(__file__).resolve().parent.parent
SEEN: dict[tuple[str, int], set[type]] = {}
LAYER = ("intellagent/llm/", "intellagent/context.py", "plugins/providers/")  # forwarding, not asking


def _site() -> tuple[str, int] | None:
    """The file and line of the ``ctx.llm.structured(...)`` call being answered: the first
    frame of ours outside the LLM layer, or where the task's coroutine was made (a call made in
    a comprehension and gathered runs in a task of its own)."""
    frame = sys._getframe(2)
    while frame is not None and "asyncio" not in Path(frame.f_code.co_filename).parts:  # the task's own frames
        site = _ours(frame.f_code.co_filename, frame.f_lineno)
        if site:
            return site
        frame = frame.f_back
    task = asyncio.current_task()
    for filename, line, _ in (task.get_coro().cr_origin or ()) if task else ():
        site = _ours(filename, line)
        if site:
            return site
    return None


def _ours(filename: str, line: int) -> tuple[str, int] | None:
    path = Path(filename).resolve()
    try:
        rel = path.relative_to(REPO).as_posix()
    except ValueError:
        return None
    if rel.startswith(("intellagent/", "plugins/")) and not rel.startswith(LAYER):
        return rel, line
    return None


def recording(inner=None):
    def answer(request, response_model):
        if response_model is not None:
            site = _site()
            assert site is not None, "a structured call from outside intellagent/ and plugins/"
            SEEN.setdefault(site, set()).add(response_model)
        if inner is not None:
            return inner(request, response_model)
        if response_model is None:
            return "Alright."
        return fabricate(response_model.model_json_schema(), random.Random(request.key()))
    return answer


def _apigen(request, model):
    """tests.test_apigen_mt's model, whose candidate user turns differ by their seed (so the
    best-of-n user's judge is asked too)."""
    from tests.test_apigen_mt import fake_model
    answer = fake_model(request, model)
    if getattr(model, "__name__", "") == "UserTurn":
        answer = {**answer, "thought": f"{answer['thought']} {request.seed}"}
    return answer


def _almita(request, model):
    from tests.almita_script import answer
    return answer(request, model)


def _tooltalk(request, model):
    from tests.tooltalk_writer import reply
    return reply(request, model)


plain = recording()
tooltalk = recording(_tooltalk)
apigen = recording(_apigen)
almita = recording(_almita)
