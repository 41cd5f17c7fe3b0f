"""Typed stage records: one dataclass per warehouse table.

Every record carries ``run_id``, ``question_id``, ``stage``, ``status`` and ``error``. Stage
functions create records without a run id (so a cached result can be reused by any run); the
warehouse writer stamps the run id when it persists them. Content fields are ``None`` when
``status`` is not ``ok``: an error message is never stored as content.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Union, get_args, get_origin, get_type_hints

import pyarrow as pa

OK = "ok"
# Every status a stage can end in (stage_runs.status; a stage's own rows use the same words).
STAGE_STATUSES: dict[str, str] = {
    "ok": "the stage did its work",
    "skipped": "switched off by the variant, or nothing to work on (no draft to refine, no answer to cite)",
    "no_results": "the search returned nothing",
    "no_new_results": "a follow-up round's search found only URLs an earlier round had read",
    "no_new_queries": "a follow-up round had no search left that was not tried before",
    "no_evidence": "the offline writer had no source text",
    "no_draft": "the refine pass had no draft",
    "no_examples": "the refine pass had no few-shot examples; the draft stands",
    "no_answer": "no pass produced answer text (the answer row's error says why)",
    "parse_error": "the model replied but the reply held no usable answer; the configured fallback was applied",
    "truncated": "the reply was cut at the output token limit",
    "empty": "the model returned no text",
    "blocked": "the provider withheld the reply (safety, recitation, a content filter)",
    "timeout": "the call ran out of time after its retries",
    "rate_limited": "the provider refused the call for its rate limit after every retry",
    "failed": "an error that is none of the above (a refused connection, an HTTP 4xx/5xx)",
    "context_length_exceeded": "the prompt did not fit the model's window, even after one retry with a smaller "
                               "split or a shorter text; the fallback was applied (the error says by how much)",
    "budget_exceeded": "the run's budget was spent before the call",
    "deadline_exceeded": "the question's deadline passed",
    "missing_secret": "a key the backend needs is not set",
    "excluded": "steering ruled it out: a site rule (the URL, or the URL it redirected to) or the date window "
                "(the page's date); the error says which",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(kw_only=True)
class Record:
    """Columns every table shares."""

    TABLE: ClassVar[str] = ""

    run_id: str = ""
    question_id: str = ""
    stage: str = ""
    # Which pass over the question made the row: 0 the first, 1.. each follow-up round of a variant that
    # looks again when its evidence falls short (``research``).
    round: int = 0
    status: str = OK
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    def to_row(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(kw_only=True)
class RunRecord(Record):
    TABLE: ClassVar[str] = "runs"
    stage: str = "run"
    status: str = "running"  # running | finished | partial | failed
    variant: str = "final"
    dataset: str | None = None
    dataset_fingerprint: str | None = None
    config_json: str = "{}"
    config_hash: str = ""
    parent_run_id: str | None = None
    overrides_json: str | None = None
    evidence_from: str | None = None
    started_at: datetime = field(default_factory=utcnow)
    finished_at: datetime | None = None
    n_questions: int = 0
    n_answered: int | None = None
    n_failed: int | None = None
    wall_seconds: float | None = None
    stage_computations: int | None = None
    cache_hits: int | None = None
    llm_calls_paid: int | None = None
    note: str | None = None


@dataclass(kw_only=True)
class QuestionRecord(Record):
    TABLE: ClassVar[str] = "questions"
    stage: str = "input"
    query: str = ""
    reference: str | None = None
    dataset: str | None = None
    line_no: int | None = None
    meta_json: str | None = None
    # Where the answer is known to be (the FAQ set): the page and its section anchor.
    gold_url: str | None = None
    gold_anchor: str | None = None


@dataclass(kw_only=True)
class TurnRecord(Record):
    """A question that follows an earlier answer (a follow-up turn, beyond the paper): its place in the thread.

    The thread's first turn has no row of its own: it follows nothing, and every later turn names it."""

    TABLE: ClassVar[str] = "turns"
    stage: str = "thread"
    turn: int = 2  # 2 for the first follow-up of a thread
    thread_run_id: str = ""  # the thread's first turn
    thread_question_id: str = ""
    follows_run_id: str = ""  # the answer this question follows
    follows_question_id: str = ""
    # what that answer kept, offered to this question's evidence: its pages with a kept section, and those sections
    # (the ones this question does not read again itself join its pages: pages.reused_from = 'turn:<answer id>')
    earlier_pages: int = 0
    earlier_sections: int = 0


@dataclass(kw_only=True)
class QueryPlanRecord(Record):
    TABLE: ClassVar[str] = "query_plans"
    stage: str = ""  # stamped by the stage's spec
    queries: list[str] | None = None
    method: str = ""  # "raw" (rewriting off), "offline-keywords", or "llm"
    model: str | None = None
    prompt_hash: str | None = None
    # A follow-up turn: the question as the pipeline read it (standing alone), and what made it so
    # ("offline-merge", "llm", "llm+fallback:offline-merge"); NULL for a question that follows nothing.
    question: str | None = None
    restated_by: str | None = None
    # Columns added after rows were cached: out of the stage cache's fingerprint while None, so a question that
    # follows nothing keeps the cache keys it had before they existed.
    KEYED_WHEN_SET: ClassVar[frozenset[str]] = frozenset({"question", "restated_by"})


@dataclass(kw_only=True)
class SearchResultRecord(Record):
    TABLE: ClassVar[str] = "search_results"
    stage: str = ""  # stamped by the stage's spec
    query: str = ""
    query_index: int = 0
    rank: int | None = None  # 1-based within its query; None on a failed query
    title: str | None = None
    url: str | None = None
    snippet: str | None = None
    provider: str = ""  # with several providers: the one whose title and snippet the row shows
    # Several providers at once (``search.providers``): the row is one page of the query's fused list (``rank``
    # its place there), found by each of ``providers`` at the rank of the same position in ``provider_ranks``;
    # ``fusion_score`` is its reciprocal-rank score. None with one provider.
    providers: list[str] | None = None
    provider_ranks: list[int] | None = None
    fusion_score: float | None = None
    # Columns added after rows were cached: out of the stage cache's fingerprint while None, so a one-provider
    # run keeps the cache keys it had before they existed.
    KEYED_WHEN_SET: ClassVar[frozenset[str]] = frozenset({"providers", "provider_ranks", "fusion_score"})


@dataclass(kw_only=True)
class SearchCallRecord(Record):
    """One provider asked one query by the search stage: what it found, what it took and what it cost.

    Written whole per question like ``llm_calls`` (it is not part of the stage's output that later stages
    read, so its timings never reach a cache key)."""

    TABLE: ClassVar[str] = "search_calls"
    query: str = ""
    query_index: int = 0
    provider: str = ""
    hits: int | None = None  # results returned; None when the call failed
    cached_answer: bool = False  # answered from the search cache (``cache/searches.sqlite``): no request sent
    attempts: int | None = None  # requests sent, retries included; None for a provider with no guard (local)
    rate_limited: int = 0  # of those, the ones the provider turned away for its rate limit and were retried
    backoff_s: float = 0.0  # waited between attempts (the retry policy's back-off, or the provider's Retry-After)
    queued_s: float = 0.0  # waited for a slot under the provider's concurrency and rpm limits
    cost_usd: float | None = None  # charged for this call (``limits.call_cost_usd``, or what the reply says)
    seconds: float = 0.0
    cache_hit: bool = False  # True when the run reused the stage's stored output instead of searching again
    started_at: datetime = field(default_factory=utcnow)


@dataclass(kw_only=True)
class UrlDecisionRecord(Record):
    TABLE: ClassVar[str] = "url_decisions"
    stage: str = ""  # stamped by the stage's spec
    url: str = ""
    title: str | None = None
    snippet: str | None = None
    search_rank: int = 0  # position in the merged, de-duplicated result list (1-based)
    kept: bool = False
    order: int | None = None  # 1-based position among kept URLs, most useful first
    score: float | None = None  # relevance from the deciding method, when it has one
    source_type: str | None = None
    prior: float | None = None
    final_score: float | None = None
    method: str = ""


@dataclass(kw_only=True)
class PageRecord(Record):
    TABLE: ClassVar[str] = "pages"
    stage: str = ""  # stamped by the stage's spec
    url: str = ""
    order: int = 0  # the URL's order among kept URLs; becomes the source number
    final_url: str | None = None
    fetcher: str = ""
    kind: str | None = None  # html | reddit | pdf | text | binary
    http_status: int | None = None
    content_type: str | None = None
    content_sha256: str | None = None  # key into the content-addressed blob store
    n_bytes: int | None = None
    title: str | None = None
    fetched_at: datetime | None = None
    # "page-cache" or "evidence:<run>" when not fetched afresh; "turn:<answer id>": carried from the answer this
    # question follows (a follow-up turn), its bytes and fetch time those of that turn's fetch
    reused_from: str | None = None
    # status "blocked": what stood in for the content, "<reason>:<vendor>" (hifirag_core.web.blocked)
    block_reason: str | None = None
    # the page's publication day (YYYY-MM-DD) from its date evidence (hifirag_core.web.page_dates), and where
    # it was read ("corpus", "json-ld:datePublished", "url:path", ...); NULL when the page gives none
    published: str | None = None
    date_source: str | None = None
    # "fetched" (the fetcher read the URL) or "search_provider" (the search result carried the document's
    # text, as MMU-RAGent's FineWeb and ClueWeb22 do; hifirag_core.backends.carried)
    text_source: str | None = None


@dataclass(kw_only=True)
class SectionRecord(Record):
    TABLE: ClassVar[str] = "sections"
    stage: str = ""  # stamped by the stage's spec
    url: str = ""
    section_id: str = ""
    ord: int = 0
    heading_path: list[str] = field(default_factory=list)
    heading: str = ""
    level: int = 0
    anchor: str | None = None
    text: str | None = None
    n_chars: int = 0
    n_words: int = 0


@dataclass(kw_only=True)
class SectionDecisionRecord(Record):
    TABLE: ClassVar[str] = "section_decisions"
    stage: str = ""  # stamped by the stage's spec
    url: str = ""
    section_id: str = ""
    source_order: int = 0  # the page's order among kept URLs
    heading: str = ""
    preview: str = ""  # what the ranker saw: heading + first characters of the text
    kept: bool = False
    rank: int | None = None  # 1-based rank within its page among kept sections
    score: float | None = None
    source_type: str | None = None
    prior: float | None = None
    final_score: float | None = None
    method: str = ""


@dataclass(kw_only=True)
class SufficiencyRecord(Record):
    """Whether the evidence kept so far covers the question, and what it is missing (a variant that looks
    again reads it to decide on another round, and plans that round's searches from ``missing``)."""

    TABLE: ClassVar[str] = "sufficiency_checks"
    stage: str = ""  # stamped by the stage's spec
    verdict: str | None = None  # sufficient | partial | not_found
    covered: list[str] = field(default_factory=list)  # the parts of the question the kept sections cover
    missing: list[str] = field(default_factory=list)  # the parts and keywords no kept section covers
    sections: int = 0  # kept sections the check read, over every round so far
    method: str | None = None
    model: str | None = None
    prompt_hash: str | None = None


@dataclass(kw_only=True)
class DraftRecord(Record):
    """One generation pass: ``stage`` is ``draft`` (pass 1) or ``refine`` (pass 2)."""

    TABLE: ClassVar[str] = "drafts"
    stage: str = ""  # stamped by the stage's spec
    text: str | None = None
    n_words: int | None = None
    source_urls: list[str] = field(default_factory=list)  # [n] in the text refers to source_urls[n-1]
    method: str = ""
    model: str | None = None
    prompt_hash: str | None = None
    # The writer's conversation as JSON ([{"role", "text"}, ...]): pass 2 continues it, and a
    # reprocess from the refine pass picks it up from here.
    conversation_json: str | None = None


@dataclass(kw_only=True)
class CitationRecord(Record):
    TABLE: ClassVar[str] = "citations"
    stage: str = ""  # stamped by the stage's spec
    source_index: int = 0  # 1-based number of the source in the draft's source list
    url: str = ""
    title: str | None = None
    cited: bool = False
    support: float | None = None  # best support score over the answer's sentences, when measured
    supported_sentences: list[int] = field(default_factory=list)  # answer_sentences.sentence_index citing it
    method: str = ""


@dataclass(kw_only=True)
class AnswerSentenceRecord(Record):
    """One claim sentence of the answer with the sources the citation stage cited for it."""

    TABLE: ClassVar[str] = "answer_sentences"
    stage: str = ""  # stamped by the stage's spec
    sentence_index: int = 0  # 0-based among the answer's claim sentences (three words or more)
    sentence: str = ""
    source_indices: list[int] = field(default_factory=list)  # [n] of the draft's sources, best first
    urls: list[str] = field(default_factory=list)  # the same sources' URLs
    support: float | None = None  # support of the first source (MiniLM cosine), when measured
    marked: list[int] = field(default_factory=list)  # the writer's own [n] markers after the sentence
    method: str = ""  # what decided: offline+marker, offline+support, llm+marker, llm+support, writer+marker, ...
    # Per cited source (in the order of urls): the kept section holding the source sentence closest to this
    # one, that sentence, and its MiniLM cosine to this one (the citation ledger shows them side by side)
    section_ids: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    evidence_scores: list[float | None] = field(default_factory=list)


@dataclass(kw_only=True)
class AnswerRecord(Record):
    TABLE: ClassVar[str] = "answers"
    stage: str = ""  # stamped by the stage's spec
    text: str | None = None  # the answer as written, without citation markers
    n_words: int | None = None
    cited_urls: list[str] = field(default_factory=list)  # [k] in cited_text is cited_urls[k - 1]
    cited_text: str | None = None  # the text with [k] after each cited sentence
    from_stage: str | None = None  # which pass produced the text: refine | draft | abstain
    # Do the sources answer the question: answered | partial | not_found, the evidence score
    # (calibrated P(answered)), why, and how it was decided (evidence | writer | writer+evidence).
    answerability: str | None = None
    answerability_score: float | None = None
    answerability_reason: str | None = None
    answerability_method: str | None = None
    answerability_signals: str | None = None  # JSON: the evidence signals behind the score
    # the calibration that turned them into the score: "shipped", or "corpus:<name>@<sha256 prefix>" for the
    # calibration the local corpus fitted on its own probes (hifirag_core/corpus/probes.py)
    answerability_calibration: str | None = None
    abstained: bool = False  # the text says the sources do not answer (answerability.abstain was on)
    see_also_urls: list[str] = field(default_factory=list)  # the closest sources an abstaining answer lists
    language: str | None = None  # the language the answer was asked to be in (steer.language, or the question's)
    note: str | None = None  # what a reader should know about how it was written (the offline writer's English)


@dataclass(kw_only=True)
class LLMCallRecord(Record):
    TABLE: ClassVar[str] = "llm_calls"
    call_id: str = ""
    role: str = ""  # filter | writer
    backend: str = ""  # gemini | openai | offline
    model: str = ""
    prompt_name: str | None = None
    prompt_hash: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_thinking: int | None = None
    latency_s: float | None = None
    cost_usd: float | None = None
    attempts: int = 1
    cache_hit: bool = False  # True when the run reused a stored result instead of paying again
    started_at: datetime = field(default_factory=utcnow)


@dataclass(kw_only=True)
class StageRunRecord(Record):
    """One stage of one question in one run: how it ended, whether it was reused, how long it took."""

    TABLE: ClassVar[str] = "stage_runs"
    cached: bool = False  # the output was reused (stage cache or another run's rows): nothing paid
    source_run_id: str | None = None  # the run whose stored rows were reused, when they were
    seconds: float = 0.0  # wall time in this run (a cache hit takes almost none)
    cache_key: str | None = None
    n_rows: int = 0
    compute_seconds: float | None = None  # what computing the output took, in the run that computed it
    # CPU seconds computing it took, in this process: the stage's own thread and the worker threads it ran
    # (page fetches, rankings, the overlapped work it started); with compute_seconds, from the computing run
    cpu_seconds: float | None = None


@dataclass(kw_only=True)
class ScoreRecord(Record):
    TABLE: ClassVar[str] = "scores"
    stage: str = "score"
    metric: str = ""
    value: float | None = None
    variant: str | None = None
    dataset: str | None = None
    detail_json: str | None = None


RECORD_TYPES: tuple[type[Record], ...] = (
    RunRecord,
    QuestionRecord,
    TurnRecord,
    QueryPlanRecord,
    SearchResultRecord,
    SearchCallRecord,
    UrlDecisionRecord,
    PageRecord,
    SectionRecord,
    SectionDecisionRecord,
    SufficiencyRecord,
    DraftRecord,
    AnswerRecord,
    CitationRecord,
    AnswerSentenceRecord,
    LLMCallRecord,
    StageRunRecord,
    ScoreRecord,
)


_SCALARS: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("us", tz="UTC"),
}


def _arrow_type(hint: Any) -> pa.DataType:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        (inner,) = [a for a in get_args(hint) if a is not type(None)]
        return _arrow_type(inner)
    if origin is list:
        (inner,) = get_args(hint)
        return pa.list_(_arrow_type(inner))
    try:
        return _SCALARS[hint]
    except KeyError:
        raise TypeError(f"no Arrow type for {hint!r}") from None


@functools.cache
def arrow_schema(cls: type[Record]) -> pa.Schema:
    """The Parquet schema of a record type, derived from its type hints."""
    hints = get_type_hints(cls, include_extras=False)
    fields = [pa.field(f.name, _arrow_type(hints[f.name])) for f in dataclasses.fields(cls)]
    return pa.schema(fields)


def to_table(records: typing.Sequence[Record], cls: type[Record], **constants: Any) -> pa.Table:
    """An Arrow table of ``records``; ``constants`` override a column for every row."""
    schema = arrow_schema(cls)
    columns = {
        name: [constants[name]] * len(records) if name in constants else [getattr(r, name) for r in records]
        for name in schema.names
    }
    return pa.Table.from_pydict(columns, schema=schema)


# Fields that say when, in which run or in which round a row was made, not what it contains: left out of
# the fingerprints that key the stage cache, so identical work in another run is recognised (a follow-up
# round's stages carry their round in their parameters instead).
VOLATILE_FIELDS = frozenset({"run_id", "question_id", "round", "fetched_at", "started_at", "call_id",
                             "_written_at"})


def content_row(record: Record) -> dict[str, Any]:
    unset = getattr(record, "KEYED_WHEN_SET", frozenset())
    return {k: v for k, v in record.to_row().items()
            if k not in VOLATILE_FIELDS and not (k in unset and v is None)}
