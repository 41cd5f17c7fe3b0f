"""Stable content hashes for cache keys, ids and the blob store."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime
from typing import Any


def _default(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, bytes):
        return sha256_bytes(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    raise TypeError(f"cannot hash {type(obj).__name__}")


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_default)


def stable_hash(value: Any, length: int = 16) -> str:
    """Hex digest of a JSON-able value (dataclasses, pydantic models and bytes included)."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_hash(text: str, length: int = 16) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]
