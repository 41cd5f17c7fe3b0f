"""Fetch: the kept URLs (pages, PDFs, Reddit threads) into the blob store, screened for pages that stand in for
content, dated, and held to the steering; with ``limits.overlap`` each page goes on to its sections and
ranking as it arrives (``hifirag_core.pipeline.overlap``)."""


from __future__ import annotations

from collections.abc import Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any

from hifirag_core.config import caps_apply
from hifirag_core.corpus.folder import is_folder_url
from hifirag_core.corpus.store import normalize_url
from hifirag_core.cpu import in_context
from hifirag_core.errors import BackendError, TransientError, error_status
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.overlap import PAGE_PARALLELISM, EarlyKey, PagePipeline
from hifirag_core.pipeline.question_steering import Steer
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.pipeline.stages.section_rank import judge_page, page_to_rank, sections_per_page
from hifirag_core.pipeline.stages.sections import page_sections
from hifirag_core.pipeline.stages.url_filter import kept_urls
from hifirag_core.pipeline.threads import carry_pages
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    PageRecord,
    Record,
    UrlDecisionRecord,
    utcnow,
)
from hifirag_core.sectioning.decoding import declared_charset
from hifirag_core.steering import DateWindow, SiteRules
from hifirag_core.types import (
    RETRYABLE_FETCH_STATUSES,
    FetchResult,
)
from hifirag_core.web.blocked import detect_blocked
from hifirag_core.web.page_dates import best_date, dates_of_page
from hifirag_core.web.reddit import (
    RedditError,
    RedditThreadNotFound,
    is_thread_url,
    thread_from_json,
    thread_to_json,
)


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
    verdict = detect_blocked(body, url=page.final_url or page.url, kind=page.kind, encoding=declared_charset(page.content_type))
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


def _page_pipeline(question: Question, decisions: StageOutput, rt: Runtime, n_pages: int) -> PagePipeline:
    """Where the fetch stage sends each page as it arrives: with ``limits.overlap``, on to its sections and
    its ranking (``hifirag_core.pipeline.overlap``), which the next two stages then take; else nowhere."""
    if not rt.cfg.limits.overlap:
        return PagePipeline(rt.early, None, workers=0)
    chars = rt.cfg.section_rank.preview_chars
    snippets = {r.url: r for r in kept_urls(decisions)}
    per_page = sections_per_page(rt)
    # a stage whose output comes from a stored run is not computed: ranking its pages early would pay twice
    rank = rt.reuse is None or rt.reuse.stored_output("section_rank", question) is None

    def follow(page: PageRecord) -> Iterator[tuple[Hashable, Any]]:
        if not page.ok or page.content_sha256 is None:
            return
        found = page_sections(page, rt)
        yield EarlyKey.sections(question, page), found
        secs = [sec for sec in found if sec.ok and sec.text]
        if rank and secs:
            overview, previews = page_to_rank(page, secs, snippets, chars)
            yield (EarlyKey.ranking(question, overview, previews, per_page, rt.cfg.section_rank.enabled),
                   judge_page(question, overview, previews, per_page, rt))

    return PagePipeline(rt.early, follow, workers=min(PAGE_PARALLELISM, n_pages))
