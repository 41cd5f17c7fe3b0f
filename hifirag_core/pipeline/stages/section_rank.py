"""Section ranking (prompt A.3): each page's sections judged from heading + first 200 characters, one call per
page (or several when its section list does not fit the model's window)."""


from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hifirag_core.config import caps_apply
from hifirag_core.cpu import in_context
from hifirag_core.credibility.rerank import score_with_prior
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.overlap import PAGE_PARALLELISM, EarlyKey
from hifirag_core.pipeline.relevance import similarities
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.pipeline.stages.url_filter import kept_urls
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    LLMCallRecord,
    PageRecord,
    Record,
    SectionDecisionRecord,
    SectionRecord,
    UrlDecisionRecord,
)
from hifirag_core.text import section_preview
from hifirag_core.types import (
    Decision,
    PageOverview,
    SectionPreview,
)


def fallback_section_decisions(sections: StageOutput, status: str, message: str) -> list[Record]:
    """Each page's first two sections, in page order."""
    out: list[Record] = []
    per_page: dict[str, int] = {}
    for sec in sections.records:
        assert isinstance(sec, SectionRecord)
        n = per_page[sec.url] = per_page.get(sec.url, 0) + 1
        out.append(SectionDecisionRecord(url=sec.url, section_id=sec.section_id, heading=sec.heading,
                                         kept=n <= 2, rank=n if n <= 2 else None,
                                         method="fallback-page-order", status=status, error=message))
    return out


def _pages_to_rank(decisions: StageOutput, pages: StageOutput, sections: StageOutput, rt: Runtime
                   ) -> list[tuple[PageRecord, list[SectionRecord], PageOverview, list[SectionPreview]]]:
    """Each page with sections: its sections, its overview and the previews the ranker reads."""
    chars = rt.cfg.section_rank.preview_chars
    snippets = {r.url: r for r in kept_urls(decisions)}
    by_url: dict[str, list[SectionRecord]] = {}
    for sec in sections.records:
        if isinstance(sec, SectionRecord) and sec.ok and sec.text:
            by_url.setdefault(sec.url, []).append(sec)
    return [(page, by_url[page.url], *page_to_rank(page, by_url[page.url], snippets, chars))
            for page in pages.records if isinstance(page, PageRecord) and by_url.get(page.url)]


def page_to_rank(page: PageRecord, secs: list[SectionRecord], snippets: dict[str, UrlDecisionRecord], chars: int
                  ) -> tuple[PageOverview, list[SectionPreview]]:
    """A page's overview and the previews of its sections, as the ranker reads them."""
    hit = snippets.get(page.url)
    overview = PageOverview(page.url, page.title or "", (hit.snippet if hit else "") or "")
    return overview, [SectionPreview(s.section_id, s.heading, section_preview(s.heading_path, s.text, chars))
                      for s in secs]


def section_rank_window(question: Question, decisions: StageOutput, pages: StageOutput, sections: StageOutput,
                        rt: Runtime) -> str | None:
    """The filter model's window when a page's section list does not fit it in one call, else None.

    It keys section ranking only then: a question whose pages all fit keeps the key it always had (and its
    stored rankings), while one with a page to split is ranked again under a new key (a ranking stored before
    splitting existed may hold that page's fallback) and again whenever the window changes.
    """
    window = getattr(rt.filter_model, "window", None)
    fits = getattr(rt.filter_model, "sections_fit", None)
    if window is None or fits is None or not rt.cfg.section_rank.enabled:
        return None
    for _, _, overview, previews in _pages_to_rank(decisions, pages, sections, rt):
        if not fits(question.query, overview, previews):
            return f"{window.context_tokens}/{window.reply_tokens}"
    return None


def rank_sections(question: Question, decisions: StageOutput, pages: StageOutput, sections: StageOutput,
                  rt: Runtime) -> StageOutput:
    """Rank each page's sections; the pages are judged in parallel (one model call each, as in A.3, or several
    for a page whose section list does not fit the model's window)."""
    cfg = rt.cfg.section_rank
    pages_to_rank = _pages_to_rank(decisions, pages, sections, rt)
    work = [(page, secs) for page, secs, _, _ in pages_to_rank]
    capped = caps_apply(rt.cfg, "filter")  # the offline default's own caps; a model keeps what it keeps
    per_page = sections_per_page(rt)

    def judge(overview: PageOverview, previews: list[SectionPreview]
              ) -> tuple[list[SectionPreview], Decision[list[int]]]:
        early = rt.early.take(EarlyKey.ranking(question, overview, previews, per_page, rt.cfg.section_rank.enabled))
        return previews, early if early is not None else judge_page(question, overview, previews, per_page, rt)

    # Each call carries this context (the question's deadline) into its worker thread.
    with ThreadPoolExecutor(max_workers=max(1, min(PAGE_PARALLELISM, len(work)))) as pool:
        futures = [pool.submit(in_context(judge), overview, previews) for _, _, overview, previews in pages_to_rank]
        judged = [f.result() for f in futures]
    records: list[SectionDecisionRecord] = []
    calls: list[LLMCallRecord] = []
    cred = rt.cfg.credibility
    for (page, secs), (previews, decision) in zip(work, judged, strict=True):
        calls.extend(decision.calls)
        rank = {idx: pos for pos, idx in enumerate(decision.value, 1)}
        texts = [p.preview for p in previews]
        sims = similarities(question.query, texts, decision.scores, rt) if cred.enabled else decision.scores
        priors = score_with_prior([page.url] * len(secs), sims or [0.0] * len(secs), cred)
        records.extend(
            SectionDecisionRecord(url=page.url, section_id=s.section_id, source_order=page.order, heading=s.heading,
                                  preview=p.preview, kept=i in rank, rank=rank.get(i),
                                  score=decision.scores[i] if decision.scores else None,
                                  method=decision.method + ("+prior" if cred.enabled else ""),
                                  source_type=priors[i].source_type, prior=priors[i].prior,
                                  final_score=priors[i].final_score if cred.enabled else None)
            for i, (s, p) in enumerate(zip(secs, previews, strict=True))
        )
    _cap_total(records, cfg.max_sections_total if cfg.enabled and capped else None)
    bad = [d.status for _, d in judged if d.status != OK]
    status = bad[0] if judged and len(bad) == len(judged) else OK
    return StageOutput(records=list(records), calls=list(calls), status=status)


def judge_page(question: Question, overview: PageOverview, previews: list[SectionPreview], per_page: int | None,
               rt: Runtime) -> Decision[list[int]]:
    """One page's sections ranked (prompt A.3): the filter model reads this page's previews and no other's."""
    if not rt.cfg.section_rank.enabled:
        return Decision(list(range(len(previews))), method="off")
    return rt.filter_model.rank_sections(question.query, overview, previews, max_sections=per_page or len(previews))


def sections_per_page(rt: Runtime) -> int | None:
    """The offline default's cap on the sections a page keeps; a model keeps what it keeps."""
    return rt.cfg.section_rank.max_sections_per_page if caps_apply(rt.cfg, "filter") else None


def _cap_total(records: list[SectionDecisionRecord], limit: int | None) -> None:
    """Keep at most ``limit`` sections over all pages: the best (weighted) scores, else page order then rank."""
    kept = [r for r in records if r.kept]
    if limit is None or len(kept) <= limit:
        return
    if all(r.final_score is not None for r in kept):  # the credibility prior is on
        kept.sort(key=lambda r: -(r.final_score or 0.0))
    elif all(r.score is not None for r in kept):
        kept.sort(key=lambda r: -(r.score or 0.0))
    else:
        kept.sort(key=lambda r: (r.rank or 0, r.source_order))
    for r in kept[limit:]:
        r.kept, r.rank = False, None
