"""URL filter (prompt A.2): keep the search results worth reading, judged on title and snippet, with the
steering's site rules and, when on, the credibility prior (similarity x prior)."""


from __future__ import annotations

import numpy as np

from hifirag_core.config import caps_apply
from hifirag_core.credibility.rerank import score_with_prior
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.question_steering import Steer
from hifirag_core.pipeline.relevance import similarities
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    Record,
    SearchResultRecord,
    UrlDecisionRecord,
)
from hifirag_core.retrieval.scoring import keep_relative
from hifirag_core.types import (
    UrlCandidate,
)


def url_key(url: str) -> str:
    """A URL as the filter tells pages apart: without its fragment."""
    return url.split("#", 1)[0]


def _merged_hits(search: StageOutput) -> list[SearchResultRecord]:
    """Results of all queries interleaved by rank, each URL once."""
    ok = [r for r in search.records if isinstance(r, SearchResultRecord) and r.ok and r.url]
    ok.sort(key=lambda r: (r.rank or 0, r.query_index))
    seen: set[str] = set()
    merged = []
    for r in ok:
        key = url_key(r.url)
        if key not in seen:
            seen.add(key)
            merged.append(r)
    return merged


def fallback_url_decisions(search: StageOutput, status: str, message: str) -> list[Record]:
    """The search engine's top three, in its order."""
    out: list[Record] = []
    for rank, hit in enumerate(_merged_hits(search), 1):
        out.append(UrlDecisionRecord(url=hit.url or "", title=hit.title, snippet=hit.snippet, search_rank=rank,
                                     kept=rank <= 3, order=rank if rank <= 3 else None,
                                     method="fallback-search-rank", status=status, error=message))
    return out


def filter_urls(question: Question, results: StageOutput, rt: Runtime, read: tuple[str, ...] = ()) -> StageOutput:
    """Keep the URLs worth reading; with the credibility prior, order them by similarity x prior.

    Every row carries its source type and prior (and, with the prior on, its final score), so
    runs with and without the prior compare row by row. ``read``: URLs an earlier round of the question
    has read (a follow-up round never judges or reads one again).
    """
    every = _merged_hits(results)
    if read:
        before, read_keys = len(every), {url_key(u) for u in read}
        every = [h for h in every if url_key(h.url or "") not in read_keys]
        if before and not every:
            return StageOutput(records=[], status="no_new_results",
                               error=f"all {before} results were read in an earlier round")
    if not every:
        return StageOutput(records=[], status="no_results" if results.status == OK else results.status)
    # steering's site rules, on every URL: a result they rule out is never judged, fetched or cited
    rules = Steer(question, rt.cfg).sites
    excluded = [(h, rules.verdict(h.url or "")) for h in every if rules.verdict(h.url or "") is not None]
    hits = [h for h in every if rules.allows(h.url or "")]
    dropped: list[Record] = [
        UrlDecisionRecord(url=h.url or "", title=h.title, snippet=h.snippet, search_rank=every.index(h) + 1,
                          kept=False, method="steer:sites", status="excluded", error=why)
        for h, why in excluded]
    if not hits:
        return StageOutput(records=dropped, status="no_results", error="steering's site rules left no result")
    cfg = rt.cfg.url_filter
    cred = rt.cfg.credibility
    texts = [f"{h.title or ''}. {h.snippet or ''}" for h in hits]
    # the offline default's own cap; a model keeps what it keeps, and with the filter off every result is read
    max_urls = cfg.max_urls if caps_apply(rt.cfg, "filter" if cfg.enabled else "writer") else len(hits)
    if not cfg.enabled:
        kept, scores, method, calls = list(range(min(len(hits), max_urls))), None, "off", []
        status, error = OK, None
    else:
        candidates = [UrlCandidate(h.url or "", h.title or "", h.snippet or "") for h in hits]
        decision = rt.filter_model.select_urls(question.query, candidates, max_urls=max_urls)
        kept, scores, method, calls = decision.value, decision.scores, decision.method, decision.calls
        status, error = decision.status, decision.error
    sims = similarities(question.query, texts, scores, rt) if cred.enabled else scores
    priors = score_with_prior([h.url or "" for h in hits], sims or [0.0] * len(hits), cred,
                              vectors=rt.embedder.encode(texts) if cred.enabled and cred.smoothing else None)
    if cred.enabled:
        final = np.array([p.final_score for p in priors], dtype=np.float32)
        if scores is not None and cfg.enabled:  # a scoring method: choose again on the weighted scores
            kept = keep_relative(final, min_relative=cfg.min_relative_score, limit=max_urls)
        else:  # a model's list: keep its choice, in the order of the weighted similarity
            kept = sorted(kept, key=lambda i: -final[i])
        method = f"{method}+prior"
    order = {idx: pos for pos, idx in enumerate(kept, 1)}
    records: list[Record] = [
        UrlDecisionRecord(url=h.url or "", title=h.title, snippet=h.snippet,
                          search_rank=(every.index(h) + 1) if dropped else i + 1, kept=i in order,
                          order=order.get(i), score=scores[i] if scores else None, method=method,
                          source_type=priors[i].source_type, prior=priors[i].prior,
                          final_score=priors[i].final_score if cred.enabled else None, status=status, error=error)
        for i, h in enumerate(hits)
    ]
    return StageOutput(records=records + dropped, calls=list(calls), status=status, error=error)


def kept_urls(decisions: StageOutput) -> list[UrlDecisionRecord]:
    kept = [r for r in decisions.records if isinstance(r, UrlDecisionRecord) and r.kept]
    return sorted(kept, key=lambda r: r.order or 0)
