"""Named configurations: a variant is a set of overrides on the defaults."""

from __future__ import annotations

from typing import Any

from hifirag_core.config import ConfigError

VARIANTS: dict[str, dict[str, Any]] = {
    # The paper's final system: query rewriting, URL and section filters, two-pass generation,
    # citation verification.
    "final": {},
}


def variant_overrides(name: str) -> dict[str, Any]:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ConfigError(f"unknown variant {name!r}; known: {', '.join(sorted(VARIANTS))}") from None
