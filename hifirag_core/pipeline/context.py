"""What web content the writer is sent, and how much.

The numbered sources (``build_sources``): the pages that kept sections, each with its kept sections, best first,
within the bound below.

The paper sends the writer every section the filters kept. Its bound is the model itself: the
content must fit the model's context window, and the run must be able to pay for it. So with a
model writer the content is bounded in tokens, by the smallest window of the models that read it
(the writer's two passes, and the filter model's citation check), less ``generation.reserve_tokens``
for the prompts' own text and the replies, and by what is left of the run's budget (the content is
sent three times: draft, refine, citations). The offline writer keeps its own cap in characters
(``generation.max_context_chars``), and so does any writer under ``limits.caps=on``.

Tokens are estimated from characters: English prose averages about four characters per token with
the Gemini, GPT and Gemma tokenizers; :data:`CHARS_PER_TOKEN` takes three, so an estimate errs on
the side of fitting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hifirag_core.config import GenerationConfig, PipelineConfig, caps_apply
from hifirag_core.limits import Budget
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.questions import Question
from hifirag_core.records import PageRecord, SectionDecisionRecord, SectionRecord
from hifirag_core.retrieval.scoring import bm25_scores
from hifirag_core.text import split_sentences
from hifirag_core.types import SourceDoc, SourceSection

if TYPE_CHECKING:
    from hifirag_core.pipeline.runtime import Runtime

CHARS_PER_TOKEN = 3.0
# The fewest content tokens a bound leaves: a few sections, so a nearly spent budget still answers.
MIN_CONTENT_TOKENS = 256


@dataclass(frozen=True)
class ContextLimit:
    """The bound on the writer's web content, and how content over it is cut."""

    chars: int
    proportional: bool  # True: every section trimmed alike (the offline cap); False: best sections kept whole
    why: str


def context_limit(cfg: PipelineConfig, budget: Budget | None = None) -> ContextLimit:
    """The bound for this configuration and what is left of the run's ``budget``."""
    gen = cfg.generation
    if caps_apply(cfg, "writer"):
        return ContextLimit(gen.max_context_chars, True, f"generation.max_context_chars={gen.max_context_chars}")
    readers = [cfg.models.writer]
    if cfg.citations.enabled and cfg.backends.filter_llm != "offline":
        readers.append(cfg.models.filter)
    windows = {m: cfg.models.context_tokens.get(m, cfg.models.default_context_tokens) for m in readers}
    model = min(windows, key=lambda m: windows[m])
    tokens = windows[model] - gen.reserve_tokens
    why = f"{model}'s window of {windows[model]:,} tokens less {gen.reserve_tokens:,} reserved"
    affordable = _affordable_tokens(cfg, budget)
    if affordable is not None and affordable < tokens:
        tokens, why = affordable, f"what is left of the run's budget ({affordable:,} content tokens)"
    tokens = max(MIN_CONTENT_TOKENS, tokens)
    return ContextLimit(int(tokens * CHARS_PER_TOKEN), False, why)


def _affordable_tokens(cfg: PipelineConfig, budget: Budget | None) -> int | None:
    """Content tokens the rest of the budget pays for, sent to the draft, refine and citation calls."""
    if budget is None:
        return None
    readers = 2 + (cfg.citations.enabled and cfg.backends.filter_llm != "offline")
    spent_usd, spent_tokens = budget.spent()  # the run's, over every process when they share a ledger
    bounds = []
    if budget.limit_tokens is not None:
        bounds.append((budget.limit_tokens - spent_tokens) // readers)
    if budget.limit_usd is not None:
        prices = [cfg.models.prices.get(cfg.models.writer)] * 2
        if readers == 3:
            prices.append(cfg.models.prices.get(cfg.models.filter))
        if all(p is not None for p in prices):
            per_token = sum(p.input for p in prices if p is not None) / 1_000_000
            bounds.append(int(round((budget.limit_usd - spent_usd) / per_token, 3)) if per_token > 0 else None)
    known = [b for b in bounds if b is not None]
    return max(0, min(known)) if known else None


def build_sources(question: Question, pages: StageOutput, sections: StageOutput, ranking: StageOutput,
                  cfg: GenerationConfig, limit: ContextLimit | None = None) -> list[SourceDoc]:
    """Number the pages that kept sections [1..n], each with its kept sections, best first.

    With ``sentence_select=bm25`` each section keeps only its sentences closest to the question (in
    their original order). Then the content is bounded by ``limit`` (default: the offline cap,
    ``max_context_chars``, every section trimmed alike); a model's bound keeps the best-ranked sections
    whole, rank by rank across the pages, and cuts the one that overflows at a sentence's end.
    """
    limit = limit or ContextLimit(cfg.max_context_chars, True, "generation.max_context_chars")
    text_of = {s.section_id: s for s in sections.records if isinstance(s, SectionRecord) and s.ok}
    kept_by_url: dict[str, list[SectionDecisionRecord]] = {}
    for d in ranking.records:
        if isinstance(d, SectionDecisionRecord) and d.kept and d.section_id in text_of:
            kept_by_url.setdefault(d.url, []).append(d)
    ordered = [p for p in pages.records if isinstance(p, PageRecord) and p.url in kept_by_url]
    ordered.sort(key=lambda p: p.order)
    texts = {sid: sec.text or "" for sid, sec in text_of.items()}
    if cfg.sentence_select == "bm25":
        texts = {sid: select_sentences(question.query, text, cfg.sentences_per_section) for sid, text in texts.items()}
    by_page = {p.url: sorted(kept_by_url[p.url], key=lambda d: d.rank or 0) for p in ordered}
    if limit.proportional:
        total = sum(len(texts[d.section_id]) for ds in by_page.values() for d in ds)
        share = min(1.0, limit.chars / total) if total else 1.0  # trim every section alike to fit the context
        sent = {d.section_id: trim_at_sentence(texts[d.section_id], max(200, int(len(texts[d.section_id]) * share)))
                for ds in by_page.values() for d in ds}
    else:
        sent = _fill_context([(p.order, by_page[p.url]) for p in ordered], texts, limit.chars)
    sources = []
    for page in ordered:
        decisions = [d for d in by_page[page.url] if d.section_id in sent]
        if not decisions:
            continue
        secs = tuple(SourceSection(d.section_id, tuple(text_of[d.section_id].heading_path), sent[d.section_id],
                                   d.score) for d in decisions)
        sources.append(SourceDoc(len(sources) + 1, page.url, page.title or "", decisions[0].preview, secs,
                                 published=page.published))
    return sources


def writer_context(rt: Runtime) -> ContextLimit:
    """The bound on the writer's web content in this run, now (``hifirag_core.pipeline.context``)."""
    return context_limit(rt.cfg, rt.guards.budget if rt.guards is not None else None)


_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)|\n")


def trim_at_sentence(text: str, chars: int) -> str:
    """``text`` in at most ``chars`` characters, cut after its last sentence (or line) that ends within them,
    else after its last whole word: a writer that copies sentences must never copy half a word."""
    if len(text) <= chars:
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, chars + 1) if m.end() <= chars]
    if ends:
        return text[:ends[-1]].rstrip()
    space = text.rfind(" ", 0, chars + 1)
    return text[:space].rstrip() if space > 0 else text[:chars]


def _fill_context(pages: list[tuple[int, list[SectionDecisionRecord]]], texts: dict[str, str],
                  max_chars: int) -> dict[str, str]:
    """Section id -> text sent: every page's best section first, then every page's second, ... until
    ``max_chars``; the section that overflows is cut after its last whole sentence that fits."""
    queue = sorted(((rank, order, d.section_id) for order, ds in pages for rank, d in enumerate(ds)))
    sent: dict[str, str] = {}
    left = max_chars
    for _, _, sid in queue:
        text = texts[sid]
        if len(text) <= left:
            sent[sid], left = text, left - len(text)
            continue
        cut = ""
        for sentence in split_sentences(text):
            if len(cut) + len(sentence) + 1 > left:
                break
            cut = f"{cut} {sentence}".strip()
        if cut:
            sent[sid] = cut
        break
    return sent


def select_sentences(question: str, text: str, k: int) -> str:
    """The ``k`` sentences of ``text`` that BM25 scores highest for ``question``, in text order."""
    sentences = split_sentences(text)
    if len(sentences) <= k:
        return text
    scores = bm25_scores(question, sentences)
    keep = sorted(sorted(range(len(sentences)), key=lambda i: -scores[i])[:k])
    return " ".join(sentences[i] for i in keep)
