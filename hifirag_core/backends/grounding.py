"""Replies grounded in a live web search: the sources, and which span of the reply each one supports.

Gemini's Google Search grounding returns ``candidates[0].groundingMetadata`` beside the text
(https://ai.google.dev/api/generate-content#GroundingMetadata): ``webSearchQueries``,
``groundingChunks[].web.{uri, title, domain}`` and ``groundingSupports[]`` with a ``segment``
(``partIndex``, ``startIndex``, ``endIndex``, ``text``) and the ``groundingChunkIndices`` that
support it. Segment offsets count UTF-8 *bytes* of one part; proto3 JSON leaves out zeros, so a
missing ``startIndex`` or ``partIndex`` is 0. On the Gemini Developer API the ``uri`` is a
``vertexaisearch.cloud.google.com/grounding-api-redirect/...`` link that redirects to the page,
``title`` is usually the site's domain and ``domain`` is unset (googleapis/python-genai#1512), so
the page itself, and its date, are only known after following the link.

:func:`grounding_from_parts` turns that metadata into character spans of the reply text;
:class:`GroundedReply` is what a :class:`SearchGroundedModel` returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hifirag_core.records import LLMCallRecord


@dataclass(frozen=True)
class GroundingSource:
    """One web source the search tool retrieved (a grounding chunk)."""

    index: int  # position in groundingChunks; supports refer to it
    uri: str
    title: str
    domain: str | None = None


@dataclass(frozen=True)
class GroundingSupport:
    """A span of the reply text (characters, end exclusive) and the sources that support it."""

    start: int
    end: int
    text: str
    sources: tuple[int, ...]
    confidence: tuple[float, ...] = ()


@dataclass(frozen=True)
class Grounding:
    """A reply's grounding: the searches made, the sources found, the spans they support."""

    queries: tuple[str, ...]
    sources: tuple[GroundingSource, ...]
    supports: tuple[GroundingSupport, ...]

    def sources_within(self, start: int, end: int) -> list[int]:
        """Source indices of the supports overlapping characters ``[start, end)``, first seen first."""
        found: list[int] = []
        for support in self.supports:
            if support.start < end and support.end > start:
                found.extend(i for i in support.sources if i not in found and 0 <= i < len(self.sources))
        return found


@dataclass
class GroundedReply:
    """A model's reply with its grounding; ``text`` is None when the call failed or was blocked,
    ``grounding`` None when the model answered without searching."""

    text: str | None
    call: LLMCallRecord
    grounding: Grounding | None


class SearchGroundedModel(Protocol):
    """A chat model that can search the web while it answers (Gemini with Google Search)."""

    backend: str
    model: str

    def chat_with_search(self, prompt: str, *, seed: int | None, stage: str, prompt_name: str,
                         prompt_hash: str) -> GroundedReply: ...


def _get(obj: Any, *names: str) -> Any:
    """A field of a dict (camelCase wire or snake_case dump) or an SDK object, whichever is present."""
    for name in names:
        value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _char_offset(part_text: str, byte_offset: int) -> int:
    """Characters of ``part_text`` before UTF-8 byte ``byte_offset`` (a split character counts as before)."""
    return len(part_text.encode("utf-8")[: max(0, byte_offset)].decode("utf-8", errors="ignore"))


def grounding_from_parts(metadata: Any, part_texts: Sequence[str | None]) -> Grounding | None:
    """The grounding of a reply whose answer text is the concatenation of ``part_texts`` (None for a
    part that is not answer text, such as a thought), from ``groundingMetadata`` as wire JSON, an SDK
    dump or an SDK object. None when the metadata holds no source."""
    if metadata is None:
        return None
    chunks = _get(metadata, "groundingChunks", "grounding_chunks") or []
    sources = []
    for i, chunk in enumerate(chunks):
        web = _get(chunk, "web") or {}
        uri = _get(web, "uri")
        sources.append(GroundingSource(i, str(uri or ""), str(_get(web, "title") or ""), _get(web, "domain")))
    if not any(s.uri for s in sources):
        return None
    starts, pos = [], 0
    for part in part_texts:
        starts.append(pos)
        pos += len(part or "")
    text = "".join(p or "" for p in part_texts)
    supports = []
    for raw in _get(metadata, "groundingSupports", "grounding_supports") or []:
        segment = _get(raw, "segment") or {}
        part = int(_get(segment, "partIndex", "part_index") or 0)
        part_text = part_texts[part] if 0 <= part < len(part_texts) else None
        said = str(_get(segment, "text") or "")
        if part_text is None:
            continue
        start = starts[part] + _char_offset(part_text, int(_get(segment, "startIndex", "start_index") or 0))
        end = starts[part] + _char_offset(part_text, int(_get(segment, "endIndex", "end_index") or 0))
        if said and text[start:end] != said and (found := text.find(said)) >= 0:
            start, end = found, found + len(said)  # offsets that disagree with the quoted text lose to it
        indices = tuple(int(i) for i in _get(raw, "groundingChunkIndices", "grounding_chunk_indices") or [])
        scores = tuple(float(s) for s in _get(raw, "confidenceScores", "confidence_scores") or [])
        if end > start and indices:
            supports.append(GroundingSupport(start, end, text[start:end], indices, scores))
    queries = tuple(str(q) for q in _get(metadata, "webSearchQueries", "web_search_queries") or [])
    return Grounding(queries, tuple(sources), tuple(supports))
