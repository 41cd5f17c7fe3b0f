"""The pipeline's stages as plain functions: records in, records out.

Each stage takes the question and the outputs of the stages it depends on and returns a
``StageOutput``: the rows for its warehouse table, the LLM calls it made, and (``value``) what a
later stage needs that the warehouse does not store. Stages never raise for a bad model reply or
a page that failed to load (those become rows with a status); they raise ``BackendError`` when a
backend is down, so the orchestrator can retry, and then take the stage's fallback to go on with
what the question has.

What each stage reads, writes and depends on is declared in ``hifirag_core.pipeline.specs``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any

import numpy as np

from hifirag_core.config import GenerationConfig, caps_apply
from hifirag_core.corpus.folder import is_folder_url
from hifirag_core.corpus.store import normalize_url
from hifirag_core.cpu import in_context
from hifirag_core.credibility.rerank import score_with_prior
from hifirag_core.errors import BackendError, TransientError, error_status
from hifirag_core.evidence.answerability import (
    CALIBRATION,
    abstention_text,
    by_parts,
    evidence_signals,
    strip_answerability,
)
from hifirag_core.evidence.answerability import Decision as Answerability
from hifirag_core.evidence.answerability import decide as decide_answerability
from hifirag_core.evidence.attribution import (
    attribute_sentences,
    locate_evidence,
    marked_sentences,
    render_citations,
    strip_markers,
)
from hifirag_core.pipeline import providers
from hifirag_core.pipeline.context import ContextLimit, context_limit
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.overlap import PagePipeline
from hifirag_core.pipeline.runtime import Runtime, SearchProviders
from hifirag_core.pipeline.steer import Steer
from hifirag_core.pipeline.threads import carried_sections, carry_pages
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    AnswerRecord,
    AnswerSentenceRecord,
    CitationRecord,
    DraftRecord,
    LLMCallRecord,
    PageRecord,
    QueryPlanRecord,
    Record,
    SearchCallRecord,
    SearchResultRecord,
    SectionDecisionRecord,
    SectionRecord,
    SufficiencyRecord,
    UrlDecisionRecord,
    utcnow,
)
from hifirag_core.retrieval.scoring import bm25_scores, keep_relative
from hifirag_core.sectioning import parse_sections
from hifirag_core.sectioning.pdf import parse_pdf_sections
from hifirag_core.sectioning.plain import parse_text_sections
from hifirag_core.steering import DateWindow, SiteRules
from hifirag_core.text import section_preview, split_sentences, word_count
from hifirag_core.turns import ThreadContext
from hifirag_core.types import (
    RETRYABLE_FETCH_STATUSES,
    AnswerStyle,
    ChatTurn,
    Conversation,
    Decision,
    FetchResult,
    PageOverview,
    SearchBackend,
    SearchSteer,
    SectionPreview,
    SourceDoc,
    SourceSection,
    Sufficiency,
    UrlCandidate,
)
from hifirag_core.web.blocked import detect_blocked
from hifirag_core.web.page_dates import best_date, dates_of_page
from hifirag_core.web.reddit import (
    RedditError,
    RedditThreadNotFound,
    is_thread_url,
    select_tree,
    thread_from_json,
    thread_sections,
    thread_to_json,
)

# Pages fetched, or judged by section ranking, at once within one question (providers' limits still apply).
PAGE_PARALLELISM = 8


# --- fallbacks: what a question goes on with when a stage could not run ----------------------


def fallback_url_decisions(search: StageOutput, status: str, message: str) -> list[Record]:
    """The search engine's top three, in its order."""
    out: list[Record] = []
    for rank, hit in enumerate(_merged_hits(search), 1):
        out.append(UrlDecisionRecord(url=hit.url or "", title=hit.title, snippet=hit.snippet, search_rank=rank,
                                     kept=rank <= 3, order=rank if rank <= 3 else None,
                                     method="fallback-search-rank", status=status, error=message))
    return out


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


# --- the stages -------------------------------------------------------------------------------


def plan_query(question: Question, rt: Runtime, thread: ThreadContext | None = None) -> StageOutput:
    """The search queries (A.1). A follow-up turn (``thread``: the turns before it) is first restated as a
    question that stands alone (``hifirag_core.pipeline.threads``), which the queries and every later stage read."""
    restated = rt.filter_model.restate(question.query, thread) if thread is not None else None
    asked = restated.value if restated is not None else question.query
    turn = {"question": asked, "restated_by": restated.method} if restated is not None else {}
    calls = list(restated.calls) if restated is not None else []
    cfg = rt.cfg.query_plan
    if not cfg.enabled or not rt.cfg.search.enabled:
        record = QueryPlanRecord(queries=[asked], method="raw", **turn)
        return StageOutput(records=[record], calls=calls, value=[asked])
    # a question not in English: search in its language (and in English where that helps); the question's
    # language is a function of its text, which keys this stage already
    detected = Steer(question, rt.cfg).detected
    language = detected.code if detected.code != "en" else None
    decision = rt.filter_model.plan_queries(asked, max_queries=cfg.max_queries, language=language)
    queries = [q for q in decision.value if q.strip()] or [asked]
    # a restatement that fell back (to the offline merge) says so, as a plan that fell back does
    status, error = next(((d.status, d.error) for d in (restated, decision) if d is not None and d.status != OK),
                         (OK, None))
    record = QueryPlanRecord(queries=queries, method=decision.method, status=status, error=error,
                             model=getattr(rt.filter_model, "model", None),
                             prompt_hash=getattr(rt.filter_model, "prompt_hashes", {}).get("query_plan"), **turn)
    return StageOutput(records=[record], calls=[*calls, *decision.calls], value=queries)


def search(question: Question, plan: StageOutput, rt: Runtime) -> StageOutput:
    if not rt.cfg.search.enabled:
        return StageOutput(records=[], status="skipped")
    queries: list[str] = plan.value or [question.query]
    steering = search_steer(question, rt)
    if isinstance(rt.search, SearchProviders):
        return _search_fused(queries, rt.search, steering, rt)
    num = rt.cfg.search.results_per_query

    def one(query: str, qi: int) -> tuple[providers.Answer, SearchCallRecord]:
        return providers.ask(rt.search, query, qi, num, steering)

    if rt.cfg.limits.overlap and len(queries) > 1:  # the queries at once; their rows in the plan's order
        with ThreadPoolExecutor(max_workers=min(PAGE_PARALLELISM, len(queries))) as pool:
            answers = list(pool.map(in_context(one), queries, range(len(queries))))
    else:
        answers = [one(query, qi) for qi, query in enumerate(queries)]
    records: list[Record] = []
    errors: list[BackendError] = []
    for qi, (query, (hits, _)) in enumerate(zip(queries, answers, strict=True)):
        if isinstance(hits, BackendError):
            errors.append(hits)
            records.append(SearchResultRecord(query=query, query_index=qi, provider=rt.search.provider,
                                              status="failed", error=f"{type(hits).__name__}: {hits}"))
            continue
        records.extend(
            SearchResultRecord(query=query, query_index=qi, rank=rank, title=h.title, url=h.url, snippet=h.snippet,
                               provider=rt.search.provider)
            for rank, h in enumerate(hits, 1)
        )
    if errors and len(errors) == len(queries) and all(isinstance(e, TransientError) for e in errors):
        raise errors[0]  # nothing came back and a later attempt may: let the orchestrator retry
    status = (error_status(errors[0]) if errors and len(errors) == len(queries) else OK)
    return StageOutput(records=records, search_calls=tuple(call for _, call in answers), status=status,
                       error=records[0].error if status != OK else None)


def _search_fused(queries: list[str], several: SearchProviders, steering: SearchSteer, rt: Runtime) -> StageOutput:
    """Every query to every provider, each query's lists fused (``pipeline/providers.py``)."""
    cfg = rt.cfg.search
    max_age = cfg.max_age_hours

    def call(provider: SearchBackend, query: str, qi: int) -> tuple[providers.Answer, SearchCallRecord]:
        return providers.ask(provider, query, qi, cfg.results_per_query, steering, rt.search_cache, max_age)

    answers = providers.ask_all(several.members, queries, call, PAGE_PARALLELISM if rt.cfg.limits.overlap else 1)
    records: list[Record] = []
    errors: list[BackendError] = []
    for qi, (query, per_provider) in enumerate(zip(queries, answers, strict=True)):
        rows, failed = providers.fused_rows(query, qi, several.members, [a for a, _ in per_provider], cfg.rrf_k,
                                            cfg.results_per_query)
        records += rows
        errors += failed
    calls = tuple(call for per_provider in answers for _, call in per_provider)
    asked = len(queries) * len(several.members)
    if errors and len(errors) == asked and all(isinstance(e, TransientError) for e in errors):
        raise errors[0]  # nothing came back and a later attempt may: let the orchestrator retry
    if errors and len(errors) == asked:
        return StageOutput(records=records, search_calls=calls, status=error_status(errors[0]),
                           error=records[0].error)
    return StageOutput(records=records, search_calls=calls)


def search_steer(question: Question, rt: Runtime) -> SearchSteer:
    """What the search request carries: the site rules, the date window, a non-English question's language."""
    steer = Steer(question, rt.cfg)
    detected = steer.detected.code
    return SearchSteer(steer.sites, steer.window, detected if detected != "en" else None)
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


def _similarities(question: str, texts: list[str], scores: list[float] | None, rt: Runtime) -> list[float]:
    """The decision's own relevance scores, or (for an LLM's list) MiniLM cosine to the question."""
    if scores is not None:
        return list(scores)
    return [float(x) for x in rt.embedder.encode(texts) @ rt.embedder.encode_one(question)] if texts else []


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
    sims = _similarities(question.query, texts, scores, rt) if cred.enabled else scores
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


def fetch_pages(question: Question, decisions: StageOutput, rt: Runtime, first_order: int = 1,
                carried: tuple[PageRecord, ...] = ()) -> StageOutput:
    """Fetch the kept URLs in parallel, taking a page from the pinned evidence or the page cache when it has one.

    Steering is enforced on every page: a URL the site rules rule out is not fetched, and a page whose
    final URL (after redirects, or a Reddit thread's own URL) they rule out, or whose date falls outside
    the date window, keeps no content (status ``excluded``, the error says why). The fetchers keep their
    own limits (Scrapingdog's concurrency, direct HTTP's per-host delay). Pages are numbered from
    ``first_order`` (a follow-up round's pages come after every page read before). ``carried``: a follow-up
    turn's pages of the answer it follows (``hifirag_core.pipeline.threads``); those not fetched here come
    after the fetched ones, under the same steering.
    """
    steer = Steer(question, rt.cfg)
    rules, window = steer.sites, steer.window
    capped = caps_apply(rt.cfg, "filter" if rt.cfg.url_filter.enabled else "writer")
    kept = kept_urls(decisions)
    chosen = list(enumerate(kept[: rt.cfg.fetch.max_pages] if capped else kept, first_order))
    records: dict[int, PageRecord] = {}
    to_fetch = []
    for order, decision in chosen:
        why = rules.verdict(decision.url)
        if why is not None:
            records[order] = PageRecord(url=decision.url, order=order, title=decision.title, fetcher="steer",
                                        status="excluded", error=why)
            continue
        reused, source = None, None
        if rt.evidence_pages is not None and decision.url in rt.evidence_pages:
            reused, source = rt.evidence_pages[decision.url], f"evidence:{rt.evidence_run}"
        elif rt.page_cache is not None and not is_folder_url(decision.url):  # a file is read as it is now
            reused, source = rt.page_cache.get(decision.url, rt.cfg.fetch.max_age_hours), "page-cache"
        if reused is not None:
            page = replace(reused, run_id="", question_id="", order=order, title=decision.title, reused_from=source)
            # a page cached before the detector knew its shape is judged now (pinned evidence stays as it was)
            page = _screened(page, rt.blobs.get(page.content_sha256)) \
                if source == "page-cache" and page.content_sha256 else page
            records[order] = _steered(_dated(page, rt), rules, window)
        else:
            to_fetch.append((order, decision))

    def fetch_one(order: int, decision: UrlDecisionRecord) -> PageRecord:
        result = _fetch_thread(decision.url, rt) if rt.reddit and is_thread_url(decision.url) else \
            rt.fetcher.fetch(decision.url)
        page = PageRecord(
            url=decision.url, order=order, final_url=result.final_url, fetcher=result.fetcher, kind=result.kind,
            http_status=result.http_status, content_type=result.content_type,
            n_bytes=len(result.body) if result.body is not None else None, title=decision.title,
            fetched_at=utcnow(), status=result.status, error=result.error,
            text_source=result.text_source or "fetched",
        )
        page = _screened(page, result.body if result.status == "ok" else None)
        if page.ok and result.body is not None:
            page.content_sha256 = rt.blobs.put(result.body)
            page = _dated(page, rt, body=result.body, published=result.published, last_modified=result.last_modified)
        if rt.page_cache is not None and not is_folder_url(decision.url):
            rt.page_cache.put(page)  # as fetched: whether steering keeps it depends on the question
        return _steered(page, rules, window)

    with _page_pipeline(question, decisions, rt, len(chosen)) as pipeline:
        for page in records.values():  # taken from the evidence or the page cache: ready now
            pipeline.arrived(page)
        if to_fetch:
            with ThreadPoolExecutor(max_workers=min(PAGE_PARALLELISM, len(to_fetch))) as pool:
                futures = [pool.submit(in_context(fetch_one), order, d) for order, d in to_fetch]
                for future in as_completed(futures):  # each page on to its sections as soon as it is here
                    page = future.result()
                    records[page.order] = page
                    pipeline.arrived(page)
    ordered: list[Record] = [records[order] for order, _ in chosen]
    failed = [r for r in ordered if not r.ok and r.status != "excluded"]
    if not carried and failed and len(failed) == len(ordered) and all(r.status in RETRYABLE_FETCH_STATUSES
                                                                       for r in failed):
        raise TransientError(f"all {len(ordered)} fetches failed; first: {failed[0].error}")
    for page in carry_pages(carried, {d.url for _, d in chosen}, first_order + len(chosen)):
        why = rules.verdict(page.url)
        ordered.append(replace(page, status="excluded", error=why, content_sha256=None) if why is not None
                       else _steered(page, rules, window))
    return StageOutput(records=ordered)


def _dated(page: PageRecord, rt: Runtime, *, body: bytes | None = None, published: str | None = None,
           last_modified: str | None = None) -> PageRecord:
    """The page with its publication day: the fetcher's (the local corpus records it), else read from the
    page's own date evidence (``hifirag_core.web.page_dates``); a Reddit thread's is its submission's."""
    if page.published is not None or not page.ok or page.content_sha256 is None:
        return page
    if published is not None:
        return replace(page, published=published, date_source="corpus")
    body = body if body is not None else rt.blobs.get(page.content_sha256)
    if page.kind == "reddit":
        created = thread_from_json(body).created_utc
        day = datetime.fromtimestamp(created, UTC).date().isoformat() if created else None
        return replace(page, published=day, date_source="reddit:created_utc" if day else None)
    if page.kind != "html":
        return page
    found = best_date(dates_of_page(body, url=page.final_url or page.url, last_modified=last_modified,
                                    today=date.today()))
    return replace(page, published=found.date.isoformat(), date_source=found.source) if found else page


def _steered(page: PageRecord, rules: SiteRules, window: DateWindow) -> PageRecord:
    """The page as ``excluded``, without content, when its final URL or its date is outside the steering."""
    if not page.ok:
        return page
    why = rules.verdict(page.final_url) if page.final_url else None
    if why is not None:
        why = f"redirected to {page.final_url}: {why}" if normalize_url(page.final_url or "") != normalize_url(page.url) \
            else why
    else:
        why = window.verdict(date.fromisoformat(page.published) if page.published else None)
    if why is None:
        return page
    return replace(page, status="excluded", error=why, content_sha256=None)


def _screened(page: PageRecord, body: bytes | None) -> PageRecord:
    """The page as ``blocked``, with no content, when its body stands in for the content; else as is."""
    if body is None or page.status != OK:
        return page
    verdict = detect_blocked(body, url=page.final_url or page.url, kind=page.kind, encoding=_charset(page.content_type))
    if verdict is None:
        return page
    return replace(page, status="blocked", error=verdict.message, block_reason=verdict.code, content_sha256=None)


def _fetch_thread(url: str, rt: Runtime) -> FetchResult:
    """A Reddit thread through the Reddit source, stored as the thread's JSON (comment tree and all)."""
    assert rt.reddit is not None
    try:
        thread = rt.reddit.thread(url)
    except RedditThreadNotFound as exc:
        return FetchResult(url=url, status="not_found", fetcher=rt.reddit.name, error=str(exc))
    except (BackendError, RedditError) as exc:
        return FetchResult(url=url, status=error_status(exc) if isinstance(exc, BackendError) else "failed",
                           fetcher=rt.reddit.name, error=f"{type(exc).__name__}: {exc}")
    return FetchResult(url=url, status="ok", fetcher=rt.reddit.name, final_url=thread.url, http_status=200,
                       content_type="application/json", body=thread_to_json(thread), kind="reddit")


def _charset(content_type: str | None) -> str | None:
    match = re.search(r"charset=([\w.-]+)", content_type or "", re.IGNORECASE)
    return match.group(1) if match else None


def split_sections(question: Question, pages: StageOutput, rt: Runtime,
                   carried: tuple[SectionRecord, ...] = ()) -> StageOutput:
    """Each fetched page's sections; a page carried from the answer a follow-up turn follows brings the sections
    that turn kept (``carried``), for section ranking to judge again."""
    records: list[Record] = []
    for page in pages.records:
        assert isinstance(page, PageRecord)
        if not page.ok or page.content_sha256 is None:
            continue
        kept_before = carried_sections(page, carried)
        if kept_before is not None:
            records.extend(kept_before)
            continue
        early = rt.early.take(_sections_key(question, page))
        records.extend(early if early is not None else page_sections(page, rt))
    return StageOutput(records=records)


def _sections_key(question: Question, page: PageRecord) -> tuple:
    """Everything of a page that its sections depend on (with the runtime's config), and the question whose
    stage takes them (two questions in flight never take each other's work)."""
    return ("sections", question.id, page.url, page.content_sha256, page.kind, page.final_url, page.content_type)


def page_sections(page: PageRecord, rt: Runtime) -> list[SectionRecord]:
    """One fetched page's sections (with a status row when it has none, or only the part read)."""
    if not page.ok or page.content_sha256 is None:
        return []
    body = rt.blobs.get(page.content_sha256)
    if page.kind == "reddit":  # a discussion: the submission, then each top comment with its replies
        parsed = thread_sections(select_tree(thread_from_json(body), rt.cfg.reddit), rt.cfg.reddit)
    elif page.kind == "pdf":
        parsed = parse_pdf_sections(body, page.final_url or page.url, config=rt.cfg.sectioning)
    elif page.kind == "text":  # a document a search provider sent as plain text
        parsed = parse_text_sections(body.decode("utf-8", "replace"), page.url, title=page.title,
                                     config=rt.cfg.sectioning)
    else:
        parsed = parse_sections(body, page.final_url or page.url, encoding=_charset(page.content_type),
                                config=rt.cfg.sectioning)
    records = [SectionRecord(url=page.url, section_id=s.section_id, ord=s.ord, heading_path=list(s.heading_path),
                             heading=s.heading, level=s.level, anchor=s.anchor, text=s.text, n_chars=s.n_chars,
                             n_words=s.n_words)
               for s in parsed.sections]
    if parsed.status != OK:  # no sections, or (a PDF cut at its bounds, "truncated") the part read
        records.append(SectionRecord(url=page.url, section_id="", status=parsed.status, error=parsed.error))
    return records


def _pages_to_rank(decisions: StageOutput, pages: StageOutput, sections: StageOutput, rt: Runtime
                   ) -> list[tuple[PageRecord, list[SectionRecord], PageOverview, list[SectionPreview]]]:
    """Each page with sections: its sections, its overview and the previews the ranker reads."""
    chars = rt.cfg.section_rank.preview_chars
    snippets = {r.url: r for r in kept_urls(decisions)}
    by_url: dict[str, list[SectionRecord]] = {}
    for sec in sections.records:
        if isinstance(sec, SectionRecord) and sec.ok and sec.text:
            by_url.setdefault(sec.url, []).append(sec)
    return [(page, by_url[page.url], *_page_to_rank(page, by_url[page.url], snippets, chars))
            for page in pages.records if isinstance(page, PageRecord) and by_url.get(page.url)]


def _page_to_rank(page: PageRecord, secs: list[SectionRecord], snippets: dict[str, UrlDecisionRecord], chars: int
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
    per_page = _sections_per_page(rt)

    def judge(overview: PageOverview, previews: list[SectionPreview]
              ) -> tuple[list[SectionPreview], Decision[list[int]]]:
        early = rt.early.take(_ranking_key(question, overview, previews, per_page, rt))
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


def _ranking_key(question: Question, overview: PageOverview, previews: list[SectionPreview], per_page: int | None,
                 rt: Runtime) -> tuple:
    """Everything a page's ranking depends on (with the runtime's config and filter model), and the question
    whose stage takes it."""
    return ("ranking", question.id, question.query, overview, tuple(previews), per_page,
            rt.cfg.section_rank.enabled)


def _sections_per_page(rt: Runtime) -> int | None:
    """The offline default's cap on the sections a page keeps; a model keeps what it keeps."""
    return rt.cfg.section_rank.max_sections_per_page if caps_apply(rt.cfg, "filter") else None


def _page_pipeline(question: Question, decisions: StageOutput, rt: Runtime, n_pages: int) -> PagePipeline:
    """Where the fetch stage sends each page as it arrives: with ``limits.overlap``, on to its sections and
    its ranking (``hifirag_core.pipeline.overlap``), which the next two stages then take; else nowhere."""
    if not rt.cfg.limits.overlap:
        return PagePipeline(rt.early, None, workers=0)
    chars = rt.cfg.section_rank.preview_chars
    snippets = {r.url: r for r in kept_urls(decisions)}
    per_page = _sections_per_page(rt)
    # a stage whose output comes from a stored run is not computed: ranking its pages early would pay twice
    rank = rt.reuse is None or rt.reuse.stored_output("section_rank", question) is None

    def follow(page: PageRecord) -> Iterator[tuple[Hashable, Any]]:
        if not page.ok or page.content_sha256 is None:
            return
        found = page_sections(page, rt)
        yield _sections_key(question, page), found
        secs = [sec for sec in found if sec.ok and sec.text]
        if rank and secs:
            overview, previews = _page_to_rank(page, secs, snippets, chars)
            yield (_ranking_key(question, overview, previews, per_page, rt),
                   judge_page(question, overview, previews, per_page, rt))

    return PagePipeline(rt.early, follow, workers=min(PAGE_PARALLELISM, n_pages))


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


def check_sufficiency(question: Question, pages: StageOutput, sections: StageOutput, ranking: StageOutput,
                      rt: Runtime) -> StageOutput:
    """Whether every section kept so far (every round's) covers the question, and what is missing (beyond
    the paper; the ``research`` variants). The value is the ``Sufficiency`` the next round plans from."""
    kept = kept_sections(pages, sections, ranking)
    decision = rt.filter_model.check_sufficiency(question.query, kept)
    check = decision.value
    record = SufficiencyRecord(verdict=check.verdict, covered=list(check.covered), missing=list(check.missing),
                               sections=len(kept), method=decision.method, model=getattr(rt.filter_model, "model", None),
                               prompt_hash=getattr(rt.filter_model, "prompt_hashes", {}).get("sufficiency"),
                               status=decision.status, error=decision.error)
    return StageOutput(records=[record], calls=list(decision.calls), value=check, status=decision.status,
                       error=decision.error)


def plan_followup(question: Question, check: StageOutput, earlier: tuple[str, ...], rt: Runtime) -> StageOutput:
    """A follow-up round's searches, aimed at what the last check found missing, none searched before."""
    sufficiency = check.value
    missing = list(sufficiency.missing) if isinstance(sufficiency, Sufficiency) else [question.query]
    decision = rt.filter_model.plan_followup(question.query, missing, list(earlier),
                                             max_queries=rt.cfg.research.max_queries_per_round)
    queries = [q for q in decision.value if q.strip()]
    record = QueryPlanRecord(queries=queries, method=decision.method, status=decision.status, error=decision.error,
                             model=getattr(rt.filter_model, "model", None),
                             prompt_hash=getattr(rt.filter_model, "prompt_hashes", {}).get("followup"))
    status = decision.status if queries or decision.status != OK else "no_new_queries"
    return StageOutput(records=[record], calls=list(decision.calls), value=queries, status=status,
                       error=decision.error)


def kept_sections(pages: StageOutput, sections: StageOutput, ranking: StageOutput) -> list[SourceSection]:
    """Every section the ranking kept, whole, in page order and then rank (what the evidence holds, before
    the writer's context bound or sentence selection)."""
    text_of = {s.section_id: s for s in sections.records if isinstance(s, SectionRecord) and s.ok}
    order = {p.url: p.order for p in pages.records if isinstance(p, PageRecord)}
    kept = sorted((d for d in ranking.records if isinstance(d, SectionDecisionRecord) and d.kept
                   and d.section_id in text_of), key=lambda d: (order.get(d.url, 0), d.rank or 0))
    return [SourceSection(d.section_id, tuple(text_of[d.section_id].heading_path), text_of[d.section_id].text or "",
                          d.score) for d in kept]


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


def writer_asked(rt: Runtime) -> bool:
    """Whether the writer was asked to say if the sources answer the question (an LLM writer with abstention on)."""
    return bool(getattr(rt.writer_model, "asks_answerability", False))


def _writer_text(text: str | None, rt: Runtime) -> str | None:
    """A writer pass's text without the answerability line it was asked to add."""
    return strip_answerability(text) if text and writer_asked(rt) else text


def answer_style(question: Question, rt: Runtime, *, dates: bool) -> AnswerStyle:
    """How the writer is asked to write: the steering's language, length and (pass 1) the sources' dates.
    An English question answered in English keeps the paper's prompt."""
    steer = Steer(question, rt.cfg)
    language = steer.language if steer.non_english else None
    return AnswerStyle(language=language, length=steer.length,  # type: ignore[arg-type]
                       source_dates=steer.source_dates if dates else False)


def _with_style(call, style: AnswerStyle):
    """A writer call with ``style`` only when it departs from the paper's (writers that predate steering)."""
    return call(style=style) if style != AnswerStyle() else call()


def write_draft(question: Question, sources: list[SourceDoc], rt: Runtime) -> StageOutput:
    style = answer_style(question, rt, dates=True)
    with _while_writing(question, sources, rt):
        decision = _with_style(lambda **kw: rt.writer_model.draft(question.query, sources,
                                                                  max_words=rt.cfg.generation.draft_words, **kw),
                               style)
    text = _writer_text(decision.value.last_reply, rt) if decision.status == OK else None
    record = DraftRecord(text=text, n_words=word_count(text) if text else None,
                         source_urls=[s.url for s in sources], method=decision.method,
                         model=getattr(rt.writer_model, "model", None),
                         prompt_hash=getattr(rt.writer_model, "prompt_hashes", {}).get("draft"),
                         conversation_json=conversation_to_json(decision.value),
                         status=decision.status, error=decision.error)
    return StageOutput(records=[record], calls=list(decision.calls), value=decision.value,
                       status=decision.status, error=decision.error)


def _similarity(rt: Runtime) -> Callable[[str, list[str]], np.ndarray]:
    """MiniLM cosine of each text to the question, through the run's cached embedder."""
    return lambda q, texts: rt.embedder.encode(texts) @ rt.embedder.encode_one(q)


@contextlib.contextmanager
def _while_writing(question: Question, sources: list[SourceDoc], rt: Runtime) -> Iterator[None]:
    """With ``limits.overlap``, embed what the answerability check will read (the kept sections' leads and
    sentences) on another thread while the writer writes, joined when it is done: the check, after the
    writer's passes, then finds every vector in the embedder's cache. It computes the same encodings in
    the same batches either way, so its verdict is the same."""
    if not rt.cfg.limits.overlap or not sources:
        yield
        return
    # a failure here is left in its future: the check computes the vectors itself and meets it there
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hifirag-overlap") as pool:
        pool.submit(in_context(evidence_signals), question.query, sources, _similarity(rt))
        yield


def conversation_to_json(conversation: Conversation) -> str:
    return json.dumps([{"role": t.role, "text": t.text} for t in conversation.turns], ensure_ascii=False)


def conversation_from_json(text: str | None) -> Conversation | None:
    if not text:
        return None
    return Conversation(tuple(ChatTurn(t["role"], t["text"]) for t in json.loads(text)))


def refine_answer(question: Question, draft: StageOutput, rt: Runtime) -> StageOutput:
    if not rt.cfg.generation.two_pass:
        return StageOutput(records=[DraftRecord(status="skipped")], status="skipped")
    conversation = draft.value
    if draft.status != OK or not isinstance(conversation, Conversation) or not conversation.last_reply:
        record = DraftRecord(status="skipped", error="no draft to refine")
        return StageOutput(records=[record], status="skipped")
    style = answer_style(question, rt, dates=False)
    decision = _with_style(lambda **kw: rt.writer_model.refine(question.query, conversation, list(rt.examples.examples),
                                                               **kw), style)
    text = _writer_text(decision.value, rt) if decision.status == OK else None
    draft_record = draft.records[0]
    assert isinstance(draft_record, DraftRecord)
    record = DraftRecord(text=text, n_words=word_count(text) if text else None,
                         source_urls=draft_record.source_urls, method=decision.method,
                         model=getattr(rt.writer_model, "model", None),
                         prompt_hash=getattr(rt.writer_model, "prompt_hashes", {}).get("refine"),
                         status=decision.status, error=decision.error)
    return StageOutput(records=[record], calls=list(decision.calls), value=text,
                       status=decision.status, error=decision.error)


def writer_text(draft: StageOutput, refined: StageOutput) -> tuple[str | None, str | None]:
    """The writer's text as it wrote it (with any ``[n]`` markers) and the pass it came from: the
    refine pass if it produced one."""
    for out in (refined, draft):
        rec = out.records[0] if out.records else None
        if isinstance(rec, DraftRecord) and rec.ok and rec.text:
            return rec.text, out.stage
    return None, None


def final_text(draft: StageOutput, refined: StageOutput) -> tuple[str | None, str | None]:
    """The answer's text as the user reads it (markers removed) and the pass it came from."""
    text, stage = writer_text(draft, refined)
    return (strip_markers(text).strip(), stage) if text else (None, None)


def verify_citations(question: Question, answer: str | None, sources: list[SourceDoc], rt: Runtime) -> StageOutput:
    """Each sentence of the answer with the source that backs it (A.5), and each source cited or not.

    ``answer`` is the writer's text with its ``[n]`` markers, which the check may follow. With the check
    off (the paper's ablation rows), the markers are the citations, unchecked (method ``writer+marker``).
    """
    if not answer or not sources:
        return StageOutput(records=[], status="skipped")
    numbers = [s.index for s in sources]
    if rt.cfg.citations.enabled:
        decision = rt.filter_model.verify_citations(question.query, answer, sources)
    else:
        decision = Decision(attribute_sentences(marked_sentences(answer), numbers, None, allowed=numbers,
                                                min_support=None, method="writer", cite_unmarked=False),
                            method="writer-markers")
    url = {s.index: s.url for s in sources}
    citing: dict[int, list[int]] = {}
    for sentence in decision.value:
        for n in sentence.sources:
            citing.setdefault(n, []).append(sentence.index)
    records: list[Record] = [
        CitationRecord(source_index=s.index, url=s.url, title=s.title, cited=s.index in citing,
                       support=decision.scores[j] if decision.scores else None,
                       supported_sentences=citing.get(s.index, []), method=decision.method,
                       status=decision.status, error=decision.error)
        for j, s in enumerate(sources)
    ]
    by_number = {s.index: s for s in sources}
    for c in decision.value:
        found = [locate_evidence(c.text, by_number[n], rt.embedder) for n in c.sources]
        records.append(AnswerSentenceRecord(
            sentence_index=c.index, sentence=c.text, source_indices=list(c.sources), urls=[url[n] for n in c.sources],
            support=c.support, marked=list(c.marked), method=c.method,
            section_ids=[e.section_id if e else "" for e in found], evidence=[e.sentence if e else "" for e in found],
            evidence_scores=[e.score if e else None for e in found],
            status=decision.status, error=decision.error))
    return StageOutput(records=records, calls=list(decision.calls), status=decision.status,
                       error=decision.error)


def answerability(question: Question, sources: list[SourceDoc], draft: StageOutput, rt: Runtime) -> Answerability:
    """Whether the sources answer the question: the writer's own verdict when it was asked for one
    (an LLM writer with abstention on), else the calibrated evidence score (``hifirag_core.evidence.answerability``),
    part by part of the question in a variant that looks again (``hifirag_core.evidence.answerability.by_parts``)."""
    cfg = rt.cfg.answerability
    conversation = draft.value if isinstance(draft.value, Conversation) else None
    asked = writer_asked(rt)

    def decide(query: str) -> Answerability:
        return decide_answerability(
            query, sources, _similarity(rt),
            writer_reply=conversation.last_reply if conversation else None, ask_writer=asked,
            calibration=CALIBRATION, threshold=cfg.threshold, partial_below=cfg.partial_below)

    # a variant that looks again judges the evidence part by part (the writer, when asked, judges the whole)
    return by_parts(question.query, decide) if rt.cfg.research.enabled and not asked else decide(question.query)


def abstains(decision: Answerability, rt: Runtime) -> bool:
    """Whether the answer says the sources do not answer instead of answering (and so cites nothing)."""
    return rt.cfg.answerability.abstain and decision.verdict == "not_found"


_SHOWN = {
    "answered": "the sources found answer this question",
    "partial": "the sources found may answer this question only in part",
    "not_found": "the sources found may not answer this question; check them before relying on this answer",
}


def decision_note(decision: Answerability, rt: Runtime) -> str | None:
    """The decision as a reader is shown it beside an answer that does not abstain (``answerability.show``)."""
    if not rt.cfg.answerability.show or abstains(decision, rt):
        return None
    return f"Answerability: {decision.verdict} ({decision.score:.2f}): {_SHOWN[decision.verdict]} ({decision.reason})."


def language_note(steer: Steer, rt: Runtime) -> str | None:
    """What a reader of an offline answer to a question not in English (or asked for in another language) is told."""
    if not steer.non_english or rt.cfg.backends.writer_llm != "offline":
        return None
    asked = "this question is in " + steer.detected.name if steer.detected.code != "en" else \
        f"{steer.language_name} was asked for"
    return (f"The offline default answers in English only ({asked}): its models and the local corpus are "
            "English. Use a model writer (for example --profile gemini) for answers in other languages.")


def assemble_answer(question: Question, draft: StageOutput, refined: StageOutput, citations: StageOutput,
                    decision: Answerability, sources: list[SourceDoc], rt: Runtime) -> StageOutput:
    """The answer: the refined text (or the draft) with each sentence's citations, and whether the sources
    answer the question; with ``answerability.abstain`` a ``not_found`` answer says so instead, lists the
    closest sources under "See also" and cites nothing; with ``answerability.show`` the answer is given and
    its note says what was decided."""
    text, from_stage = final_text(draft, refined)
    steer = Steer(question, rt.cfg)
    verdict = {"answerability": decision.verdict, "answerability_score": decision.score,
               "answerability_reason": decision.reason, "answerability_method": decision.method,
               "answerability_signals": decision.signals_json(), "language": steer.language,
               "note": "\n".join(n for n in (decision_note(decision, rt), language_note(steer, rt)) if n) or None}
    sentences = sorted((r for r in citations.records if isinstance(r, AnswerSentenceRecord)),
                       key=lambda r: r.sentence_index)
    if abstains(decision, rt):
        said, see_also = abstention_text(sources)
        record = AnswerRecord(text=said, n_words=word_count(said), from_stage="abstain", abstained=True,
                              see_also_urls=see_also, **verdict)
    elif text:
        cited_text, cited = render_citations(text, [(r.sentence, r.urls) for r in sentences])
        record = AnswerRecord(text=text, n_words=word_count(text), cited_urls=cited, cited_text=cited_text,
                              from_stage=from_stage, **verdict)
    else:
        why = next((o.error for o in (refined, draft) if o.error), None) or "no answer text was produced"
        record = AnswerRecord(status="no_answer", error=why, **verdict)
    return StageOutput(records=[record], status=record.status, error=record.error)

