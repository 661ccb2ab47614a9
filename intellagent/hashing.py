"""Content hashes: the identity of everything the store keeps."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

from intellagent import jsontext


def content_hash(*parts: Any) -> str:
    """A stable hash of JSON-able parts (pydantic models are dumped first)."""
    data = [p.model_dump(mode="json") if isinstance(p, BaseModel) else p for p in parts]
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def json_copy(value: Any) -> Any:
    """A deep copy of plain JSON data (dicts with string keys, lists, strings, numbers, booleans,
    None) through a C JSON codec: many times as fast as ``copy.deepcopy`` on a JSON Schema."""
    return jsontext.copy(value)
