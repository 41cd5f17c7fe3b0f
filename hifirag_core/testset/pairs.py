"""Question-answer pairs out of a model's reply to prompt A.6: a pure, tolerant parser.

A.6 asks for ``.jsonl``, and models answer with JSON Lines, often inside a code fence, sometimes as
one JSON array, with a numbered list around the objects, a sentence before or after, trailing
commas, single quotes, or other key names (``question``/``answer``). Every JSON object that holds a
question and an answer is a pair, found where it stands in the reply (its character span, which the
grounding metadata's spans are matched against); everything else is skipped and said why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hifirag_core.llm.parsing import loads_lenient

_PAIR_START = re.compile(r"\{\s*[\"']?(?:query|question|q|prompt|user_query)[\"']?\s*:", re.IGNORECASE)
QUERY_KEYS = ("query", "question", "q", "prompt", "user_query")
REFERENCE_KEYS = ("reference", "answer", "a", "response", "ground_truth", "gold_answer")


@dataclass(frozen=True)
class ParsedPair:
    """One pair and the characters ``[start, end)`` of the reply it was read from."""

    query: str
    reference: str
    start: int
    end: int


@dataclass
class PairParse:
    """The pairs a reply held, in reply order, and why anything else was skipped."""

    pairs: list[ParsedPair] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.pairs)


def _field(obj: dict[str, Any], keys: tuple[str, ...]) -> Any:
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    return next((lowered[k] for k in keys if k in lowered), None)


def _text(value: Any) -> str:
    return str(value).strip() if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""


def _object_at(text: str, start: int, decoder: json.JSONDecoder) -> tuple[Any, int] | None:
    """The JSON value starting at ``start`` and where it ends; a line with a trailing comma or
    single quotes is read leniently."""
    try:
        return decoder.raw_decode(text, start)
    except json.JSONDecodeError:
        pass
    line_end = text.find("\n", start)
    line_end = len(text) if line_end == -1 else line_end
    snippet = text[start:line_end].rstrip().rstrip(",").rstrip()
    value = loads_lenient(snippet)
    return (value, start + len(snippet)) if isinstance(value, dict) else None


def parse_qa_pairs(text: str | None) -> PairParse:
    """Every ``{query, reference}`` object of ``text`` (other key names accepted, see the keys above)."""
    out = PairParse()
    if not text:
        out.problems.append("empty reply")
        return out
    decoder = json.JSONDecoder()
    i = 0
    while (i := text.find("{", i)) != -1:
        found = _object_at(text, i, decoder)
        if found is None or not isinstance(found[0], dict):
            if _PAIR_START.match(text, i):  # a pair that does not parse (a reply cut short): never half-read
                out.problems.append(f"unreadable object at character {i}: {text[i:i + 80]!r}")
            i += 1
            continue
        obj, end = found
        query, reference = _field(obj, QUERY_KEYS), _field(obj, REFERENCE_KEYS)
        if query is None and reference is None:
            i += 1  # a wrapper such as {"pairs": [...]}: its objects are read one by one
            continue
        q, r = " ".join(_text(query).split()), _text(reference)
        if not q or not r:
            out.problems.append(f"object at character {i} lacks {'a question' if not q else 'an answer'}: "
                                f"{text[i:min(end, i + 80)]!r}")
        else:
            out.pairs.append(ParsedPair(q, r, i, end))
        i = end
    if not out.pairs and not out.problems:
        out.problems.append("no JSON object with a question and an answer in the reply")
    return out
