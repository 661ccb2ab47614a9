"""Reading the user's YAML (keeping line numbers) and JSON files, and pydantic validation that
reports them: every fault of such a file is one ConfigError naming the file and line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Iterator, TypeVar

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor, SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from intellagent.bounds import MAX_YAML_VALUES
from intellagent.errors import ConfigError, IntellagentError

M = TypeVar("M", bound=BaseModel)


#: The most digits an integer of a file or a flag may have: Python refuses to read a longer one.
MAX_DIGITS = sys.get_int_max_str_digits() or 4_300


def too_many_digits(digits: int) -> str:
    return f"a number of {digits:,} digits, past the bound of {MAX_DIGITS:,}"


def _bounded_int(base: type) -> type:
    """``base``, a ruamel constructor, whose integers past :data:`MAX_DIGITS` digits are a YAML
    error at their line (Python's own ValueError has no line and ends the command as a crash)."""

    class Bounded(base):  # type: ignore[misc, valid-type]
        def construct_yaml_int(self, node: Any) -> Any:
            try:
                return super().construct_yaml_int(node)
            except ValueError:
                digits = sum(c.isdigit() for c in str(node.value))
                raise ConstructorError(None, None, too_many_digits(digits), node.start_mark) from None

    Bounded.add_constructor("tag:yaml.org,2002:int", Bounded.construct_yaml_int)
    return Bounded


_RoundTrip = _bounded_int(RoundTripConstructor)
_Safe = _bounded_int(SafeConstructor)


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.Constructor = _RoundTrip
    yaml.allow_duplicate_keys = False
    return yaml


def safe_yaml() -> YAML:
    """A plain-data YAML reader (no line information) whose long integers are YAML errors too."""
    yaml = YAML(typ="safe")
    yaml.Constructor = _Safe
    return yaml


def json_number_fault(text: str) -> tuple[str, int | None] | None:
    """Why ``json.loads(text)`` raised a ValueError that is not a syntax error, and the line: an
    integer past :data:`MAX_DIGITS` digits (the first run of that many digits), else None."""
    found = re.search(r"\d{%d,}" % (MAX_DIGITS + 1), text)
    if found is None:
        return None
    return too_many_digits(len(found.group())), text.count("\n", 0, found.start()) + 1


def _read_text(path: Path, kind: str) -> str:
    """The UTF-8 text of a ``kind`` file: missing, a folder or not UTF-8 is a ConfigError."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", file=path) from None
    except IsADirectoryError:
        raise ConfigError(f"is a folder, expected a {kind} file", file=path) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason})", file=path) from None


def expanded_size(data: Any) -> int:
    """How many values ``data`` holds with every shared (aliased) map or list counted each time
    it is used; computed once per distinct container, so an alias bomb costs no time here."""
    sizes: dict[int, int] = {}

    def size(value: Any) -> int:
        if not isinstance(value, (dict, list)):
            return 1
        if id(value) not in sizes:
            sizes[id(value)] = 0  # (a recursive alias counts once)
            children = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            sizes[id(value)] = min(1 + sum(size(child) for child in children), MAX_YAML_VALUES + 1)
        return sizes[id(value)]
    return size(data)


def check_expansion(data: Any, path: str | Path | None, line: int | None = None) -> Any:
    """``data`` as read, or a ConfigError when its aliases expand past the bound."""
    if expanded_size(data) > MAX_YAML_VALUES:
        raise ConfigError(f"its aliases expand to more than {MAX_YAML_VALUES:,} values (the bound of a "
                          "YAML file)", file=path, line=line)
    return data


def json_lines(text: str, path: Path, *, error: type[IntellagentError] = ConfigError,
               what: str = "not JSON") -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSONL text, parsed, with its line number; a line that is not JSON
    (or nested too deeply to read) is ``error("{what}: …")`` naming the file and line."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{what}: {exc.msg}", file=path, line=number) from None
        except RecursionError:
            raise error(f"{what}: nested too deeply", file=path, line=number) from None
        except ValueError as exc:  # e.g. an integer past Python's digit limit
            fault = json_number_fault(line)
            raise error(f"{what}: {fault[0] if fault else exc}", file=path, line=number) from None
        yield number, value


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file, keeping ruamel's line information on maps and sequences; one whose
    aliases expand past :data:`~intellagent.bounds.MAX_YAML_VALUES` values is refused."""
    path = Path(path)
    text = _read_text(path, "YAML")
    try:
        return check_expansion(_yaml().load(text), path)
    except RecursionError:
        raise ConfigError("invalid YAML: nested too deeply", file=path) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(f"invalid YAML: {problem}", file=path, line=line) from None
    except YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=path) from None


def read_json(path: str | Path) -> Any:
    """Parse a JSON file: a file that is missing, a folder, not UTF-8, not JSON or nested past
    the parser's depth is a ConfigError naming it (and the line)."""
    path = Path(path)
    text = _read_text(path, "JSON")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from None
    except RecursionError:
        raise ConfigError("invalid JSON: nested too deeply", file=path) from None
    except ValueError as exc:  # an integer past Python's digit limit
        fault = json_number_fault(text)
        raise ConfigError(f"invalid JSON: {fault[0] if fault else exc}", file=path,
                          line=fault[1] if fault else None) from None


def line_of(data: Any, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the node at ``loc`` (a pydantic error location), as deep as it resolves."""
    line: int | None = None
    node = data
    for key in loc:
        if isinstance(node, CommentedMap) and key in node:
            try:
                line = node.lc.key(key)[0] + 1
            except (KeyError, TypeError):
                pass
            node = node[key]
        elif isinstance(node, CommentedSeq) and isinstance(key, int) and 0 <= key < len(node):
            try:
                line = node.lc.item(key)[0] + 1
            except (KeyError, TypeError):
                pass
            node = node[key]
        else:
            break
    if line is None and isinstance(node, (CommentedMap, CommentedSeq)) and node.lc.line is not None:
        line = node.lc.line + 1
    return line


def format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def error_text(err: dict) -> str:
    """A pydantic error's message without the "Value error, " pydantic puts before the message
    of a validator of ours."""
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ") if err.get("type") == "value_error" else msg


def validate_data(model: type[M], data: Any, path: str | Path, *, context: dict | None = None) -> M:
    """Validate parsed YAML against ``model``; the first error names its file, line and key."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = error_text(err)
        if err["type"] == "extra_forbidden":
            msg = f"unknown key '{loc[-1]}'" if loc else "unknown key"
        elif err["type"] == "missing":
            msg = f"missing required key '{loc[-1]}'" if loc else "missing required key"
        where = format_loc(loc)
        more = len(exc.errors()) - 1
        tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
        raise ConfigError(f"{where + ': ' if where and err['type'] != 'extra_forbidden' else ''}{msg}{tail}",
                          file=path, line=line_of(data, loc)) from None


def load_model(model: type[M], path: str | Path, *, context: dict | None = None) -> M:
    """Read a YAML file and validate it against ``model``."""
    data = read_yaml(path)
    if data is None:
        raise ConfigError("file is empty", file=path)
    return validate_data(model, data, path, context=context)
