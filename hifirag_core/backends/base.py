"""The small protocols every external system sits behind, and the errors they raise.

Two levels:

* transport protocols, one per external system: ``SearchBackend``, ``Fetcher``, ``ChatModel``
  (Gemini, OpenAI-compatible servers), and the Reddit source in ``hifirag_core.reddit``;
* decision protocols, one per model role: ``FilterModel`` (query plan, URL filter, section
  ranking, citation verification) and ``WriterModel`` (the two generation passes). The LLM
  implementations render the paper's prompts through a ``ChatModel`` and parse the replies;
  the offline implementations are deterministic algorithms over BM25 and MiniLM embeddings.

A decision never raises for a bad model reply: it returns a ``Decision`` whose ``status`` says
what happened (``ok``, ``parse_error`` with the configured fallback applied, ``blocked``, ...).
Transport errors that a retry may cure are ``TransientError``; the rest are ``PermanentError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar

from hifirag_core.records import LLMCallRecord

if TYPE_CHECKING:
    from hifirag_core.attribution import SentenceCitation

T = TypeVar("T")


class BackendError(Exception):
    """Base of every error an adapter raises."""


class TransientError(BackendError):
    """Worth retrying: HTTP 429 and 5xx, timeouts, dropped connections.

    ``rate_limited``: the server turned the call away for a rate limit (HTTP 429, or a 403 whose
    reason says so) before doing any work, so the call did not use up any of that limit.
    """

    def __init__(self, message: str, retry_after: float | None = None, *, rate_limited: bool = False):
        super().__init__(message)
        self.retry_after = retry_after
        self.rate_limited = rate_limited


class CallTimeoutError(TransientError):
    """A call that ran out of time; retried like any transient error, recorded as ``timeout``."""


class PermanentError(BackendError):
    """Not worth retrying: other 4xx, a malformed request, an unsupported input."""


class MissingSecretError(BackendError):
    """A real backend was selected but the environment variable that holds its key is unset."""


class BudgetExceededError(BackendError):
    """The run's budget is spent: no new paid calls start."""


class DeadlineExceededError(BackendError):
    """The question's deadline has passed."""


def error_status(exc: BaseException) -> str:
    """The status a row gets for the error that ended its call or stage (``llm_calls``, stage rows)."""
    if isinstance(exc, BudgetExceededError):
        return "budget_exceeded"
    if isinstance(exc, DeadlineExceededError):
        return "deadline_exceeded"
    if isinstance(exc, MissingSecretError):
        return "missing_secret"
    if isinstance(exc, CallTimeoutError):
        return "timeout"
    if isinstance(exc, TransientError) and exc.rate_limited:
        return "rate_limited"  # refused for a rate limit after every retry: not an outage
    return "failed"


# --- search and fetch -------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class SearchBackend(Protocol):
    provider: str

    def search(self, query: str, *, num: int) -> list[SearchHit]: ...


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
    kind: str | None = None  # html | reddit | pdf | binary
    encoding: str | None = None  # declared charset, when the response had one
    error: str | None = None
    last_modified: str | None = None  # the Last-Modified header, when the fetcher saw the response headers


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


@dataclass
class Decision(Generic[T]):
    value: T
    method: str
    calls: list[LLMCallRecord] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None
    scores: list[float] | None = None  # per candidate, in input order, when the method scores


class FilterModel(Protocol):
    """The cheap model's four jobs (the paper's prompts A.1, A.2, A.3, A.5)."""

    identity: str  # backend, model, algorithm version, every prompt hash

    def stage_identity(self, stage: str) -> str:
        """The part of ``identity`` one stage's output depends on (its own prompt only): cache keys."""
        ...

    def plan_queries(self, question: str, *, max_queries: int) -> Decision[list[str]]: ...

    def select_urls(self, question: str, candidates: list[UrlCandidate], *, max_urls: int) -> Decision[list[int]]:
        """0-based indices into ``candidates`` of the URLs worth reading, most useful first."""
        ...

    def rank_sections(
        self, question: str, page: PageOverview, sections: list[SectionPreview], *, max_sections: int
    ) -> Decision[list[int]]:
        """0-based indices into ``sections`` of the useful ones, most useful first."""
        ...

    def verify_citations(self, question: str, answer: str,
                         sources: list[SourceDoc]) -> Decision[list[SentenceCitation]]:
        """Each claim sentence of ``answer`` (the writer's text, ``[n]`` markers and all) with the 1-based
        ``SourceDoc.index`` values of the sources that directly support it; ``scores`` per source."""
        ...


class WriterModel(Protocol):
    """The strong model's two passes (the paper's prompt A.4)."""

    identity: str

    def stage_identity(self, stage: str) -> str: ...

    def draft(self, question: str, sources: list[SourceDoc], *, max_words: int) -> Decision[Conversation]: ...

    def refine(
        self, question: str, conversation: Conversation, examples: list[FewShotExample]
    ) -> Decision[str]: ...
