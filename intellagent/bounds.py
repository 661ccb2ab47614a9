"""The upper bounds of every size a user can pass (docs/input-and-bounds.md, Bounds). Options that count things
carry them (``Field(le=...)``), so a value past its bound is refused when the pipeline is
resolved, before any work; the runner also refuses a step that makes more than
:data:`MAX_ITEMS` items however it got there (a long task file, fan-outs that multiply)."""

#: Items one step may make in a run: the elements of a list it gives, and its items across every
#: fan-out it runs in. About 1.5 KB of memory each while a list is in hand (200,000 event specs:
#: 410 MB), and the runner numbers a fan-out's items with six digits.
MAX_ITEMS = 100_000

#: Rounds of any repair, feedback or retry loop (each round is a model call or more).
MAX_ROUNDS = 20

#: Turns of a dialog, tool calls of one agent turn, candidates or members asked at once.
MAX_TURNS = 200

#: Characters of text a step puts into one prompt (a transcript, records, a policy).
MAX_CHARS = 1_000_000

#: Values a YAML file may hold once its aliases are expanded: ten lines of anchors, each
#: repeating the last ten times, make a billion (validating them took over 2 minutes and 1.4 GB).
MAX_YAML_VALUES = 1_000_000

#: Bytes of one seed file, once decompressed: a .gz of 100 KB can hold a gigabyte (τ-bench's
#: largest seed file is 1.4 MB; every event copies the seed database).
MAX_SEED_BYTES = 100_000_000

#: Seconds of any one timeout or back-off.
MAX_SECONDS = 3_600

#: Processes, Ray workers, requests or items in flight at once.
MAX_PARALLEL = 10_000

#: Dollars per million tokens of a price a run gives (``llm.prices``); the dearest model listed by
#: genai-prices costs about $600.
MAX_PRICE = 1_000_000
