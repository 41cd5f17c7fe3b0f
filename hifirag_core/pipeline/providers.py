"""The search stage's calls: each provider asked on its own, and with several (``search.providers``) their
lists fused. Every call leaves a ``search_calls`` row: its hits, attempts, the back-off and rate-limit
waits behind them, and what it cost (the run's cost counts paid searches from these rows).

With several providers, every query goes to every provider at once. A live provider's answer is taken from the search cache when it
has one for exactly that provider, query, number and steering (``store/search_cache.py``), so a run that adds
a provider asks only the new one. A provider that fails (down, timed out, rate-limited after its retries,
out of budget) leaves one row with its status for that query, and the others' results go on: the question
fails only when every provider failed every query. Each query's lists are fused by reciprocal rank
(``retrieval/fusion.py``); a fused row keeps every provider that found the page and its rank there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from hifirag_core.config import LOCAL_PROVIDERS
from hifirag_core.cpu import in_context
from hifirag_core.errors import BackendError, error_status
from hifirag_core.limits import CallTally, counting
from hifirag_core.records import OK, Record, SearchCallRecord, SearchResultRecord
from hifirag_core.retrieval.fusion import reciprocal_rank_fusion
from hifirag_core.store.search_cache import SearchCache, provider_call_key
from hifirag_core.types import SearchBackend, SearchHit, SearchSteer

Answer = list[SearchHit] | BackendError


def ask(
    provider: SearchBackend,
    query: str,
    query_index: int,
    num: int,
    steer: SearchSteer,
    cache: SearchCache | None = None,
    max_age_hours: float | None = None,
) -> tuple[Answer, SearchCallRecord]:
    """One provider's answer to one query, from the cache when it is fresh there, else asked (and kept), with
    the call's row: attempts, back-off, cost."""
    live = provider.provider not in LOCAL_PROVIDERS and cache is not None
    key = provider_call_key(str(getattr(provider, "identity", provider.provider)), query, num, steer)
    began = time.monotonic()
    if live and cache is not None:
        kept = cache.get(key, max_age_hours)
        if kept is not None:
            return kept, _call_row(provider, query, query_index, kept, began, None)
    with counting() as tally:
        try:
            hits = (
                provider.search(query, num=num, steer=steer) if steer.active else provider.search(query, num=num)
            )
        except BackendError as exc:
            return exc, _call_row(provider, query, query_index, exc, began, tally)
    if live and cache is not None:
        cache.put(key, hits)
    return hits, _call_row(provider, query, query_index, hits, began, tally)


def _call_row(
    provider: SearchBackend, query: str, query_index: int, answer: Answer, began: float, tally: CallTally | None
) -> SearchCallRecord:
    """The ``search_calls`` row of one call; ``tally`` None: answered from the search cache."""
    failed = isinstance(answer, BackendError)
    return SearchCallRecord(
        query=query,
        query_index=query_index,
        provider=provider.provider,
        hits=None if failed else len(answer),
        cached_answer=tally is None,
        attempts=(tally.attempts or None) if tally is not None else 0,
        rate_limited=tally.rate_limited if tally else 0,
        backoff_s=round(tally.backoff_s, 3) if tally else 0.0,
        queued_s=round(tally.queued_s, 3) if tally else 0.0,
        cost_usd=tally.cost_usd if tally else None,
        seconds=round(time.monotonic() - began, 3),
        status=error_status(answer) if failed else OK,
        error=f"{type(answer).__name__}: {answer}" if failed else None,
    )


def ask_all(
    providers: Sequence[SearchBackend],
    queries: Sequence[str],
    call: Callable[[SearchBackend, str, int], tuple[Answer, SearchCallRecord]],
    parallel: int,
) -> list[list[tuple[Answer, SearchCallRecord]]]:
    """Every provider's answer to every query, with its call's row: ``answers[query index][provider index]``."""
    triples = [(q, qi, p) for qi, q in enumerate(queries) for p in providers]
    if parallel > 1 and len(triples) > 1:
        with ThreadPoolExecutor(max_workers=min(parallel, len(triples))) as pool:
            flat = list(pool.map(in_context(lambda t: call(t[2], t[0], t[1])), triples))
    else:
        flat = [call(p, q, qi) for q, qi, p in triples]
    n = len(providers)
    return [flat[i * n : (i + 1) * n] for i in range(len(queries))]


def fused_rows(
    query: str, qi: int, providers: Sequence[SearchBackend], answers: Sequence[Answer], k: int, num: int
) -> tuple[list[Record], list[BackendError]]:
    """One query's rows: its fused list (at most ``num``), then a row per provider that failed."""
    ranked = {
        p.provider: a for p, a in zip(providers, answers, strict=True) if not isinstance(a, BackendError)
    }
    rows: list[Record] = []
    for rank, f in enumerate(reciprocal_rank_fusion(ranked, k)[:num], 1):
        rows.append(
            SearchResultRecord(
                query=query,
                query_index=qi,
                rank=rank,
                title=f.hit.title,
                url=f.hit.url,
                snippet=f.hit.snippet,
                provider=f.provider,
                providers=[name for name, _ in f.found_by],
                provider_ranks=[r for _, r in f.found_by],
                fusion_score=round(f.score, 6),
            )
        )
    errors = [a for a in answers if isinstance(a, BackendError)]
    for p, a in zip(providers, answers, strict=True):
        if isinstance(a, BackendError):
            rows.append(
                SearchResultRecord(
                    query=query,
                    query_index=qi,
                    provider=p.provider,
                    providers=[p.provider],
                    status=error_status(a),
                    error=f"{type(a).__name__}: {a}",
                )
            )
    return rows, errors
