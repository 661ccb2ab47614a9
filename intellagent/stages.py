"""The base class of stage plugins (extractor, sampler, generator, simulator, critic, reporter)."""

from __future__ import annotations

from typing import Any, ClassVar

from intellagent.artefacts import Dialog, Event, EventSpec, PolicyGraph, Verdict
from intellagent.environment import Environment
from intellagent.model import StrictModel

STAGE_KINDS = ("extractor", "sampler", "generator", "simulator", "critic", "reporter")


class NoOptions(StrictModel):
    """A stage that takes no options still refuses unknown ones."""


class Stage:
    """A pipeline stage. Subclasses set ``kind``, ``name``, their ``Config`` model and the
    artefact types they ``consumes`` and ``produces``, so a pipeline is checked before it runs."""

    kind: ClassVar[str]
    name: ClassVar[str]
    Config: ClassVar[type[StrictModel]] = NoOptions
    consumes: ClassVar[tuple[type, ...]] = ()
    produces: ClassVar[tuple[type, ...]] = ()

    def __init__(self, config: StrictModel, **context: Any) -> None:
        self.config = config
        self.context = context


class Extractor(Stage):
    """Environment → PolicyGraph."""

    kind = "extractor"
    consumes = (Environment,)
    produces = (PolicyGraph,)

    async def extract(self, ctx: Any) -> Any:
        raise NotImplementedError


class Sampler(Stage):
    """PolicyGraph → EventSpecs."""

    kind = "sampler"
    consumes = (PolicyGraph,)
    produces = (EventSpec,)

    def sample(self, ctx: Any, graph: Any, events: int) -> list[Any]:
        raise NotImplementedError


class Generator(Stage):
    """EventSpec (+ PolicyGraph) → Event."""

    kind = "generator"
    consumes = (PolicyGraph, EventSpec)
    produces = (Event,)

    async def generate(self, ctx: Any, graph: Any, spec: Any) -> Any:
        raise NotImplementedError


class Simulator(Stage):
    """Event → Dialog."""

    kind = "simulator"
    consumes = (PolicyGraph, Event)
    produces = (Dialog,)

    async def simulate(self, ctx: Any, graph: Any, event: Any) -> Any:
        raise NotImplementedError


class Critic(Stage):
    """Event + Dialog → Verdict."""

    kind = "critic"
    consumes = (PolicyGraph, Event, Dialog)
    produces = (Verdict,)

    async def critique(self, ctx: Any, graph: Any, event: Any, dialog: Any) -> Any:
        raise NotImplementedError
