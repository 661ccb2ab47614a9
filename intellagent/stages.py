"""The base class of stage plugins (extractor, sampler, generator, simulator, critic, reporter)."""

from __future__ import annotations

from typing import Any, ClassVar

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

    async def extract(self, ctx: Any) -> Any:
        raise NotImplementedError


class Sampler(Stage):
    """PolicyGraph → EventSpecs."""

    kind = "sampler"

    def sample(self, ctx: Any, graph: Any, events: int) -> list[Any]:
        raise NotImplementedError
