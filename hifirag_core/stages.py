"""The pipeline's stages as plain functions: records in, records out.

Each stage takes the question and the outputs of the stages it depends on and returns a
``StageOutput``: the rows for its warehouse table, the LLM calls it made, and (``value``) what a
later stage needs that the warehouse does not store. Stages never raise for a bad model reply or
a page that failed to load (those become rows with a status); they raise ``BackendError`` when a
backend is down, so the orchestrator can retry, and then call ``failed_output`` to go on with
what the question has.

``cache_key`` says exactly what a stage's output depends on: its inputs, the config slice it
reads, the identity of the backend or model it calls (with prompt hashes), and its version.
"""

from __future__ import annotations

import contextvars
import functools
import json
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from hifirag_core.answerability import CALIBRATION, abstention_text, strip_answerability
from hifirag_core.answerability import decide as decide_answerability
from hifirag_core.backends.base import (
    RETRYABLE_FETCH_STATUSES,
    BackendError,
    ChatTurn,
    Conversation,
    Decision,
    FetchResult,
    PageOverview,
    SectionPreview,
    SourceDoc,
    SourceSection,
    TransientError,
    UrlCandidate,
)
from hifirag_core.backends.offline import strip_markers
from hifirag_core.config import GenerationConfig
from hifirag_core.credibility.rerank import score_with_prior
from hifirag_core.hashing import stable_hash
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    AnswerRecord,
    CitationRecord,
    DraftRecord,
    LLMCallRecord,
    PageRecord,
    QueryPlanRecord,
    Record,
    SearchResultRecord,
    SectionDecisionRecord,
    SectionRecord,
    UrlDecisionRecord,
    content_row,
    utcnow,
)
from hifirag_core.reddit import (
    RedditError,
    RedditThreadNotFound,
    is_thread_url,
    select_tree,
    thread_from_json,
    thread_sections,
    thread_to_json,
)
from hifirag_core.retrieval import bm25_scores, keep_relative
from hifirag_core.sectioning import SECTIONER_VERSION, parse_sections
from hifirag_core.text import split_sentences, word_count

if TYPE_CHECKING:
    from hifirag_core.runtime import Runtime

# (stage, table) in pipeline order
STAGES: tuple[tuple[str, str], ...] = (
    ("query_plan", "query_plans"),
    ("search", "search_results"),
    ("url_filter", "url_decisions"),
    ("fetch", "pages"),
    ("sections", "sections"),
    ("section_rank", "section_decisions"),
    ("draft", "drafts"),
    ("refine", "drafts"),
    ("citations", "citations"),
    ("answer", "answers"),
)
STAGE_NAMES = tuple(s for s, _ in STAGES)
# Pages fetched, or judged by section ranking, at once within one question (providers' limits still apply).
PAGE_PARALLELISM = 8
STAGE_TABLE = dict(STAGES)


@dataclass
class StageOutput:
    stage: str
    records: list[Record]
    calls: list[LLMCallRecord] = field(default_factory=list)
    value: Any = None
    status: str = OK
    error: str | None = None
    # How long computing this output took. It travels with the output into the stage cache, so a
    # cache hit still knows what the stage costs to compute.
    compute_seconds: float | None = None

    @property
    def table(self) -> str:
        return STAGE_TABLE[self.stage]


def timed(stage_fn: Callable[..., StageOutput]) -> Callable[..., StageOutput]:
    """Stamp a stage function's output with the seconds it took."""

    @functools.wraps(stage_fn)
    def run(*args: Any, **kwargs: Any) -> StageOutput:
        began = time.perf_counter()
        output = stage_fn(*args, **kwargs)
        output.compute_seconds = round(time.perf_counter() - began, 4)
        return output

    return run


# --- cache keys -------------------------------------------------------------------------------

# Bump a stage's version when its code changes what it outputs.
STAGE_VERSIONS = {
    "query_plan": 1, "search": 1, "url_filter": 2, "fetch": 1, "sections": f"1/{SECTIONER_VERSION}",
    "section_rank": 2, "draft": 1, "refine": 1, "citations": 1, "answer": 2,
}
# The config each stage reads (and nothing else: other fields never invalidate it).
STAGE_CONFIG = {
    "query_plan": ("query_plan", "backends.filter_llm", "models.filter"),
    "search": ("search", "backends.search", "corpus"),  # search.max_age_hours: live results expire
    "url_filter": ("url_filter", "credibility", "backends.filter_llm", "models.filter"),
    "fetch": ("fetch.max_pages", "fetch.max_bytes", "fetch.max_age_hours", "backends.fetch", "backends.reddit",
              "corpus"),
    "sections": ("sectioning", "reddit"),
    "section_rank": ("section_rank", "credibility", "backends.filter_llm", "models.filter"),
    "draft": ("generation.draft_words", "generation.prompt", "generation.mmr_lambda",
              "generation.max_context_chars", "backends.writer_llm", "models.writer"),
    "refine": ("generation.two_pass", "generation.examples", "backends.writer_llm", "models.writer"),
    "citations": ("citations", "backends.filter_llm", "models.filter"),
    "answer": ("answerability",),
}


def _identity(stage: str, rt: Runtime) -> str:
    if stage in ("query_plan", "url_filter", "section_rank", "citations"):
        return rt.filter_model.stage_identity(stage)
    if stage in ("draft", "refine"):
        return rt.writer_model.stage_identity(stage)
    if stage == "search":
        return getattr(rt.search, "identity", rt.search.provider)
    if stage == "fetch":  # pinned evidence changes what a fetch returns
        return f"{getattr(rt.fetcher, 'identity', rt.fetcher.name)}|evidence={rt.evidence_run}"
    if stage == "answer":  # the evidence score's embeddings, and whether the writer was asked for its verdict
        return f"{rt.embedder.model_id}|{stable_hash(CALIBRATION, 12)}|writer_asked={writer_asked(rt)}"
    return ""


def fingerprint(value: Any) -> Any:
    """What of a stage input counts for caching: content, not the run or time it came from."""
    if isinstance(value, StageOutput):
        return {"records": [content_row(r) for r in value.records], "status": value.status,
                "value": fingerprint(value.value)}
    if isinstance(value, Record):
        return content_row(value)
    if isinstance(value, Question):
        return {"query": value.query}  # the id is a label; the same question is the same work
    if isinstance(value, (list, tuple)):
        return [fingerprint(v) for v in value]
    return value


def cache_key(stage: str, inputs: dict[str, Any], rt: Runtime) -> str:
    payload = {
        "stage": stage,
        "version": STAGE_VERSIONS[stage],
        "config": rt.cfg.slice(*STAGE_CONFIG[stage]),
        "identity": _identity(stage, rt),
        "inputs": {k: fingerprint(v) for k, v in sorted(inputs.items())},
    }
    if stage == "refine":
        payload["examples"] = [(e.example_id, e.question, e.answer) for e in rt.examples.examples]
    return f"{stage}-{stable_hash(payload, 32)}"


# --- failures ---------------------------------------------------------------------------------


def failure_status(exc: BaseException) -> str:
    """The status a stage row gets for the error that ended it (the llm_calls names, where shared)."""
    name = type(exc).__name__
    return {
        "BudgetExceededError": "budget_exceeded",
        "DeadlineExceededError": "deadline_exceeded",
        "MissingSecretError": "missing_secret",
    }.get(name, "failed")


def failed_output(stage: str, question: Question, error: BaseException | str, *, status: str = "failed",
                  upstream: StageOutput | None = None) -> StageOutput:
    """The row a stage leaves when it could not run, and what the next stages can go on with.

    A failed URL filter keeps the search engine's top results, a failed section ranking keeps
    each page's first sections, a failed refine leaves the draft as the answer: the question goes
    on with what it has, and the status says what happened.
    """
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    records: list[Record] = []
    value: Any = None
    if stage == "query_plan":
        records = [QueryPlanRecord(status=status, error=message, method="fallback-raw")]
        value = [question.query]  # search the question as asked
    elif stage == "url_filter" and upstream is not None:
        records = _fallback_url_decisions(upstream, status, message)
    elif stage == "section_rank" and upstream is not None:
        records = _fallback_section_decisions(upstream, status, message)
    elif stage in ("draft", "refine"):
        records = [DraftRecord(stage=stage, status=status, error=message)]
    elif stage == "answer":
        records = [AnswerRecord(status=status, error=message)]
    return StageOutput(stage, records, value=value, status=status, error=message)


def _fallback_url_decisions(search: StageOutput, status: str, message: str) -> list[Record]:
    out: list[Record] = []
    for rank, hit in enumerate(_merged_hits(search), 1):
        out.append(UrlDecisionRecord(url=hit.url or "", title=hit.title, snippet=hit.snippet, search_rank=rank,
                                     kept=rank <= 3, order=rank if rank <= 3 else None,
                                     method="fallback-search-rank", status=status, error=message))
    return out


def _fallback_section_decisions(sections: StageOutput, status: str, message: str) -> list[Record]:
    out: list[Record] = []
    per_page: dict[str, int] = {}
    for sec in sections.records:
        assert isinstance(sec, SectionRecord)
        n = per_page[sec.url] = per_page.get(sec.url, 0) + 1
        out.append(SectionDecisionRecord(url=sec.url, section_id=sec.section_id, heading=sec.heading,
                                         kept=n <= 2, rank=n if n <= 2 else None,
                                         method="fallback-page-order", status=status, error=message))
    return out


# --- the stages -------------------------------------------------------------------------------


def _stamp(calls: Sequence[LLMCallRecord], stage: str) -> list[LLMCallRecord]:
    for call in calls:
        call.stage = stage
    return list(calls)


@timed
def plan_query(question: Question, rt: Runtime) -> StageOutput:
    cfg = rt.cfg.query_plan
    if not cfg.enabled or not rt.cfg.search.enabled:
        record = QueryPlanRecord(queries=[question.query], method="raw")
        return StageOutput("query_plan", [record], value=[question.query])
    decision = rt.filter_model.plan_queries(question.query, max_queries=cfg.max_queries)
    queries = [q for q in decision.value if q.strip()] or [question.query]
    record = QueryPlanRecord(queries=queries, method=decision.method, status=decision.status, error=decision.error,
                             model=getattr(rt.filter_model, "model", None),
                             prompt_hash=getattr(rt.filter_model, "prompt_hashes", {}).get("query_plan"))
    return StageOutput("query_plan", [record], _stamp(decision.calls, "query_plan"), value=queries)


@timed
def search(question: Question, plan: StageOutput, rt: Runtime) -> StageOutput:
    if not rt.cfg.search.enabled:
        return StageOutput("search", [], status="skipped")
    queries: list[str] = plan.value or [question.query]
    records: list[Record] = []
    errors: list[BackendError] = []
    for qi, query in enumerate(queries):
        try:
            hits = rt.search.search(query, num=rt.cfg.search.results_per_query)
        except BackendError as exc:
            errors.append(exc)
            records.append(SearchResultRecord(query=query, query_index=qi, provider=rt.search.provider,
                                              status="failed", error=f"{type(exc).__name__}: {exc}"))
            continue
        records.extend(
            SearchResultRecord(query=query, query_index=qi, rank=rank, title=h.title, url=h.url, snippet=h.snippet,
                               provider=rt.search.provider)
            for rank, h in enumerate(hits, 1)
        )
    if errors and len(errors) == len(queries) and all(isinstance(e, TransientError) for e in errors):
        raise errors[0]  # nothing came back and a later attempt may: let the orchestrator retry
    status = (failure_status(errors[0]) if errors and len(errors) == len(queries) else OK)
    return StageOutput("search", records, status=status, error=records[0].error if status != OK else None)


def _merged_hits(search: StageOutput) -> list[SearchResultRecord]:
    """Results of all queries interleaved by rank, each URL once."""
    ok = [r for r in search.records if isinstance(r, SearchResultRecord) and r.ok and r.url]
    ok.sort(key=lambda r: (r.rank or 0, r.query_index))
    seen: set[str] = set()
    merged = []
    for r in ok:
        key = r.url.split("#", 1)[0]
        if key not in seen:
            seen.add(key)
            merged.append(r)
    return merged


def _similarities(question: str, texts: list[str], scores: list[float] | None, rt: Runtime) -> list[float]:
    """The decision's own relevance scores, or (for an LLM's list) MiniLM cosine to the question."""
    if scores is not None:
        return list(scores)
    return [float(x) for x in rt.embedder.encode(texts) @ rt.embedder.encode_one(question)] if texts else []


@timed
def filter_urls(question: Question, results: StageOutput, rt: Runtime) -> StageOutput:
    """Keep the URLs worth reading; with the credibility prior, order them by similarity x prior.

    Every row carries its source type and prior (and, with the prior on, its final score), so
    runs with and without the prior compare row by row.
    """
    hits = _merged_hits(results)
    if not hits:
        return StageOutput("url_filter", [], status="no_results" if results.status == OK else results.status)
    cfg = rt.cfg.url_filter
    cred = rt.cfg.credibility
    texts = [f"{h.title or ''}. {h.snippet or ''}" for h in hits]
    if not cfg.enabled:
        kept, scores, method, calls = list(range(min(len(hits), cfg.max_urls))), None, "off", []
        status, error = OK, None
    else:
        candidates = [UrlCandidate(h.url or "", h.title or "", h.snippet or "") for h in hits]
        decision = rt.filter_model.select_urls(question.query, candidates, max_urls=cfg.max_urls)
        kept, scores, method, calls = decision.value, decision.scores, decision.method, decision.calls
        status, error = decision.status, decision.error
    sims = _similarities(question.query, texts, scores, rt) if cred.enabled else scores
    priors = score_with_prior([h.url or "" for h in hits], sims or [0.0] * len(hits), cred,
                              vectors=rt.embedder.encode(texts) if cred.enabled and cred.smoothing else None)
    if cred.enabled:
        final = np.array([p.final_score for p in priors], dtype=np.float32)
        if scores is not None and cfg.enabled:  # a scoring method: choose again on the weighted scores
            kept = keep_relative(final, min_relative=cfg.min_relative_score, limit=cfg.max_urls)
        else:  # a model's list: keep its choice, in the order of the weighted similarity
            kept = sorted(kept, key=lambda i: -final[i])
        method = f"{method}+prior"
    order = {idx: pos for pos, idx in enumerate(kept, 1)}
    records: list[Record] = [
        UrlDecisionRecord(url=h.url or "", title=h.title, snippet=h.snippet, search_rank=i + 1, kept=i in order,
                          order=order.get(i), score=scores[i] if scores else None, method=method,
                          source_type=priors[i].source_type, prior=priors[i].prior,
                          final_score=priors[i].final_score if cred.enabled else None, status=status, error=error)
        for i, h in enumerate(hits)
    ]
    return StageOutput("url_filter", records, _stamp(calls, "url_filter"), status=status, error=error)


def kept_urls(decisions: StageOutput) -> list[UrlDecisionRecord]:
    kept = [r for r in decisions.records if isinstance(r, UrlDecisionRecord) and r.kept]
    return sorted(kept, key=lambda r: r.order or 0)


@timed
def fetch_pages(question: Question, decisions: StageOutput, rt: Runtime) -> StageOutput:
    """Fetch the kept URLs in parallel, taking a page from the pinned evidence or the page cache when it has one.

    The fetchers keep their own limits (Scrapingdog's concurrency, direct HTTP's per-host delay).
    """
    chosen = list(enumerate(kept_urls(decisions)[: rt.cfg.fetch.max_pages], 1))
    records: dict[int, PageRecord] = {}
    to_fetch = []
    for order, decision in chosen:
        reused, source = None, None
        if rt.evidence_pages is not None and decision.url in rt.evidence_pages:
            reused, source = rt.evidence_pages[decision.url], f"evidence:{rt.evidence_run}"
        elif rt.page_cache is not None:
            reused, source = rt.page_cache.get(decision.url, rt.cfg.fetch.max_age_hours), "page-cache"
        if reused is not None:
            records[order] = replace(reused, run_id="", question_id="", order=order, title=decision.title,
                                     reused_from=source)
        else:
            to_fetch.append((order, decision))

    def fetch_one(order: int, decision: UrlDecisionRecord) -> PageRecord:
        result = _fetch_thread(decision.url, rt) if rt.reddit and is_thread_url(decision.url) else \
            rt.fetcher.fetch(decision.url)
        digest = rt.blobs.put(result.body) if result.status == "ok" and result.body is not None else None
        page = PageRecord(
            url=decision.url, order=order, final_url=result.final_url, fetcher=result.fetcher, kind=result.kind,
            http_status=result.http_status, content_type=result.content_type, content_sha256=digest,
            n_bytes=len(result.body) if result.body is not None else None, title=decision.title,
            fetched_at=utcnow(), status=result.status, error=result.error,
        )
        if rt.page_cache is not None:
            rt.page_cache.put(page)
        return page

    if to_fetch:
        with ThreadPoolExecutor(max_workers=min(PAGE_PARALLELISM, len(to_fetch))) as pool:
            futures = [pool.submit(contextvars.copy_context().run, fetch_one, order, d) for order, d in to_fetch]
            for future in futures:
                page = future.result()
                records[page.order] = page
    ordered: list[Record] = [records[order] for order, _ in chosen]
    failed = [r for r in ordered if not r.ok]
    if ordered and len(failed) == len(ordered) and all(r.status in RETRYABLE_FETCH_STATUSES for r in failed):
        raise TransientError(f"all {len(ordered)} fetches failed; first: {failed[0].error}")
    return StageOutput("fetch", ordered)


def _fetch_thread(url: str, rt: Runtime) -> FetchResult:
    """A Reddit thread through the Reddit source, stored as the thread's JSON (comment tree and all)."""
    assert rt.reddit is not None
    try:
        thread = rt.reddit.thread(url)
    except RedditThreadNotFound as exc:
        return FetchResult(url=url, status="not_found", fetcher=rt.reddit.name, error=str(exc))
    except (BackendError, RedditError) as exc:
        return FetchResult(url=url, status=failure_status(exc) if isinstance(exc, BackendError) else "failed",
                           fetcher=rt.reddit.name, error=f"{type(exc).__name__}: {exc}")
    return FetchResult(url=url, status="ok", fetcher=rt.reddit.name, final_url=thread.url, http_status=200,
                       content_type="application/json", body=thread_to_json(thread), kind="reddit")


def _charset(content_type: str | None) -> str | None:
    match = re.search(r"charset=([\w.-]+)", content_type or "", re.IGNORECASE)
    return match.group(1) if match else None


@timed
def split_sections(question: Question, pages: StageOutput, rt: Runtime) -> StageOutput:
    records: list[Record] = []
    for page in pages.records:
        assert isinstance(page, PageRecord)
        if not page.ok or page.content_sha256 is None:
            continue
        body = rt.blobs.get(page.content_sha256)
        if page.kind == "reddit":  # a discussion: the submission, then each top comment with its replies
            parsed = thread_sections(select_tree(thread_from_json(body), rt.cfg.reddit), rt.cfg.reddit)
        else:
            parsed = parse_sections(body, page.final_url or page.url, encoding=_charset(page.content_type),
                                    config=rt.cfg.sectioning)
        if parsed.status != OK:
            records.append(SectionRecord(url=page.url, section_id="", status=parsed.status, error=parsed.error))
            continue
        records.extend(
            SectionRecord(url=page.url, section_id=s.section_id, ord=s.ord, heading_path=list(s.heading_path),
                          heading=s.heading, level=s.level, anchor=s.anchor, text=s.text, n_chars=s.n_chars,
                          n_words=s.n_words)
            for s in parsed.sections
        )
    return StageOutput("sections", records)


def section_preview(section: SectionRecord, chars: int) -> str:
    """What the ranker sees: the heading path and the first ``chars`` characters of the text."""
    path = " > ".join(section.heading_path) or "(untitled)"
    return f"{path}: {(section.text or '')[:chars]}"


@timed
def rank_sections(question: Question, decisions: StageOutput, pages: StageOutput, sections: StageOutput,
                  rt: Runtime) -> StageOutput:
    """Rank each page's sections; the pages are judged in parallel (one model call each, as in A.3)."""
    cfg = rt.cfg.section_rank
    snippets = {r.url: r for r in kept_urls(decisions)}
    by_url: dict[str, list[SectionRecord]] = {}
    for sec in sections.records:
        if isinstance(sec, SectionRecord) and sec.ok and sec.text:
            by_url.setdefault(sec.url, []).append(sec)
    work = [(page, by_url[page.url]) for page in pages.records
            if isinstance(page, PageRecord) and by_url.get(page.url)]

    def judge(page: PageRecord, secs: list[SectionRecord]) -> tuple[list[SectionPreview], Decision[list[int]]]:
        previews = [SectionPreview(s.section_id, s.heading, section_preview(s, cfg.preview_chars)) for s in secs]
        if not cfg.enabled:
            return previews, Decision(list(range(len(secs))), method="off")
        hit = snippets.get(page.url)
        overview = PageOverview(page.url, page.title or "", (hit.snippet if hit else "") or "")
        return previews, rt.filter_model.rank_sections(question.query, overview, previews,
                                                       max_sections=cfg.max_sections_per_page)

    # Each call carries this context (the question's deadline) into its worker thread.
    with ThreadPoolExecutor(max_workers=max(1, min(PAGE_PARALLELISM, len(work)))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, judge, page, secs) for page, secs in work]
        judged = [f.result() for f in futures]
    records: list[SectionDecisionRecord] = []
    calls: list[LLMCallRecord] = []
    cred = rt.cfg.credibility
    for (page, secs), (previews, decision) in zip(work, judged, strict=True):
        calls.extend(decision.calls)
        rank = {idx: pos for pos, idx in enumerate(decision.value, 1)}
        texts = [p.preview for p in previews]
        sims = _similarities(question.query, texts, decision.scores, rt) if cred.enabled else decision.scores
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
    _cap_total(records, cfg.max_sections_total if cfg.enabled else None)
    bad = [d.status for _, d in judged if d.status != OK]
    status = bad[0] if judged and len(bad) == len(judged) else OK
    return StageOutput("section_rank", list(records), _stamp(calls, "section_rank"), status=status)


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


def build_sources(question: Question, pages: StageOutput, sections: StageOutput, ranking: StageOutput,
                  cfg: GenerationConfig) -> list[SourceDoc]:
    """Number the pages that kept sections [1..n], each with its kept sections, best first.

    With ``sentence_select=bm25`` each section keeps only its sentences closest to the question
    (in their original order); then every section is trimmed alike to fit ``max_context_chars``.
    """
    max_chars = cfg.max_context_chars
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
    total = sum(len(texts[d.section_id]) for ds in kept_by_url.values() for d in ds)
    share = min(1.0, max_chars / total) if total else 1.0  # trim every section alike to fit the context
    sources = []
    for n, page in enumerate(ordered, 1):
        decisions = sorted(kept_by_url[page.url], key=lambda d: d.rank or 0)
        secs = tuple(
            SourceSection(d.section_id, tuple(text_of[d.section_id].heading_path),
                          trim_at_sentence(texts[d.section_id], max(200, int(len(texts[d.section_id]) * share))),
                          d.score)
            for d in decisions
        )
        preview = decisions[0].preview if decisions else ""
        sources.append(SourceDoc(n, page.url, page.title or "", preview, secs))
    return sources


_SENTENCE_STOP = re.compile(r"[.!?][\"'”’)\]]*(?=\s)")


def trim_at_sentence(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters at the end of a sentence, never inside the first one: a
    sentence cut in half is no evidence a writer can quote."""
    if len(text) <= limit:
        return text
    ends = [m.end() for m in _SENTENCE_STOP.finditer(text, 0, limit + 1)]
    if ends:
        return text[: ends[-1]]
    first = _SENTENCE_STOP.search(text, limit)
    return text[: first.end()] if first else text


def select_sentences(question: str, text: str, k: int) -> str:
    """The ``k`` sentences of ``text`` that BM25 scores highest for ``question``, in text order."""
    sentences = split_sentences(text)
    if len(sentences) <= k:
        return text
    scores = bm25_scores(question, sentences)
    keep = sorted(sorted(range(len(sentences)), key=lambda i: -scores[i])[:k])
    return " ".join(sentences[i] for i in keep)


def writer_asked(rt: Runtime) -> bool:
    """Whether the writer was asked to say if the sources answer the question (an LLM writer with abstention on)."""
    return bool(getattr(rt.writer_model, "asks_answerability", False))


def _writer_text(text: str | None, rt: Runtime) -> str | None:
    """A writer pass's text without the answerability line it was asked to add."""
    return strip_answerability(text) if text and writer_asked(rt) else text


@timed
def write_draft(question: Question, sources: list[SourceDoc], rt: Runtime) -> StageOutput:
    decision = rt.writer_model.draft(question.query, sources, max_words=rt.cfg.generation.draft_words)
    text = _writer_text(decision.value.last_reply, rt) if decision.status == OK else None
    record = DraftRecord(stage="draft", text=text, n_words=word_count(text) if text else None,
                         source_urls=[s.url for s in sources], method=decision.method,
                         model=getattr(rt.writer_model, "model", None),
                         prompt_hash=getattr(rt.writer_model, "prompt_hashes", {}).get("draft"),
                         conversation_json=conversation_to_json(decision.value),
                         status=decision.status, error=decision.error)
    return StageOutput("draft", [record], _stamp(decision.calls, "draft"), value=decision.value,
                       status=decision.status, error=decision.error)


def conversation_to_json(conversation: Conversation) -> str:
    return json.dumps([{"role": t.role, "text": t.text} for t in conversation.turns], ensure_ascii=False)


def conversation_from_json(text: str | None) -> Conversation | None:
    if not text:
        return None
    return Conversation(tuple(ChatTurn(t["role"], t["text"]) for t in json.loads(text)))


@timed
def refine_answer(question: Question, draft: StageOutput, rt: Runtime) -> StageOutput:
    if not rt.cfg.generation.two_pass:
        return StageOutput("refine", [DraftRecord(stage="refine", status="skipped")], status="skipped")
    conversation = draft.value
    if draft.status != OK or not isinstance(conversation, Conversation) or not conversation.last_reply:
        record = DraftRecord(stage="refine", status="skipped", error="no draft to refine")
        return StageOutput("refine", [record], status="skipped")
    decision = rt.writer_model.refine(question.query, conversation, list(rt.examples.examples))
    text = _writer_text(decision.value, rt) if decision.status == OK else None
    draft_record = draft.records[0]
    assert isinstance(draft_record, DraftRecord)
    record = DraftRecord(stage="refine", text=text, n_words=word_count(text) if text else None,
                         source_urls=draft_record.source_urls, method=decision.method,
                         model=getattr(rt.writer_model, "model", None),
                         prompt_hash=getattr(rt.writer_model, "prompt_hashes", {}).get("refine"),
                         status=decision.status, error=decision.error)
    return StageOutput("refine", [record], _stamp(decision.calls, "refine"), value=text,
                       status=decision.status, error=decision.error)


def final_text(draft: StageOutput, refined: StageOutput) -> tuple[str | None, str | None]:
    """The answer's text and the pass it came from: the refine pass if it produced one."""
    for out in (refined, draft):
        rec = out.records[0] if out.records else None
        if isinstance(rec, DraftRecord) and rec.ok and rec.text:
            return strip_markers(rec.text).strip(), out.stage
    return None, None


@timed
def verify_citations(question: Question, answer: str | None, sources: list[SourceDoc], rt: Runtime) -> StageOutput:
    if not rt.cfg.citations.enabled:
        return StageOutput("citations", [], status="skipped")
    if not answer or not sources:
        return StageOutput("citations", [], status="skipped")
    decision = rt.filter_model.verify_citations(question.query, answer, sources)
    cited = set(decision.value)
    records: list[Record] = [
        CitationRecord(source_index=s.index, url=s.url, title=s.title, cited=s.index in cited,
                       support=decision.scores[j] if decision.scores else None, method=decision.method,
                       status=decision.status, error=decision.error)
        for j, s in enumerate(sources)
    ]
    return StageOutput("citations", records, _stamp(decision.calls, "citations"), status=decision.status,
                       error=decision.error)


@timed
def assemble_answer(question: Question, draft: StageOutput, refined: StageOutput, citations: StageOutput,
                    sources: list[SourceDoc], rt: Runtime) -> StageOutput:
    """The answer: the refined text (or the draft) with the URLs its citations kept, and whether the
    sources answer the question; with ``answerability.abstain`` a ``not_found`` answer says so instead."""
    text, from_stage = final_text(draft, refined)
    cited = [c.url for c in citations.records if isinstance(c, CitationRecord) and c.cited]
    cfg = rt.cfg.answerability
    conversation = draft.value if isinstance(draft.value, Conversation) else None
    decision = decide_answerability(
        question.query, sources, lambda q, texts: rt.embedder.encode(texts) @ rt.embedder.encode_one(q),
        writer_reply=conversation.last_reply if conversation else None, ask_writer=writer_asked(rt),
        calibration=CALIBRATION, threshold=cfg.threshold, partial_below=cfg.partial_below)
    verdict = {"answerability": decision.verdict, "answerability_score": decision.score,
               "answerability_reason": decision.reason, "answerability_method": decision.method,
               "answerability_signals": decision.signals_json()}
    if cfg.abstain and decision.verdict == "not_found":
        said, see_also = abstention_text(sources)
        record = AnswerRecord(text=said, n_words=word_count(said), from_stage="abstain", abstained=True,
                              see_also_urls=see_also, **verdict)
    elif text:
        record = AnswerRecord(text=text, n_words=word_count(text), cited_urls=cited, from_stage=from_stage, **verdict)
    else:
        why = next((o.error for o in (refined, draft) if o.error), None) or "no answer text was produced"
        record = AnswerRecord(status="no_answer", error=why, **verdict)
    return StageOutput("answer", [record], status=record.status, error=record.error)
