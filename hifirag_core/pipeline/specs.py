"""The pipeline as data: one ``StageSpec`` per stage, in order.

A spec says everything the orchestration needs to know about a stage, in one place: its name and
position, the records it writes, its code version, the config fields it reads (the slice that
enters its cache key), the model role it calls, whether it does IO (and so how it is retried), what
it leaves when it fails, how its ``value`` is rebuilt from stored rows, and how its parameters are
gathered from the outputs before it. Tasks, the question runner, reuse and reprocess, the CLI's
stage choices and the reprocess flow's typed parameter all derive from ``PIPELINE``.

Adding a stage is one spec here and one module in ``hifirag_core.pipeline.stages``. The question's trail
(``pipeline.trail``) and the persistence of its rows (``pipeline.persistence``) live beside this table.

The order of a question's steps and the policy around each (reuse, the deadline, fallbacks, the ledger)
are ``hifirag_core.pipeline.runner``'s, shared by the flow and the plain loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hifirag_core.config import LOCAL_PROVIDERS, search_providers
from hifirag_core.cpu import metered
from hifirag_core.errors import TransientError, error_status
from hifirag_core.hashing import stable_hash
from hifirag_core.pipeline import steps, threads
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.question_steering import steered_slice
from hifirag_core.pipeline.stages import (
    citation_check,
    fetch,
    final_answer,
    query_plan,
    research,
    search,
    section_rank,
    sections,
    url_filter,
    writing,
)
from hifirag_core.pipeline.trail import Trail
from hifirag_core.questions import Question
from hifirag_core.records import (
    AnswerRecord,
    AnswerSentenceRecord,
    CitationRecord,
    DraftRecord,
    PageRecord,
    QueryPlanRecord,
    Record,
    SearchResultRecord,
    SectionDecisionRecord,
    SectionRecord,
    SufficiencyRecord,
    UrlDecisionRecord,
    content_row,
)
from hifirag_core.sectioning import SECTIONER_VERSION
from hifirag_core.turns import merged_question
from hifirag_core.types import Sufficiency
from hifirag_core.web.blocked import DETECTOR_VERSION

if TYPE_CHECKING:
    from hifirag_core.config import PipelineConfig
    from hifirag_core.pipeline.runtime import Runtime

Role = Literal["filter", "writer"]
# Config fields that choose how the stages compute, never what they output: no stage's cache key holds them.
HOW_NOT_WHAT: tuple[str, ...] = ("limits.overlap",)


@dataclass(frozen=True)
class StageRetry:
    """How the orchestrator retries a stage: only errors a later attempt may cure, never a bug.

    A stage raises ``TransientError`` when a backend was down or refused it for a rate limit after
    the adapter's own retries; anything else (a ``KeyError`` in the stage's code, a permanent 4xx)
    fails at once and leaves the stage's fallback row.
    """

    retries: int = 0
    delays_s: tuple[float, ...] = ()
    retry_on: tuple[type[BaseException], ...] = (TransientError,)

    def should_retry(self, error: BaseException | None) -> bool:
        return self.retries > 0 and isinstance(error, self.retry_on)


NO_RETRY = StageRetry()
# Network stages back off before retrying; a stage that still fails becomes a status row.
IO_RETRY = StageRetry(retries=2, delays_s=(2.0, 10.0))


def _no_value(_question: Question, _records: Sequence[Record]) -> Any:
    return None


def _by_role(spec: StageSpec, rt: Runtime) -> str:
    if spec.role == "filter":
        return rt.filter_model.job_identity(spec.job or "")
    if spec.role == "writer":
        return rt.writer_model.job_identity(spec.job or "")
    return ""


# (question, trail, status, message, round) -> the rows a stage leaves when it cannot run in that round
Fallback = Callable[[Question, Trail, str, str, int], list[Record]]


def _no_rows(_question: Question, _trail: Trail, _status: str, _message: str, _round: int) -> list[Record]:
    return []


@dataclass(frozen=True)
class StageSpec:
    """Everything the orchestration knows about one stage."""

    name: str
    records: tuple[type[Record], ...]  # the record types it writes; each has its own table
    version: str  # bump when the stage's code changes what it outputs
    # Config fields the stage reads, when it runs or when its adapter is built ("url_filter": the whole
    # section); nothing else keys it. What ``gather`` reads reaches the key through the inputs.
    reads: tuple[str, ...]
    compute: Callable[..., StageOutput]  # <stage module>.<fn>(question, **gathered, rt=rt)
    gather: Callable[[Trail], dict[str, Any]]  # the stage's parameters from the outputs before it
    summary: str  # one line, for tasks and docs
    role: Role | None = None  # the model role it calls, whose identity (model, prompt hash) keys it
    job: str | None = None  # which of that model's jobs it asks for (its prompt: A.1 query_plan, ...)
    io: bool = False  # talks to a backend that can be down
    retry: StageRetry = NO_RETRY
    fallback: Fallback = _no_rows  # the rows it leaves when it cannot run
    rebuild: Callable[[Question, Sequence[Record]], Any] = _no_value  # ``value`` from stored rows
    # What else its output depends on, beyond the role's identity: the search index, the pinned
    # evidence, the few-shot examples.
    identity: Callable[[StageSpec, Runtime], Any] = _by_role
    # What keys its output only for some inputs (None: nothing more for these): section ranking's window, for a
    # question with a page whose section list must be split to fit it.
    fit: Callable[[Question, Mapping[str, Any], Runtime], Any] | None = None
    # Hours a live result stays valid (search results, crawled pages); None: forever.
    max_age_hours: Callable[[PipelineConfig], float | None] = lambda _cfg: None
    # Replayed from another run when a run pins its evidence (``--evidence-from``); pages are replayed
    # by URL inside the fetch stage instead, so a pinned run still fetches what the other run did not.
    evidence: bool = False
    # The Markdown line a person watching the question sees when the stage finishes (the service's
    # /run stream), from its output and the outputs before it; None: the stage shows nothing.
    step: Callable[[StageOutput, Mapping[str, StageOutput]], str | None] | None = None
    # Looking again (beyond the paper): ``research`` stages run only in a variant that looks again;
    # ``first_pass`` False: only in follow-up rounds; ``again``: how a follow-up round gathers the stage's
    # parameters (None: the stage is not repeated in rounds).
    research: bool = False
    first_pass: bool = True
    again: Callable[[Trail, int], dict[str, Any]] | None = None
    # Later stages whose work this one may start early (``limits.overlap``: fetch sections and ranks each page
    # as it arrives, ``hifirag_core.pipeline.overlap``). It reads their config fields for that work, and they
    # key their own outputs: the work is theirs, it only starts sooner.
    ahead: tuple[str, ...] = ()

    def allowed_reads(self) -> tuple[str, ...]:
        """Config fields the stage may read: its own key's, the stages' it works ahead for, and those that
        choose how it computes, never what (``HOW_NOT_WHAT``)."""
        return (*self.reads, *(r for name in self.ahead for r in SPECS[name].reads), *HOW_NOT_WHAT)

    def __post_init__(self) -> None:
        if (self.role is None) != (self.job is None):
            raise ValueError(f"stage {self.name!r}: a model role and the job it asks for go together")

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(r.TABLE for r in self.records)

    def cache_key(self, question: Question, params: Mapping[str, Any], rt: Runtime, round: int = 0) -> str:
        """Exactly what the output depends on: inputs, the config slice, identity, version (and the round,
        for a follow-up round's stage). A ``question`` among ``params`` (a follow-up turn's, restated) is the
        question the stage answers, in place of ``question``."""
        return f"{self.name}-{stable_hash(self.key_payload(question, params, rt, round), 32)}"

    def key_payload(self, question: Question, params: Mapping[str, Any], rt: Runtime, round: int = 0) -> dict[str, Any]:
        """What :meth:`cache_key` hashes."""
        question = params.get("question", question)
        payload = {
            "stage": self.name,
            "version": self.version,
            # the question's own steering fields (sites, dates, language, length) replace the run's
            "config": steered_slice(rt.cfg, question, self.reads),
            "identity": self.identity(self, rt),
            "inputs": {k: fingerprint(v) for k, v in sorted({"question": question, **params}.items())},
        }
        if round:
            payload["round"] = round
        extra = self.fit(question, params, rt) if self.fit is not None else None
        if extra is not None:
            payload["fit"] = extra
        return payload

    def gather_for(self, trail: Trail, round: int) -> dict[str, Any]:
        """The stage's parameters in ``round`` (0: the first pass); after a follow-up turn's query plan, the question
        restated to stand alone is one of them (``question``), so it keys the stage and the stage answers it."""
        if round == 0:
            params = self.gather(trail)
        else:
            assert self.again is not None, f"stage {self.name!r} is not repeated in follow-up rounds"
            params = self.again(trail, round)
        return params if trail.question is trail.asked else {**params, "question": trail.question}

    def failed(self, question: Question, trail: Trail, error: BaseException | str, *,
               status: str | None = None, round: int = 0) -> StageOutput:
        """The output a stage leaves when it could not run: its fallback rows, and a status that says why."""
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        status = status or (error_status(error) if isinstance(error, BaseException) else "failed")
        records = self.fallback(question, trail, status, message, round)
        return self.stamp(StageOutput(records=records, value=self.rebuild(question, records), status=status,
                                      error=message), round)

    def run(self, question: Question, params: Mapping[str, Any], rt: Runtime, round: int = 0) -> StageOutput:
        """Compute the stage: its output stamped with its name, its round, the seconds and the CPU seconds it took."""
        began = time.perf_counter()
        inputs = dict(params)
        question = inputs.pop("question", question)  # a follow-up turn's, restated (``gather_for``)
        with metered() as cpu:
            output = self.compute(question, **inputs, rt=rt)
        output.compute_seconds = _seconds(time.perf_counter() - began)
        output.cpu_seconds = _seconds(cpu.seconds)
        return self.stamp(output, round)

    def stamp(self, output: StageOutput, round: int = 0) -> StageOutput:
        """Put this stage's name and round on the output, each of its rows and each model call behind them."""
        output.stage, output.round = self.name, round
        for item in (*output.records, *output.calls, *output.search_calls):
            item.stage, item.round = self.name, round
        return output


def _seconds(value: float) -> float:
    return round(value, 4)


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


# --- fallbacks and rebuilt values ---------------------------------------------------------------


def _raw_plan(question: Question, _trail: Trail, status: str, message: str, _round: int) -> list[Record]:
    """A failed plan searches the question as asked; a follow-up turn's, merged with the earlier question's
    keywords (the offline restatement needs no model)."""
    turn = ({"question": merged_question(question.query, question.earlier.context), "restated_by": "offline-merge"}
            if question.earlier is not None else {})
    return [QueryPlanRecord(status=status, error=message, method="fallback-raw", **turn)]




def _no_followup(_question: Question, _trail: Trail, status: str, message: str, _round: int) -> list[Record]:
    """A failed follow-up plan searches nothing more (the round ends)."""
    return [QueryPlanRecord(queries=[], status=status, error=message, method="fallback-none")]


def _followup_queries(_question: Question, records: Sequence[Record]) -> list[str]:
    first = records[0] if records else None
    return list(getattr(first, "queries", None) or [])


def _unchecked(_question: Question, _trail: Trail, status: str, message: str, _round: int) -> list[Record]:
    """A failed check claims nothing: the pipeline does not look again on its account."""
    return [SufficiencyRecord(status=status, error=message, method="fallback-none")]


def _sufficiency(_question: Question, records: Sequence[Record]) -> Any:
    first = records[0] if records else None
    if not isinstance(first, SufficiencyRecord) or first.verdict is None:
        return None
    return Sufficiency(first.verdict, tuple(first.covered), tuple(first.missing))  # type: ignore[arg-type]


def _plan_queries(question: Question, records: Sequence[Record]) -> list[str]:
    first = records[0] if records else None
    # search the question as asked (a follow-up turn's as restated)
    return list(getattr(first, "queries", None) or [getattr(first, "question", None) or question.query])


def _search_rank(_question: Question, trail: Trail, status: str, message: str, round: int) -> list[Record]:
    """A failed URL filter keeps the search engine's top three."""
    search = trail.at("search", round)
    return url_filter.fallback_url_decisions(search, status, message) if search else []


def _page_order(_question: Question, trail: Trail, status: str, message: str, round: int) -> list[Record]:
    """A failed section ranking keeps each page's first two sections."""
    sections = trail.at("sections", round)
    return section_rank.fallback_section_decisions(sections, status, message) if sections else []


def _failed_pass(_question: Question, _trail: Trail, status: str, message: str, _round: int) -> list[Record]:
    return [DraftRecord(status=status, error=message)]


def _failed_answer(_question: Question, _trail: Trail, status: str, message: str, _round: int) -> list[Record]:
    return [AnswerRecord(status=status, error=message)]


def _conversation(_question: Question, records: Sequence[Record]) -> Any:
    return writing.conversation_from_json(getattr(records[0], "conversation_json", None) if records else None)


def _refined_text(_question: Question, records: Sequence[Record]) -> Any:
    return getattr(records[0], "text", None) if records else None


# --- identities beyond the model role -----------------------------------------------------------


def _search_identity(_spec: StageSpec, rt: Runtime) -> str:
    return getattr(rt.search, "identity", rt.search.provider)


def _fetch_identity(_spec: StageSpec, rt: Runtime) -> str:
    # pinned evidence changes what a fetch returns
    return f"{getattr(rt.fetcher, 'identity', rt.fetcher.name)}|evidence={rt.evidence_run}"


def _refine_identity(spec: StageSpec, rt: Runtime) -> Any:
    return [_by_role(spec, rt), [(e.example_id, e.question, e.answer) for e in rt.examples.examples]]


def _live_age(kind: Literal["search", "fetch"]) -> Callable[[PipelineConfig], float | None]:
    """Live search results and crawled pages age; the local corpus's never do."""

    def hours(cfg: PipelineConfig) -> float | None:
        if kind == "search":
            live = any(p not in LOCAL_PROVIDERS for p in search_providers(cfg))
            return cfg.search.max_age_hours if live else None
        return cfg.fetch.max_age_hours if cfg.backends.fetch != "local" else None

    return hours


# --- the pipeline ---------------------------------------------------------------------------------

_FILTER_MODEL = ("backends.filter_llm", "models.filter")
_WRITER_MODEL = ("backends.writer_llm", "models.writer")
# Steering (hifirag_core.pipeline.question_steering): the site rules, and the date window with its rule for undated pages.
_SITES = ("steer.sites", "steer.exclude_sites")
_WINDOW = ("steer.after", "steer.before", "steer.undated")

PIPELINE: tuple[StageSpec, ...] = (
    StageSpec(
        "query_plan", (QueryPlanRecord,), "2", ("query_plan", "search.enabled", *_FILTER_MODEL),
        query_plan.plan_query, lambda t: threads.thread_input(t.asked),
        "Rewrite the question into search queries (prompt A.1); a follow-up turn first into a question that stands "
        "alone (ours).",
        role="filter", job="query_plan", io=True, retry=IO_RETRY, fallback=_raw_plan, rebuild=_plan_queries,
        evidence=True, step=lambda o, t: steps.query_plan(o),
        # a follow-up turn is restated by the filter model's own job, whose prompt keys it (and only it)
        fit=lambda q, p, rt: rt.filter_model.job_identity("restate") if "thread" in p else None,
    ),
    StageSpec(
        "search", (SearchResultRecord,), "2", ("search", "backends.search", "corpus", *_SITES, *_WINDOW),
        search.search, lambda t: {"plan": t["query_plan"]}, "Run the query plan against the search backend.",
        io=True, retry=IO_RETRY, identity=_search_identity, max_age_hours=_live_age("search"), evidence=True,
        step=lambda o, t: steps.search(o), again=lambda t, r: {"plan": t.at("followup", r)},
    ),
    StageSpec(
        "url_filter", (UrlDecisionRecord,), "3",
        ("url_filter", "credibility", "limits.caps", "backends.writer_llm", *_FILTER_MODEL, *_SITES),
        url_filter.filter_urls, lambda t: {"results": t["search"]},
        "Keep the search results worth reading, judged on title and snippet (prompt A.2).",
        role="filter", job="url_filter", io=True, retry=IO_RETRY, fallback=_search_rank,
        step=lambda o, t: steps.url_filter(o),
        again=lambda t, r: {"results": t.at("search", r), "read": t.read_urls()},
    ),
    StageSpec(
        "fetch", (PageRecord,), f"3/{DETECTOR_VERSION}",
        ("fetch.max_pages", "fetch.max_bytes", "fetch.max_age_hours", "backends.fetch", "backends.reddit", "corpus",
         "limits.caps", "url_filter.enabled", "backends.filter_llm", "backends.writer_llm", *_SITES, *_WINDOW),
        fetch.fetch_pages,
        lambda t: {"decisions": t["url_filter"], **threads.carried_pages_input(t.asked, t["search"])},
        "Fetch the kept URLs (pages, or Reddit threads) into the blob store.",
        io=True, retry=IO_RETRY, identity=_fetch_identity, max_age_hours=_live_age("fetch"),
        step=lambda o, t: steps.fetch(o), ahead=("sections", "section_rank"),
        again=lambda t, r: {"decisions": t.at("url_filter", r), "first_order": t.next_page_order()},
    ),
    StageSpec(
        "sections", (SectionRecord,), f"1/{SECTIONER_VERSION}", ("sectioning", "reddit"),
        sections.split_sections, lambda t: {"pages": t["fetch"], **threads.carried_sections_input(t.asked)},
        "Parse each fetched page into heading-scoped Markdown sections.",
        step=lambda o, t: steps.sections(o), again=lambda t, r: {"pages": t.at("fetch", r)},
    ),
    StageSpec(
        "section_rank", (SectionDecisionRecord,), "2", ("section_rank", "credibility", "limits.caps", *_FILTER_MODEL),
        section_rank.rank_sections,
        lambda t: {"decisions": t["url_filter"], "pages": t["fetch"], "sections": t["sections"]},
        "Rank each page's sections from heading + first 200 characters (prompt A.3).",
        role="filter", job="section_rank", io=True, retry=IO_RETRY, fallback=_page_order,
        step=lambda o, t: steps.section_rank(o, t.get("sections"), t.get("fetch")),
        fit=lambda q, p, rt: section_rank.section_rank_window(q, p["decisions"], p["pages"], p["sections"], rt)
        if {"decisions", "pages", "sections"} <= set(p) else None,
        again=lambda t, r: {"decisions": t.at("url_filter", r), "pages": t.at("fetch", r),
                            "sections": t.at("sections", r)},
    ),
    # Looking again (beyond the paper; the research variants): does the evidence of every round so far cover
    # the question? If not, a follow-up round plans searches for what is missing, then runs search, the URL
    # filter, fetch, sections and ranking on what is new, and this check again (``runner.question_steps``).
    StageSpec(
        "sufficiency", (SufficiencyRecord,), "1", ("research", *_FILTER_MODEL),
        research.check_sufficiency,
        lambda t: {"pages": t.merged("fetch"), "sections": t.merged("sections"), "ranking": t.merged("section_rank")},
        "Say which parts of the question the kept sections cover and what is missing (ours).",
        role="filter", job="sufficiency", io=True, retry=IO_RETRY, fallback=_unchecked, rebuild=_sufficiency,
        step=lambda o, t: steps.sufficiency(o), research=True,
        again=lambda t, r: {"pages": t.merged("fetch"), "sections": t.merged("sections"),
                            "ranking": t.merged("section_rank")},
    ),
    StageSpec(
        "followup", (QueryPlanRecord,), "1", ("research", *_FILTER_MODEL),
        research.plan_followup, lambda t: {}, "Plan searches aimed at what the last check found missing (ours).",
        role="filter", job="followup", io=True, retry=IO_RETRY, fallback=_no_followup, rebuild=_followup_queries,
        step=lambda o, t: steps.followup(o), research=True, first_pass=False,
        again=lambda t, r: {"check": t.at("sufficiency", r - 1), "earlier": t.earlier_queries()},
    ),
    StageSpec(
        "draft", (DraftRecord,), "2", ("generation.draft_words", "generation.prompt", "generation.mmr_lambda",
                                       *_WRITER_MODEL, "steer.language", "steer.length", "steer.source_dates"),
        writing.write_draft, lambda t: {"sources": t.sources()}, "Generation pass 1 (prompt A.4).",
        role="writer", job="draft", io=True, retry=IO_RETRY, fallback=_failed_pass, rebuild=_conversation,
        step=lambda o, t: steps.draft(o),
    ),
    StageSpec(
        "refine", (DraftRecord,), "2", ("generation.two_pass", "generation.examples", *_WRITER_MODEL, "steer.language",
                                        "steer.length"),
        writing.refine_answer, lambda t: {"draft": t["draft"]},
        "Generation pass 2: few-shot style and length (prompt A.4).",
        role="writer", job="refine", io=True, retry=IO_RETRY, fallback=_failed_pass, rebuild=_refined_text,
        identity=_refine_identity, step=lambda o, t: steps.refine(o),
    ),
    StageSpec(
        "citations", (CitationRecord, AnswerSentenceRecord), "4", ("citations", *_FILTER_MODEL),
        citation_check.verify_citations,
        # the writer's own text, markers and all: they are a hint the citation check may follow; an
        # answer that abstains has nothing to cite
        lambda t: {"answer": t.answer_to_cite(), "sources": t.sources()},
        "Decide each answer sentence's sources and keep those that support the answer (prompt A.5).",
        role="filter", job="citations", io=True, retry=IO_RETRY, step=lambda o, t: steps.citations(o),
    ),
    StageSpec(  # 5: the markers of a sentence inside a code block go after the block (render_citations)
        "answer", (AnswerRecord,), "5", ("answerability.abstain", "answerability.show", "steer.language",
                                         "backends.writer_llm"),
        final_answer.assemble_answer,
        lambda t: {"draft": t["draft"], "refined": t["refine"], "citations": t["citations"],
                   "decision": t.answerability(), "sources": t.sources()},
        "Put the answer together: the refined text (or the draft), the URLs its citations kept, and whether "
        "the sources answer the question (a not_found answer may abstain).",
        fallback=_failed_answer,
    ),
)

STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in PIPELINE)
SPECS: dict[str, StageSpec] = {s.name: s for s in PIPELINE}
# The stages every variant runs once per question (the research stages run only in one that looks again).
BASE_STAGES: tuple[str, ...] = tuple(s.name for s in PIPELINE if not s.research)
# The stages other modules need by what they do rather than by name: the one that writes the answers
# table, and the writer's passes in order (the draft, then its refinement).
ANSWER_STAGE: str = next(s.name for s in PIPELINE if AnswerRecord in s.records)
WRITER_STAGES: tuple[str, ...] = tuple(s.name for s in PIPELINE if s.role == "writer")


# A follow-up round, in order: plan the searches, then the evidence stages again, then the check.
ROUND: tuple[StageSpec, ...] = tuple(SPECS[name] for name in ("followup", "search", "url_filter", "fetch", "sections",
                                                              "section_rank", "sufficiency"))


def writer_outputs(outputs: Mapping[str, StageOutput]) -> list[StageOutput]:
    """The writer's passes a question has finished so far, in pipeline order."""
    return [outputs[name] for name in WRITER_STAGES if name in outputs]


def spec(name: str) -> StageSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise ValueError(f"unknown stage {name!r}; stages: {', '.join(STAGE_NAMES)}") from None


def stage_index(name: str) -> int:
    return STAGE_NAMES.index(spec(name).name)
