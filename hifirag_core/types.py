"""The pipeline's value types and model interfaces: what flows between the stages and the systems behind them.

Two levels of protocol:

* transport protocols, one per external system: ``SearchBackend``, ``Fetcher``, ``ChatModel``
  (Gemini, OpenAI-compatible servers), and the Reddit source in ``hifirag_core.web.reddit``;
* decision protocols, one per model role: ``FilterModel`` (query plan, URL filter, section
  ranking, citation verification) and ``WriterModel`` (the two generation passes). The LLM
  implementations render the paper's prompts through a ``ChatModel`` and parse the replies;
  the offline implementations are deterministic algorithms over BM25 and MiniLM embeddings.

A decision never raises for a bad model reply: it returns a ``Decision`` whose ``status`` says
what happened (``ok``, ``parse_error`` with the configured fallback applied, ``blocked``, ...).
Adapters raise the errors of ``hifirag_core.errors``. This module sits just above the records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from hifirag_core.records import LLMCallRecord
from hifirag_core.steering import DateWindow, SiteRules
from hifirag_core.turns import ThreadContext

T = TypeVar("T")


# --- search and fetch -------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class SearchSteer:
    """What a search is steered by: pushed into the provider's request where it has a parameter for it
    (and enforced again on every URL by the stages after search, whatever the provider did)."""

    sites: SiteRules = SiteRules()
    window: DateWindow = DateWindow()
    language: str | None = None  # the language the question is asked in, when it is not English

    @property
    def active(self) -> bool:
        return self.sites.active or self.window.active or self.language is not None


class SearchBackend(Protocol):
    provider: str

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]: ...


FetchStatus = Literal[
    "ok", "http_error", "timeout", "too_large", "unsupported_type", "blocked", "refused", "not_found", "failed",
    "budget_exceeded", "deadline_exceeded",
]
# What the statuses that are not self-explanatory mean:
# * ``blocked``: the server answered, but with a page that stands in for the content (a challenge, a
#   captcha wall, an "Access denied" or "403 Forbidden" body, a rate-limit page, a paywall with no
#   article under it, a page that only asks for JavaScript), often with HTTP 200. The fetch stage
#   sets it after any fetcher (``hifirag_core.blocked``); ``pages.block_reason`` says which kind.
# * ``refused``: we did not ask: the URL is not http(s), or its host resolves to an address the
#   SSRF guard refuses (loopback, private, link-local, cloud metadata, ...).
# * ``unsupported_type``: a body that is neither a page nor a PDF (an image, an archive, ...).
# Statuses a later attempt may cure; the others (a 404, a refused address, a spent budget) stay.
RETRYABLE_FETCH_STATUSES = frozenset({"timeout", "failed"})


@dataclass
class FetchResult:
    url: str
    status: FetchStatus
    fetcher: str
    final_url: str | None = None
    http_status: int | None = None
    content_type: str | None = None
    body: bytes | None = None  # None unless status == "ok"
    kind: str | None = None  # html | reddit | pdf | text | binary
    encoding: str | None = None  # declared charset, when the response had one
    error: str | None = None
    last_modified: str | None = None  # the Last-Modified header, when the fetcher saw the response headers
    published: str | None = None  # the page's publication day when the fetcher knows it (the local corpus)
    # where the text came from: "fetched", or "search_provider" when the search result carried the document
    text_source: str | None = None


class Fetcher(Protocol):
    name: str

    def fetch(self, url: str) -> FetchResult: ...


# --- chat models ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatTurn:
    role: Literal["user", "model"]
    text: str


@dataclass
class ChatReply:
    """A model's reply; ``text`` is None when the call failed or the reply was blocked."""

    text: str | None
    call: LLMCallRecord
    # When the provider refused the prompt as longer than the window: (tokens it counted, its window), each
    # None when it did not say.
    overflow: tuple[int | None, int | None] | None = None


class ChatModel(Protocol):
    backend: str  # gemini | openai
    model: str
    role: str  # filter | writer

    def chat(
        self,
        turns: list[ChatTurn],
        *,
        stage: str,
        prompt_name: str,
        prompt_hash: str,
        response_schema: dict | None = None,
    ) -> ChatReply: ...


# --- what the decision models see and return --------------------------------------------------


@dataclass(frozen=True)
class UrlCandidate:
    url: str
    title: str
    snippet: str


@dataclass(frozen=True)
class SectionPreview:
    section_id: str
    heading: str
    preview: str  # heading path + the first characters of the section text


@dataclass(frozen=True)
class PageOverview:
    url: str
    title: str
    snippet: str


@dataclass(frozen=True)
class SourceSection:
    section_id: str
    heading_path: tuple[str, ...]
    text: str
    score: float | None = None  # the section ranker's score, when it ranked this section


@dataclass(frozen=True)
class SourceDoc:
    """One numbered source as the writer sees it: a page and its kept sections, best first."""

    index: int  # 1-based; the [n] markers in drafts refer to it
    url: str
    title: str
    preview: str
    sections: tuple[SourceSection, ...]
    published: str | None = None  # the page's publication day (YYYY-MM-DD), when its date evidence gives one


@dataclass(frozen=True)
class AnswerStyle:
    """How an answer is written beyond the paper's defaults (``AnswerStyle()`` is the paper's writer)."""

    language: str | None = None  # a language code: say which language to answer in (None: the paper's prompt)
    length: Literal["short", "standard", "long"] = "standard"
    source_dates: bool = False  # each source shows its publication date

    @property
    def language_name(self) -> str | None:
        from hifirag_core.language import language_name

        return language_name(self.language) if self.language else None


@dataclass(frozen=True)
class FewShotExample:
    question: str
    answer: str
    example_id: str = ""


@dataclass(frozen=True)
class Conversation:
    """The writer's two-turn conversation: pass 1's prompt and reply, kept for pass 2."""

    turns: tuple[ChatTurn, ...]

    @property
    def last_reply(self) -> str:
        return self.turns[-1].text if self.turns and self.turns[-1].role == "model" else ""


@dataclass(frozen=True)
class SentenceCitation:
    """One claim sentence of an answer and the sources cited for it (``SourceDoc.index``, best first)."""

    index: int  # 0-based position among the answer's claim sentences
    text: str
    sources: tuple[int, ...]
    support: float | None  # support of the first source; None when nothing measured it
    marked: tuple[int, ...]  # the writer's own markers after the sentence
    method: str


SufficiencyVerdict = Literal["sufficient", "partial", "not_found"]


@dataclass(frozen=True)
class Sufficiency:
    """Whether the evidence kept so far covers the question: the parts it covers and what it is missing."""

    verdict: SufficiencyVerdict
    covered: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def falls_short(self) -> bool:
        return self.verdict != "sufficient"


@dataclass
class Decision(Generic[T]):
    value: T
    method: str
    calls: list[LLMCallRecord] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None
    scores: list[float] | None = None  # per candidate, in input order, when the method scores


class FilterModel(Protocol):
    """The cheap model's jobs: the paper's four (prompts A.1, A.2, A.3, A.5), and two of ours for looking
    again (the sufficiency check and the follow-up queries)."""

    identity: str  # backend, model, algorithm version, every prompt hash

    def job_identity(self, job: str) -> str:
        """The part of ``identity`` one job's output depends on (its own prompt only), for cache keys.
        The jobs are named by their prompts: ``query_plan``, ``url_filter``, ``section_rank``,
        ``citations``, and ours, ``sufficiency``, ``followup`` and ``restate``."""
        ...

    def plan_queries(self, question: str, *, max_queries: int, language: str | None = None) -> Decision[list[str]]:
        """1..max_queries search queries; ``language``: the question's language when it is not English
        (search in it, and in English where that helps)."""
        ...

    def restate(self, question: str, thread: ThreadContext) -> Decision[str]:
        """A follow-up turn's ``question`` as one that stands alone, given the ``thread`` before it (ours: job
        ``restate``)."""
        ...

    def select_urls(self, question: str, candidates: list[UrlCandidate], *, max_urls: int) -> Decision[list[int]]:
        """0-based indices into ``candidates`` of the URLs worth reading, most useful first."""
        ...

    def rank_sections(
        self, question: str, page: PageOverview, sections: list[SectionPreview], *, max_sections: int
    ) -> Decision[list[int]]:
        """0-based indices into ``sections`` of the useful ones, most useful first."""
        ...

    def check_sufficiency(self, question: str, sections: list[SourceSection]) -> Decision[Sufficiency]:
        """Which parts of the question the kept ``sections`` cover and what they miss (beyond the paper)."""
        ...

    def plan_followup(self, question: str, missing: list[str], earlier: list[str], *,
                      max_queries: int) -> Decision[list[str]]:
        """Search queries aimed at what is ``missing``, none of them one of the ``earlier`` queries."""
        ...

    def verify_citations(self, question: str, answer: str,
                         sources: list[SourceDoc]) -> Decision[list[SentenceCitation]]:
        """Each claim sentence of ``answer`` (the writer's text, ``[n]`` markers and all) with the 1-based
        ``SourceDoc.index`` values of the sources that directly support it; ``scores`` per source."""
        ...


class WriterModel(Protocol):
    """The strong model's two passes (the paper's prompt A.4)."""

    identity: str

    def job_identity(self, job: str) -> str:
        """As ``FilterModel.job_identity``, for the two passes: ``draft`` and ``refine``."""
        ...

    def draft(self, question: str, sources: list[SourceDoc], *, max_words: int,
              style: AnswerStyle = AnswerStyle()) -> Decision[Conversation]: ...

    def refine(
        self, question: str, conversation: Conversation, examples: list[FewShotExample],
        style: AnswerStyle = AnswerStyle(),
    ) -> Decision[str]: ...
