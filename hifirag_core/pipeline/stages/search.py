"""Search: the query plan against the search backend, or against several providers at once, fused by reciprocal
rank (``hifirag_core.pipeline.providers``)."""


from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hifirag_core.cpu import in_context
from hifirag_core.errors import BackendError, TransientError, error_status
from hifirag_core.pipeline import providers
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.overlap import PAGE_PARALLELISM
from hifirag_core.pipeline.question_steering import Steer
from hifirag_core.pipeline.runtime import Runtime, SearchProviders
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    Record,
    SearchCallRecord,
    SearchResultRecord,
)
from hifirag_core.types import (
    SearchBackend,
    SearchSteer,
)


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
                                              status=error_status(hits), error=f"{type(hits).__name__}: {hits}"))
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
